//! The Subscription controller: resolves each Subscription's namespace with `olm-resolver` over
//! the visible catalogs' content (its namespace's CatalogSources and the global namespace's),
//! creates the Subscription's InstallPlans and reports its status. See [`decide`] for where we
//! differ from upstream (failure isolation, per-Subscription Manual approval).

pub mod act;
pub mod decide;
pub mod observe;
pub mod plan;
pub mod pulls;
pub mod reconcile;
pub mod resolution;
pub mod rollback;
mod state;

pub use reconcile::{NAME, run};
pub use state::{NamespaceLocks, SubscriptionControllerState};
