//! Adopting what OLM v0 installed (issue #54): a ClusterExtension `olm migrate` created names,
//! in `olm-rs.io/adopt-from`, the ClusterServiceVersion whose objects it takes over in place
//! instead of refusing them as OLM v0's. Each object is released from OLM v0 in one write — its
//! v0 labels, its owner reference to the CSV and OLM v0's field ownership removed, tested
//! against the version read — and then applied as the extension's, so no object is ever owned
//! by both worlds. An adopted Deployment keeps the spec it runs with until the bundle changes:
//! OLM v0's pod template differs from v1's in annotations and environment, and applying v1's
//! would restart every pod for nothing.
//!
//! Pure: the reconcile reads and writes.

use kube::api::DynamicObject;
use olm_api::keys;
use serde_json::{Value, json};

/// The CSV a migration adopts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdoptFrom {
    pub namespace: String,
    pub csv: String,
    /// OLM v0's Operator label of the package in that namespace
    /// (`operators.coreos.com/<package>.<namespace>`): the only mark OLM v0 leaves on the
    /// cluster-scoped objects a bundle ships besides its CSV (a bundle's own ClusterRoles).
    pub operator_label: Option<String>,
}

impl AdoptFrom {
    /// From the annotation's `<namespace>/<csv>` and the extension's package; anything else
    /// adopts nothing.
    pub fn parse(annotation: &str, package: &str) -> Option<AdoptFrom> {
        let (namespace, csv) = annotation.split_once('/')?;
        (!namespace.is_empty() && !csv.is_empty() && !csv.contains('/')).then(|| AdoptFrom {
            namespace: namespace.to_owned(),
            csv: csv.to_owned(),
            operator_label: (!package.is_empty()).then(|| keys::operator_component_label(&keys::operator_name(package, namespace))).flatten(),
        })
    }
}

/// Labels OLM v0 puts on what it installs (not those a bundle gives its objects).
const V0_LABELS: [&str; 7] = [
    keys::OWNER_LABEL,
    keys::OWNER_NAMESPACE_LABEL,
    keys::OWNER_KIND_LABEL,
    keys::MANAGED_LABEL,
    keys::DEPLOYMENT_SPEC_HASH_LABEL,
    keys::SERVICE_SPEC_HASH_LABEL,
    keys::PERMISSIONS_HASH_LABEL,
];

fn is_v0_label(key: &str) -> bool {
    V0_LABELS.contains(&key) || key.starts_with(keys::OPERATOR_COMPONENT_LABEL_PREFIX) || key.starts_with(keys::OPERATOR_GROUP_UID_LABEL_PREFIX)
}

/// Whether `existing` is what OLM v0 installed for `from`'s CSV: labelled as its (cluster-scoped
/// objects), owned by it (namespaced ones), an object of the bundle labelled for the package's
/// v0 Operator (the extension applies the same bundle, so it is the CSV's bundle's), or a CRD of
/// the bundle that no OLM v1 install owns (OLM v0 leaves its CRDs without owner; the bundle
/// being the CSV's, its CRDs are the CSV's).
pub fn installed_by(existing: &DynamicObject, from: &AdoptFrom, kind: &str, v1_owner_label: &str) -> bool {
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    let of_the_operator = from.operator_label.as_ref().is_some_and(|label| labels.contains_key(label));
    let labelled = labels.get(keys::OWNER_LABEL) == Some(&from.csv)
        && labels.get(keys::OWNER_NAMESPACE_LABEL) == Some(&from.namespace)
        && labels.get(keys::OWNER_KIND_LABEL).map(String::as_str) == Some("ClusterServiceVersion");
    let owned = existing.metadata.namespace.as_deref() == Some(from.namespace.as_str())
        && existing.metadata.owner_references.iter().flatten().any(|o| o.kind == "ClusterServiceVersion" && o.name == from.csv);
    let unowned_crd = kind == "CustomResourceDefinition" && !labels.contains_key(v1_owner_label) && existing.metadata.owner_references.as_ref().is_none_or(Vec::is_empty);
    labelled || owned || of_the_operator || unowned_crd
}

