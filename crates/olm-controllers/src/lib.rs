//! OLM controllers: the shared controller runtime and one module per controller.

#![forbid(unsafe_code)]

pub mod runtime;
pub mod csv;
pub mod manager;
pub mod operatorgroup;
pub mod olmconfig;
pub mod selector;
pub mod registry_client;
pub mod catalogsource;
pub mod installplan;
pub mod subscription;
pub mod rbac;
pub mod scoped_client;
