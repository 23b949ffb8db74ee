//! Test support against the real local control plane of `olm-dev`.
//!
//! - [`cluster`] makes sure the control plane runs (building and starting it through olm-dev
//!   when needed, under olm-dev's file lock so parallel test binaries do not race) and returns a
//!   [`TestCluster`] with a `kube::Client`.
//! - [`TestCluster::namespace`] creates a [`TestNamespace`] with a random name, deleted when
//!   dropped, or by [`TestNamespace::cleanup`] (which waits only for OLM to release its CSVs).
//! - [`wait_for`] and [`TestNamespace::wait_for`] poll an async condition with a bounded backoff;
//!   on timeout the error carries the objects you name and the namespace's recent events.
//! - [`TestCluster::kubectl`] runs the kubectl built for this control plane.
//! - [`registry()`] starts a CNCF distribution OCI registry for one test (no control plane
//!   needed), optionally with htpasswd auth or TLS; [`token_auth_front`] puts Docker's token
//!   authentication in front of one.
//!
//! Longer than ~600 lines: the test cluster's whole life (start or reuse, kubectl, namespaces, waits with diagnostics) is one small API.

use std::collections::hash_map::RandomState;
use std::fmt::Display;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use olm_dev::{Layout, Progress};

mod namespace_cleanup;
mod registry;
mod token_auth;

pub use olm_dev::pki::{CertificateAuthority, IssuedCert};
pub use registry::{Credentials, REALM, RegistryOptions, RegistryServer, TestRegistry, registry};
pub use olm_dev::{KUBERNETES_VERSION, NODE_NAME};
pub use token_auth::{TOKEN_SERVICE, TokenAuthCounts, TokenAuthFront, token_auth_front};

/// Label put on every namespace this crate creates, so leftovers are easy to find.
pub const NAMESPACE_LABEL: &str = "olm.testkit/created-by";
/// Label naming the test process that created a namespace; namespaces of other (finished)
/// test binaries are swept when a test binary first connects.
pub const RUN_LABEL: &str = "olm.testkit/run";

/// This test process's value of [`RUN_LABEL`].
fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| random_name(&format!("run-{}", std::process::id())))
}

#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    #[error("the local control plane is not available: {0}")]
    ControlPlane(String),

    #[error("the test registry is not available: {0}")]
    Registry(String),

    #[error("cannot build a Kubernetes client from {}: {reason}", path.display())]
    Kubeconfig { path: PathBuf, reason: String },

    #[error("Kubernetes API request failed while {action}: {source}")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },

    #[error("`{command}` failed ({status}): {stderr}")]
    Kubectl {
        command: String,
        status: String,
        stderr: String,
    },

    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },

    #[error("timed out after {}s waiting for {what}; last observation: {last}\n{dump}", timeout.as_secs_f32())]
    Timeout {
        what: String,
        timeout: Duration,
        last: String,
        dump: String,
    },
}

impl TestkitError {
    /// A PascalCase category, as used in metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            TestkitError::ControlPlane(_) => "ControlPlaneUnavailable",
            TestkitError::Registry(_) => "RegistryUnavailable",
            TestkitError::Kubeconfig { .. } => "KubeconfigError",
            TestkitError::Api { .. } => "ApiError",
            TestkitError::Kubectl { .. } => "KubectlFailed",
            TestkitError::Spawn { .. } => "SpawnFailed",
            TestkitError::Timeout { .. } => "Timeout",
        }
    }

    /// Whether running the same thing again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            TestkitError::Api { .. } | TestkitError::Kubectl { .. } | TestkitError::Timeout { .. }
        )
    }
}

pub type Result<T, E = TestkitError> = std::result::Result<T, E>;

/// Port base of the tests' own control plane (override: `OLM_TEST_PORT_BASE`); apart from the
/// developer's `olm dev` environment (28000) so tests never share a cluster with a host `olm run`.
pub const TEST_PORT_BASE: u16 = 29000;

/// The layout of the tests' own control plane: the binary cache of `olm dev` (built once, shared),
/// but its own state directory, `OLM_TEST_STATE_DIR` or `${XDG_STATE_HOME:-~/.local/state}/olm-dev-test`,
/// and its own ports, from `OLM_TEST_PORT_BASE` (default [`TEST_PORT_BASE`]).
pub fn test_layout() -> Result<Layout> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    test_layout_from(&env)
}

