//! What every controller shares: its context (client, metrics, events, status writer,
//! leadership, backoff) and the generic `error_policy` / reconcile bookkeeping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

use super::backoff::{Backoff, ObjectKey};
use super::error::Error;
use super::events::{EventNote, EventPublisher};
use super::leader::Leadership;
use super::metrics::Metrics;
use super::status::StatusWriter;

/// The context a controller's reconcile receives; `state` holds its caches.
pub struct ControllerContext<S> {
    /// Short controller name (`csv`, `operatorgroup`): metric label and log field.
    pub name: &'static str,
    /// Field manager and Event reporter: `<prefix>/<name>`.
    field_manager: String,
    /// API client.
    pub client: Client,
    /// Process metrics.
    pub metrics: Arc<Metrics>,
    /// Event publisher reporting as the field manager.
    pub events: EventPublisher,
    /// Status writer with this controller's field manager.
    pub status: StatusWriter,
    /// Whether this replica may act.
    pub leadership: Leadership,
    /// Per-object failure backoff.
    pub backoff: Backoff,
    /// Controller-specific state (caches, settings).
    pub state: S,
}

impl<S> ControllerContext<S> {
    /// Build a context whose field manager and event reporter are `<prefix>/<name>`.
    pub fn new(
        (prefix, name): (&str, &'static str),
        client: Client,
        metrics: Arc<Metrics>,
        leadership: Leadership,
        state: S,
    ) -> Self {
        let manager = format!("{prefix}/{name}");
        let instance = std::env::var("POD_NAME").ok();
        Self {
            name,
            field_manager: manager.clone(),
            events: EventPublisher::new(client.clone(), manager.clone(), instance),
            status: StatusWriter::new(client.clone(), manager),
            client,
            metrics,
            leadership,
            backoff: Backoff::default(),
            state,
        }
    }

    /// The field manager of this controller (`<prefix>/<name>`).
    pub fn field_manager(&self) -> String {
        self.field_manager.clone()
    }
}

/// Most reconciles one controller runs at once. Unbounded (kube's default), a burst of
/// changes (hundreds of namespaces created together) starts hundreds of reconciles, each with
/// its own API connection and working set, that only queue up at the API server; a bound
/// keeps the same throughput on a busy server with a fraction of the memory.
pub const RECONCILE_CONCURRENCY: u16 = 16;

/// The runtime settings every controller uses.
pub fn controller_config() -> kube::runtime::controller::Config {
    kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY)
}

/// The backoff key of an object.
pub fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectKey {
    let kind: &'static str = match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        // Static types always have a borrowed kind; an owned one only costs a generic key.
        std::borrow::Cow::Owned(_) => "Object",
    };
    (kind, obj.namespace().unwrap_or_default(), obj.name_any())
}

/// How long a pass runs before it is reported as slow: long past what a pass of a healthy
/// cluster takes, even one writing thousands of copies.
pub const SLOW_PASS: Duration = Duration::from_secs(180);

/// Run one reconcile with the shared bookkeeping: followers skip (they are re-triggered when
/// they gain leadership), duration is measured, success resets the object's backoff.
pub async fn guarded<K, S, F, Fut>(obj: Arc<K>, ctx: Arc<ControllerContext<S>>, reconcile: F) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<ControllerContext<S>>) -> Fut,
    Fut: std::future::Future<Output = Result<Action, Error>>,
{
    if !ctx.leadership.is_leader() {
        return Ok(Action::await_change());
    }
    if ctx.status.is_stale(obj.as_ref()) {
        tracing::debug!("the cache has not caught up with this controller's last status write; waiting for it");
        return Ok(Action::await_change());
    }
    let key = object_key(obj.as_ref());
    if let Some(left) = ctx.backoff.gate(&key, obj.meta().generation) {
        tracing::debug!(retry_in = ?left, "backing off after a failure; not reconciling before then");
        return Ok(Action::requeue(left));
    }
    let started = Instant::now();
    let pass = reconcile(obj, ctx.clone());
    tokio::pin!(pass);
    // A pass holds its object: every change of it waits until the pass ends. One that does not
    // end (a request the API server never answers) stops its object silently; say so once.
    let result = tokio::select! {
        result = &mut pass => result,
        () = tokio::time::sleep(SLOW_PASS) => {
            tracing::warn!(
                controller = ctx.name,
                kind = key.0,
                namespace = %key.1,
                name = %key.2,
                "a pass has run for {} s and still waits for the API server; changes of this object wait for it",
                SLOW_PASS.as_secs()
            );
            pass.await
        }
    };
    ctx.metrics.observe_reconcile(ctx.name, started.elapsed());
    if result.is_ok() {
        ctx.backoff.on_success(&key);
    }
    result
}

