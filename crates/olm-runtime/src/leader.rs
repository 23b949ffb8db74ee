//! Leader election with a `coordination.k8s.io/v1` Lease, so two replicas can run side by side
//! and only one of them reconciles.
//!
//! The holder renews every `retry_period`. A lease whose `renewTime + leaseDurationSeconds` is in
//! the past (or whose holder is empty: released) may be taken over. Writes use the lease's
//! resourceVersion, so two candidates racing for the same lease cannot both win.
//!
//! Why our own rather than kube-lease-manager (0.13, kube 5; weighed for issue #58): OLM's flags
//! and upstream's Deployments speak client-go's three timings (lease duration, renew deadline,
//! retry period), and a leader must stop acting once it could not renew for the renew deadline,
//! before another replica may take the lease; kube-lease-manager has a duration and a grace and
//! holds the lock until the lease is lost. Its locking is server-side apply (a `patch` on leases
//! that OLM's Role does not grant; ours are `get`/`create`/`update` with the resourceVersion, as
//! client-go's), and its state is a bool, where the manager's "leadership gained" trigger needs the
//! term this module publishes so that a lose-and-regain between two polls still reconciles all.
//! The leader and chaos suites hold this behaviour; a swap must keep them green.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

use super::error::is_not_found;

/// Where the lease lives and how it is timed.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (written into `holderIdentity`).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// The leader gives up leadership when it could not renew for this long.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// Defaults as in client-go (15 s lease, 10 s renew deadline, 2 s retry) for `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The published leadership state: `term` grows every time this replica acquires the lease, so a
/// quick lose-and-regain between two polls is still seen as a new acquisition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LeaderState {
    leading: bool,
    term: u64,
}

/// A cheap handle telling whether this replica currently leads.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<LeaderState>,
    // Keeps the channel open for `always()` handles, which have no election task.
    _tx: Option<std::sync::Arc<watch::Sender<LeaderState>>>,
}

