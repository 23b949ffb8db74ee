use serde_json::{Value, json};

use super::*;

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("fixture")
}

/// etcd 0.9.4 installed for all namespaces from an image CatalogSource, Automatic approval.
fn etcd() -> Observed {
    Observed {
        subscription: from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "operators"},
            "spec": {"name": "etcd", "channel": "clusterwide-alpha", "source": "community", "sourceNamespace": "olm"},
            "status": {"installedCSV": "etcdoperator.v0.9.4", "currentCSV": "etcdoperator.v0.9.4"}
        })),
        csv: Some(from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcdoperator.v0.9.4", "namespace": "operators"},
            "spec": {"displayName": "etcd", "version": "0.9.4", "install": {"strategy": "deployment"}}
        }))),
        groups: vec![from(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "global", "namespace": "operators"},
            "spec": {},
            "status": {"namespaces": [""]}
        }))],
        other_subscriptions: Vec::new(),
        catalog_source: Some(from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "community", "namespace": "olm"},
            "spec": {"sourceType": "grpc", "image": "registry.local/catalogs/community@sha256:aa",
                     "updateStrategy": {"registryPoll": {"interval": "90s"}}}
        }))),
        cluster_catalogs: Vec::new(),
        existing_extension: None,
        default_channel: Some("singlenamespace-alpha".into()),
        install_plans: vec!["install-abcde".into()],
    }
}

fn catalog(name: &str, image: &str) -> ClusterCatalog {
    from(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}}
    }))
}

fn spec_of(plan: &Plan) -> Value {
    serde_json::to_value(&plan.extension).expect("serialises")
}

fn refusals(observed: &Observed, choices: &Choices) -> Vec<Refusal> {
    plan(observed, choices).expect_err("refused")
}

fn refused_because(observed: &Observed, choices: &Choices, what: &str, fix: &str) {
    let all = refusals(observed, choices);
    assert!(
        all.iter().any(|r| r.what.contains(what) && r.fix.contains(fix)),
        "no refusal with {what:?} / {fix:?} in {all:#?}"
    );
}

#[test]
fn a_clusterwide_install_becomes_an_extension_pinned_while_adopted_then_following_its_channel() {
    let plan = plan(&etcd(), &Choices::default()).expect("a plan");
    let ce = spec_of(&plan);
    assert_eq!(ce["metadata"]["name"], "etcd");
    assert_eq!(ce["metadata"]["annotations"][ADOPT_FROM_ANNOTATION], "operators/etcdoperator.v0.9.4");
    assert_eq!(ce["metadata"]["annotations"][MIGRATED_FROM_ANNOTATION], "operators/etcd");
    assert_eq!(ce["spec"]["namespace"], "operators");
    assert_eq!(ce["spec"]["serviceAccount"]["name"], "etcd-installer");
    let filter = &ce["spec"]["source"]["catalog"];
    assert_eq!(filter["packageName"], "etcd");
    assert_eq!(filter["version"], "0.9.4");
    assert_eq!(filter["channels"], json!(["clusterwide-alpha"]));
    assert_eq!(filter["selector"]["matchLabels"][METADATA_NAME_LABEL], "community");
    assert!(ce["spec"].get("config").is_none(), "all namespaces: no watchNamespace");
    assert_eq!(plan.final_version, None, "Automatic approval follows the channel once adopted");

    let new_catalog = serde_json::to_value(plan.new_catalog.as_ref().expect("a ClusterCatalog for the image")).unwrap();
    assert_eq!(new_catalog["metadata"]["name"], "community");
    assert_eq!(new_catalog["spec"]["source"]["image"]["ref"], "registry.local/catalogs/community@sha256:aa");
    assert_eq!(new_catalog["spec"]["source"]["image"]["pollIntervalMinutes"], 2, "90s rounds up to 2 minutes");
    assert_eq!(plan.new_service_account, Some(NewServiceAccount { name: "etcd-installer".into(), cluster_role: "cluster-admin".into() }));
    assert_eq!(
        plan.deletions.described(),
        [
            "Subscription operators/etcd",
            "InstallPlan operators/install-abcde",
            "ClusterServiceVersion operators/etcdoperator.v0.9.4 (its objects kept, now the extension's; its copies in other namespaces go with it)",
            "OperatorGroup operators/global",
        ]
    );
    assert!(plan.notes.iter().any(|n| n.contains("cluster-admin") && n.contains("--service-account")), "{:?}", plan.notes);
}

#[test]
fn own_and_single_namespace_groups_become_watch_namespace() {
    for (targets, expected) in [(json!(["operators"]), "operators"), (json!(["team-a"]), "team-a")] {
        let mut observed = etcd();
        observed.groups = vec![from(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "operators"},
            "spec": {"targetNamespaces": targets}
        }))];
        let ce = spec_of(&plan(&observed, &Choices::default()).expect("a plan"));
        assert_eq!(ce["spec"]["config"], json!({"configType": "Inline", "inline": {"watchNamespace": expected}}));
    }
}

