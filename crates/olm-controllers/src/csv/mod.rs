//! The ClusterServiceVersion controller: requirement checks, the `deployment` install strategy,
//! health, upgrades through `spec.replaces`, and copies into target namespaces.

mod act;
pub mod api_registration;
pub mod certs;
pub mod decide;
pub mod deployment;
mod finalizer;
mod installer;
pub mod metrics;
mod observe;
mod orphans;
mod permissions;
pub mod reconcile;
pub mod requirements;
mod state;
pub mod subscription_config;
mod watch;

pub use reconcile::{NAME, run};
pub use state::CsvState;

#[cfg(test)]
mod tests;
