//! The InstallPlan controller's context: the caches it reads and what it shares with the rest of
//! the process, imported by the executor (`reconcile`), `shared_crd` and `preview`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_runtime::Cache;

use crate::plan_write_failures::PlanWriteFailures;
use crate::scoped_client::ScopedClients;

/// The caches the InstallPlan controller reads.
#[derive(Clone)]
pub struct InstallPlanState {
    /// Every InstallPlan.
    pub plans: Cache<InstallPlan>,
    /// Every OperatorGroup: the namespace's group says with whose permissions to install.
    pub groups: Cache<OperatorGroup>,
    /// Every CSV (trimmed): which CSVs a shared CRD's installed-alongside annotations name
    /// still exist.
    pub csvs: Cache<ClusterServiceVersion>,
    /// One writer at a time per CRD (shared with the Operator controller).
    pub crd_writes: crate::crd_writes::CrdWrites,
    /// Every CRD (trimmed), when the process watches them (the CSV or Operator controller
    /// runs): a step whose CRD this process wrote with the same manifest needs no upgrade check
    /// and may park its share (`shared_crd`).
    pub crds: Option<Cache<CustomResourceDefinition>>,
    /// OLM's client and the ServiceAccount-impersonating ones derived from it.
    pub clients: ScopedClients,
    /// The catalog-operator metrics.
    pub metrics: crate::catalog_metrics::CatalogMetrics,
    /// Where a refused status write is recorded for the Subscription controller to report.
    pub write_failures: PlanWriteFailures,
}
