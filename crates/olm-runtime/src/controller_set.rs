//! A group of controllers another crate brings to a manager: the manager owns the caches,
//! leadership, metrics and shutdown; a set adds its watches and its controllers' tasks. So the
//! v1 API's controllers (`olm-controllers-v1`) run in the same process, under the same leader
//! and readiness, as the v0 ones, without either crate importing the other.

use std::sync::Arc;

use kube::Client;

use crate::cache::Caches;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

/// What a manager lends a set while it starts.
pub struct Wiring<'a> {
    pub client: &'a Client,
    /// Watches added here start with the manager's, and count towards its readiness.
    pub caches: &'a mut Caches,
    pub metrics: &'a Arc<Metrics>,
    pub leadership: &'a Leadership,
    pub shutdown: &'a Shutdown,
}

/// Controllers started by a manager beside its own.
pub trait ControllerSet: std::fmt::Debug + Send + Sync {
    /// The controllers' names (metric labels, `--controllers` values).
    fn names(&self) -> Vec<&'static str>;
    /// Add watches and spawn the controllers (before the caches start).
    fn start(&self, wiring: Wiring<'_>) -> Vec<tokio::task::JoinHandle<()>>;
}