fn test_layout_from(env: &dyn Fn(&str) -> Option<PathBuf>) -> Result<Layout> {
    let absolute = |name: &str| env(name).filter(|p| p.is_absolute());
    let mut layout = Layout::from_env().map_err(|e| TestkitError::ControlPlane(e.to_string()))?;
    layout.state_dir = match absolute("OLM_TEST_STATE_DIR") {
        Some(dir) => dir,
        None => match (absolute("XDG_STATE_HOME"), absolute("HOME")) {
            (Some(state), _) => state.join("olm-dev-test"),
            (None, Some(home)) => home.join(".local/state/olm-dev-test"),
            (None, None) => {
                return Err(TestkitError::ControlPlane(
                    "cannot decide where the test state directory is: set OLM_TEST_STATE_DIR or HOME".into(),
                ));
            }
        },
    };
    let base = match env("OLM_TEST_PORT_BASE") {
        Some(value) => olm_dev::parse_port_base("OLM_TEST_PORT_BASE", &value.to_string_lossy())
            .map_err(|e| TestkitError::ControlPlane(e.to_string()))?,
        None => TEST_PORT_BASE,
    };
    layout
        .set_port_base(base)
        .map_err(|e| TestkitError::ControlPlane(e.to_string()))?;
    Ok(layout)
}

/// Outcome of `ensure_up`, shared by all tests of one test binary.
static CONTROL_PLANE: OnceLock<std::result::Result<Layout, String>> = OnceLock::new();

/// Makes sure the control plane runs, once per process. Blocking; run off the async runtime.
fn ensure_up_blocking() -> std::result::Result<Layout, String> {
    CONTROL_PLANE
        .get_or_init(|| {
            let layout = test_layout().map_err(|e| e.to_string())?;
            let progress = Progress::new();
            olm_dev::up(&layout, &progress).map_err(|e| e.to_string())?;
            Ok(layout)
        })
        .clone()
}

/// The running local control plane: a client, and paths to its kubeconfig and kubectl.
#[derive(Clone)]
pub struct TestCluster {
    layout: Layout,
    client: Client,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("kubeconfig", &self.layout.kubeconfig())
            .finish_non_exhaustive()
    }
}

/// Connects to the local control plane, starting (and, the first time, building) it if needed.
/// Each call builds a fresh client so it belongs to the calling test's runtime.
pub async fn cluster() -> Result<TestCluster> {
    let layout = tokio::task::spawn_blocking(ensure_up_blocking)
        .await
        .map_err(|e| TestkitError::ControlPlane(format!("start task failed: {e}")))?
        .map_err(TestkitError::ControlPlane)?;
    let client = client_for(&layout.kubeconfig()).await?;
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT
        .get_or_init(|| namespace_cleanup::sweep_finished_runs(client.clone()))
        .await;
    Ok(TestCluster { layout, client })
}

