//! The other kinds: optional specs, upstream examples, helper behaviour.

use olm_api::packages::v1::{PackageManifest, PackageManifestList};
use olm_api::v1::{OLMConfig, Operator, OperatorGroup, UpgradeStrategy};
use olm_api::v1alpha1::{Approval, CatalogSource, InstallPlan, InstallPlanPhase, SourceType, StepStatus, Subscription};
use olm_api::v2::OperatorCondition;
use olm_api::{ConditionStatus, yaml};

#[test]
fn olm_config_without_spec_parses_like_upstreams_chart() {
    // deploy/chart/templates/0000_50_olm_03-olmconfig.yaml upstream has no spec.
    let text = "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata:\n  name: cluster\n";
    let config: OLMConfig = yaml::from_str(text, "olmconfig.yaml").expect("no spec is fine");
    assert!(!config.copied_csvs_disabled());
    let with = "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata:\n  name: cluster\nspec:\n  features:\n    disableCopiedCSVs: true\n    packageServerSyncInterval: 5m\n";
    let config: OLMConfig = yaml::from_str(with, "olmconfig.yaml").expect("parses");
    assert!(config.copied_csvs_disabled());
    assert_eq!(config.spec.features.and_then(|f| f.package_server_sync_interval).as_deref(), Some("5m"));
}

#[test]
fn operator_group_without_spec_targets_all_namespaces_by_default() {
    let text = "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global-operators\n  namespace: operators\n";
    let group: OperatorGroup = yaml::from_str(text, "og.yaml").expect("no spec is fine");
    assert_eq!(group.spec.target_namespaces, None);
    assert_eq!(group.spec.selector, None);
    assert_eq!(group.spec.upgrade_strategy(), UpgradeStrategy::Default);
    let back = serde_json::to_value(&group).expect("serialise");
    assert_eq!(back["spec"], serde_json::json!({}));
}

