//! The catalog page: every package of every catalog the user can see, as cards, with search and
//! filters (category, catalog, install mode, capability level) given as query parameters, so
//! a filtered page is a link. The cards and the filtering are pure; [`page`] renders them.

use olm_api::packages::v1::PackageManifest;
use serde::Deserialize;

use crate::html::{escape, query_value};

/// The filters of the catalog page (all optional; empty means any).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub catalog: String,
    #[serde(default, rename = "installMode")]
    pub install_mode: String,
    #[serde(default)]
    pub capability: String,
}

/// One package as its card shows it, from its default channel's head.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub namespace: String,
    pub package: String,
    pub display_name: String,
    pub provider: String,
    pub description: String,
    pub categories: Vec<String>,
    /// `catalog-namespace/catalog`, and the catalog's display name.
    pub catalog: String,
    pub catalog_display: String,
    pub install_modes: Vec<String>,
    pub capability: String,
    pub has_icon: bool,
    /// The package's deprecation message, when deprecated.
    pub deprecated: Option<String>,
}

impl Card {
    pub fn of(manifest: &PackageManifest) -> Card {
        let status = &manifest.status;
        let desc = manifest.shown_channel().map(|c| &c.current_csv_desc);
        let annotation = |key: &str| desc.and_then(|d| d.annotations.get(key)).cloned().unwrap_or_default();
        let display_name = desc.map(|d| d.display_name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| status.package_name.clone());
        Card {
            namespace: manifest.metadata.namespace.clone().unwrap_or_default(),
            package: manifest.metadata.name.clone().unwrap_or_default(),
            display_name,
            provider: desc.and_then(|d| d.provider.name.clone()).filter(|p| !p.is_empty()).or_else(|| status.provider.name.clone()).unwrap_or_default(),
            description: annotation("description"),
            categories: annotation("categories").split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect(),
            catalog: format!("{}/{}", status.catalog_source_namespace, status.catalog_source),
            catalog_display: if status.catalog_source_display_name.is_empty() { status.catalog_source.clone() } else { status.catalog_source_display_name.clone() },
            install_modes: desc.map(|d| d.install_modes.iter().filter(|m| m.supported).map(|m| m.type_.to_string()).collect()).unwrap_or_default(),
            capability: annotation("capabilities"),
            has_icon: desc.is_some_and(|d| d.icon.iter().any(|i| !i.base64_data.is_empty())),
            deprecated: status.deprecation.as_ref().map(|d| d.message.clone()),
        }
    }

    /// Whether the card passes `filters` (search in names, provider, description and
    /// categories, case-insensitive; the others exact).
    pub fn matches(&self, filters: &Filters) -> bool {
        let q = filters.q.trim().to_lowercase();
        let searched = q.is_empty()
            || [&self.package, &self.display_name, &self.provider, &self.description].iter().any(|t| t.to_lowercase().contains(&q))
            || self.categories.iter().any(|c| c.to_lowercase().contains(&q));
        searched
            && (filters.category.is_empty() || self.categories.iter().any(|c| *c == filters.category))
            && (filters.catalog.is_empty() || self.catalog == filters.catalog)
            && (filters.install_mode.is_empty() || self.install_modes.iter().any(|m| *m == filters.install_mode))
            && (filters.capability.is_empty() || self.capability == filters.capability)
    }
}

/// Cards sorted by display name, then catalog.
pub fn cards(manifests: &[PackageManifest]) -> Vec<Card> {
    let mut cards: Vec<Card> = manifests.iter().map(Card::of).collect();
    cards.sort_by(|a, b| a.display_name.to_lowercase().cmp(&b.display_name.to_lowercase()).then_with(|| a.catalog.cmp(&b.catalog)));
    cards
}

fn select(name: &str, label: &str, options: &[String], chosen: &str) -> String {
    let mut html = format!("<label>{label} <select name=\"{name}\"><option value=\"\">any</option>");
    for option in options {
        let selected = if option == chosen { " selected" } else { "" };
        html.push_str(&format!("<option value=\"{v}\"{selected}>{v}</option>", v = escape(option)));
    }
    html.push_str("</select></label> ");
    html
}

fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let set: std::collections::BTreeSet<String> = values.filter(|v| !v.is_empty()).collect();
    set.into_iter().collect()
}

