//! Running the cluster admin's commands as kubectl runs a plugin (#22): `kubectl olm …` finds
//! `kubectl-olm`, a link to this build's `olm`, on PATH.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;
use olm_testkit::TestCluster;

/// A directory holding `kubectl-olm` (a link to this build's `olm`), to put on PATH.
pub fn plugin_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::os::unix::fs::symlink(crate::olm_bin(), dir.path().join("kubectl-olm"))?;
    Ok(dir)
}

/// `kubectl olm <args>` against `cluster`, with `plugins` on PATH and no terminal: exit code,
/// stdout, stderr (also printed, so the test's log shows what an admin would see).
pub fn kubectl_olm(cluster: &TestCluster, plugins: &Path, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let path = format!("{}:{}", plugins.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(cluster.kubectl_path())
        .arg("olm")
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .context("running kubectl olm")?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    println!("$ kubectl olm {}\n{}{}", args.join(" "), text(&out.stdout), text(&out.stderr));
    Ok((out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr)))
}

/// The koku-metrics-operator CRD the koku suites install: removed before and after them, as
/// its stored versions (0.9.3 stores v1beta1) would refuse an older bundle's CRD in the next.
pub const KOKU_CRD: &str = "kokumetricsconfigs.koku-metrics-cfg.openshift.io";

/// Delete [`KOKU_CRD`] if it exists, and wait until it is gone.
pub async fn remove_koku_crd(cluster: &TestCluster) -> anyhow::Result<()> {
    cluster.kubectl(&["delete", "crd", KOKU_CRD, "--ignore-not-found", "--wait=true"]).await?;
    Ok(())
}

const CSV_FILE: &str = "manifests/koku-metrics-operator.clusterserviceversion.yaml";

/// A catalog directory of the real koku-metrics-operator bundles `versions`
/// (tests/testdata/real-bundles); `edit` changes a version's CSV.
pub fn koku_catalog(dir: &Path, versions: &[&str], edit: impl Fn(&str, &mut serde_json::Value)) -> anyhow::Result<()> {
    let real = crate::repo().join("tests/testdata/real-bundles/koku-metrics-operator");
    for version in versions {
        let to = dir.join(version);
        for sub in ["manifests", "metadata"] {
            std::fs::create_dir_all(to.join(sub))?;
            for entry in std::fs::read_dir(real.join(version).join(sub))? {
                let entry = entry?;
                std::fs::copy(entry.path(), to.join(sub).join(entry.file_name()))?;
            }
        }
        let mut csv: serde_json::Value = olm_api::yaml::from_path(to.join(CSV_FILE))?;
        edit(version, &mut csv);
        std::fs::write(to.join(CSV_FILE), serde_json::to_string_pretty(&csv)?)?;
    }
    Ok(())
}

