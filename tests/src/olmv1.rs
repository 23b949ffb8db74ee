//! What the OLM v1 suites share: an `olm run` of their own, a ClusterCatalog manifest, a catalog
//! whose bundles carry their manifests.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::{Value, json};
use olm_testkit::TestCluster;

/// `olm run` against the test cluster, its ClusterCatalog content on a port of its own; killed
/// when dropped.
pub struct OlmRun {
    child: tokio::process::Child,
}

impl OlmRun {
    pub async fn start(cluster: &TestCluster, cache: &Path) -> anyhow::Result<OlmRun> {
        let child = tokio::process::Command::new(crate::olm_bin())
            .args(["run", "--metrics-addr=127.0.0.1:0", "--cluster-catalog-addr=127.0.0.1:0"])
            .arg(format!("--kubeconfig={}", cluster.kubeconfig().display()))
            .arg(format!("--image-cache-dir={}", cache.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("start olm run")?;
        Ok(OlmRun { child })
    }

    /// The process id (0 once it has exited).
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

impl Drop for OlmRun {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A ClusterCatalog of `image`, polled every `poll_minutes` when given.
pub fn cluster_catalog(name: &str, image: &str, poll_minutes: Option<u32>) -> String {
    let poll = poll_minutes.map(|m| format!("\n      pollIntervalMinutes: {m}")).unwrap_or_default();
    format!(
        "apiVersion: olm.operatorframework.io/v1\nkind: ClusterCatalog\nmetadata:\n  name: {name}\nspec:\n  source:\n    type: Image\n    image:\n      ref: {image}{poll}\n"
    )
}


/// A catalog of one package, `widget`, whose bundles carry their manifests (`olm.bundle.object`):
/// v1 with a metrics Service, v2 without it and with a CRD schema that requires `spec.size`; its
/// API in `group` (a suite of its own each, so that one's leftovers do not stand in another's way).
pub fn widget_catalog(dir: &std::path::Path, group: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("catalog.json"), widget_package("widget", group))?;
    Ok(())
}

/// The documents (JSON lines) of [`widget_catalog`]'s package under the name `package`: its
/// objects named after it (CSV `<package>.v1.0.0`, Deployment `<package>-operator`, …), so that
/// several can share a catalog and a namespace.
pub fn widget_package(package: &str, group: &str) -> String {
    let object = |value: Value| json!({"type": "olm.bundle.object", "value": {"data": base64::engine::general_purpose::STANDARD.encode(value.to_string())}});
    let crd = |required: bool| {
        let mut spec = json!({"type": "object", "properties": {"size": {"type": "integer"}}});
        if required {
            spec["required"] = json!(["size"]);
        }
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("widgets.{group}")},
               "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})
    };
    let csv = |version: &str| {
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": format!("{package}.v{version}")},
               "spec": {"version": version, "displayName": package,
                        "installModes": [{"type": "AllNamespaces", "supported": true}, {"type": "OwnNamespace", "supported": true}],
                        "customresourcedefinitions": {"owned": [{"name": format!("widgets.{group}"), "version": "v1", "kind": "Widget"}]},
                        "install": {"strategy": "deployment", "spec": {
                            "clusterPermissions": [{"serviceAccountName": package, "rules": [{"apiGroups": [group], "resources": ["widgets"], "verbs": ["*"]}]}],
                            "deployments": [{"name": format!("{package}-operator"), "spec": {"selector": {"matchLabels": {"app": package}},
                                "template": {"metadata": {"labels": {"app": package}}, "spec": {"serviceAccountName": package, "containers": [{"name": "op", "image": format!("example.com/{package}:{version}")}]}}}}]}}}})
    };
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("{package}-metrics")}, "spec": {"selector": {"app": package}, "ports": [{"port": 8443}]}});
    let bundle = |version: &str, objects: Vec<Value>| {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package, "version": version}}),
            json!({"type": "olm.gvk", "value": {"group": group, "version": "v1", "kind": "Widget"}}),
        ];
        properties.extend(objects.into_iter().map(object));
        json!({"schema": "olm.bundle", "package": package, "name": format!("{package}.v{version}"), "image": format!("example.com/{package}-bundle:v{version}"), "properties": properties})
    };
    let docs = [
        json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": format!("{package}.v1.0.0")}, {"name": format!("{package}.v2.0.0"), "replaces": format!("{package}.v1.0.0")}]}),
        bundle("1.0.0", vec![csv("1.0.0"), crd(false), service]),
        bundle("2.0.0", vec![csv("2.0.0"), crd(true)]),
    ];
    docs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n") + "\n"
}

