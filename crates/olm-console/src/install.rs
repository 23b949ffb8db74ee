//! The install page: namespace, channel, version and approval in one form; then a preview of
//! the exact objects it creates (the namespace and its OperatorGroup when absent, said so, and
//! the Subscription), checked by a server-side dry run, and a button that creates them. The
//! choice of objects is pure ([`plan`]); the page functions render.

use olm_api::packages::v1::PackageManifest;
use olm_api::v1alpha1::cluster_service_version::InstallModeType;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::html::{escape, query_value};

/// What the form sends.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct InstallForm {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub channel: String,
    /// A CSV name of the channel to start from; empty: the channel's head.
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub approval: String,
    /// For a new OperatorGroup: `AllNamespaces` or `OwnNamespace`.
    #[serde(default)]
    pub watch: String,
    /// `preview` or `create`.
    #[serde(default)]
    pub action: String,
}

/// The OperatorGroup already in the namespace, as far as the plan needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingGroup {
    pub name: String,
    /// Empty: all namespaces.
    pub targets: Vec<String>,
}

/// What the namespace holds now.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub namespace_exists: bool,
    pub groups: Vec<ExistingGroup>,
}

/// The objects to create, in order, and what the user should know.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub objects: Vec<Value>,
    pub notes: Vec<String>,
}

