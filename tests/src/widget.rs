//! The Widget test operator: a CRD under a group of its own per test (`widgets.<random>.olm.test`)
//! and CSVs without Deployments, so an install or upgrade is decided by OLM alone, in
//! seconds; and a legacy ConfigMap catalog to serve them from.

use serde_json::json;

pub fn widget_crd(required_color: bool, random: &str) -> serde_json::Value {
    let mut spec_schema = json!({"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}});
    if required_color {
        spec_schema["required"] = json!(["color"]);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{random}.olm.test")},
        "spec": {"group": format!("{random}.olm.test"), "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}}]}
    })
}

pub fn widget_csv(version: &str, replaces: Option<&str>, random: &str) -> serde_json::Value {
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("widget.v{version}")},
        "spec": {"version": version, "displayName": "Widget",
                 "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                                  {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": false}],
                 "customresourcedefinitions": {"owned": [{"name": format!("widgets.{random}.olm.test"), "version": "v1", "kind": "Widget"}]},
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}
    });
    if let Some(r) = replaces {
        csv["spec"]["replaces"] = json!(r);
    }
    csv
}

/// A legacy ConfigMap catalog `name` with the package `widget`, one channel `stable` whose
/// head is `current`, these CSVs and CRDs.
pub fn widget_catalog(name: &str, current: &str, csvs: Vec<serde_json::Value>, crds: Vec<serde_json::Value>) -> serde_json::Value {
    let list = |items: Vec<serde_json::Value>| serde_json::to_string(&items).unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {
            "packages": format!("- packageName: widget\n  channels:\n  - name: stable\n    currentCSV: {current}\n"),
            "clusterServiceVersions": list(csvs),
            "customResourceDefinitions": list(crds),
        }
    })
}

/// In `ns`: the ConfigMap catalog `widgets` serving `csvs` (and the Widget CRD of `random`),
/// `head` the head of its channel `stable`, its CatalogSource, and an Automatic Subscription
/// `widget` to that channel, from `starting_csv` or the head.
pub async fn subscribe_to_widgets(
    ns: &olm_testkit::TestNamespace,
    random: &str,
    head: &str,
    csvs: Vec<serde_json::Value>,
    starting_csv: Option<&str>,
) -> anyhow::Result<()> {
    use crate::controllers::create_from_yaml;
    let catalog = widget_catalog("widgets", head, csvs, vec![widget_crd(false, random)]);
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api();
    cms.create(&Default::default(), &serde_json::from_value(catalog)?).await?;
    create_from_yaml(
        ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: widgets\nspec:\n  sourceType: configmap\n  configMap: widgets\n",
    )
    .await?;
    let starting = starting_csv.map(|s| format!("  startingCSV: {s}\n")).unwrap_or_default();
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: widget\nspec:\n  source: widgets\n  sourceNamespace: {}\n  name: widget\n  channel: stable\n{starting}  installPlanApproval: Automatic\n",
            ns.name()
        ),
    )
    .await
}