#[test]
fn a_multinamespace_group_is_refused_with_how_to_narrow_it() {
    let mut observed = etcd();
    observed.groups[0].status.as_mut().unwrap().namespaces = Some(vec!["a".into(), "b".into()]);
    refused_because(&observed, &Choices::default(), "targets 2 namespaces (a, b)", "one namespace, or remove them for all namespaces");
}

#[test]
fn a_namespace_without_or_with_two_groups_is_refused() {
    let mut observed = etcd();
    observed.groups.clear();
    refused_because(&observed, &Choices::default(), "has no OperatorGroup", "create the OperatorGroup");
    let mut observed = etcd();
    observed.groups.push(observed.groups[0].clone());
    refused_because(&observed, &Choices::default(), "has 2 OperatorGroups", "delete all but one");
}

#[test]
fn manual_approval_is_refused_unless_pinned() {
    let mut observed = etcd();
    observed.subscription.spec.install_plan_approval = Some(Approval::Manual);
    refused_because(&observed, &Choices::default(), "installPlanApproval: Manual", "--pin");
    let plan = plan(&observed, &Choices { pin: true, ..Choices::default() }).expect("pinned");
    assert_eq!(plan.final_version.as_deref(), Some("0.9.4"));
    assert!(plan.notes.iter().any(|n| n.contains("pinned version")));
}

#[test]
fn dependencies_are_refused_unless_ignored() {
    let mut observed = etcd();
    let mut csv = serde_json::to_value(observed.csv.as_ref().unwrap()).unwrap();
    csv["spec"]["customresourcedefinitions"] = json!({"required": [{"name": "backups.example.com", "version": "v1", "kind": "Backup"}]});
    observed.csv = Some(from(csv));
    refused_because(&observed, &Choices::default(), "requires APIs other operators provide: backups.example.com (Backup)", "--ignore-dependencies");
    let plan = plan(&observed, &Choices { ignore_dependencies: true, ..Choices::default() }).expect("ignored");
    assert!(plan.notes.iter().any(|n| n.contains("backups.example.com")));
}

#[test]
fn subscription_config_is_refused_unless_dropped() {
    let mut observed = etcd();
    observed.subscription.spec.config = Some(from(json!({"env": [{"name": "LOG", "value": "debug"}]})));
    refused_because(&observed, &Choices::default(), "has spec.config", "--drop-config");
    assert!(plan(&observed, &Choices { drop_config: true, ..Choices::default() }).is_ok());
}

#[test]
fn a_catalog_source_that_is_not_an_image_is_refused_naming_what_it_serves_from() {
    let mut observed = etcd();
    observed.catalog_source = Some(from(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "community", "namespace": "olm"},
        "spec": {"sourceType": "configmap", "configMap": "community-catalog"}
    })));
    refused_because(&observed, &Choices::default(), "from ConfigMap community-catalog; OLM v1 reads catalogs from images", "--catalog NAME");
    // Naming a ClusterCatalog that exists settles it.
    observed.cluster_catalogs = vec![catalog("published", "registry.local/published:1")];
    let ce = spec_of(&plan(&observed, &Choices { catalog: Some("published".into()), ..Choices::default() }).expect("a plan"));
    assert_eq!(ce["spec"]["source"]["catalog"]["selector"]["matchLabels"][METADATA_NAME_LABEL], "published");
    refused_because(&observed, &Choices { catalog: Some("missing".into()), ..Choices::default() }, "ClusterCatalog missing does not exist", "published");
}

#[test]
fn a_cluster_catalog_of_the_same_image_is_used_and_a_name_taken_by_another_image_is_avoided() {
    let mut observed = etcd();
    observed.cluster_catalogs = vec![catalog("operatorhub", "registry.local/catalogs/community@sha256:aa")];
    let plan_same = plan(&observed, &Choices::default()).expect("a plan");
    assert!(plan_same.new_catalog.is_none());
    assert_eq!(spec_of(&plan_same)["spec"]["source"]["catalog"]["selector"]["matchLabels"][METADATA_NAME_LABEL], "operatorhub");

    observed.cluster_catalogs = vec![catalog("community", "registry.local/other:1")];
    let plan_other = plan(&observed, &Choices::default()).expect("a plan");
    let new_name = plan_other.new_catalog.as_ref().map(ResourceExt::name_any);
    assert_eq!(new_name.as_deref(), Some("olm-community"));
}

#[test]
fn an_extension_of_the_same_name_is_refused_unless_it_is_this_migrations() {
    let mut observed = etcd();
    observed.existing_extension = Some(from(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": "etcd"},
        "spec": {"namespace": "elsewhere", "source": {"sourceType": "Catalog", "catalog": {"packageName": "etcd"}}}
    })));
    refused_because(&observed, &Choices::default(), "ClusterExtension etcd already exists", "--name");
    // Another name: `olm migrate` looks up the extension of that name, and there is none.
    observed.existing_extension = None;
    assert!(plan(&observed, &Choices { name: Some("etcd-operators".into()), ..Choices::default() }).is_ok());
    // A rerun of an interrupted migration finds its own extension.
    observed.existing_extension = Some(plan(&etcd(), &Choices::default()).unwrap().extension);
    assert!(plan(&observed, &Choices::default()).is_ok());
}