/// The JSON patch that releases `existing` from OLM v0: tested against the version read; its
/// v0 labels removed; its owner references to CSVs removed; the field ownership of OLM v0's
/// managers (`olm/…`, other than `field_manager`) dropped, so that what the extension stops
/// applying later is removed rather than kept for a manager that is gone.
pub fn release_patch(existing: &DynamicObject, field_manager: &str) -> Value {
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": existing.metadata.resource_version})];
    let mut labels: Vec<&String> = existing.metadata.labels.iter().flatten().map(|(k, _)| k).filter(|k| is_v0_label(k)).collect();
    labels.sort();
    for key in labels {
        ops.push(json!({"op": "remove", "path": format!("/metadata/labels/{}", key.replace('~', "~0").replace('/', "~1"))}));
    }
    if let Some(refs) = &existing.metadata.owner_references {
        let kept: Vec<_> = refs.iter().filter(|o| o.kind != "ClusterServiceVersion").collect();
        if kept.len() != refs.len() {
            ops.push(json!({"op": "replace", "path": "/metadata/ownerReferences", "value": kept}));
        }
    }
    if let Some(fields) = &existing.metadata.managed_fields {
        let v0 = |m: &Option<String>| m.as_deref().is_some_and(|m| m.starts_with("olm/") && m != field_manager);
        if fields.iter().any(|f| v0(&f.manager)) {
            let kept: Vec<_> = fields.iter().filter(|f| !v0(&f.manager)).collect();
            // An empty list would be ignored; one empty entry clears them (the apply that
            // follows makes the extension the owner of what it applies).
            let value = if kept.is_empty() { json!([{}]) } else { json!(kept) };
            ops.push(json!({"op": "replace", "path": "/metadata/managedFields", "value": value}));
        }
    }
    Value::Array(ops)
}

