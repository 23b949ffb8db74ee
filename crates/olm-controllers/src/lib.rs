//! OLM controllers, one module per controller, on the generic runtime of `olm-runtime`.

#![forbid(unsafe_code)]

pub mod csv;
pub mod csv_index;
pub mod manager;
pub mod metadata;
pub mod operator;
pub mod operatorgroup;
pub mod olmconfig;
pub mod catalogsource;
pub mod catalog_metrics;
pub mod catalog_operator;
pub mod crd_writes;
pub mod plan_steps;
pub mod plan_preview;
pub mod plan_content;
pub mod plan_write_failures;
pub mod installplan;
pub mod subscription;
pub mod rbac;
pub mod scoped_client;

/// The field-manager and Event-reporter prefix of every OLM controller: `olm/<controller>`.
pub const FIELD_MANAGER_PREFIX: &str = "olm";