/// The catalog page's body. `note` says what could not be read, if anything.
pub fn page(all: &[Card], filters: &Filters, note: Option<&str>) -> String {
    let mut html = String::new();
    if let Some(note) = note {
        html.push_str(&format!("<p class=\"note\" role=\"status\">{}</p>", escape(note)));
    }
    html.push_str("<form class=\"filters\" method=\"get\" action=\"/\" role=\"search\">");
    html.push_str(&format!("<label>Search <input type=\"search\" name=\"q\" value=\"{}\"></label> ", escape(&filters.q)));
    html.push_str(&select("category", "Category", &distinct(all.iter().flat_map(|c| c.categories.clone())), &filters.category));
    html.push_str(&select("catalog", "Catalog", &distinct(all.iter().map(|c| c.catalog.clone())), &filters.catalog));
    html.push_str(&select("installMode", "Install mode", &distinct(all.iter().flat_map(|c| c.install_modes.clone())), &filters.install_mode));
    html.push_str(&select("capability", "Capability", &distinct(all.iter().map(|c| c.capability.clone())), &filters.capability));
    html.push_str("<button type=\"submit\">Filter</button></form>");
    let shown: Vec<&Card> = all.iter().filter(|c| c.matches(filters)).collect();
    html.push_str(&format!("<p>{} of {} packages</p><ul class=\"cards\">", shown.len(), all.len()));
    for card in shown {
        let link = format!("/package/{}/{}", query_value(&card.namespace), query_value(&card.package));
        let icon = if card.has_icon {
            format!("<img src=\"/icon/{}/{}\" alt=\"\" width=\"48\" height=\"48\" loading=\"lazy\">", query_value(&card.namespace), query_value(&card.package))
        } else {
            "<span class=\"noicon\" aria-hidden=\"true\"></span>".to_owned()
        };
        let deprecated = card.deprecated.as_ref().map(|m| format!("<p class=\"deprecated\"><strong>Deprecated:</strong> {}</p>", escape(m))).unwrap_or_default();
        html.push_str(&format!(
            "<li class=\"card\">{icon}<h2><a href=\"{link}\">{name}</a></h2><p class=\"provider\">by {provider}</p>{deprecated}<p>{description}</p><p class=\"meta\">{categories}<br>Catalog: {catalog}{capability}</p></li>",
            name = escape(&card.display_name),
            provider = escape(if card.provider.is_empty() { "an unnamed provider" } else { &card.provider }),
            description = escape(&card.description),
            categories = escape(&card.categories.join(", ")),
            catalog = escape(&card.catalog_display),
            capability = if card.capability.is_empty() { String::new() } else { format!(" · {}", escape(&card.capability)) },
        ));
    }
    html.push_str("</ul>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(name: &str, display: &str, categories: &str, modes: &[&str]) -> PackageManifest {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "olm"},
            "status": {"catalogSource": "community", "catalogSourceNamespace": "olm", "catalogSourceDisplayName": "Community", "packageName": name,
                       "defaultChannel": "stable", "provider": {"name": "Acme"},
                       "channels": [{"name": "stable", "currentCSV": format!("{name}.v1"), "currentCSVDesc": {
                           "displayName": display, "version": "1.0.0", "provider": {"name": "Acme"},
                           "annotations": {"categories": categories, "description": format!("{display} does things"), "capabilities": "Basic Install"},
                           "installModes": modes.iter().map(|m| json!({"type": m, "supported": true})).collect::<Vec<_>>(),
                           "icon": [{"base64data": "iVBOR", "mediatype": "image/png"}]}}]}
        }))
        .unwrap()
    }

    #[test]
    fn cards_come_from_the_default_channels_head_and_filter_by_every_field() {
        let all = cards(&[manifest("etcd", "etcd", "Database", &["OwnNamespace", "AllNamespaces"]), manifest("argocd", "Argo CD", "Developer Tools, Integration & Delivery", &["OwnNamespace"])]);
        assert_eq!(all[0].display_name, "Argo CD", "sorted by display name");
        assert_eq!(all[1].categories, ["Database"]);
        assert_eq!(all[1].catalog, "olm/community");
        assert!(all[1].has_icon);
        let only = |f: Filters| all.iter().filter(|c| c.matches(&f)).map(|c| c.package.clone()).collect::<Vec<_>>();
        assert_eq!(only(Filters { q: "DOES".into(), ..Filters::default() }), ["argocd", "etcd"]);
        assert_eq!(only(Filters { q: "integration".into(), ..Filters::default() }), ["argocd"]);
        assert_eq!(only(Filters { category: "Database".into(), ..Filters::default() }), ["etcd"]);
        assert_eq!(only(Filters { install_mode: "AllNamespaces".into(), ..Filters::default() }), ["etcd"]);
        assert_eq!(only(Filters { catalog: "olm/other".into(), ..Filters::default() }), Vec::<String>::new());
    }

    #[test]
    fn a_card_escapes_what_the_catalog_says() {
        let hostile = manifest("x", "<img src=x onerror=alert(1)>", "<b>c</b>", &["AllNamespaces"]);
        let html = page(&cards(&[hostile]), &Filters::default(), None);
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{html}");
        assert!(!html.contains("<b>c</b>"), "{html}");
    }
}
