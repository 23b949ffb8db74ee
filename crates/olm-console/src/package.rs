//! The package page: its long description (Markdown, sanitised), channels with their versions,
//! install modes, the APIs it provides and requires, the packages it depends on, the permissions
//! its install grants, its links and maintainers. Pure.

use olm_api::packages::v1::PackageManifest;

use crate::html::{escape, markdown, query_value, safe_link};

/// The body of the page of `manifest`.
pub fn page(manifest: &PackageManifest) -> String {
    let status = &manifest.status;
    let namespace = manifest.metadata.namespace.clone().unwrap_or_default();
    let name = manifest.metadata.name.clone().unwrap_or_default();
    let default = manifest.default_channel().unwrap_or_default().to_owned();
    let head = manifest.shown_channel();
    let mut html = String::new();
    html.push_str(&format!(
        "<p class=\"meta\">Package <code>{}</code> from catalog {} (<code>{}/{}</code>)</p>",
        escape(&name),
        escape(if status.catalog_source_display_name.is_empty() { &status.catalog_source } else { &status.catalog_source_display_name }),
        escape(&status.catalog_source_namespace),
        escape(&status.catalog_source)
    ));
    if let Some(deprecation) = &status.deprecation {
        html.push_str(&format!("<p class=\"deprecated\"><strong>Deprecated:</strong> {}</p>", escape(&deprecation.message)));
    }
    html.push_str(&format!("<p><a class=\"button\" href=\"/install/{}/{}\">Install</a></p>", query_value(&namespace), query_value(&name)));
    if let Some(head) = head {
        let desc = &head.current_csv_desc;
        html.push_str("<section aria-labelledby=\"about\"><h2 id=\"about\">About</h2>");
        if let Some(provider) = desc.provider.name.as_deref().filter(|p| !p.is_empty()) {
            html.push_str(&format!("<p>Provided by {}</p>", escape(provider)));
        }
        html.push_str(&format!("<div class=\"description\">{}</div></section>", markdown(&desc.long_description)));
        let modes: Vec<String> = desc.install_modes.iter().map(|m| format!("{}: {}", m.type_.as_str(), if m.supported { "supported" } else { "not supported" })).collect();
        html.push_str(&format!("<section aria-labelledby=\"modes\"><h2 id=\"modes\">Install modes</h2><ul>{}</ul></section>", list(&modes)));
        let owned: Vec<String> = desc.custom_resource_definitions.owned.iter().flatten().map(|c| format!("{} ({} {})", c.display_name.as_deref().unwrap_or(&c.kind), c.name, c.version)).collect();
        let mut required: Vec<String> = desc.custom_resource_definitions.required.iter().flatten().map(|c| format!("{} ({} {})", c.kind, c.name, c.version)).collect();
        required.extend(desc.required_apis.iter().map(|g| format!("{} ({}/{})", g.kind, g.group, g.version)));
        let packages: Vec<String> = desc
            .required_packages
            .iter()
            .map(|p| if p.version_range.is_empty() { p.package_name.clone() } else { format!("{}, versions {}", p.package_name, p.version_range) })
            .collect();
        html.push_str(&format!(
            "<section aria-labelledby=\"apis\"><h2 id=\"apis\">APIs</h2><h3>Provided</h3><ul>{}</ul><h3>Required from other operators</h3><ul>{}</ul></section>\
             <section aria-labelledby=\"dependencies\"><h2 id=\"dependencies\">Dependencies</h2><p class=\"meta\">Packages OLM installs with it when they are not installed yet:</p><ul>{}</ul></section>",
            list_or(&owned, "none"),
            list_or(&required, "none"),
            list_or(&packages, "none")
        ));
        html.push_str(&permissions(&head.current_csv, desc.install_permissions.as_ref()));
        let links: Vec<String> = desc
            .links
            .iter()
            .filter_map(|l| {
                let url = l.url.as_deref().filter(|u| safe_link(u))?;
                Some(format!("<a rel=\"noopener noreferrer nofollow\" target=\"_blank\" href=\"{}\">{}</a>", escape(url), escape(l.name.as_deref().unwrap_or(url))))
            })
            .collect();
        if !links.is_empty() {
            html.push_str(&format!("<section aria-labelledby=\"links\"><h2 id=\"links\">Links</h2><ul>{}</ul></section>", links.iter().map(|l| format!("<li>{l}</li>")).collect::<String>()));
        }
    }
    html.push_str("<section aria-labelledby=\"channels\"><h2 id=\"channels\">Channels and versions</h2>");
    for channel in &status.channels {
        let marks = if channel.name == default { " (default)" } else { "" };
        let deprecated = channel.deprecation.as_ref().map(|d| format!(" — deprecated: {}", escape(&d.message))).unwrap_or_default();
        let mut versions: Vec<String> = channel
            .entries
            .iter()
            .map(|e| format!("{} ({}){}", e.version, e.name, e.deprecation.as_ref().map(|d| format!(" — deprecated: {}", d.message)).unwrap_or_default()))
            .collect();
        if versions.is_empty() {
            versions.push(format!("{} ({})", channel.current_csv_desc.version, channel.current_csv));
        }
        html.push_str(&format!("<h3>{}{marks}{deprecated}</h3><ul>{}</ul>", escape(&channel.name), list(&versions)));
    }
    html.push_str("</section>");
    html
}

