//! The controller runtime shared by every OLM controller.
//!
//! - [`cache`]: shared watch caches (one watch per type, shared trigger streams).
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz` (ready after every cache's initial list).
//! - [`leader`]: Lease-based leader election; only the leader reconciles.
//! - [`status`]: server-side-apply status writer, skipped when nothing but timestamps changed.
//! - [`events`]: Event publisher with PascalCase reasons.
//! - [`error`], [`backoff`]: the error type (retryable + category) and per-object backoff.
//! - [`decision`]: `Decision { actions, status, events, requeue_after }` returned by pure `decide`s.
//! - [`controller`]: the per-controller context, `guarded` reconcile wrapper and `error_policy`.

pub mod admin;
pub mod backoff;
pub mod cache;
pub mod controller;
pub mod decision;
pub mod error;
pub mod events;
pub mod leader;
pub mod metrics;
pub mod shutdown;
pub mod status;

pub use admin::Readiness;
pub use cache::{Cache, Caches};
pub use controller::{ControllerContext, error_policy, guarded};
pub use decision::Decision;
pub use error::{Error, Result};
pub use events::{EventNote, EventPublisher, Severity};
pub use leader::{LeaderElectionConfig, Leadership};
pub use metrics::Metrics;
pub use status::StatusWriter;
