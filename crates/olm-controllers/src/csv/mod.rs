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
pub mod subscription_config;
mod watch;

pub use reconcile::{CsvState, NAME, run};

#[cfg(test)]
mod tests;
