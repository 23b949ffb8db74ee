//! The Uninstall and Rollback pages: what `kubectl olm uninstall` and `kubectl olm rollback`
//! say before they act (from `olm_admin`, the same plans), with the options as checkboxes
//! and a confirmation; and what happened after. Pure renderers.

use olm_admin::rollback::Rollback;
use olm_admin::uninstall::{Item, OptionNames, Options, Summary};
use serde::Deserialize;

use crate::html::{escape, query_value};

/// The uninstall options as the page's forms send them (checkboxes: present when ticked).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct UninstallForm {
    #[serde(default)]
    pub operands: Option<String>,
    #[serde(default)]
    pub crds: Option<String>,
    /// The confirmation box of the form that deletes.
    #[serde(default)]
    pub confirm: Option<String>,
}

impl UninstallForm {
    pub fn options(&self) -> Options {
        Options { delete_operands: self.operands.is_some(), delete_crds: self.crds.is_some() }
    }
}

/// How the page names the options in what the summary says they would do.
pub const OPTION_NAMES: OptionNames<'static> = OptionNames { delete_operands: "“Also delete its operands”", delete_crds: "“Also delete its CRDs”" };

fn items(items: &[Item]) -> String {
    items
        .iter()
        .map(|item| {
            let details = if item.details.is_empty() {
                String::new()
            } else {
                format!("<ul>{}</ul>", item.details.iter().map(|d| format!("<li>{}</li>", escape(d))).collect::<String>())
            };
            format!("<li>{}{details}</li>", escape(&item.text))
        })
        .collect()
}

/// The Uninstall page of Subscription `namespace/name`: what goes and what stays with the
/// options chosen, a form to choose again, and the one that uninstalls (confirmed by a box).
pub fn uninstall_page(namespace: &str, name: &str, summary: &Summary, options: Options, error: Option<&str>) -> String {
    let action = format!("/uninstall/{}/{}", query_value(namespace), query_value(name));
    let checked = |on: bool| if on { " checked" } else { "" };
    let hidden = |field: &str, on: bool| if on { format!("<input type=\"hidden\" name=\"{field}\" value=\"on\">") } else { String::new() };
    let mut html = String::new();
    if let Some(error) = error {
        html.push_str(&format!("<p class=\"error\" role=\"alert\"><strong>Not uninstalled:</strong> {}</p>", escape(error)));
    }
    html.push_str(&format!("<p class=\"note\">{}.</p>", escape(&summary.title)));
    html.push_str(&format!(
        "<form method=\"get\" action=\"{action}\" class=\"options\"><fieldset><legend>Also delete</legend>\
         <label><input type=\"checkbox\" name=\"operands\" value=\"on\"{}> Also delete its operands (the objects of its CRDs)</label><br>\
         <label><input type=\"checkbox\" name=\"crds\" value=\"on\"{}> Also delete its CRDs that no other operator uses (their objects go with them)</label></fieldset>\
         <button type=\"submit\">Show what goes</button></form>",
        checked(options.delete_operands),
        checked(options.delete_crds)
    ));
    html.push_str(&format!("<h2>Goes</h2><ul class=\"goes\">{}</ul>", items(&summary.goes)));
    html.push_str(&format!("<h2>Stays</h2><ul class=\"kept\">{}</ul>", items(&summary.kept)));
    html.push_str(&format!(
        "<form method=\"post\" action=\"{action}\" class=\"confirm\">{}{}\
         <p><label><input type=\"checkbox\" name=\"confirm\" value=\"yes\" required> Delete what is listed under “Goes”</label></p>\
         <p><button type=\"submit\">Uninstall</button> <a href=\"/installed\">Cancel</a></p></form>",
        hidden("operands", options.delete_operands),
        hidden("crds", options.delete_crds)
    ));
    html
}

/// What an uninstall did.
pub fn uninstalled_page(uninstalled: &str, note: Option<&str>) -> String {
    let note = note.map(|n| format!("<p class=\"note\">{}</p>", escape(n))).unwrap_or_default();
    format!("<p role=\"status\">Uninstalled {}.</p>{note}<p><a href=\"/installed\">Installed operators</a></p>", escape(uninstalled))
}

/// The Rollback page: how it will go, and the button that asks OLM for it.
pub fn rollback_page(rollback: &Rollback) -> String {
    let lines: String = rollback.summary().iter().map(|l| format!("<p>{}</p>", escape(l))).collect();
    format!(
        "{lines}<form method=\"post\" action=\"/rollback/{}/{}\"><input type=\"hidden\" name=\"from\" value=\"{}\"><button type=\"submit\">Roll back to {}</button> <a href=\"/installed\">Cancel</a></form>",
        query_value(&rollback.namespace),
        query_value(&rollback.subscription),
        escape(&rollback.from),
        escape(&rollback.to)
    )
}

/// A page that says one thing (a rollback under way, done, refused) and leads back.
pub fn message_page(message: &str, refused: bool) -> String {
    let class = if refused { "<p class=\"error\" role=\"alert\">" } else { "<p role=\"status\">" };
    format!("{class}{}</p><p><a href=\"/installed\">Installed operators</a></p>", escape(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uninstall_page_lists_what_goes_and_stays_and_deletes_only_what_it_showed() {
        let summary = Summary {
            title: "Uninstalls Subscription a/etcd (etcd.v2)".into(),
            goes: vec![Item { text: "Subscription etcd".into(), details: vec![] }, Item { text: "EtcdCluster a/<x> (operand)".into(), details: vec![] }],
            kept: vec![Item { text: "1 thing:".into(), details: vec!["CRD <y>".into()] }],
        };
        let html = uninstall_page("a", "etcd", &summary, Options { delete_operands: true, delete_crds: false }, None);
        assert!(html.contains("<ul class=\"goes\"><li>Subscription etcd</li><li>EtcdCluster a/&lt;x&gt; (operand)</li></ul>"), "{html}");
        assert!(html.contains("<ul class=\"kept\"><li>1 thing:<ul><li>CRD &lt;y&gt;</li></ul></li></ul>"), "{html}");
        assert!(html.contains("name=\"operands\" value=\"on\" checked>"), "the options shown are ticked: {html}");
        let confirm = &html[html.find("class=\"confirm\"").expect("the confirm form")..];
        assert!(confirm.contains("<input type=\"hidden\" name=\"operands\" value=\"on\">") && !confirm.contains("name=\"crds\""), "deletes what it showed: {confirm}");
        assert!(confirm.contains("name=\"confirm\" value=\"yes\" required"), "{confirm}");
    }

    #[test]
    fn the_rollback_page_posts_the_version_it_showed() {
        let rollback = Rollback {
            namespace: "a".into(),
            subscription: "etcd".into(),
            from: "etcd.v2".into(),
            to: "etcd.v1".into(),
            catalog: "olm/c".into(),
            package: "etcd".into(),
            approval: "Manual".into(),
            offered: Ok(true),
            before: None,
        };
        let html = rollback_page(&rollback);
        assert!(html.contains("<p>Rolls Subscription a/etcd back from etcd.v2 to etcd.v1.</p>"), "{html}");
        assert!(html.contains("action=\"/rollback/a/etcd\"><input type=\"hidden\" name=\"from\" value=\"etcd.v2\"><button type=\"submit\">Roll back to etcd.v1</button>"), "{html}");
    }
}