impl Leadership {
    /// Leadership without election (a single replica): always the leader.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(LeaderState { leading: true, term: 1 });
        Self {
            rx,
            _tx: Some(std::sync::Arc::new(tx)),
        }
    }

    /// Whether this replica leads right now.
    pub fn is_leader(&self) -> bool {
        self.rx.borrow().leading
    }

    /// Emits once every time this replica becomes the leader (including at start when it
    /// already is); controllers use it to reconcile everything they skipped as followers.
    pub fn gained(&self) -> impl Stream<Item = ()> + Send + 'static {
        let rx = self.rx.clone();
        futures::stream::unfold((rx, 0u64), |(mut rx, emitted_term)| async move {
            loop {
                let state = *rx.borrow_and_update();
                if state.leading && state.term != emitted_term {
                    return Some(((), (rx, state.term)));
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
        .boxed()
    }

    /// Wait until this replica leads.
    pub async fn wait_until_leader(&self) {
        let mut rx = self.rx.clone();
        // An error means the election task ended: nobody will make us leader any more.
        let _ = rx.wait_for(|state| state.leading).await;
    }
}

fn set_leading(tx: &watch::Sender<LeaderState>, leading: bool) {
    tx.send_if_modified(|state| {
        if state.leading == leading {
            return false;
        }
        state.leading = leading;
        if leading {
            state.term += 1;
        }
        true
    });
}

/// What a candidate should do with the lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseStep {
    /// No lease exists: create it with us as holder.
    Create,
    /// We hold it: renew.
    Renew,
    /// The holder's lease expired or was released: take it over.
    TakeOver,
    /// Someone else holds a valid lease.
    Follow {
        /// The current holder.
        holder: String,
    },
}

/// Decide what to do with the lease (pure: the clock is an argument).
pub fn lease_step(lease: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> LeaseStep {
    let Some(spec) = lease else {
        return LeaseStep::Create;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == identity {
        return LeaseStep::Renew;
    }
    if holder.is_empty() {
        return LeaseStep::TakeOver;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
    let last = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    match last {
        Some(renewed) if renewed + duration > now => LeaseStep::Follow { holder },
        _ => LeaseStep::TakeOver,
    }
}

/// Start the election loop. The returned handle flips to true while we hold the lease. When
/// `shutdown` resolves the loop releases the lease (if held) and ends.
pub fn start(
    client: Client,
    config: LeaderElectionConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (Leadership, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(LeaderState::default());
    let leadership = Leadership { rx, _tx: None };
    let task = tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let mut shutdown = std::pin::pin!(shutdown);
        let mut last_renewed: Option<tokio::time::Instant> = None;
        loop {
            // Each round is bounded: a request that hangs (an API server whose etcd is gone
            // accepts and stalls) must not keep a leader leading past its renew deadline
            // while another replica takes the expired lease.
            let limit = match last_renewed.filter(|_| tx.borrow().leading) {
                Some(at) => config.renew_deadline.saturating_sub(at.elapsed()).max(Duration::from_millis(100)),
                None => config.renew_deadline,
            };
            let round = match tokio::time::timeout(limit, try_acquire_or_renew(&api, &config)).await {
                Ok(result) => result.map_err(|err| err.to_string()),
                Err(_) => Err(format!("no answer within {:.1}s", limit.as_secs_f64())),
            };
            match round {
                Ok(true) => {
                    last_renewed = Some(tokio::time::Instant::now());
                    if !tx.borrow().leading {
                        tracing::info!(lease = %config.name, identity = %config.identity, "became leader");
                    }
                    set_leading(&tx, true);
                }
                Ok(false) => {
                    if tx.borrow().leading {
                        tracing::warn!(lease = %config.name, "lost leadership to another replica");
                    }
                    last_renewed = None;
                    set_leading(&tx, false);
                }
                Err(err) => {
                    let expired = last_renewed.is_none_or(|at| at.elapsed() >= config.renew_deadline);
                    tracing::warn!(lease = %config.name, %err, "cannot read or write the leader lease");
                    if expired && tx.borrow().leading {
                        tracing::warn!(lease = %config.name, "renew deadline passed: giving up leadership");
                        set_leading(&tx, false);
                    }
                }
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(config.retry_period) => {}
            }
        }
        if tx.borrow().leading {
            set_leading(&tx, false);
            if let Err(err) = release(&api, &config).await {
                tracing::warn!(lease = %config.name, %err, "cannot release the leader lease");
            } else {
                tracing::info!(lease = %config.name, "released the leader lease");
            }
        }
    });
    (leadership, task)
}

/// One election round: returns whether we hold the lease afterwards.
async fn try_acquire_or_renew(api: &Api<Lease>, config: &LeaderElectionConfig) -> Result<bool, kube::Error> {
    let existing = match api.get(&config.name).await {
        Ok(lease) => Some(lease),
        Err(err) if is_not_found(&err) => None,
        Err(err) => return Err(err),
    };
    let now = Timestamp::now();
    let step = lease_step(existing.as_ref().and_then(|l| l.spec.as_ref()), &config.identity, now);
    let duration_secs = i32::try_from(config.lease_duration.as_secs()).unwrap_or(15);
    match (step, existing) {
        (LeaseStep::Create, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(config.name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(config.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(err) if super::error::api_status_code(&err) == Some(409) => Ok(false),
                Err(err) => Err(err),
            }
        }
        (LeaseStep::Follow { .. }, _) => Ok(false),
        (step @ (LeaseStep::Renew | LeaseStep::TakeOver), Some(mut lease)) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if step == LeaseStep::TakeOver {
                spec.holder_identity = Some(config.identity.clone());
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
            }
            spec.lease_duration_seconds = Some(duration_secs);
            spec.renew_time = Some(MicroTime(now));
            // `replace` carries the resourceVersion we read: a concurrent writer makes this 409.
            match api.replace(&config.name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(err) if super::error::api_status_code(&err) == Some(409) => Ok(false),
                Err(err) => Err(err),
            }
        }
        (LeaseStep::Renew | LeaseStep::TakeOver, None) => Ok(false),
    }
}

async fn release(api: &Api<Lease>, config: &LeaderElectionConfig) -> Result<(), kube::Error> {
    let mut lease = api.get(&config.name).await?;
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    let now = Timestamp::now();
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    api.replace(&config.name, &PostParams::default(), &lease).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed: Timestamp, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(secs),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        }
    }

    #[test]
    fn lease_steps() {
        let now = Timestamp::from_second(1_000_000).expect("valid timestamp");
        assert_eq!(lease_step(None, "a", now), LeaseStep::Create);
        assert_eq!(lease_step(Some(&spec("a", now, 15)), "a", now), LeaseStep::Renew);
        assert_eq!(
            lease_step(Some(&spec("b", now - SignedDuration::from_secs(5), 15)), "a", now),
            LeaseStep::Follow { holder: "b".into() }
        );
        assert_eq!(
            lease_step(Some(&spec("b", now - SignedDuration::from_secs(16), 15)), "a", now),
            LeaseStep::TakeOver
        );
        assert_eq!(lease_step(Some(&spec("", now, 15)), "a", now), LeaseStep::TakeOver);
    }

    #[tokio::test]
    async fn gained_fires_on_each_acquisition() {
        let (tx, rx) = watch::channel(LeaderState::default());
        let leadership = Leadership { rx, _tx: None };
        let mut gained = leadership.gained();
        set_leading(&tx, true);
        assert_eq!(gained.next().await, Some(()));
        assert!(leadership.is_leader());
        // Lost and regained before the stream is polled again: still a new acquisition.
        set_leading(&tx, false);
        set_leading(&tx, true);
        let next = tokio::time::timeout(Duration::from_secs(1), gained.next()).await;
        assert_eq!(next.ok().flatten(), Some(()));
    }

    /// A fake API server that creates the Lease, then accepts every later request and never
    /// answers (an API server whose etcd is gone).
    fn answers_then_hangs() -> Client {
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let n = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let (status, body) = match (n, request.method().as_str()) {
                    (0, "GET") => (404, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#.to_owned()),
                    (1, "POST") => {
                        let lease = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": "l", "namespace": "olm", "resourceVersion": "1"},
                            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 3}});
                        (201, lease.to_string())
                    }
                    _ => std::future::pending().await,
                };
                http::Response::builder().status(status).header("content-type", "application/json").body(kube::client::Body::from(body.into_bytes()))
            }
        });
        Client::new(service, "olm")
    }

    #[tokio::test]
    async fn a_leader_whose_renewal_hangs_gives_up_at_its_renew_deadline() {
        let config = LeaderElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(200),
            ..LeaderElectionConfig::new("olm", "l", "me")
        };
        let (leadership, task) = start(answers_then_hangs(), config, std::future::pending());
        tokio::time::timeout(Duration::from_secs(5), leadership.wait_until_leader()).await.expect("leads after creating the lease");
        let became = tokio::time::Instant::now();
        while leadership.is_leader() {
            assert!(became.elapsed() < Duration::from_secs(3), "still leading 3 s after its last renewal, past the lease another replica takes");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        task.abort();
    }
}
