//! The control-plane components: what each one is, where its binary and ports are, how its
//! health is checked, and the arguments it runs with.

use std::path::PathBuf;
use std::time::Duration;

use crate::layout::{Layout, POD_CIDR, SERVICE_CIDR};
use crate::pki::FRONT_PROXY_CLIENT_NAME;

/// One process of the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    Etcd,
    ApiServer,
    ControllerManager,
    Scheduler,
    Kwok,
}

impl Component {
    /// In start order; stopped in reverse.
    pub const ALL: [Component; 5] = [
        Component::Etcd,
        Component::ApiServer,
        Component::ControllerManager,
        Component::Scheduler,
        Component::Kwok,
    ];

    /// Name used for log and pid files and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
            Component::Kwok => "kwok",
        }
    }

    pub fn binary(self, layout: &Layout) -> PathBuf {
        match self {
            Component::Etcd => layout.etcd(),
            Component::ApiServer => layout.kube_apiserver(),
            Component::ControllerManager => layout.kube_controller_manager(),
            Component::Scheduler => layout.kube_scheduler(),
            Component::Kwok => layout.kwok(),
        }
    }

    /// The port its health endpoint listens on.
    pub fn port(self, layout: &Layout) -> u16 {
        let p = layout.ports;
        match self {
            Component::Etcd => p.etcd_client,
            Component::ApiServer => p.apiserver,
            Component::ControllerManager => p.controller_manager,
            Component::Scheduler => p.scheduler,
            Component::Kwok => p.kwok,
        }
    }

    /// Every port it listens on (checked for conflicts before starting).
    pub(crate) fn all_ports(self, layout: &Layout) -> Vec<u16> {
        match self {
            Component::Etcd => vec![layout.ports.etcd_client, layout.ports.etcd_peer],
            other => vec![other.port(layout)],
        }
    }

    /// Health endpoint path and whether it is served over TLS (by our CA).
    pub(crate) fn health(self) -> (&'static str, bool) {
        match self {
            Component::Etcd => ("/health", false),
            Component::ApiServer => ("/readyz", true),
            Component::ControllerManager | Component::Scheduler => ("/healthz", true),
            Component::Kwok => ("/healthz", false),
        }
    }

    /// How long it may take to become healthy after start.
    pub(crate) fn start_timeout(self) -> Duration {
        match self {
            Component::ApiServer => Duration::from_secs(90),
            _ => Duration::from_secs(45),
        }
    }

    pub(crate) fn args(self, layout: &Layout) -> Vec<String> {
        let pki = |f: &str| layout.pki_file(f).display().to_string();
        let kubeconfig = layout.kubeconfig().display().to_string();
        let p = layout.ports;
        match self {
            Component::Etcd => vec![
                "--name=olm-dev".into(),
                format!("--data-dir={}", layout.etcd_data_dir().display()),
                format!("--listen-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--advertise-client-urls=http://127.0.0.1:{}", p.etcd_client),
                format!("--listen-peer-urls=http://127.0.0.1:{}", p.etcd_peer),
                format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                    p.etcd_peer
                ),
                format!("--initial-cluster=olm-dev=http://127.0.0.1:{}", p.etcd_peer),
                // A throwaway development store: durability is not worth the fsync latency.
                "--unsafe-no-fsync=true".into(),
                "--auto-compaction-retention=1".into(),
                "--quota-backend-bytes=4294967296".into(),
            ],
            Component::ApiServer => crate::node::apiserver::apiserver_args(layout, vec![
                format!("--etcd-servers=http://127.0.0.1:{}", p.etcd_client),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.apiserver),
                // Loopback advertise address is only accepted without an endpoint reconciler.
                "--advertise-address=127.0.0.1".into(),
                "--endpoint-reconciler-type=none".into(),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                format!("--tls-cert-file={}", pki("apiserver.crt")),
                format!("--tls-private-key-file={}", pki("apiserver.key")),
                format!("--client-ca-file={}", pki("ca.crt")),
                "--authorization-mode=Node,RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", pki("sa.pub")),
                format!("--service-account-signing-key-file={}", pki("sa.key")),
                "--allow-privileged=true".into(),
                // API aggregation: the API server authenticates to extension servers with the
                // front-proxy client certificate and passes the user in these headers.
                format!(
                    "--requestheader-client-ca-file={}",
                    pki("front-proxy-ca.crt")
                ),
                format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT_NAME}"),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", pki("front-proxy-client.crt")),
                format!("--proxy-client-key-file={}", pki("front-proxy-client.key")),
                profiling_flag(),
                // What OLM's own ServiceAccounts ask of the API server, to derive the least
                // privilege OLM needs (tests/tests/least_privilege.rs); nothing else is logged.
                format!("--audit-policy-file={}", layout.audit_policy().display()),
                format!("--audit-log-path={}", layout.audit_log().display()),
                "--audit-log-format=json".into(),
                "--audit-log-maxsize=100".into(),
                "--audit-log-maxbackup=1".into(),
            ]),
            Component::ControllerManager => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.controller_manager),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
                "--leader-elect=false".into(),
                format!("--root-ca-file={}", pki("ca.crt")),
                format!("--service-account-private-key-file={}", pki("sa.key")),
                "--use-service-account-credentials=true".into(),
                format!("--cluster-signing-cert-file={}", pki("ca.crt")),
                format!("--cluster-signing-key-file={}", pki("ca.key")),
                // Remove the not-ready taint from the fake node within seconds, not minutes.
                "--node-monitor-period=5s".into(),
                "--node-monitor-grace-period=40s".into(),
                // Each controller's client may send 100 requests a second, not 20: at the
                // default, rolling out a thousand operator Deployments at once (the deployment
                // and replicaset controllers create a ReplicaSet and a Pod for each and write
                // their status a few times) waits minutes on kube-controller-manager's own
                // rate limit with the API server idle (BENCHMARKS.md, the 1,000-namespace run).
                "--kube-api-qps=100".into(),
                "--kube-api-burst=200".into(),
                // 25 workers each for Deployments and ReplicaSets, not 5: each sync waits on the
                // API server, and with a thousand operator Deployments rolled out at once five
                // workers left a Deployment 69 s without its ReplicaSet and a ready pod 68 s
                // without its Deployment Available, while the API server's CPU fell from ~1.4 to
                // ~0.85 of a core (BENCHMARKS.md, the 1,000-namespace run).
                "--concurrent-deployment-syncs=25".into(),
                "--concurrent-replicaset-syncs=25".into(),
                profiling_flag(),
            ],
            Component::Scheduler => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.scheduler),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
                "--leader-elect=false".into(),
                profiling_flag(),
            ],
            Component::Kwok => [
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", layout.kwok_stages().display()),
                // Only the fake node: a real node (`--real-node`) belongs to its kubelet.
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                // The API server reaches the fake node's kubelet API (kwok's server below) for
                // logs, exec and port-forward of its pods; kwok answers what its configuration
                // (`OLM_DEV_KWOK_CONFIG`) gives them, and refuses the rest at once.
                "--node-ip=127.0.0.1".into(),
                format!("--cidr={POD_CIDR}"),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{}", p.kwok),
                format!("--node-port={}", p.kwok),
                format!("--tls-cert-file={}", pki("components.crt")),
                format!("--tls-private-key-file={}", pki("components.key")),
            ]
            .into_iter()
            .chain(extra_kwok_configs())
            .collect(),
        }
    }
}

/// `--config=` for each path of `OLM_DEV_KWOK_CONFIG` (colon-separated): kwok resources the
/// fake node should have, such as a `ClusterPortForward` that forwards a fake pod's port to a
/// process on this host (bench/operator-controller-e2e does so for upstream's e2e registry).
fn extra_kwok_configs() -> Vec<String> {
    let paths = std::env::var("OLM_DEV_KWOK_CONFIG").unwrap_or_default();
    paths.split(':').filter(|p| !p.is_empty()).map(|p| format!("--config={p}")).collect()
}

/// `--profiling=false`, or `true` when `OLM_DEV_PROFILING=1`: the API server, the
/// controller-manager and the scheduler then serve Go's pprof endpoints under /debug/pprof/ on
/// their secure ports, to find where a benchmark's control-plane CPU goes. Off by default, as a
/// cluster should be.
fn profiling_flag() -> String {
    let on = std::env::var("OLM_DEV_PROFILING").as_deref() == Ok("1");
    format!("--profiling={on}")
}
