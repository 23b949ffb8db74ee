//! What the OLM v1 suites share: an `olm run` of their own and a ClusterCatalog manifest.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context as _;
use olm_testkit::TestCluster;

/// `olm run` against the test cluster, its ClusterCatalog content on a port of its own; killed
/// when dropped.
pub struct OlmRun {
    child: tokio::process::Child,
}

impl OlmRun {
    pub async fn start(cluster: &TestCluster, cache: &Path) -> anyhow::Result<OlmRun> {
        let child = tokio::process::Command::new(crate::olm_bin())
            .args(["run", "--metrics-addr=127.0.0.1:0", "--cluster-catalog-addr=127.0.0.1:0"])
            .arg(format!("--kubeconfig={}", cluster.kubeconfig().display()))
            .arg(format!("--image-cache-dir={}", cache.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("start olm run")?;
        Ok(OlmRun { child })
    }
}

impl Drop for OlmRun {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A ClusterCatalog of `image`, polled every `poll_minutes` when given.
pub fn cluster_catalog(name: &str, image: &str, poll_minutes: Option<u32>) -> String {
    let poll = poll_minutes.map(|m| format!("\n      pollIntervalMinutes: {m}")).unwrap_or_default();
    format!(
        "apiVersion: olm.operatorframework.io/v1\nkind: ClusterCatalog\nmetadata:\n  name: {name}\nspec:\n  source:\n    type: Image\n    image:\n      ref: {image}{poll}\n"
    )
}

