//! §4 of BENCHMARKS.md, in the same run as the rest: operators and catalogs from images
//! (tests/examples/image_bench, run as its own process: it needs every controller in process,
//! which this harness does not link) and, behind `--unpack-rounds N` because it needs root and a
//! real node, upstream's unpack Job against our in-process pull (unpack.rs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::tools::Tools;
use crate::unpack::{self, UnpackReport};

/// What §4 measured; `None` where the run skipped it.
pub struct Images {
    /// The image benchmark's Markdown, and how long it ran.
    pub images: Option<Result<(String, Duration), String>>,
    pub unpack: Option<Result<UnpackReport, String>>,
}

/// The image benchmark's binary: `OLM_BENCH_IMAGE_BENCH`, else `examples/image_bench` beside this
/// program (bench/run.sh builds it there).
fn image_bench_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_BENCH_IMAGE_BENCH") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("locating olm-bench")?;
    let path = exe.parent().context("olm-bench's directory")?.join("examples/image_bench");
    if !path.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release -p olm-e2e --example image_bench` (bench/run.sh does), or pass --images-rounds 0",
            path.display()
        );
    }
    Ok(path)
}

fn run_image_bench(tools: &Tools, work: &Path, fbc: &Path, rounds: usize) -> anyhow::Result<(String, Duration)> {
    let binary = image_bench_binary()?;
    let markdown = work.join("images.md");
    let log = work.join("images.log");
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    let status = Command::new(&binary)
        .args(["--rounds", &rounds.to_string(), "--fbc"])
        .arg(fbc)
        .arg("--markdown")
        .arg(&markdown)
        .env("OLM_BIN", &tools.olm)
        .current_dir(&tools.workspace)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .with_context(|| format!("running {}", binary.display()))?;
    if !status.success() {
        bail!("{} failed ({status}); its output is in {}", binary.display(), log.display());
    }
    let text = std::fs::read_to_string(&markdown).with_context(|| format!("reading {}", markdown.display()))?;
    Ok((text, started.elapsed()))
}

/// Runs what §4 asks for: `image_rounds` rounds of the image benchmark (0 skips it) and
/// `unpack_rounds` of the real-node comparison (0 skips it).
pub fn run(tools: &Tools, work: &Path, fbc: &Path, image_rounds: usize, unpack_rounds: usize) -> Images {
    let images = (image_rounds > 0).then(|| {
        eprintln!("images: tests/examples/image_bench, {image_rounds} rounds");
        run_image_bench(tools, work, fbc, image_rounds).map_err(|e| format!("{e:#}"))
    });
    let unpack = (unpack_rounds > 0).then(|| {
        eprintln!("images: unpack comparison on a real node, {unpack_rounds} rounds");
        unpack::run(tools, &tools.workspace, work, unpack_rounds).map_err(|e| format!("{e:#}"))
    });
    Images { images, unpack }
}

/// The section.
pub fn section(o: &mut String, images: Option<&Images>) -> std::fmt::Result {
    writeln!(o, "## 4. Operators and catalogs from images\n")?;
    let Some(images) = images else {
        return writeln!(o, "Skipped in this run (`--no-e2e` or `--e2e-only`).\n");
    };
    match &images.images {
        None => writeln!(o, "The image benchmark was skipped in this run (`--images-rounds 0`).\n")?,
        Some(Err(e)) => writeln!(o, "The image benchmark failed: {e}\n")?,
        Some(Ok((text, took))) => writeln!(o, "{}\n\nIt ran for {:.0} s.\n", text.trim_end(), took.as_secs_f64())?,
    }
    writeln!(o, "### Side by side on a real node: upstream's unpack Job against our in-process pull\n")?;
    match &images.unpack {
        None => writeln!(o, "Not run in this run: it needs root and a real node. Run `sudo bench/run.sh --unpack-rounds 5` (or `target/release/olm-bench --unpack 5` for this part alone).\n")?,
        Some(Err(e)) => writeln!(o, "The comparison failed: {e}\n")?,
        Some(Ok(report)) => {
            writeln!(o, "{UNPACK_METHOD}\n")?;
            if let Some(summary) = unpack_summary(report) {
                writeln!(o, "{summary}\n")?;
            }
            writeln!(o, "{}", unpack::markdown(report))?;
        }
    }
    writeln!(o, "### Compared with upstream's unpack Job and catalog Pod\n\n{UPSTREAM_FROM_CODE}\n")
}

/// "Median X against Y: N× faster, with A MiB against B MiB."
fn unpack_summary(report: &UnpackReport) -> Option<String> {
    let side = |prefix: &str| report.sides.iter().find(|s| s.label.starts_with(prefix));
    let (ours, theirs) = (side("ours")?, side("upstream")?);
    let median = |installs: &[Duration]| {
        let mut v = installs.to_vec();
        v.sort();
        v.get(v.len() / 2).map(Duration::as_secs_f64)
    };
    let (ours_s, theirs_s) = (median(&ours.installs)?, median(&theirs.installs)?);
    let memory = |rss: &[(String, f64)]| rss.iter().map(|(_, m)| m).sum::<f64>();
    Some(format!(
        "**Median {theirs_s:.2} s against {ours_s:.2} s: {:.1}× faster, with {:.1} MiB (`olm run` and `olm catalog serve`) against {:.1} MiB (upstream's two operators and `opm serve`).**",
        theirs_s / ours_s,
        memory(&ours.rss),
        memory(&theirs.rss),
    ))
}

const UNPACK_METHOD: &str = "A private olm-dev control plane **with its real kubelet node** (containerd, `olm dev up --real-node`), a local registry, etcd 0.9.4 pushed as a bundle image and a catalog naming it by digest with only `olm.csv.metadata` (so upstream must unpack it and we must pull it), served by `opm serve` (upstream) or `olm catalog serve` (ours) as the CatalogSource's gRPC address. Upstream's catalog operator runs with `--util-image` and `--opmImage` pointing at images built here: `cpb` (built from its module) plus busybox-static as `/bin/cp`, and `opm` on the distroless-like base of `olm dev image build`. Its unpack Job's pods run as real containers on the real node; the operator's own Deployment stays on kwok for both sides. Every round is cold: fresh processes; upstream's unpack ConfigMap and Job of the round before deleted and the bundle image removed from the node's containerd; our image cache a fresh directory. Time = Subscription created → CSV Succeeded, from watches; RSS read right after.";

const UPSTREAM_FROM_CODE: &str = "What upstream does, from its code (the measured comparison is the section above):

- **Bundles named by image** (operator-lifecycle-manager pkg/controller/bundle/bundle_unpacker.go): for each bundle the catalog operator creates a ConfigMap, a Role, a RoleBinding and a Job whose Pod runs two init containers (one copies a copy tool out of the util image, one runs the bundle image itself with `imagePullPolicy: Always` to copy its content into an emptyDir) and then `opm alpha bundle extract`, which writes the manifests into the ConfigMap; the InstallPlan waits for the Job to complete and reads the ConfigMap. That is Pod scheduling, three container starts, the kubelet going to the registry for the bundle image on every unpack (`Always`) and for the util and opm images when the node lacks them, and several API writes, against one in-process pull here. The Job's deadline defaults to 10 minutes ([olm-docs PR #325](https://github.com/operator-framework/olm-docs/pull/325), troubleshooting page). No published measurement of how long an unpack Job takes was found (searched operator-lifecycle-manager, operator-registry and olm-docs issues and PRs); the reports found are of Jobs exceeding the deadline (e.g. [operator-lifecycle-manager PR #2093](https://github.com/operator-framework/operator-lifecycle-manager/pull/2093), [community-operators-prod #214](https://github.com/redhat-openshift-ecosystem/community-operators-prod/issues/214)).
- **Catalogs from images**: upstream runs a registry Pod from `spec.image` (`opm serve /configs`) and connects to it over gRPC; §1 measures `opm serve`'s own start on the same catalog, before any Pod scheduling, image pull or connection. Published figures for real clusters, different catalogs and machines, so only orders of magnitude: \"startup times of catalog pod around 15 seconds\" for the IBM Operator catalog with a pre-built cache ([operator-registry PR #1005](https://github.com/operator-framework/operator-registry/pull/1005), 2022-08-17); a mirrored catalog of about 45–70 operators \"coming up in about ~42 seconds\" ([oc-mirror PR #899](https://github.com/openshift/oc-mirror/pull/899), 2024-08-06); the kubelet pulling quay.io/operatorhubio/catalog:latest \"in 16.469534578s\" before the Pod failed its startup probe ([operator-lifecycle-manager #3269](https://github.com/operator-framework/operator-lifecycle-manager/issues/3269)); upstream's catalog Pod startup probe allows about 150 s ([operator-lifecycle-manager PR #2919](https://github.com/operator-framework/operator-lifecycle-manager/pull/2919)).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unpack::UnpackSide;

    #[test]
    fn the_summary_compares_the_medians_and_the_memory_of_both_sides() {
        let side = |label, ms: &[u64], rss: &[f64]| UnpackSide {
            label,
            installs: ms.iter().map(|m| Duration::from_millis(*m)).collect(),
            rss: rss.iter().map(|m| ("p".to_owned(), *m)).collect(),
            timeline: Vec::new(),
        };
        let report = UnpackReport {
            bundle_image: String::new(),
            util_image: String::new(),
            opm_image: String::new(),
            sides: vec![side("upstream (x)", &[12_000, 8_000, 10_000], &[60.0, 80.0]), side("ours (y)", &[900, 500, 1_000], &[20.0, 30.0])],
        };
        assert_eq!(
            unpack_summary(&report).as_deref(),
            Some("**Median 10.00 s against 0.90 s: 11.1× faster, with 50.0 MiB (`olm run` and `olm catalog serve`) against 140.0 MiB (upstream's two operators and `opm serve`).**")
        );
        let mut one_side = report;
        one_side.sides.pop();
        assert_eq!(unpack_summary(&one_side), None);
    }
}
