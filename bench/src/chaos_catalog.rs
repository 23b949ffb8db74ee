//! The chaos run's catalog and what it expects: synthetic packages that install in seconds on
//! kwok (a CRD of their own, a ServiceAccount with a Role, one Deployment), with upgrade
//! chains, a package dependency and an all-namespaces package; written as FBC with inline
//! manifests, so the catalog server serves everything and no image is pulled. And the workload
//! that subscribes to them: which namespace gets which package, with which approval.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

/// Packages a namespace subscribes to, in turn. `chaos-dep` requires `chaos-a`, so its
/// namespaces get both. `chaos-global` is the one all-namespaces operator.
pub const NAMESPACED: [&str; 4] = ["chaos-a", "chaos-b", "chaos-c", "chaos-dep"];
pub const GLOBAL: &str = "chaos-global";
/// The channel's versions at the start; [`UPDATE`] is added mid-run.
pub const INITIAL: [&str; 3] = ["1.0.0", "1.1.0", "1.2.0"];
pub const UPDATE: &str = "1.3.0";
pub const CHANNEL: &str = "stable";

/// The namespaces of the workload, each with its package and approval.
pub struct Workload {
    pub namespace: String,
    pub package: &'static str,
    pub manual: bool,
}

pub fn workload(namespaces: usize) -> Vec<Workload> {
    (0..namespaces)
        .map(|i| Workload { namespace: format!("chaos-{i:03}"), package: NAMESPACED[i % NAMESPACED.len()], manual: i % 4 == 3 })
        .collect()
}

pub const GLOBAL_NAMESPACE: &str = "chaos-all";

pub fn csv_name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

/// The packages a Subscription to `package` installs: itself, and what it requires.
pub fn installs(package: &str) -> Vec<&'static str> {
    match package {
        "chaos-dep" => vec!["chaos-a", "chaos-dep"],
        "chaos-a" => vec!["chaos-a"],
        "chaos-b" => vec!["chaos-b"],
        "chaos-c" => vec!["chaos-c"],
        _ => vec![GLOBAL],
    }
}

fn encode(object: &Value) -> Value {
    json!({"type": "olm.bundle.object", "value": {"data": base64::engine::general_purpose::STANDARD.encode(object.to_string())}})
}

fn group(package: &str) -> String {
    format!("{}.chaos.example.com", package.trim_start_matches("chaos-"))
}

fn crd(package: &str) -> Value {
    let group = group(package);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

fn csv(package: &str, version: &str, replaces: Option<&str>) -> Value {
    let all_namespaces = package == GLOBAL;
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": csv_name(package, version), "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "displayName": package, "version": version,
            "installModes": [{"type": "OwnNamespace", "supported": !all_namespaces}, {"type": "SingleNamespace", "supported": !all_namespaces},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": all_namespaces}],
            "customresourcedefinitions": {"owned": [{"name": format!("gadgets.{}", group(package)), "version": "v1", "kind": "Gadget", "displayName": "Gadget"}]},
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": package, "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [group(package)], "resources": ["gadgets"], "verbs": ["*"]}
                ]}],
                "deployments": [{"name": package, "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": package}},
                    "template": {"metadata": {"labels": {"app": package}}, "spec": {
                        "serviceAccountName": package,
                        "containers": [{"name": "operator", "image": format!("registry.example.com/{package}:{version}")}]
                    }}
                }}]
            }}
        }
    });
    if let Some(replaces) = replaces {
        csv["spec"]["replaces"] = json!(csv_name(package, replaces));
    }
    csv
}

/// The FBC of every package with `versions` in its channel (each replacing the one before).
pub fn render(versions: &[&str]) -> String {
    let mut out = String::new();
    let mut push = |doc: Value| {
        out.push_str(&doc.to_string());
        out.push('\n');
    };
    for package in NAMESPACED.iter().copied().chain([GLOBAL]) {
        push(json!({"schema": "olm.package", "name": package, "defaultChannel": CHANNEL}));
        let entries: Vec<Value> = versions
            .iter()
            .enumerate()
            .map(|(i, v)| match i {
                0 => json!({"name": csv_name(package, v)}),
                _ => json!({"name": csv_name(package, v), "replaces": csv_name(package, versions[i - 1])}),
            })
            .collect();
        push(json!({"schema": "olm.channel", "package": package, "name": CHANNEL, "entries": entries}));
        for (i, version) in versions.iter().enumerate() {
            let replaces = i.checked_sub(1).map(|p| versions[p]);
            let mut properties = vec![
                json!({"type": "olm.package", "value": {"packageName": package, "version": version}}),
                json!({"type": "olm.gvk", "value": {"group": group(package), "kind": "Gadget", "version": "v1"}}),
                encode(&csv(package, version, replaces)),
                encode(&crd(package)),
            ];
            if package == "chaos-dep" {
                properties.push(json!({"type": "olm.package.required", "value": {"packageName": "chaos-a", "versionRange": ">=1.0.0"}}));
            }
            push(json!({"schema": "olm.bundle", "name": csv_name(package, version), "package": package, "image": "", "properties": properties}));
        }
    }
    out
}

/// Write the catalog with `versions` into `dir/catalog.json` (atomically: the catalog server
/// reloads from the directory).
pub fn write(dir: &Path, versions: &[&str]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(".catalog.json.tmp");
    std::fs::write(&tmp, render(versions))?;
    std::fs::rename(&tmp, dir.join("catalog.json"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_loads_with_upgrade_chains_and_a_dependency() {
        let dir = std::env::temp_dir().join(format!("olm-chaos-catalog-{}", std::process::id()));
        let mut versions = INITIAL.to_vec();
        versions.push(UPDATE);
        write(&dir, &versions).unwrap();
        let (catalog, problems) = olm_catalog::load::load_fbc(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        for package in NAMESPACED.iter().copied().chain([GLOBAL]) {
            let package = catalog.package(package).unwrap();
            let channel = package.channels().iter().find(|c| c.name == CHANNEL).unwrap();
            assert_eq!(channel.head().map(|h| h.name.clone()), Some(csv_name(&package.name, UPDATE)));
            assert_eq!(channel.replaces_chain().count(), 4);
        }
        assert!(catalog.package("chaos-dep").unwrap().bundles()[0].required_packages().count() == 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
