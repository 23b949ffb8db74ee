//! The preview of real upgrades: koku-metrics-operator 0.9.1 → 0.9.2 from community-operators
//! (tests/testdata/real-bundles), which adds permissions on CSVs, drops a container and
//! changes its CRD's schema.

use std::path::PathBuf;

use olm_api::v1alpha1::install_plan::{Step, StepResource, StepStatus};
use serde_json::{Value, json};

use super::*;

fn koku(version: &str, file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/testdata/real-bundles/koku-metrics-operator")
        .join(version)
        .join("manifests")
        .join(file);
    olm_api::yaml::from_path(&path).expect("a real manifest")
}

const CSV: &str = "koku-metrics-operator.clusterserviceversion.yaml";
const CRD: &str = "koku-metrics-cfg.openshift.io_kokumetricsconfigs.yaml";

fn step(group: &str, kind: &str, manifest: &Value) -> Step {
    Step {
        resolving: "koku-metrics-operator.v0.9.2".into(),
        resource: StepResource {
            source_name: "community".into(),
            source_namespace: "olm".into(),
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            name: manifest.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().into(),
            manifest: Some(manifest.to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

fn upgrade_steps() -> Vec<Step> {
    vec![
        step("apiextensions.k8s.io", "CustomResourceDefinition", &koku("0.9.2", CRD)),
        step("operators.coreos.com", "ClusterServiceVersion", &koku("0.9.2", CSV)),
    ]
}

fn installed_0_9_1() -> Installed {
    let mut installed = Installed::default();
    installed.csvs.insert("koku-metrics-operator.v0.9.1".into(), koku("0.9.1", CSV));
    let crd = koku("0.9.1", CRD);
    let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    installed.objects.insert(("CustomResourceDefinition".into(), name), crd);
    installed
}

#[test]
fn an_upgrade_lists_the_permissions_it_adds_spelled_out() {
    let preview = preview(&upgrade_steps(), &installed_0_9_1());
    assert_eq!(
        preview.operators,
        vec![OperatorChange {
            csv: "koku-metrics-operator.v0.9.2".into(),
            version: Some("0.9.2".into()),
            replaces: Some("koku-metrics-operator.v0.9.1".into()),
        }]
    );
    let added: Vec<String> = preview.permissions.iter().filter(|p| p.change == Change::Added).map(render::permission_line).collect();
    assert!(
        added.contains(
            &"+ in the target namespaces, ServiceAccount koku-metrics-manager-role: get, list, patch, update, watch clusterserviceversions.operators.coreos.com"
                .to_owned()
        ),
        "{added:#?}"
    );
    assert!(preview.grants_more());
    // 0.9.2 drops the leader-election account's role: its grants are listed as removed.
    assert!(
        preview
            .permissions
            .iter()
            .any(|p| p.change == Change::Removed && p.service_account.as_deref() == Some("koku-metrics-leader-election-role")),
        "{:#?}",
        preview.permissions
    );
}

#[test]
fn an_upgrade_lists_its_deployment_and_crd_changes() {
    let preview = preview(&upgrade_steps(), &installed_0_9_1());
    let [deployment] = preview.deployments.as_slice() else { panic!("{:#?}", preview.deployments) };
    assert_eq!((deployment.name.as_str(), deployment.change.as_str()), ("koku-metrics-controller-manager", "changed"));
    let proxy = deployment.containers.iter().find(|c| c.name == "kube-rbac-proxy").expect("the proxy container goes");
    assert_eq!((proxy.image_before.as_deref(), proxy.image_after.as_deref()), (Some("gcr.io/kubebuilder/kube-rbac-proxy:v0.5.0"), None));
    let manager = deployment.containers.iter().find(|c| c.name == "manager").expect("the manager's image changes");
    assert_eq!(manager.image_before.as_deref(), Some("quay.io/project-koku/koku-metrics-operator:v0.9.1"));
    let [crd] = preview.crds.as_slice() else { panic!("{:#?}", preview.crds) };
    assert!(!crd.new && crd.removed_versions.is_empty(), "{crd:#?}");
    assert!(!crd.changed_schemas.is_empty(), "the 0.9.2 schema differs: {crd:#?}");
    let text = render::text(&preview);
    assert!(text.starts_with("Upgrades koku-metrics-operator.v0.9.1 to koku-metrics-operator.v0.9.2 (version 0.9.2)\n"), "{text}");
    assert!(text.contains("  - container kube-rbac-proxy: gcr.io/kubebuilder/kube-rbac-proxy:v0.5.0\n"), "{text}");
}

#[test]
fn a_first_install_lists_everything_as_new() {
    let preview = preview(&upgrade_steps(), &Installed::default());
    assert_eq!(preview.operators[0].replaces.as_deref(), Some("koku-metrics-operator.v0.9.1"));
    assert!(preview.permissions.iter().all(|p| p.change == Change::Added));
    assert!(preview.crds[0].new);
    assert_eq!(preview.deployments[0].change, "added");
}

#[test]
fn the_same_version_again_changes_nothing() {
    let steps = vec![step("operators.coreos.com", "ClusterServiceVersion", &{
        let mut csv = koku("0.9.1", CSV);
        csv["spec"]["replaces"] = json!("koku-metrics-operator.v0.9.1");
        csv
    })];
    let preview = preview(&steps, &installed_0_9_1());
    assert!(preview.permissions.is_empty() && preview.deployments.is_empty(), "{preview:#?}");
    assert!(!preview.grants_more());
    assert!(render::text(&preview).contains("Permissions: no permission added or removed\n"));
}

#[test]
fn bundle_roles_are_compared_with_the_existing_ones_and_webhooks_are_named() {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["token"], "verbs": ["get"]}]});
    let mut csv = koku("0.9.2", CSV);
    csv["spec"]["webhookdefinitions"] = json!([{"generateName": "vkoku.example.com", "type": "ValidatingAdmissionWebhook"}]);
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{"group": "metrics.koku.io", "version": "v1"}]});
    let steps = vec![step("rbac.authorization.k8s.io", "ClusterRole", &role), step("operators.coreos.com", "ClusterServiceVersion", &csv)];
    let mut installed = installed_0_9_1();
    let mut old_role = role.clone();
    old_role["rules"] = json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]);
    installed.objects.insert(("ClusterRole".into(), "metrics-reader".into()), old_role);
    let generated = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "koku-metrics-operator.v0.9.2-sa-0123456789ab", "labels": {"olm.owner": "koku-metrics-operator.v0.9.2", "olm.owner.kind": "ClusterServiceVersion"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]});
    let mut steps = steps;
    steps.push(step("rbac.authorization.k8s.io", "Role", &generated));
    let preview = preview(&steps, &installed);
    assert!(!preview.permissions.iter().any(|p| p.resource == "pods"), "roles generated from the CSV are compared CSV to CSV");
    let by_role: Vec<String> = preview.permissions.iter().filter(|p| p.scope.starts_with("ClusterRole")).map(render::permission_line).collect();
    assert_eq!(by_role, vec!["+ by ClusterRole metrics-reader: get secrets named token"]);
    assert_eq!(preview.webhooks_added, vec!["vkoku.example.com (ValidatingAdmissionWebhook)"]);
    assert_eq!(preview.api_services_added, vec!["v1.metrics.koku.io"]);
    assert!(preview.other_objects.contains(&"ClusterRole metrics-reader".to_owned()));
}

#[test]
fn a_crd_that_drops_a_stored_version_is_said_to_be_refused() {
    // Back from 0.9.3 (v1alpha1 and v1beta1, storing v1beta1) to 0.9.1 (v1alpha1 only).
    let mut existing = koku("0.9.3", CRD);
    existing["status"] = json!({"storedVersions": ["v1alpha1", "v1beta1"]});
    let name = existing.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut installed = Installed::default();
    installed.objects.insert(("CustomResourceDefinition".into(), name), existing);
    let preview = preview(&[step("apiextensions.k8s.io", "CustomResourceDefinition", &koku("0.9.1", CRD))], &installed);
    let crd = &preview.crds[0];
    assert_eq!((crd.removed_versions.clone(), crd.removed_stored_versions.clone()), (vec!["v1beta1".to_owned()], vec!["v1beta1".to_owned()]));
    assert_eq!(crd.storage_version, Some(("v1beta1".to_owned(), "v1alpha1".to_owned())));
    assert!(render::text(&preview).contains("REFUSED: versions v1beta1 still store objects"), "{}", render::text(&preview));
}