/// The `error_policy` of every controller: count the failure by category, log it, report a
/// failed write as a Warning Event on the object written (reason: the category), and retry
/// after a per-object bounded exponential backoff (which [`guarded`] enforces).
pub fn error_policy<K, S>(obj: Arc<K>, err: &Error, ctx: Arc<ControllerContext<S>>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    let key = object_key(obj.as_ref());
    let delay = ctx.backoff.on_failure(key.clone(), obj.meta().generation, err);
    ctx.metrics.observe_failure(ctx.name, err.category());
    let report = match err.refused_write() {
        Some(regarding) => Some((regarding.clone(), write_failed_event(err))),
        // Without a write to blame, OLM's own missing permission is still the user's to fix:
        // reported on the object being reconciled.
        None if err.category() == "ApiForbidden" => Some((obj.object_ref(&()), forbidden_event(err))),
        None => None,
    };
    if let Some((regarding, note)) = report {
        let events = ctx.events.clone();
        // Events are best effort and must not hold up the controller: sent in the background.
        tokio::spawn(async move { events.publish(&regarding, &note).await });
    }
    tracing::warn!(
        controller = ctx.name,
        kind = key.0,
        namespace = %key.1,
        name = %key.2,
        error.category = err.category(),
        retryable = err.retryable(),
        retry_in = ?delay,
        "reconcile failed: {err}"
    );
    Action::requeue(delay)
}

/// The Warning Event for a failed write: reason the error's category, what was refused and
/// what the API server said, and what happens next. The message does not change from one
/// retry to the next, so the retries count on one Event's series.
pub fn write_failed_event(err: &Error) -> EventNote {
    let hint = if err.retryable() {
        "OLM retries with backoff"
    } else {
        "OLM retries with backoff, but the same request is refused until the cause (an admission policy or webhook, a quota, the object's size) is removed"
    };
    EventNote::warning(
        err.category(),
        "Write",
        format!("{err}. {hint}."),
    )
}

/// The Warning Event for a request of OLM's the API server forbade (a read or a deletion; a
/// refused write has [`write_failed_event`]). Stable from one retry to the next.
pub fn forbidden_event(err: &Error) -> EventNote {
    EventNote::warning(
        err.category(),
        "Reconcile",
        format!("{err}. OLM's ServiceAccount lacks this permission: grant it in OLM's ClusterRole (manifests/01-rbac-controllers.yaml); OLM retries with backoff."),
    )
}

/// Convert an optional requeue into a controller `Action`.
pub fn action_for(requeue_after: Option<Duration>) -> Action {
    match requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_request_names_the_permission_and_where_to_grant_it() {
        let err = Error::api(
            "delete the ClusterRoles of ClusterServiceVersion ns/x",
            kube::Error::Api(Box::new(
                kube::core::Status::failure("clusterroles.rbac.authorization.k8s.io is forbidden: cannot deletecollection", "Forbidden").with_code(403),
            )),
        );
        assert!(err.refused_write().is_none(), "a deletion by label is not a write of one object");
        let note = forbidden_event(&err);
        assert_eq!(note.reason, "ApiForbidden");
        assert!(note.message.contains("cannot deletecollection"), "{}", note.message);
        assert!(note.message.contains("manifests/01-rbac-controllers.yaml"), "{}", note.message);
        assert!(!note.message.contains("Status {"), "no debug dump: {}", note.message);
    }
}
