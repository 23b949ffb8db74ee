//! The OperatorGroup controller: resolves target namespaces into `status.namespaces`, annotates
//! member CSVs, keeps `olm.providedAPIs` and labels target namespaces.

pub mod decide;
pub mod reconcile;

pub use reconcile::{NAME, OgState, run};

#[cfg(test)]
mod tests;