/// The objects that install `manifest` as `form` asks into a namespace that is as `target`
/// says, or why not (in words, with what to change).
pub fn plan(manifest: &PackageManifest, form: &InstallForm, target: &Target) -> Result<Plan, String> {
    let status = &manifest.status;
    let package = manifest.metadata.name.clone().unwrap_or_default();
    let namespace = form.namespace.trim();
    if namespace.is_empty() || namespace.len() > 63 || !namespace.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') || namespace.starts_with('-') || namespace.ends_with('-') {
        return Err(format!("“{namespace}” is not a namespace name: use lower-case letters, digits and '-', at most 63"));
    }
    let Some(channel) = status.channels.iter().find(|c| c.name == form.channel) else {
        let names: Vec<&str> = status.channels.iter().map(|c| c.name.as_str()).collect();
        return Err(format!("package {package} has no channel “{}”; choose one of {}", form.channel, names.join(", ")));
    };
    let starting = form.version.trim();
    if !starting.is_empty() && !channel.entries.iter().any(|e| e.name == starting) && channel.current_csv != starting {
        return Err(format!("{starting} is not in channel {}: choose a version of that channel, or the latest", channel.name));
    }
    let approval = match form.approval.as_str() {
        "" | "Automatic" => "Automatic",
        "Manual" => "Manual",
        other => return Err(format!("approval “{other}” is neither Automatic nor Manual")),
    };
    let supported = |mode: InstallModeType| channel.current_csv_desc.install_modes.iter().any(|m| m.type_ == mode && m.supported);
    let mut objects = Vec::new();
    let mut notes = Vec::new();
    if !target.namespace_exists {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
        notes.push(format!("Namespace {namespace} does not exist: it is created."));
    }
    match target.groups.as_slice() {
        [] => {
            let all = match form.watch.as_str() {
                "AllNamespaces" => true,
                "OwnNamespace" => false,
                _ => supported(InstallModeType::AllNamespaces),
            };
            let (mode, spec) = if all { (InstallModeType::AllNamespaces, json!({})) } else { (InstallModeType::OwnNamespace, json!({"targetNamespaces": [namespace]})) };
            if !supported(mode) {
                return Err(format!("{} does not support {}: choose the other watch option", channel.current_csv, mode.as_str()));
            }
            objects.push(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": namespace, "namespace": namespace}, "spec": spec}));
            notes.push(format!(
                "Namespace {namespace} has no OperatorGroup: OperatorGroup {namespace} is created, for {}.",
                if all { "all namespaces" } else { "this namespace only" }
            ));
        }
        [group] => {
            let mode = match group.targets.as_slice() {
                [] => InstallModeType::AllNamespaces,
                [one] if one == namespace => InstallModeType::OwnNamespace,
                [_] => InstallModeType::SingleNamespace,
                _ => InstallModeType::MultiNamespace,
            };
            if !supported(mode) {
                return Err(format!(
                    "OperatorGroup {} in {namespace} targets {} ({}), which {} does not support: install into another namespace",
                    group.name,
                    if group.targets.is_empty() { "all namespaces".to_owned() } else { group.targets.join(", ") },
                    mode.as_str(),
                    channel.current_csv
                ));
            }
            notes.push(format!("The namespace's OperatorGroup {} is used ({}).", group.name, mode.as_str()));
        }
        groups => {
            let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            return Err(format!("namespace {namespace} has {} OperatorGroups ({}); OLM installs nothing there until only one is left", groups.len(), names.join(", ")));
        }
    }
    let mut spec = json!({
        "name": package,
        "channel": channel.name,
        "source": status.catalog_source,
        "sourceNamespace": status.catalog_source_namespace,
        "installPlanApproval": approval,
    });
    if !starting.is_empty() {
        spec["startingCSV"] = json!(starting);
    }
    objects.push(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": package, "namespace": namespace}, "spec": spec}));
    if approval == "Manual" {
        notes.push("Manual approval: each install and upgrade waits for your approval on the Installed page.".into());
    }
    Ok(Plan { objects, notes })
}

fn hidden(name: &str, value: &str) -> String {
    format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", escape(value))
}

/// The form, filled with `form` (defaults: the package's name as namespace, the default
/// channel, its head, Automatic).
pub fn form_page(manifest: &PackageManifest, form: &InstallForm, error: Option<&str>) -> String {
    let status = &manifest.status;
    let ns = manifest.metadata.namespace.clone().unwrap_or_default();
    let name = manifest.metadata.name.clone().unwrap_or_default();
    let chosen_channel = if form.channel.is_empty() { manifest.default_channel().unwrap_or_default().to_owned() } else { form.channel.clone() };
    let namespace = if form.namespace.is_empty() { name.clone() } else { form.namespace.clone() };
    let mut html = String::new();
    if let Some(error) = error {
        html.push_str(&format!("<p class=\"error\" role=\"alert\"><strong>Cannot install:</strong> {}</p>", escape(error)));
    }
    html.push_str(&format!("<form method=\"post\" action=\"/install/{}/{}\" class=\"install\">", query_value(&ns), query_value(&name)));
    html.push_str(&format!("<p><label>Namespace <input name=\"namespace\" value=\"{}\" required></label></p>", escape(&namespace)));
    html.push_str("<p><label>Channel <select name=\"channel\">");
    for channel in &status.channels {
        let selected = if channel.name == chosen_channel { " selected" } else { "" };
        html.push_str(&format!("<option value=\"{c}\"{selected}>{c}</option>", c = escape(&channel.name)));
    }
    html.push_str("</select></label></p><p><label>Version <select name=\"version\"><option value=\"\">the channel's latest</option>");
    for channel in &status.channels {
        for entry in &channel.entries {
            let selected = if entry.name == form.version { " selected" } else { "" };
            html.push_str(&format!("<option value=\"{}\"{selected}>{} ({} in {})</option>", escape(&entry.name), escape(&entry.version), escape(&entry.name), escape(&channel.name)));
        }
    }
    html.push_str("</select></label></p>");
    let approval = |value: &str| if form.approval == value || (form.approval.is_empty() && value == "Automatic") { " checked" } else { "" };
    html.push_str(&format!(
        "<fieldset><legend>Approval</legend><label><input type=\"radio\" name=\"approval\" value=\"Automatic\"{}> Automatic: upgrades install as they come</label><br><label><input type=\"radio\" name=\"approval\" value=\"Manual\"{}> Manual: each waits for approval</label></fieldset>",
        approval("Automatic"),
        approval("Manual")
    ));
    html.push_str("<fieldset><legend>For a new OperatorGroup, the operator watches</legend><label><input type=\"radio\" name=\"watch\" value=\"\" checked> all namespaces when it can</label><br><label><input type=\"radio\" name=\"watch\" value=\"AllNamespaces\"> all namespaces</label><br><label><input type=\"radio\" name=\"watch\" value=\"OwnNamespace\"> its own namespace only</label></fieldset>");
    html.push_str("<p><button type=\"submit\" name=\"action\" value=\"preview\">Preview</button></p></form>");
    html
}

/// The preview: the objects as YAML, what the dry run said, and the button that creates them.
pub fn preview_page(manifest: &PackageManifest, form: &InstallForm, plan: &Plan, yaml: &str, dry_run: &[String]) -> String {
    let ns = manifest.metadata.namespace.clone().unwrap_or_default();
    let name = manifest.metadata.name.clone().unwrap_or_default();
    let mut html = String::new();
    html.push_str(&format!("<ul class=\"notes\">{}</ul>", plan.notes.iter().map(|n| format!("<li>{}</li>", escape(n))).collect::<String>()));
    html.push_str(&format!("<h2>What will be created</h2><pre class=\"yaml\"><code>{}</code></pre>", escape(yaml)));
    html.push_str(&format!("<h2>Server-side dry run</h2><ul class=\"dry-run\">{}</ul>", dry_run.iter().map(|d| format!("<li>{}</li>", escape(d))).collect::<String>()));
    html.push_str(&format!("<form method=\"post\" action=\"/install/{}/{}\">", query_value(&ns), query_value(&name)));
    for (field, value) in [("namespace", &form.namespace), ("channel", &form.channel), ("version", &form.version), ("approval", &form.approval), ("watch", &form.watch)] {
        html.push_str(&hidden(field, value));
    }
    html.push_str("<button type=\"submit\" name=\"action\" value=\"create\">Create</button> ");
    html.push_str(&format!("<a href=\"/install/{}/{}\">Change</a></form>", query_value(&ns), query_value(&name)));
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd(modes: &[(&str, bool)]) -> PackageManifest {
        serde_json::from_value(json!({
            "metadata": {"name": "etcd", "namespace": "olm"},
            "status": {"catalogSource": "community", "catalogSourceNamespace": "olm", "packageName": "etcd", "defaultChannel": "alpha",
                "channels": [{"name": "alpha", "currentCSV": "etcd.v2", "entries": [{"name": "etcd.v2", "version": "2"}, {"name": "etcd.v1", "version": "1"}],
                    "currentCSVDesc": {"displayName": "etcd", "version": "2", "installModes": modes.iter().map(|(m, s)| json!({"type": m, "supported": s})).collect::<Vec<_>>()}}]}
        }))
        .unwrap()
    }

    fn form(namespace: &str) -> InstallForm {
        InstallForm { namespace: namespace.into(), channel: "alpha".into(), ..InstallForm::default() }
    }

    const NEW: Target = Target { namespace_exists: false, groups: Vec::new() };

    #[test]
    fn a_new_namespace_gets_its_group_and_the_subscription() {
        let plan = plan(&etcd(&[("OwnNamespace", true), ("AllNamespaces", false)]), &InstallForm { version: "etcd.v1".into(), approval: "Manual".into(), ..form("team-a") }, &NEW).unwrap();
        let kinds: Vec<&str> = plan.objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "OperatorGroup", "Subscription"]);
        assert_eq!(plan.objects[1]["spec"], json!({"targetNamespaces": ["team-a"]}), "OwnNamespace when all namespaces is not supported");
        assert_eq!(plan.objects[2]["spec"], json!({"name": "etcd", "channel": "alpha", "source": "community", "sourceNamespace": "olm", "installPlanApproval": "Manual", "startingCSV": "etcd.v1"}));
        assert!(plan.notes.iter().any(|n| n.contains("is created, for this namespace only")));
    }

    #[test]
    fn an_existing_group_is_used_when_the_operator_supports_it_and_said_otherwise() {
        let global = Target { namespace_exists: true, groups: vec![ExistingGroup { name: "global".into(), targets: Vec::new() }] };
        let only_own = etcd(&[("OwnNamespace", true), ("AllNamespaces", false)]);
        let err = plan(&only_own, &form("operators"), &global).unwrap_err();
        assert!(err.contains("OperatorGroup global") && err.contains("AllNamespaces") && err.contains("another namespace"), "{err}");
        let both = etcd(&[("OwnNamespace", true), ("AllNamespaces", true)]);
        let ok = plan(&both, &form("operators"), &global).unwrap();
        assert_eq!(ok.objects.len(), 1, "only the Subscription");
        assert!(ok.notes[0].contains("OperatorGroup global is used"));
    }

    #[test]
    fn bad_input_is_refused_in_words() {
        let manifest = etcd(&[("AllNamespaces", true)]);
        assert!(plan(&manifest, &form("Team_A"), &NEW).unwrap_err().contains("not a namespace name"));
        assert!(plan(&manifest, &InstallForm { channel: "beta".into(), ..form("a") }, &NEW).unwrap_err().contains("choose one of alpha"));
        assert!(plan(&manifest, &InstallForm { version: "etcd.v9".into(), ..form("a") }, &NEW).unwrap_err().contains("not in channel alpha"));
        let two = Target { namespace_exists: true, groups: vec![ExistingGroup { name: "a".into(), targets: vec![] }, ExistingGroup { name: "b".into(), targets: vec![] }] };
        assert!(plan(&manifest, &form("a"), &two).unwrap_err().contains("2 OperatorGroups"));
    }

    #[test]
    fn the_forms_echo_what_was_typed_escaped() {
        let manifest = etcd(&[("AllNamespaces", true)]);
        let html = form_page(&manifest, &InstallForm { namespace: "\"><script>x()</script>".into(), ..InstallForm::default() }, Some("<b>no</b>"));
        assert!(!html.contains("<script>") && !html.contains("<b>no</b>"), "{html}");
    }
}