/// The Deployment `rendered` as applied while it keeps the spec it runs with: `live`'s spec,
/// the rendered metadata (the extension's labels and owner).
pub fn with_live_spec(mut rendered: Value, live: &DynamicObject) -> Value {
    if let Some(spec) = live.data.get("spec") {
        rendered["spec"] = spec.clone();
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).expect("object")
    }

    fn from() -> AdoptFrom {
        AdoptFrom { namespace: "operators".into(), csv: "etcdoperator.v0.9.4".into(), operator_label: Some("operators.coreos.com/etcd.operators".into()) }
    }

    #[test]
    fn the_annotation_names_a_namespace_and_a_csv() {
        assert_eq!(AdoptFrom::parse("operators/etcdoperator.v0.9.4", "etcd"), Some(from()));
        for bad in ["", "operators", "/csv", "operators/", "a/b/c"] {
            assert_eq!(AdoptFrom::parse(bad, "etcd"), None, "{bad}");
        }
    }

    #[test]
    fn a_bundles_own_cluster_role_labelled_for_the_packages_v0_operator_is_adoptable() {
        // What OLM v0 leaves on a ClusterRole shipped in the bundle's manifests/.
        let shipped = object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "etcd-editor-role",
            "labels": {"operators.coreos.com/etcd.operators": ""}}}));
        assert!(installed_by(&shipped, &from(), "ClusterRole", "olm.operatorframework.io/owner-name"));
        let other_namespace = object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "etcd-editor-role",
            "labels": {"operators.coreos.com/etcd.elsewhere": ""}}}));
        assert!(!installed_by(&other_namespace, &from(), "ClusterRole", "olm.operatorframework.io/owner-name"));
    }

    #[test]
    fn what_the_csv_installed_is_adoptable_and_nothing_else() {
        let owned = object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "etcd-operator", "namespace": "operators",
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "etcdoperator.v0.9.4", "uid": "u1"}]}}));
        assert!(installed_by(&owned, &from(), "Deployment", "olm.operatorframework.io/owner-name"));
        let other_csv = object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "operators",
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "other.v1", "uid": "u2"}]}}));
        assert!(!installed_by(&other_csv, &from(), "Deployment", "olm.operatorframework.io/owner-name"));
        let labelled = object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "etcd-x",
            "labels": {"olm.owner": "etcdoperator.v0.9.4", "olm.owner.namespace": "operators", "olm.owner.kind": "ClusterServiceVersion"}}}));
        assert!(installed_by(&labelled, &from(), "ClusterRole", "olm.operatorframework.io/owner-name"));
        let unlabelled_role = object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "someone-elses"}}));
        assert!(!installed_by(&unlabelled_role, &from(), "ClusterRole", "olm.operatorframework.io/owner-name"));
        let crd = object(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "etcdclusters.etcd.database.coreos.com"}}));
        assert!(installed_by(&crd, &from(), "CustomResourceDefinition", "olm.operatorframework.io/owner-name"));
        let v1_crd = object(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "c",
            "labels": {"olm.operatorframework.io/owner-name": "another"}}}));
        assert!(!installed_by(&v1_crd, &from(), "CustomResourceDefinition", "olm.operatorframework.io/owner-name"));
    }

    #[test]
    fn release_removes_v0s_labels_owner_and_field_ownership_in_one_tested_write() {
        let existing = object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "etcd-operator", "namespace": "operators", "resourceVersion": "42",
            "labels": {"name": "etcd-operator", "olm.owner": "etcdoperator.v0.9.4", "olm.owner.namespace": "operators",
                       "olm.owner.kind": "ClusterServiceVersion", "olm.deployment-spec-hash": "abc", "operators.coreos.com/etcd.operators": ""},
            "ownerReferences": [
                {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "etcdoperator.v0.9.4", "uid": "u1", "controller": false},
                {"apiVersion": "example.com/v1", "kind": "Keeper", "name": "k", "uid": "u9"}],
            "managedFields": [
                {"manager": "olm/csv", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {}, "subresource": "status"}]}}));
        let patch = release_patch(&existing, "olm/clusterextension");
        let ops = patch.as_array().unwrap();
        assert_eq!(ops[0], json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"}));
        let removed: Vec<_> = ops.iter().filter(|o| o["op"] == "remove").map(|o| o["path"].as_str().unwrap()).collect();
        assert_eq!(
            removed,
            [
                "/metadata/labels/olm.deployment-spec-hash",
                "/metadata/labels/olm.owner",
                "/metadata/labels/olm.owner.kind",
                "/metadata/labels/olm.owner.namespace",
                "/metadata/labels/operators.coreos.com~1etcd.operators",
            ],
            "the bundle's own label `name` stays"
        );
        let owners = ops.iter().find(|o| o["path"] == "/metadata/ownerReferences").unwrap();
        assert_eq!(owners["value"].as_array().unwrap().len(), 1);
        assert_eq!(owners["value"][0]["kind"], "Keeper");
        let fields = ops.iter().find(|o| o["path"] == "/metadata/managedFields").unwrap();
        assert_eq!(fields["value"].as_array().unwrap().len(), 1);
        assert_eq!(fields["value"][0]["manager"], "kube-controller-manager");
    }

    #[test]
    fn release_of_an_object_only_v0_managed_clears_its_field_ownership_with_one_empty_entry() {
        let existing = object(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "operators", "resourceVersion": "7",
            "managedFields": [{"manager": "olm/installplan", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]}}));
        let patch = release_patch(&existing, "olm/clusterextension");
        let fields = patch.as_array().unwrap().iter().find(|o| o["path"] == "/metadata/managedFields").cloned().unwrap();
        assert_eq!(fields["value"], json!([{}]));
    }

    #[test]
    fn an_adopted_deployment_keeps_the_spec_it_runs_with_and_takes_the_rendered_metadata() {
        let live = object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
            "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"olm.operatorGroup": "global"}}}}, "status": {"replicas": 1}}));
        let rendered = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n", "labels": {"olm.operatorframework.io/owner-name": "etcd"}},
            "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"olm.targetNamespaces": ""}}}}});
        let applied = with_live_spec(rendered, &live);
        assert_eq!(applied["spec"]["template"]["metadata"]["annotations"], json!({"olm.operatorGroup": "global"}));
        assert_eq!(applied["metadata"]["labels"]["olm.operatorframework.io/owner-name"], "etcd");
        assert!(applied.get("status").is_none());
    }
}