#[test]
fn operator_condition_override_without_transition_time_parses() {
    // The shape upstream's documentation tells admins to write.
    let text = r#"apiVersion: operators.coreos.com/v2
kind: OperatorCondition
metadata:
  name: etcdoperator.v0.9.4
  namespace: operators
spec:
  conditions:
  - type: Upgradeable
    status: "False"
    reason: migration
    message: a migration is in progress
    lastTransitionTime: "2026-01-02T03:04:05Z"
  overrides:
  - type: Upgradeable
    status: "True"
    reason: upgradeIsSafe
    message: the admin says so
"#;
    let condition: OperatorCondition = yaml::from_str(text, "condition.yaml").expect("parses");
    assert_eq!(condition.upgradeable(), Some((ConditionStatus::True, "the admin says so".into())));
    // Without the override: the operator's False counts at once.
    let mut reported = condition.clone();
    reported.spec.overrides = None;
    assert_eq!(reported.upgradeable(), Some((ConditionStatus::False, "a migration is in progress".into())));
    // A True status condition of another generation is outdated, as upstream says.
    let status: serde_json::Value = serde_json::json!({"conditions": [{"type": "Upgradeable", "status": "True", "reason": "ok", "message": "fine",
        "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 3}]});
    let mut stale = reported.clone();
    stale.spec.conditions = None;
    stale.metadata.generation = Some(2);
    stale.status = Some(serde_json::from_value(status).expect("status"));
    assert_eq!(stale.upgradeable(), Some((ConditionStatus::False, "the operatorcondition status \"Upgradeable\"=\"True\" is outdated".into())));
    stale.metadata.generation = Some(3);
    assert_eq!(stale.upgradeable(), Some((ConditionStatus::True, "fine".into())));
}

#[test]
fn operator_is_cluster_scoped_and_has_an_empty_spec() {
    use kube::Resource;
    let text = "apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: etcd.operators\n";
    let operator: Operator = yaml::from_str(text, "operator.yaml").expect("parses");
    assert_eq!(operator.meta().name.as_deref(), Some("etcd.operators"));
    assert_eq!(Operator::plural(&()), "operators");
    let back = serde_json::to_value(&operator).expect("serialise");
    assert_eq!(back["apiVersion"], "operators.coreos.com/v1");
}

#[test]
fn catalog_source_and_subscription_from_upstream_docs() {
    let catalog = r#"apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: operatorhubio-catalog
  namespace: olm
spec:
  sourceType: grpc
  image: quay.io/operatorhubio/catalog:latest
  displayName: Community Operators
  publisher: OperatorHub.io
  grpcPodConfig:
    securityContextConfig: restricted
    memoryTarget: 30Mi
  updateStrategy:
    registryPoll:
      interval: 60m
"#;
    let catalog: CatalogSource = yaml::from_str(catalog, "catsrc.yaml").expect("parses");
    assert_eq!(catalog.spec.source_type, SourceType::Grpc);
    assert_eq!(catalog.spec.poll_interval(), Some("60m"));
    assert!(catalog.spec.polls());
    let subscription = r#"apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: my-etcd
  namespace: operators
spec:
  channel: singlenamespace-alpha
  name: etcd
  source: operatorhubio-catalog
  sourceNamespace: olm
  config:
    env:
    - name: HTTP_PROXY
      value: http://proxy:3128
"#;
    let sub: Subscription = yaml::from_str(subscription, "sub.yaml").expect("parses");
    assert_eq!(sub.spec.approval(), Approval::Automatic, "absent means Automatic");
    assert_eq!(sub.spec.config.as_ref().and_then(|c| c.env.as_ref()).map(Vec::len), Some(1));
}

#[test]
fn install_plan_status_with_empty_phase_round_trips() {
    let text = r#"apiVersion: operators.coreos.com/v1alpha1
kind: InstallPlan
metadata:
  name: install-abcde
  namespace: operators
spec:
  approval: Manual
  approved: false
  clusterServiceVersionNames: [etcdoperator.v0.9.4]
  generation: 1
status:
  phase: ""
  catalogSources: []
  plan:
  - resolving: etcdoperator.v0.9.4
    resource:
      group: operators.coreos.com
      kind: ClusterServiceVersion
      name: etcdoperator.v0.9.4
      sourceName: operatorhubio-catalog
      sourceNamespace: olm
      version: v1alpha1
    status: WaitingForApi
"#;
    let plan: InstallPlan = yaml::from_str(text, "ip.yaml").expect("parses");
    let status = plan.status.as_ref().expect("status");
    assert_eq!(status.phase, InstallPlanPhase::None);
    assert_eq!(status.plan.as_ref().expect("steps")[0].status, StepStatus::WaitingForApi);
    let raw: serde_json::Value = yaml::from_str(text, "ip.yaml").expect("parses");
    assert_eq!(serde_json::to_value(&plan).expect("serialise"), raw);
}

#[test]
fn package_manifest_reads_packageserver_output() {
    let json = r#"{
      "apiVersion": "packages.operators.coreos.com/v1",
      "kind": "PackageManifestList",
      "metadata": {},
      "items": [{
        "apiVersion": "packages.operators.coreos.com/v1",
        "kind": "PackageManifest",
        "metadata": {"name": "etcd", "namespace": "operators", "labels": {"catalog": "operatorhubio-catalog"}},
        "spec": {},
        "status": {
          "catalogSource": "operatorhubio-catalog",
          "catalogSourceDisplayName": "Community Operators",
          "catalogSourcePublisher": "OperatorHub.io",
          "catalogSourceNamespace": "olm",
          "provider": {"name": "CNCF"},
          "packageName": "etcd",
          "channels": [{
            "name": "singlenamespace-alpha",
            "currentCSV": "etcdoperator.v0.9.4",
            "currentCSVDesc": {
              "displayName": "etcd",
              "version": "0.9.4",
              "provider": {"name": "CNCF"},
              "installModes": [{"type": "OwnNamespace", "supported": true}],
              "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}]},
              "apiservicedefinitions": {},
              "nativeApis": [{"group": "", "version": "v1", "kind": "Pod"}],
              "relatedImages": ["quay.io/coreos/etcd-operator@sha256:66a37fd61a06a43969854ee6d3e21087a98b93838e284a6086b13917f96b0d9b"]
            },
            "entries": [{"name": "etcdoperator.v0.9.4", "version": "0.9.4"}, {"name": "etcdoperator.v0.9.2", "version": "0.9.2"}]
          }],
          "defaultChannel": "singlenamespace-alpha"
        }
      }]
    }"#;
    let list: PackageManifestList = serde_json::from_str(json).expect("parses");
    let manifest: &PackageManifest = &list.items[0];
    assert_eq!(manifest.default_channel(), Some("singlenamespace-alpha"));
    assert_eq!(manifest.status.channels[0].entries.len(), 2);
    let raw: serde_json::Value = serde_json::from_str(json).expect("json");
    assert_eq!(serde_json::to_value(&list).expect("serialise"), raw);
}

#[test]
fn enum_strings_are_upstreams() {
    use olm_api::v1alpha1::{CsvPhase, CsvReason, InstallModeType, SubscriptionConditionType, SubscriptionState};
    assert_eq!(CsvReason::CannotModifyStaticOperatorGroupProvidedApis.as_str(), "CannotModifyStaticOperatorGroupProvidedAPIs");
    assert_eq!(CsvReason::ApiServiceResourcesNeedReinstall.as_str(), "APIServiceResourcesNeedReinstall");
    assert_eq!(CsvReason::parse("WaitingOnCleanup"), CsvReason::WaitingOnCleanup);
    assert_eq!(CsvPhase::parse("Replacing"), CsvPhase::Replacing);
    assert_eq!(SubscriptionState::AtLatestKnown.as_str(), "AtLatestKnown");
    assert_eq!(SubscriptionConditionType::ResolutionFailed.to_string(), "ResolutionFailed");
    assert_eq!("AllNamespaces".parse::<InstallModeType>(), Ok(InstallModeType::AllNamespaces));
    let err = "allnamespaces".parse::<InstallModeType>().expect_err("case matters");
    assert!(err.to_string().contains("OwnNamespace, SingleNamespace, MultiNamespace, AllNamespaces"), "{err}");
    assert_eq!(StepStatus::WaitingForApi.as_str(), "WaitingForApi");
    assert!(CsvReason::NoOperatorGroup.is_uncopiable());
    assert!(!CsvReason::InstallSucceeded.is_uncopiable());
}

#[test]
fn catalog_source_and_subscription_reasons_have_their_own_types_and_upstreams_strings() {
    use olm_api::v1alpha1::{CatalogSourceReason, CatalogSourceStatus, CsvReason, SubscriptionReason, SubscriptionStatus};
    for reason in ["SpecInvalidError", "ConfigMapError", "RegistryServerError", "InvalidIntervalError"] {
        let status: CatalogSourceStatus = serde_json::from_value(serde_json::json!({"reason": reason})).expect("decodes");
        assert!(status.reason.as_ref().is_some_and(CatalogSourceReason::is_known), "{reason}");
        assert_eq!(serde_json::to_value(&status).expect("encodes"), serde_json::json!({"reason": reason}));
        // Not a CSV's reason any more, and still read and written unchanged as one.
        assert_eq!(CsvReason::parse(reason), CsvReason::Other(reason.to_owned()));
    }
    for reason in ["InvalidCatalog", "UpgradeSucceeded"] {
        let status: SubscriptionStatus = serde_json::from_value(serde_json::json!({"reason": reason})).expect("decodes");
        assert!(status.reason.as_ref().is_some_and(SubscriptionReason::is_known), "{reason}");
        assert_eq!(serde_json::to_value(&status).expect("encodes"), serde_json::json!({"reason": reason}));
    }
    // A reason this version does not know stays as it was written.
    let status: CatalogSourceStatus = serde_json::from_value(serde_json::json!({"reason": "RegistryPodError"})).expect("decodes");
    assert_eq!(status.reason, Some(CatalogSourceReason::Other("RegistryPodError".into())));
    assert_eq!(serde_json::to_value(&status).expect("encodes"), serde_json::json!({"reason": "RegistryPodError"}));
}
