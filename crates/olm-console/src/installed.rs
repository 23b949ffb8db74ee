//! The Installed page: every Subscription the user can see, with its CSV's phase and the
//! conditions that need attention, in words. Pure: rows from the objects read.

use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;

use crate::html::escape;

/// One Subscription as its row shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub package: String,
    pub channel: String,
    pub installed: String,
    /// The CSV's phase (or a word for none), and its reason and message.
    pub phase: String,
    pub detail: String,
    /// What the Subscription is doing, in words.
    pub state: String,
    /// Conditions that are True and say something is wrong, as `Type: message`.
    pub problems: Vec<String>,
    /// The InstallPlan that waits for approval, when one does.
    pub review: Option<String>,
    /// The APIs the installed CSV provides.
    pub apis: Vec<crate::instance::ProvidedApi>,
    /// The installed CSV replaced another: it can be rolled back to that one.
    pub can_roll_back: bool,
}

/// The rows for `subscriptions`, their CSVs looked up in `csvs`; sorted by namespace and name.
pub fn rows(subscriptions: &[Subscription], csvs: &[ClusterServiceVersion]) -> Vec<Row> {
    let mut rows: Vec<Row> = subscriptions
        .iter()
        .map(|sub| {
            let namespace = sub.metadata.namespace.clone().unwrap_or_default();
            let status = sub.status.clone().unwrap_or_default();
            let installed = status.installed_csv.clone().unwrap_or_default();
            let current = status.current_csv.clone().unwrap_or_default();
            let csv = csvs.iter().find(|c| c.metadata.namespace.as_deref() == Some(namespace.as_str()) && c.metadata.name.as_deref() == Some(installed.as_str()));
            let (phase, detail) = match csv.and_then(|c| c.status.as_ref()) {
                Some(s) => (
                    s.phase.as_ref().map(ToString::to_string).unwrap_or_else(|| "not started".into()),
                    [s.reason.as_ref().map(ToString::to_string), s.message.clone()].into_iter().flatten().filter(|t| !t.is_empty()).collect::<Vec<_>>().join(": "),
                ),
                None if installed.is_empty() => ("nothing installed yet".into(), String::new()),
                None => ("its CSV is not there".into(), format!("ClusterServiceVersion {installed} was not found in {namespace}")),
            };
            let state = match status.state.as_ref().map(ToString::to_string).as_deref() {
                Some("AtLatestKnown") => "up to date with its channel".to_owned(),
                Some("UpgradePending") if !current.is_empty() && current != installed => format!("{current} waits for approval"),
                Some("UpgradeAvailable") => format!("{current} is available"),
                Some("UpgradePending") => "installing".to_owned(),
                Some(other) => other.to_owned(),
                None => "not resolved yet".to_owned(),
            };
            let problems = status
                .conditions
                .iter()
                .flatten()
                .filter(|c| c.status.to_string() == "True" && !matches!(c.type_.to_string().as_str(), "InstallPlanPending"))
                .map(|c| format!("{}: {}", c.type_, c.message.clone().or(c.reason.clone()).unwrap_or_default()))
                .collect();
            let waiting = status.conditions.iter().flatten().any(|c| {
                c.type_.to_string() == "InstallPlanPending" && c.status.to_string() == "True" && c.reason.as_deref() == Some("RequiresApproval")
            });
            let review = status.install_plan_ref.as_ref().and_then(|r| r.name.clone()).filter(|_| waiting);
            Row {
                review,
                can_roll_back: csv.and_then(|c| c.spec.replaces.as_deref()).is_some_and(|r| !r.is_empty()),
                apis: csv.map(crate::instance::provided_apis).unwrap_or_default(),
                name: sub.metadata.name.clone().unwrap_or_default(),
                package: sub.spec.name.clone(),
                channel: sub.spec.channel.clone().unwrap_or_default(),
                installed,
                phase,
                detail,
                state,
                problems,
                namespace,
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

/// The page's body.
pub fn page(rows: &[Row], note: Option<&str>) -> String {
    let mut html = String::new();
    if let Some(note) = note {
        html.push_str(&format!("<p class=\"note\" role=\"status\">{}</p>", escape(note)));
    }
    if rows.is_empty() {
        html.push_str("<p>No Subscription you can see. Install one from the <a href=\"/\">catalog</a>.</p>");
        return html;
    }
    html.push_str("<table class=\"installed\"><thead><tr><th scope=\"col\">Namespace</th><th scope=\"col\">Subscription</th><th scope=\"col\">Channel</th><th scope=\"col\">Installed</th><th scope=\"col\">Phase</th><th scope=\"col\">State</th><th scope=\"col\">Provided APIs</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
    for row in rows {
        let problems = if row.problems.is_empty() {
            String::new()
        } else {
            format!("<ul class=\"problems\">{}</ul>", row.problems.iter().map(|p| format!("<li>{}</li>", escape(p))).collect::<String>())
        };
        html.push_str(&format!(
            "<tr data-subscription=\"{ns}/{name}\"><td data-label=\"Namespace\">{ns}</td><td data-label=\"Subscription\">{name} <span class=\"meta\">({package})</span></td><td data-label=\"Channel\">{channel}</td><td data-label=\"Installed\">{installed}</td><td class=\"phase\" data-label=\"Phase\"><strong>{phase}</strong>{detail}</td><td data-label=\"State\">{state}{problems}</td><td class=\"apis\" data-label=\"Provided APIs\">{apis}</td><td class=\"actions\" data-label=\"Actions\">{actions}</td></tr>",
            ns = escape(&row.namespace),
            name = escape(&row.name),
            package = escape(&row.package),
            channel = escape(&row.channel),
            installed = escape(&row.installed),
            phase = escape(&row.phase),
            detail = if row.detail.is_empty() { String::new() } else { format!("<br><span class=\"meta\">{}</span>", escape(&row.detail)) },
            apis = row
                .apis
                .iter()
                .map(|api| if api.has_example {
                    format!(
                        "<a href=\"/instance/{}/{}/{}\">Create {}</a><br>",
                        crate::html::query_value(&row.namespace),
                        crate::html::query_value(&row.installed),
                        crate::html::query_value(&api.kind),
                        escape(&api.display_name)
                    )
                } else {
                    format!("{}<br>", escape(&api.display_name))
                })
                .collect::<String>(),
            actions = {
                let path = format!("{}/{}", crate::html::query_value(&row.namespace), crate::html::query_value(&row.name));
                let rollback = if row.can_roll_back { format!("<a href=\"/rollback/{path}\">Roll back</a><br>") } else { String::new() };
                format!("{rollback}<a href=\"/uninstall/{path}\">Uninstall</a>")
            },
            state = match &row.review {
                Some(plan) => format!("{} <a href=\"/plan/{}/{}\">Review and approve</a>", escape(&row.state), crate::html::query_value(&row.namespace), crate::html::query_value(plan)),
                None => escape(&row.state),
            },
        ));
    }
    html.push_str("</tbody></table>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_say_the_phase_the_state_and_what_is_wrong_in_words() {
        let subs: Vec<Subscription> = vec![
            serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "etcd", "namespace": "b"},
                "spec": {"name": "etcd", "channel": "alpha", "source": "c", "sourceNamespace": "olm"},
                "status": {"installedCSV": "etcd.v1", "currentCSV": "etcd.v2", "state": "UpgradePending",
                           "installPlanRef": {"name": "install-abc", "namespace": "b"},
                           "conditions": [{"type": "CatalogSourcesUnhealthy", "status": "True", "message": "catalog olm/c is not serving"}, {"type": "InstallPlanPending", "status": "True", "reason": "RequiresApproval"}]}})).unwrap(),
            serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "new", "namespace": "a"},
                "spec": {"name": "new", "source": "c", "sourceNamespace": "olm"}})).unwrap(),
        ];
        let csvs: Vec<ClusterServiceVersion> = vec![serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "b", "annotations": {"alm-examples": "[{\"apiVersion\": \"etcd.database.coreos.com/v1beta2\", \"kind\": \"EtcdCluster\", \"metadata\": {\"name\": \"example\"}}]"}},
            "spec": {"displayName": "etcd", "install": {"strategy": "deployment"}, "replaces": "etcd.v0",
                "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster", "displayName": "etcd Cluster"},
                    {"name": "etcdbackups.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdBackup"}]}},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"}})).unwrap()];
        let rows = rows(&subs, &csvs);
        assert_eq!(rows[0].name, "new", "sorted by namespace");
        assert_eq!((rows[0].phase.as_str(), rows[0].state.as_str()), ("nothing installed yet", "not resolved yet"));
        assert_eq!(rows[1].phase, "Succeeded");
        assert_eq!(rows[1].detail, "InstallSucceeded: install strategy completed with no errors");
        assert_eq!(rows[1].state, "etcd.v2 waits for approval");
        assert_eq!(rows[1].problems, ["CatalogSourcesUnhealthy: catalog olm/c is not serving"]);
        assert_eq!(rows[1].review.as_deref(), Some("install-abc"));
        assert_eq!(rows[0].review, None);
        let html = page(&rows, None);
        assert!(html.contains("<strong>Succeeded</strong>"), "{html}");
        assert!(html.contains("<a href=\"/plan/b/install-abc\">Review and approve</a>"), "{html}");
        assert!(html.contains("<a href=\"/instance/b/etcd.v1/EtcdCluster\">Create etcd Cluster</a><br>EtcdBackup<br>"), "an example links to its form: {html}");
        assert!(html.contains("<td class=\"actions\" data-label=\"Actions\"><a href=\"/rollback/b/etcd\">Roll back</a><br><a href=\"/uninstall/b/etcd\">Uninstall</a></td>"), "{html}");
        assert!(html.contains("<td class=\"actions\" data-label=\"Actions\"><a href=\"/uninstall/a/new\">Uninstall</a></td>"), "nothing installed: nothing to roll back to: {html}");
    }
}