/// What installing `csv` grants, a line per resource (as the review page says it), or why it
/// cannot be known yet.
fn permissions(csv: &str, install: Option<&olm_api::packages::v1::InstallPermissions>) -> String {
    let body = match install {
        None => "<p>The catalog carries only this version's metadata, not its install: the permissions are shown on the review page of its InstallPlan (choose Manual approval to see them before anything runs).</p>".to_owned(),
        Some(install) => {
            let csv_json = serde_json::json!({"spec": {"install": {"spec": install}}});
            let lines: Vec<String> = olm_controllers::plan_preview::csv_permissions(&csv_json).iter().map(olm_controllers::plan_preview::render::grant_line).collect();
            format!("<p class=\"meta\">What installing {} gives its ServiceAccounts:</p><ul class=\"permissions\">{}</ul>", escape(csv), list_or(&lines, "nothing: it asks for no permission"))
        }
    };
    format!("<section aria-labelledby=\"permissions\"><h2 id=\"permissions\">Permissions the install grants</h2>{body}</section>")
}

fn list(items: &[String]) -> String {
    items.iter().map(|i| format!("<li>{}</li>", escape(i))).collect()
}

fn list_or(items: &[String], none: &str) -> String {
    if items.is_empty() { format!("<li>{}</li>", escape(none)) } else { list(items) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_page_renders_the_description_safely_and_lists_channels_and_apis() {
        let manifest: PackageManifest = serde_json::from_value(json!({
            "metadata": {"name": "etcd", "namespace": "olm"},
            "status": {"catalogSource": "community", "catalogSourceNamespace": "olm", "packageName": "etcd", "defaultChannel": "alpha",
                "channels": [{"name": "alpha", "currentCSV": "etcd.v2", "entries": [{"name": "etcd.v2", "version": "2.0.0"}, {"name": "etcd.v1", "version": "1.0.0"}],
                    "currentCSVDesc": {"displayName": "etcd", "version": "2.0.0", "provider": {"name": "CoreOS"},
                        "longDescription": "Hello <script>window.pwned=1</script> [x](javascript:window.pwned=2)",
                        "links": [{"name": "bad", "url": "javascript:alert(1)"}, {"name": "site", "url": "https://etcd.io"}],
                        "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false}],
                        "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster", "displayName": "etcd Cluster"}]},
                        "requiredPackages": [{"packageName": "cert-manager", "versionRange": ">=1.0.0 <2.0.0"}],
                        "requiredApis": [{"group": "monitoring.coreos.com", "version": "v1", "kind": "ServiceMonitor"}]}}]}
        }))
        .unwrap();
        let html = page(&manifest);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(html.contains("href=\"https://etcd.io\""), "{html}");
        assert!(html.contains("alpha (default)"), "{html}");
        assert!(html.contains("<li>2.0.0 (etcd.v2)</li><li>1.0.0 (etcd.v1)</li>"), "{html}");
        assert!(html.contains("OwnNamespace: supported") && html.contains("AllNamespaces: not supported"), "{html}");
        assert!(html.contains("etcd Cluster (etcdclusters.etcd.database.coreos.com v1beta2)"), "{html}");
        assert!(html.contains("<li>ServiceMonitor (monitoring.coreos.com/v1)</li>"), "a required API: {html}");
        assert!(html.contains("<li>cert-manager, versions &gt;=1.0.0 &lt;2.0.0</li>"), "a required package: {html}");
        assert!(html.contains("href=\"/install/olm/etcd\""), "{html}");
        assert!(html.contains("The catalog carries only this version's metadata"), "no install strategy: said, not guessed: {html}");
    }

    #[test]
    fn the_permissions_the_install_grants_are_listed_per_resource_with_their_scope() {
        let install: olm_api::packages::v1::InstallPermissions = serde_json::from_value(json!({
            "permissions": [{"serviceAccountName": "etcd-operator", "rules": [{"apiGroups": ["etcd.database.coreos.com"], "resources": ["etcdclusters"], "verbs": ["*"]},
                                                                           {"apiGroups": [""], "resources": ["pods", "<b>x</b>"], "verbs": ["get", "list"]}]}],
            "clusterPermissions": [{"serviceAccountName": "etcd-operator", "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}]
        }))
        .unwrap();
        let html = permissions("etcd.v2", Some(&install));
        assert!(html.contains("What installing etcd.v2 gives its ServiceAccounts:"), "{html}");
        for line in [
            "<li>in the target namespaces, ServiceAccount etcd-operator: * etcdclusters.etcd.database.coreos.com</li>",
            "<li>in the target namespaces, ServiceAccount etcd-operator: get, list pods</li>",
            "<li>in the target namespaces, ServiceAccount etcd-operator: get, list &lt;b&gt;x&lt;/b&gt;</li>",
            "<li>cluster-wide, ServiceAccount etcd-operator: get /metrics</li>",
        ] {
            assert!(html.contains(line), "{line} in {html}");
        }
        let none = permissions("quiet.v1", Some(&olm_api::packages::v1::InstallPermissions::default()));
        assert!(none.contains("<li>nothing: it asks for no permission</li>"), "{none}");
    }
}
