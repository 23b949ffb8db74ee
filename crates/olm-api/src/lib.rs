//! API types of OLM v0 (`operators.coreos.com`) and the PackageManifest API
//! (`packages.operators.coreos.com`), wire-compatible with upstream
//! (operator-framework/api and OLM's packageserver types).
//!
//! * [`v1alpha1`]: ClusterServiceVersion, CatalogSource, Subscription, InstallPlan.
//! * [`v1`]: OperatorGroup (storage), Operator, OLMConfig, OperatorCondition (served).
//! * [`v1alpha2`]: OperatorGroup (served). [`v2`]: OperatorCondition (storage).
//! * [`olmv1`]: OLM v1's ClusterCatalog and ClusterExtension (`olm.operatorframework.io/v1`).
//! * [`packages::v1`]: PackageManifest and PackageManifestList (plain serde types).
//! * [`crds`]: the generated CRDs. [`yaml`]: reading manifests with located errors.
//! * [`keys`]: well-known labels and annotations. [`duration`]: Go durations, as upstream
//!   writes time spans.
//!
//! Conventions (see also `enums` and `unknown`):
//! * Field names, enum strings, short names, categories and printer columns are upstream's.
//! * Optional fields are `Option`s, lists that may be absent are `Option<Vec<_>>`, so that
//!   "absent" and "empty" survive a round trip.
//! * Spec enums that people write are closed (a typo is an error that lists the accepted
//!   values, and the CRD schema has the same `enum`); status enums are open
//!   (`Other(String)`), so a value written by another OLM version never breaks a read.
//! * Keys the types do not model are kept (`extra` maps, [`unknown::Verbatim`]), and the
//!   CRD schema marks those objects `x-kubernetes-preserve-unknown-fields`, so a bundle's CSV
//!   with extra keys can be server-side applied as parsed. Explicit `null` members are
//!   dropped (Kubernetes treats them as absent; server-side apply rejects them).
//! * The Deployment specs inside a CSV are not validated by the CRD (kept small: ~52 KB
//!   instead of upstream's 814 KB); errors in them surface when OLM creates the Deployment.
//! * Schemas are never stricter than upstream's except for those closed enums; a few
//!   fields upstream requires are optional here, so that OLM's own writes of partial
//!   objects are never rejected.

#![forbid(unsafe_code)]

pub mod common;
pub mod crds;
pub mod duration;
pub mod enums;
pub mod keys;
pub mod olmv1;
pub mod packages;
pub mod schema;
pub mod unknown;
pub mod v1;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod v2;
pub mod yaml;

pub use common::{ConditionOverride, ConditionStatus};
pub use unknown::{ExtraFields, Verbatim};

/// The API group of every CRD here.
pub const GROUP: &str = "operators.coreos.com";