#[test]
fn nothing_installed_is_refused() {
    let mut observed = etcd();
    observed.csv = None;
    refused_because(&observed, &Choices::default(), "ClusterServiceVersion etcdoperator.v0.9.4, which does not exist", "wait until");
    observed.subscription.status = None;
    refused_because(&observed, &Choices::default(), "has installed nothing yet", "kubectl olm status");
}

#[test]
fn a_scoped_install_keeps_its_service_account_and_a_shared_group_stays() {
    let mut observed = etcd();
    observed.groups[0].spec.service_account_name = Some("scoped-installer".into());
    observed.other_subscriptions = vec!["prometheus".into()];
    let plan = plan(&observed, &Choices::default()).expect("a plan");
    assert_eq!(spec_of(&plan)["spec"]["serviceAccount"]["name"], "scoped-installer");
    assert_eq!(plan.new_service_account, None);
    assert!(!plan.deletions.described().iter().any(|d| d.starts_with("OperatorGroup")));
    assert!(plan.notes.iter().any(|n| n.contains("OperatorGroup operators/global stays") && n.contains("prometheus")));
}

#[test]
fn without_a_channel_the_packages_default_channel_is_kept() {
    let mut observed = etcd();
    observed.subscription.spec.channel = None;
    let ce = spec_of(&plan(&observed, &Choices::default()).expect("a plan"));
    assert_eq!(ce["spec"]["source"]["catalog"]["channels"], json!(["singlenamespace-alpha"]));
}

#[test]
fn every_reason_is_given_at_once() {
    let mut observed = etcd();
    observed.subscription.spec.install_plan_approval = Some(Approval::Manual);
    observed.subscription.spec.config = Some(from(json!({"env": [{"name": "A", "value": "1"}]})));
    observed.groups[0].status.as_mut().unwrap().namespaces = Some(vec!["a".into(), "b".into()]);
    assert_eq!(refusals(&observed, &Choices::default()).len(), 3);
}

#[test]
fn a_rerun_after_the_csv_went_goes_on_from_the_extension_this_migration_made() {
    let first = plan(&etcd(), &Choices::default()).expect("a plan");
    let mut observed = etcd();
    observed.csv = None;
    observed.existing_extension = Some(first.extension.clone());
    let again = plan(&observed, &Choices::default()).expect("resumed");
    assert_eq!(again.extension.spec, first.extension.spec);
    assert_eq!(again.deletions, first.deletions);
    // Unpinned already (Automatic): the installed version says where it stands.
    let mut unpinned = first.extension.clone();
    unpinned.spec.source.catalog.as_mut().unwrap().version = None;
    unpinned.status = Some(from(json!({"install": {"bundle": {"name": "etcdoperator.v0.9.4", "version": "0.9.4"}}})));
    observed.existing_extension = Some(unpinned);
    assert!(plan(&observed, &Choices::default()).is_ok());
    // Another Subscription's extension of the same name is not this migration's.
    observed.csv = etcd().csv;
    observed.subscription.metadata.name = Some("other".into());
    refused_because(&observed, &Choices { name: Some("etcd".into()), ..Choices::default() }, "already exists", "--name");
}

#[test]
fn a_rerun_after_the_operator_group_went_keeps_the_extensions_namespaces_and_account() {
    for (group, account) in [(json!({}), None), (json!({"targetNamespaces": ["operators"], "serviceAccountName": "scoped"}), Some("scoped"))] {
        let mut observed = etcd();
        observed.groups[0].spec = from(group);
        observed.groups[0].status = None;
        let first = plan(&observed, &Choices::default()).expect("a plan");
        assert_eq!(first.new_service_account.is_some(), account.is_none());
        observed.csv = None;
        observed.groups.clear();
        observed.existing_extension = Some(first.extension.clone());
        let again = plan(&observed, &Choices::default()).expect("resumed without its OperatorGroup");
        assert_eq!(again.extension.spec, first.extension.spec, "the same namespaces watched and the same installer");
        assert_eq!(again.new_service_account, None, "made by the first run");
        assert_eq!(again.deletions.operator_group, None);
    }
    // Without an extension of this migration, a missing group is still refused.
    let mut observed = etcd();
    observed.groups.clear();
    refused_because(&observed, &Choices::default(), "has no OperatorGroup", "create the OperatorGroup");
}

#[test]
fn the_roles_of_its_apis_are_said_to_stay() {
    let mut observed = etcd();
    let mut csv = serde_json::to_value(observed.csv.as_ref().unwrap()).unwrap();
    csv["spec"]["customresourcedefinitions"] = json!({"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}]});
    observed.csv = Some(from(csv));
    let plan = plan(&observed, &Choices::default()).expect("a plan");
    assert!(
        plan.notes.iter().any(|n| n.contains("stay with their CRDs") && n.contains("etcdclusters.etcd.database.coreos.com") && n.contains("RBAC of your own")),
        "{:?}",
        plan.notes
    );
}
