//! Dependency resolution for OLM v0 Subscriptions, without Kubernetes.
//!
//! Give it the catalogs a namespace can see ([`Catalogs`], built once from
//! [`CatalogSnapshot`]s) and a [`Request`] (installed operators and Subscriptions); it
//! answers with the bundles to install or upgrade and, for each Subscription that cannot
//! be resolved, a message saying why and what to do. It follows upstream OLM's rules
//! (channel order, upgrade edges, dependency preference, one operator per package and
//! one provider per API) and isolates failures: a Subscription that cannot be resolved
//! does not block the others.
//!
//! [`adapter`] turns `olm_catalog` catalogs into [`CatalogSnapshot`]s.

pub mod adapter;
pub mod extension;
mod explain;
pub mod file;
mod index;
pub mod model;
mod request;
mod problem;
mod resolve;
mod search;

pub use olm_catalog::cel::CelRule;
pub use explain::category;
pub use index::{Catalogs, IndexedCatalog, matches};
pub use model::{
    CatalogKey, CatalogSnapshot, Dependency, Deprecation, Entry, Gvk, Requirement, UpgradeEdges, Version, VersionRange,
};
pub use request::{Installed, Reason, Request, Resolution, Selected, Subscription, SubscriptionError};
pub use resolve::resolve;
