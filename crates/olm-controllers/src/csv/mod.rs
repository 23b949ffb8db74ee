//! The ClusterServiceVersion controller: requirement checks, the `deployment` install strategy,
//! health, upgrades through `spec.replaces`, and copies into target namespaces.

pub mod certs;
pub mod decide;
pub mod deployment;
pub mod metrics;
pub mod reconcile;
pub mod requirements;
pub mod subscription_config;

pub use reconcile::{CsvState, NAME, run};

#[cfg(test)]
mod tests;
