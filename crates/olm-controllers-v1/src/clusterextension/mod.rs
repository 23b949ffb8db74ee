//! The ClusterExtension controller: OLM v1's install of one package, on v0's engine. A pass
//! chooses a bundle from the ClusterCatalogs this process serves (`olm_resolver::extension`),
//! reads it with the catalog's puller, renders it to plain objects (`olm_install::registry_v1`,
//! no CSV), checks CRD upgrades, applies every object owned by the ClusterExtension (as the
//! `spec.serviceAccount` it names, when it names one), removes what the previous revision had
//! and the new one dropped, records the revision ([`record`], stored as upstream's Helm release:
//! [`release`]) and writes the status
//! ([`decide`], pure). A failed upgrade leaves the previous revision running and `Installed`.
//!
//! Deleting a ClusterExtension deletes what it installed, CRDs included, through the garbage
//! collector (every object is owned by it), as upstream.

mod adopt;
mod apply;
pub mod decide;
mod reconcile;
pub mod record;
pub mod release;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use olm_api::olmv1::{ClusterCatalog, ClusterExtension};
use olm_runtime::Cache;

pub use reconcile::run;

/// Controller name: metric label, field manager `olm/clusterextension`.
pub const NAME: &str = "clusterextension";
/// The owner kind every installed object is labelled with.
pub const OWNER_KIND: &str = "ClusterExtension";
/// The labels that say which ClusterExtension installed an object (upstream's).
pub const OWNER_KIND_LABEL: &str = "olm.operatorframework.io/owner-kind";
pub const OWNER_NAME_LABEL: &str = "olm.operatorframework.io/owner-name";

/// What the ClusterExtension controller reads and holds.
#[derive(Clone)]
pub struct ClusterExtensionState {
    pub extensions: Cache<ClusterExtension>,
    pub catalogs: Cache<ClusterCatalog>,
    /// What the ClusterCatalog controller serves, by catalog name.
    pub served: Arc<Mutex<HashMap<String, crate::clustercatalog::Memory>>>,
    /// The installed objects watched for their removal.
    pub installed: Installed,
    /// Per ClusterExtension name, between passes.
    pub memory: Arc<Mutex<HashMap<String, Memory>>>,
    /// OLM's own namespace: where the revision records live ([`release`]), as upstream keeps
    /// its releases in its own.
    pub namespace: String,
}

/// Caches of the objects ClusterExtensions installed (by the owner-kind label; trimmed to what
/// the trigger reads by the label selector itself): a deletion brings the owner to a pass.
#[derive(Clone)]
pub struct Installed {
    pub deployments: Cache<k8s_openapi::api::apps::v1::Deployment>,
    pub services: Cache<k8s_openapi::api::core::v1::Service>,
    pub service_accounts: Cache<k8s_openapi::api::core::v1::ServiceAccount>,
    /// Metadata only (their data trimmed): a bundle's ConfigMaps, put back when deleted.
    pub config_maps: Cache<k8s_openapi::api::core::v1::ConfigMap>,
}

/// What this process remembers of one ClusterExtension.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// The last complete apply: for which generation, which bundle, and when.
    pub applied: Option<(Option<i64>, String, Instant)>,
    /// Failed passes in a row.
    pub failures: u32,
}
