//! The installer floor, below both APIs' controllers (OLM v0's InstallPlan and CSV controllers,
//! OLM v1's ClusterExtension controller), so that neither copies the other:
//!
//! - [`bundle_objects`]: a bundle's manifests as the API server takes them (what real bundles
//!   carry and upstream installs anyway);
//! - [`registry_v1`]: OLM v1's rendering of a registry+v1 bundle to plain objects (no CSV);
//! - [`names`]: the names OLM gives the RBAC it generates;
//! - [`serving_cert`]: serving certificates of webhooks and APIServices;
//! - [`crd_rules`] (pure) and [`crd_check`] (reads the cluster): what a CRD change must keep.

#![forbid(unsafe_code)]

pub mod bundle_objects;
pub mod crd_check;
pub mod crd_rules;
pub mod names;
pub mod registry_v1;
pub mod serving_cert;
pub mod typed_decode;
