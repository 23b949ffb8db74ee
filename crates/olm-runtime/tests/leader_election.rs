//! Lease-based leader election against the real API server: two replicas, one leader, and a
//! clean handover when the leader shuts down.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use olm_runtime::leader::{self, LeaderElectionConfig};
use olm_runtime::shutdown::Shutdown;

fn config(namespace: &str, identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new(namespace, "olm-test-lock", identity);
    config.lease_duration = Duration::from_secs(4);
    config.renew_deadline = Duration::from_secs(3);
    config.retry_period = Duration::from_millis(300);
    config
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_hand_over_on_shutdown() -> anyhow::Result<()> {
    let cluster = olm_testkit::cluster().await?;
    let ns = cluster.namespace("leader").await?;
    let stop_a = Shutdown::default();
    let stop_b = Shutdown::default();
    let (a, task_a) = leader::start(cluster.client(), config(ns.name(), "replica-a"), stop_a.signal());
    let (b, task_b) = leader::start(cluster.client(), config(ns.name(), "replica-b"), stop_b.signal());

    // Exactly one leader emerges, and for a few seconds there are never two.
    let begin = Instant::now();
    while !(a.is_leader() || b.is_leader()) {
        anyhow::ensure!(begin.elapsed() < Duration::from_secs(20), "no leader elected within 20s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watch_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < watch_until {
        anyhow::ensure!(!(a.is_leader() && b.is_leader()), "both replicas lead at once");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (leader, follower, stop_leader, leader_task, leader_name, follower_name) = if a.is_leader() {
        (a, b, stop_a, task_a, "replica-a", "replica-b")
    } else {
        (b, a, stop_b, task_b, "replica-b", "replica-a")
    };
    let leases: Api<Lease> = ns.api();
    let lease = leases.get("olm-test-lock").await?;
    assert_eq!(lease.spec.and_then(|s| s.holder_identity).as_deref(), Some(leader_name));

    // The leader shuts down: it releases the lease, so the follower takes over on its next
    // retry instead of waiting for the lease to expire.
    stop_leader.trigger();
    leader_task.await?;
    assert!(!leader.is_leader());
    let released_at = Instant::now();
    while !follower.is_leader() {
        anyhow::ensure!(released_at.elapsed() < Duration::from_secs(10), "the follower never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lease = leases.get("olm-test-lock").await?;
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some(follower_name));
    assert!(spec.lease_transitions.unwrap_or(0) >= 1);
    ns.cleanup().await?;
    Ok(())
}
