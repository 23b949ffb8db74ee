//! A generic controller runtime over kube-rs: it knows nothing of OLM's types. The OLM
//! controllers (`olm-controllers`) are built on it.
//!
//! - [`cache`]: shared watch caches (one watch per type, shared trigger streams).
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz` (ready after every cache's initial list).
//! - [`leader`]: Lease-based leader election; only the leader reconciles.
//! - [`apply`]: server-side apply that says whether it created the object.
//! - [`status`]: server-side-apply status writer, skipped when nothing but timestamps changed.
//! - [`events`]: Event publisher with PascalCase reasons.
//! - [`error`], [`backoff`]: the error type (retryable + category) and per-object backoff.
//! - [`decision`]: `Decision { actions, status, events, requeue_after }` returned by pure `decide`s.
//! - [`controller`]: the per-controller context, `guarded` reconcile wrapper and `error_policy`.
//! - [`shutdown`]: a shutdown signal many tasks can wait on.
//! - [`controller_set`]: controllers another crate adds to a manager (its caches, leader, shutdown).
//!
//! How a controller is put together (see olm-controllers' `operatorgroup` and `csv`):
//!
//! 1. `Manager::start` creates the caches with `Caches::watch(api, watcher::Config)`; a cache is
//!    one watch shared by every controller. Controllers read `Cache::get/list/list_in` (never GET
//!    in a reconcile) and take trigger streams with `Cache::subscribe()` *before*
//!    `Caches::start()`; a subscription also sees deleted objects.
//! 2. The controller's `run(ctx, shutdown)` builds `Controller::for_shared_stream(cache.subscribe(),
//!    cache.store().clone())` with `.watches_shared_stream(other.subscribe(), mapper)`,
//!    `.owns_shared_stream(..)`, `.reconcile_all_on(ctx.leadership.gained())` and
//!    `.graceful_shutdown_on(shutdown)`, waits for `Cache::synced()` of what it reads, then runs
//!    `|obj, ctx| guarded(obj, ctx, reconcile)` with `error_policy`.
//! 3. `reconcile` (with `#[instrument(skip_all, fields(kind, namespace, name))]`) observes from
//!    the caches into a plain `Observed`, calls the pure `decide(&Observed, now) -> Decision`,
//!    applies `decision.actions`, writes `decision.status` once with `ctx.status.apply` (skipped
//!    when only timestamps differ), publishes `decision.events`, and returns
//!    `action_for(decision.requeue_after)`. Errors are [`Error`]: `retryable()` and
//!    `category()` drive the backoff, the failure metric and logs.

#![forbid(unsafe_code)]

pub mod admin;
pub mod apply;
pub mod backoff;
pub mod cache;
mod cache_index;
mod cache_written;
pub mod client;
pub mod controller;
pub mod controller_set;
pub mod decision;
pub mod error;
pub mod events;
pub mod leader;
pub mod metrics;
pub mod requests;
pub mod shutdown;
pub mod status;
pub mod warnings;

pub use admin::Readiness;
pub use cache::{Cache, Caches};
pub use controller::{ControllerContext, error_policy, guarded};
pub use controller_set::{ControllerSet, Wiring};
pub use decision::Decision;
pub use error::{Error, Result};
pub use events::{EventNote, EventPublisher, Severity};
pub use leader::{LeaderElectionConfig, Leadership};
pub use metrics::Metrics;
pub use status::StatusWriter;
