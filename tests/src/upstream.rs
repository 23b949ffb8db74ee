//! Upstream OLM v0.46 (its `olm` and `catalog` operators, built from the Go module by
//! `olm-bench`) as the OLM under test on the tests' control plane, for suites that judge
//! olm-rs against upstream on the same cluster (the conformance run's upstream column).
//!
//! The binaries come from `$OLM_CONFORMANCE_UPSTREAM` (a directory with `olm` and `catalog`);
//! upstream's CRDs from its module in the olm-dev Go cache. They replace ours for as long as
//! upstream runs; the next suite's `install_crds` puts ours back.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use olm_testkit::TestCluster;

/// Upstream's operators, stopped when dropped.
pub struct UpstreamOlm {
    children: Vec<tokio::process::Child>,
}

/// The operator-lifecycle-manager version whose binaries and CRDs are used.
pub const VERSION: &str = "v0.46.0";

impl UpstreamOlm {
    /// Apply upstream's CRDs and start its `olm` and `catalog` operators from `bin` against
    /// `cluster`, watching `global` as the global catalog namespace; logs go to `logs`.
    pub async fn start(cluster: &TestCluster, bin: &Path, global: &str, logs: &Path) -> anyhow::Result<UpstreamOlm> {
        for name in ["olm", "catalog"] {
            if !bin.join(name).is_file() {
                bail!("{}: upstream's `{name}` operator is missing (olm-bench builds it into ~/.cache/olm-dev/bin/olm-{VERSION})", bin.display());
            }
        }
        let crds = module_dir()?.join("deploy/chart/crds");
        cluster
            .kubectl(&["apply", "--server-side", "--force-conflicts", "-f", crds.to_str().context("CRD path")?])
            .await
            .with_context(|| format!("apply upstream's CRDs from {}", crds.display()))?;
        std::fs::create_dir_all(logs)?;
        let kubeconfig = cluster.kubeconfig();
        let log = |name: &str| -> anyhow::Result<std::fs::File> { Ok(std::fs::File::create(logs.join(format!("upstream-{name}.log")))?) };
        let layout = cluster.layout();
        // Both operators serve health and metrics on :8080 unless given TLS (then :8443): the
        // olm operator gets the API server's serving certificate so that they do not collide.
        let olm = tokio::process::Command::new(bin.join("olm"))
            .env("KUBECONFIG", &kubeconfig)
            .args(["--namespace", global, "--writeStatusName", "", "--writePackageServerStatusName", ""])
            .arg("--tls-cert")
            .arg(layout.pki_file("apiserver.crt"))
            .arg("--tls-key")
            .arg(layout.pki_file("apiserver.key"))
            .stdout(log("olm")?)
            .stderr(log("olm")?)
            .kill_on_drop(true)
            .spawn()
            .context("start upstream's olm operator")?;
        let catalog = tokio::process::Command::new(bin.join("catalog"))
            .env("KUBECONFIG", &kubeconfig)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(["--namespace", global, "--writeStatusName", ""])
            .stdout(log("catalog")?)
            .stderr(log("catalog")?)
            .kill_on_drop(true)
            .spawn()
            .context("start upstream's catalog operator")?;
        Ok(UpstreamOlm { children: vec![olm, catalog] })
    }

    /// Whether both operators still run (a crash is the run's failure, not a package's).
    pub fn running(&mut self) -> bool {
        self.children.iter_mut().all(|c| matches!(c.try_wait(), Ok(None)))
    }
}

/// operator-lifecycle-manager's module in the olm-dev Go cache (olm-bench downloads it).
fn module_dir() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let dir = PathBuf::from(home).join(format!(".cache/olm-dev/go/mod/github.com/operator-framework/operator-lifecycle-manager@{VERSION}"));
    if dir.is_dir() { Ok(dir) } else { bail!("{} is missing: run olm-bench once (it downloads upstream's module)", dir.display()) }
}
