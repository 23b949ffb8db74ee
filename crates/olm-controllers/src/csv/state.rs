//! The CSV controller's context: the caches it reads and the metrics it keeps, imported by
//! `observe`, `act`, `installer`, `finalizer`, `orphans` and `reconcile`.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use olm_api::v1::olm_config::OLMConfig;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::subscription::Subscription;
use olm_api::v2::OperatorCondition;
use olm_runtime::Cache;

/// The caches the CSV controller reads.
#[derive(Clone)]
pub struct CsvState {
    /// Every ClusterServiceVersion.
    pub csvs: Cache<ClusterServiceVersion>,
    /// Every OperatorGroup.
    pub groups: Cache<OperatorGroup>,
    /// Every CRD.
    pub crds: Cache<CustomResourceDefinition>,
    /// Every ServiceAccount.
    pub service_accounts: Cache<ServiceAccount>,
    /// Deployments labelled `olm.owner.kind=ClusterServiceVersion`, without their pod specs
    /// (`deployment::trim_cached_deployment`).
    pub deployments: Cache<Deployment>,
    /// The operator Deployments whose pod spec is known to be as wanted.
    pub verified_specs: super::deployment::VerifiedSpecs,
    /// Every Namespace.
    pub namespaces: Cache<Namespace>,
    /// ClusterRoles labelled `olm.managed=true`.
    pub cluster_roles: Cache<ClusterRole>,
    /// Every OperatorCondition (v2).
    pub operator_conditions: Cache<OperatorCondition>,
    /// The OLMConfig singleton.
    pub olm_configs: Cache<OLMConfig>,
    /// Every Subscription (their `spec.config` shapes the operator Deployments).
    pub subscriptions: Cache<Subscription>,
    /// Every APIService: the owned ones, and ones a CSV would adopt (their owner labels decide).
    pub api_services: Cache<APIService>,
    /// ValidatingWebhookConfigurations labelled `olm.owner.kind=ClusterServiceVersion`.
    pub validating_webhooks: Cache<ValidatingWebhookConfiguration>,
    /// MutatingWebhookConfigurations labelled `olm.owner.kind=ClusterServiceVersion`.
    pub mutating_webhooks: Cache<MutatingWebhookConfiguration>,
    /// Secrets labelled `olm.owner.kind=ClusterServiceVersion` (the serving certificates),
    /// their metadata only: a certificate Secret someone changes or deletes brings its CSV
    /// back at once to check it.
    pub serving_secrets: Cache<kube::core::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>>,
    /// Roles labelled `olm.managed=true` (among them each OperatorCondition's).
    pub managed_roles: Cache<Role>,
    /// RoleBindings labelled `olm.managed=true`.
    pub managed_role_bindings: Cache<RoleBinding>,
    /// The CSV metrics.
    pub metrics: super::metrics::CsvMetrics,
}