async fn client_for(path: &Path) -> Result<Client> {
    let err = |reason: String| TestkitError::Kubeconfig {
        path: path.to_path_buf(),
        reason,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    Client::try_from(config).map_err(|e| err(e.to_string()))
}

/// Output of a successful kubectl run.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs kubectl with `--kubeconfig` set; fails with its stderr on a non-zero exit.
async fn run_kubectl(
    kubectl: &Path,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<KubectlOutput> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(kubectl);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--request-timeout=30s")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let command = format!("kubectl {}", args.join(" "));
    let mut child = cmd.spawn().map_err(|source| TestkitError::Spawn {
        command: command.clone(),
        source,
    })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .await
            .map_err(|source| TestkitError::Spawn {
                command: command.clone(),
                source,
            })?;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|source| TestkitError::Spawn {
            command: command.clone(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(KubectlOutput { stdout, stderr })
    } else {
        Err(TestkitError::Kubectl {
            command,
            status: output.status.to_string(),
            stderr: stderr.trim().to_string(),
        })
    }
}

impl TestCluster {
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.layout.kubeconfig()
    }

    /// Environment for a child `olm` process so that it talks to this (the tests') cluster and
    /// never to the developer's: KUBECONFIG, OLM_DEV_STATE_DIR, OLM_DEV_PORT_BASE.
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("KUBECONFIG", self.layout.kubeconfig().display().to_string()),
            ("OLM_DEV_STATE_DIR", self.layout.state_dir.display().to_string()),
            ("OLM_DEV_PORT_BASE", self.layout.host_ports.base.to_string()),
        ]
    }

    /// Path of the kubectl built for this control plane.
    pub fn kubectl_path(&self) -> PathBuf {
        self.layout.kubectl()
    }

    /// Runs the built kubectl against this cluster.
    pub async fn kubectl(&self, args: &[&str]) -> Result<KubectlOutput> {
        run_kubectl(
            &self.layout.kubectl(),
            &self.layout.kubeconfig(),
            args,
            None,
        )
        .await
    }

    /// Runs the built kubectl with `input` on stdin (e.g. `apply -f -`).
    pub async fn kubectl_with_input(&self, args: &[&str], input: &str) -> Result<KubectlOutput> {
        run_kubectl(
            &self.layout.kubectl(),
            &self.layout.kubeconfig(),
            args,
            Some(input),
        )
        .await
    }

    /// Creates a namespace named `<prefix>-<random>`.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace> {
        let name = random_name(prefix);
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    [
                        (NAMESPACE_LABEL.to_string(), "olm-testkit".to_string()),
                        (RUN_LABEL.to_string(), run_id().to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &namespace)
            .await
            .map_err(|source| TestkitError::Api {
                action: format!("creating namespace {name}"),
                source,
            })?;
        Ok(TestNamespace {
            name,
            cluster: self.clone(),
            deleted: false,
        })
    }

    /// `kubectl get <ref> -o yaml` for each reference, then recent events of `namespace`.
    pub async fn dump(&self, namespace: Option<&str>, objects: &[&str]) -> String {
        let mut out = String::new();
        for object in objects {
            let mut args = vec!["get", object, "-o", "yaml"];
            if let Some(ns) = namespace {
                args.extend(["-n", ns]);
            }
            match self.kubectl(&args).await {
                Ok(o) => out.push_str(&format!("--- {object}:\n{}\n", o.stdout.trim_end())),
                Err(e) => out.push_str(&format!("--- {object}: {e}\n")),
            }
        }
        if let Some(ns) = namespace {
            let args = ["get", "events", "-n", ns, "--sort-by=.lastTimestamp"];
            match self.kubectl(&args).await {
                Ok(o) => {
                    let lines: Vec<&str> = o.stdout.lines().collect();
                    let from = lines.len().saturating_sub(30);
                    out.push_str(&format!(
                        "--- recent events in namespace {ns}:\n{}\n",
                        if lines.is_empty() {
                            "(none)".to_string()
                        } else {
                            lines[from..].join("\n")
                        }
                    ));
                }
                Err(e) => out.push_str(&format!("--- events in namespace {ns}: {e}\n")),
            }
        }
        out
    }
}

/// `<prefix>-<8 random base-36 chars>`, a valid namespace name.
pub fn random_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let mut value = hasher.finish();
    let mut suffix = String::new();
    for _ in 0..8 {
        let digit = (value % 36) as u32;
        suffix.push(char::from_digit(digit, 36).unwrap_or('x'));
        value /= 36;
    }
    let clean: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let clean = clean.trim_matches('-');
    if clean.is_empty() {
        format!("test-{suffix}")
    } else {
        format!("{clean}-{suffix}")
    }
}

