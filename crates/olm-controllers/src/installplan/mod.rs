//! The InstallPlan controller: approval, then applying the plan's steps (CRDs, the CSV,
//! ServiceAccounts, RBAC and the other bundle objects) with bounded retries, ending Complete or
//! Failed with a message naming the object and the API error. The steps themselves are built
//! from catalog content by [`crate::plan_steps::bundle_steps`] when the Subscription controller creates the
//! plan (no bundle unpack Job: the catalog server hands out the manifests).

mod alongside;
pub mod content;
mod copy_in_the_way;
pub mod decide;
pub mod preview;
mod pruned_write;
pub mod reconcile;
mod rounds;
pub mod scope;
mod shared_crd;
mod state;
pub mod crd_upgrade;

pub use reconcile::run;
pub use state::InstallPlanState;

/// Controller name: metric label, field manager `olm/installplan`.
pub const NAME: &str = "installplan";
