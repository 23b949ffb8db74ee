//! `operators.coreos.com/v1alpha1`: ClusterServiceVersion, CatalogSource, Subscription,
//! InstallPlan.

pub mod catalog_source;
pub mod cluster_service_version;
pub mod install_plan;
pub mod subscription;

pub use catalog_source::*;
pub use cluster_service_version::*;
pub use install_plan::*;
pub use subscription::*;