/// A namespace for one test; deleted on drop (without waiting) or by [`TestNamespace::cleanup`].
pub struct TestNamespace {
    name: String,
    cluster: TestCluster,
    deleted: bool,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }

    /// A typed API scoped to this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.cluster.client(), &self.name)
    }

    /// Runs kubectl with `-n <this namespace>`.
    pub async fn kubectl(&self, args: &[&str]) -> Result<KubectlOutput> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        self.cluster.kubectl(&all).await
    }

    /// Runs kubectl with `-n <this namespace>` and `input` on stdin.
    pub async fn kubectl_with_input(&self, args: &[&str], input: &str) -> Result<KubectlOutput> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        self.cluster.kubectl_with_input(&all, input).await
    }

    /// The given objects as YAML (namespaced refs are looked up here) and this namespace's events.
    pub async fn dump(&self, objects: &[&str]) -> String {
        self.cluster.dump(Some(&self.name), objects).await
    }

    /// Like [`wait_for`], but a timeout error also shows `objects` (kubectl refs such as
    /// `deployment/web` or `apiservice/v1.example.com`) and the namespace's recent events.
    pub async fn wait_for<T, E, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        objects: &[&str],
        check: F,
    ) -> Result<T>
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<Option<T>, E>>,
    {
        match wait_for(what, timeout, check).await {
            Err(TestkitError::Timeout {
                what,
                timeout,
                last,
                ..
            }) => Err(TestkitError::Timeout {
                what,
                timeout,
                last,
                dump: self.dump(objects).await,
            }),
            other => other,
        }
    }

    /// Deletes the namespace, and waits (up to 60 s) until OLM has released its CSVs (their
    /// cleanup finalizer); kube-controller-manager removes the rest in the background
    /// (`namespace_cleanup` says why this does not wait for that).
    pub async fn cleanup(mut self) -> Result<()> {
        self.deleted = true;
        namespace_cleanup::delete_namespace(&self.cluster.client, &self.name, Duration::from_secs(60)).await
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        // No async in Drop and the test's runtime may be shutting down: ask kubectl, don't wait
        // for finalization.
        let _ = std::process::Command::new(self.cluster.kubectl_path())
            .arg(format!(
                "--kubeconfig={}",
                self.cluster.kubeconfig().display()
            ))
            .args([
                "--request-timeout=15s",
                "delete",
                "namespace",
                &self.name,
                "--wait=false",
                "--ignore-not-found",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Polls `check` until it returns `Ok(Some(value))`, with a backoff from 100 ms up to 1 s.
/// `Ok(None)` means "not yet"; `Err(e)` is remembered as the last observation and polling goes
/// on. On timeout the error names `what` and the last observation.
pub async fn wait_for<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<Option<T>, E>>,
{
    let begin = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        let last = match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => String::from("condition not met yet"),
            Err(e) => e.to_string(),
        };
        if begin.elapsed() >= timeout {
            return Err(TestkitError::Timeout {
                what: what.to_string(),
                timeout,
                last,
                dump: String::new(),
            });
        }
        let remaining = timeout.saturating_sub(begin.elapsed());
        tokio::time::sleep(delay.min(remaining)).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_names_are_valid_and_distinct() {
        let a = random_name("My_Test");
        let b = random_name("My_Test");
        assert_ne!(a, b);
        assert!(a.starts_with("my-test-"), "{a}");
        assert!(a.len() <= 63);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(random_name("--").starts_with("test-"));
    }

    #[test]
    fn test_layout_is_apart_from_the_developers() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| PathBuf::from(v))
            }
        };
        let l = test_layout_from(&vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(l.state_dir, PathBuf::from("/home/u/.local/state/olm-dev-test"));
        assert_eq!(l.ports.apiserver, 29443);
        assert_eq!(l.ports.etcd_client, 29379);
        assert_eq!(l.cache_dir, Layout::from_env().unwrap().cache_dir);

        let l = test_layout_from(&vars(&[("HOME", "/home/u"), ("XDG_STATE_HOME", "/x")])).unwrap();
        assert_eq!(l.state_dir, PathBuf::from("/x/olm-dev-test"));

        let l = test_layout_from(&vars(&[
            ("OLM_TEST_STATE_DIR", "/t"),
            ("OLM_TEST_PORT_BASE", "31000"),
        ]))
        .unwrap();
        assert_eq!(l.state_dir, PathBuf::from("/t"));
        assert_eq!(l.ports.apiserver, 31443);

        let err = test_layout_from(&vars(&[("HOME", "/h"), ("OLM_TEST_PORT_BASE", "x")])).unwrap_err();
        assert!(err.to_string().contains("OLM_TEST_PORT_BASE"), "{err}");
    }

    #[tokio::test]
    async fn wait_for_returns_value_once_ready() {
        let mut calls = 0;
        let value = wait_for("third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { Ok::<_, String>(if n >= 3 { Some(n) } else { None }) }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test]
    async fn wait_for_timeout_names_what_and_last_error() {
        let err = wait_for("the impossible", Duration::from_millis(300), || async {
            Err::<Option<()>, _>("backend said no")
        })
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("the impossible"), "{text}");
        assert!(text.contains("backend said no"), "{text}");
        assert_eq!(err.category(), "Timeout");
    }
}
