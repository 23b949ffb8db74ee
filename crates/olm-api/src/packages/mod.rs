//! `packages.operators.coreos.com`: the PackageManifest API served by packageserver (an
//! aggregated API, not a CRD, so these are plain serde types).

pub mod v1;
