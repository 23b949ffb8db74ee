//! Bundles from images, side by side on a real node (issues #19 and #17): upstream's catalog
//! operator unpacking a bundle through its Job (util image with `cpb`, the bundle image itself,
//! `opm alpha bundle extract` writing a ConfigMap) against `olm run` pulling the same image
//! in-process. Same private control plane (with olm-dev's real kubelet node, where the unpack
//! Job's pods run as real containers), same registry, same bundle, same catalog content.
//!
//! Each round is cold for both sides: fresh processes; upstream's unpack ConfigMap and Job from
//! the round before deleted and the bundle image removed from the node's containerd; our image
//! cache a fresh directory. Time = Subscription created → CSV Succeeded (the e2e part's watches).
//! Needs root (the real node, buildah).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::e2e::{self, GLOBAL_NAMESPACE, Impl, Selection};
use crate::kubectl::kubectl;
use crate::tools::Tools;

/// Its own port base: apart from `olm dev up` (28000), the tests (29000..) and the e2e part; below
/// the ephemeral range like every base (see upstream_e2e's PORT_BASE).
const PORT_BASE: u16 = 24000;
/// The bundle every round installs (the repository's etcd 0.9.4).
const BUNDLE: &str = "crates/olm-registry/testdata/bundles/etcd/0.9.4";
const CSV: &str = "etcdoperator.v0.9.4";

/// One side's rounds.
pub struct UnpackSide {
    pub label: &'static str,
    pub installs: Vec<Duration>,
    /// Controllers' RSS (MiB) after each round's install, by process.
    pub rss: Vec<(String, f64)>,
    /// The median round's timeline.
    pub timeline: Vec<(String, Duration)>,
}

/// What the section reports.
pub struct UnpackReport {
    pub bundle_image: String,
    pub util_image: String,
    pub opm_image: String,
    pub sides: Vec<UnpackSide>,
}

fn layout(work: &Path) -> anyhow::Result<olm_dev::Layout> {
    let mut layout = olm_dev::Layout::from_env().context("olm-dev layout")?;
    layout.state_dir = work.join("cluster-unpack");
    layout.set_port_base(PORT_BASE).context("port base")?;
    for port in [layout.ports.etcd_client, layout.ports.apiserver, layout.host_ports.registry] {
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            bail!("port {port} (base {PORT_BASE}) is in use; the unpack benchmark's control plane needs the range free");
        }
    }
    Ok(layout)
}

fn olm(tools: &Tools, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(&tools.olm).args(args).output().context("running olm")?;
    if !out.status.success() {
        bail!("olm {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// busybox-static's `/bin/busybox`, which answers as `cp` (upstream's util init container runs
/// `/bin/cp -Rv /bin/cpb /util/cpb`).
fn busybox(layout: &olm_dev::Layout, progress: &olm_dev::Progress) -> anyhow::Result<PathBuf> {
    const BUSYBOX: &str = "/bin/busybox";
    olm_dev::ensure_debian_packages(layout, progress, "unpack-bench", &[("busybox-static", BUSYBOX)])?;
    Ok(PathBuf::from(BUSYBOX))
}

/// The catalog both sides serve: etcd 0.9.4 named by its image only (`olm.csv.metadata`, no
/// `olm.bundle.object`), so upstream must unpack it and we must pull it.
fn write_catalog(tools: &Tools, workspace: &Path, work: &Path, bundle_image: &str) -> anyhow::Result<PathBuf> {
    let bundle = workspace.join(BUNDLE);
    let rendered = olm(
        tools,
        &["catalog", "render", &bundle.to_string_lossy(), "--image", bundle_image, "--migrate-level", "bundle-object-to-csv-metadata", "-o", "json"],
    )?;
    let dir = work.join("unpack-catalog");
    std::fs::create_dir_all(dir.join("etcd"))?;
    let package = r#"{"schema":"olm.package","name":"etcd","defaultChannel":"singlenamespace-alpha"}"#;
    let channel = format!(r#"{{"schema":"olm.channel","package":"etcd","name":"singlenamespace-alpha","entries":[{{"name":"{CSV}"}}]}}"#);
    std::fs::write(dir.join("etcd/catalog.json"), format!("{package}\n{channel}\n{rendered}\n"))?;
    Ok(dir)
}

/// Runs the benchmark: `rounds` cold installs per side.
pub fn run(tools: &Tools, workspace: &Path, work: &Path, rounds: usize) -> anyhow::Result<UnpackReport> {
    let layout = layout(work)?;
    let progress = olm_dev::Progress::new();
    olm_dev::up_with(&layout, &progress, olm_dev::UpOptions { real_node: true }).context("starting the control plane with a real node")?;
    let registry = olm_dev::registry::ensure_dev_registry(&layout, &progress).context("starting the registry")?.addr;
    let result = run_on(tools, workspace, work, &layout, &progress, &registry, rounds);
    let _ = olm_dev::registry::stop_dev_registry(&layout, &progress, true);
    let _ = olm_dev::down(&layout, &progress, true);
    result
}

fn run_on(
    tools: &Tools,
    workspace: &Path,
    work: &Path,
    layout: &olm_dev::Layout,
    progress: &olm_dev::Progress,
    registry: &str,
    rounds: usize,
) -> anyhow::Result<UnpackReport> {
    let util_image = olm_dev::build_small_image(
        layout,
        progress,
        olm_dev::SmallBase::Scratch,
        &[
            olm_dev::SmallFile { source: busybox(layout, progress)?, dest: "/bin/cp".into() },
            olm_dev::SmallFile { source: tools.upstream_operators.join("cpb"), dest: "/bin/cpb".into() },
        ],
        &format!("{registry}/bench/olm-util:{}", tools.olm_upstream_version),
    )?;
    let opm_image = olm_dev::build_small_image(
        layout,
        progress,
        olm_dev::SmallBase::Runtime,
        &[olm_dev::SmallFile { source: tools.opm.clone(), dest: "/usr/bin/opm".into() }],
        &format!("{registry}/bench/opm:v1"),
    )?;
    let bundle_image = olm(tools, &["bundle", "push", &workspace.join(BUNDLE).to_string_lossy(), &format!("{registry}/bench/etcd-bundle:0.9.4")])?;
    let catalog_dir = write_catalog(tools, workspace, work, &bundle_image)?;
    eprintln!("unpack: util {util_image}, opm {opm_image}, bundle {bundle_image}");

    let mut sides = Vec::new();
    for imp in [Impl::Upstream, Impl::Ours] {
        let mut installs = Vec::new();
        let mut runs = Vec::new();
        for round in 1..=rounds.max(1) {
            let extra = match imp {
                Impl::Upstream => vec![format!("--util-image={util_image}"), format!("--opmImage={opm_image}")],
                Impl::Ours => vec![format!("--image-cache-dir={}", work.join(format!("unpack-cache-{round}")).display())],
            };
            let (install, rss) = round_of(imp, tools, layout, work, &catalog_dir, &bundle_image, round, &extra)?;
            eprintln!("  [unpack {}] round {round}: {} ms", imp.label(), install.install.as_millis());
            installs.push(install.install);
            runs.push((install, rss));
        }
        runs.sort_by_key(|(i, _)| i.install);
        let (median, rss) = runs.swap_remove(runs.len() / 2);
        sides.push(UnpackSide { label: imp.label(), installs, rss, timeline: median.timeline });
    }
    Ok(UnpackReport { bundle_image, util_image, opm_image, sides })
}

/// The real node's containerd socket (olm-dev keeps it under the state directory).
fn containerd_socket(layout: &olm_dev::Layout) -> PathBuf {
    layout.state_dir.join("node/containerd/containerd.sock")
}

/// Everything of the round before that would make this one warm, gone.
fn make_cold(layout: &olm_dev::Layout, bundle_image: &str) {
    let label = "operatorframework.io/bundle-unpack-ref";
    for kind in ["job", "configmap"] {
        let _ = kubectl(layout, &["delete", kind, "-n", GLOBAL_NAMESPACE, "-l", label, "--wait=true", "--timeout=60s"], None);
    }
    let _ = kubectl(layout, &["delete", "pods", "-n", GLOBAL_NAMESPACE, "--all", "--wait=true", "--timeout=60s"], None);
    let _ = Command::new("ctr")
        .arg("--address")
        .arg(containerd_socket(layout))
        .args(["-n", "k8s.io", "images", "rm", bundle_image])
        .output();
}

#[allow(clippy::too_many_arguments)]
fn round_of(
    imp: Impl,
    tools: &Tools,
    layout: &olm_dev::Layout,
    work: &Path,
    catalog_dir: &Path,
    bundle_image: &str,
    round: usize,
    extra: &[String],
) -> anyhow::Result<(e2e::Install, Vec<(String, f64)>)> {
    e2e::install_crds(imp, tools, layout, work)?;
    kubectl(layout, &["create", "namespace", GLOBAL_NAMESPACE], None).ok();
    // The unpack Job's pods (in the catalog's namespace) run on the real node; the operator's
    // own Deployment (its image cannot exist here) stays on kwok.
    let mut annotate = vec!["annotate", "--overwrite", "namespace", GLOBAL_NAMESPACE];
    let annotations = olm_dev::real_node_namespace_annotations();
    annotate.extend(annotations.iter().map(String::as_str));
    kubectl(layout, &annotate, None)?;
    make_cold(layout, bundle_image);
    let ns = format!("unpack-{}-{round}", if imp == Impl::Upstream { "upstream" } else { "ours" });
    let mut started = e2e::start_with(imp, tools, layout, work, catalog_dir, &format!("unpack-{round}"), extra)?;
    let source = format!("unpack-{round}");
    kubectl(layout, &["apply", "-f", "-"], Some(&e2e::catalog_source(&source, &started.grpc_addr)))?;
    let namespace_yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: {ns}}}\nspec: {{targetNamespaces: [{ns}]}}\n");
    kubectl(layout, &["apply", "-f", "-"], Some(&namespace_yaml))?;
    e2e::wait_catalog_ready(layout, &source)?;
    let result = e2e::time_install(layout, &ns, &source, CSV, &mut started.procs, Duration::from_secs(600), &work.join(format!("unpack-{ns}")));
    let rss = started.procs.iter().map(|p| (p.label.clone(), p.memory().0)).collect();
    e2e::cleanup(layout, &Selection::Names(vec![ns]), started.procs, "etcd.database.coreos.com", Duration::from_secs(120));
    Ok((result?, rss))
}

fn median_ms(values: &[Duration]) -> f64 {
    crate::figures::median(values.iter().map(|d| d.as_secs_f64() * 1000.0).collect())
}

/// The report as a Markdown section.
pub fn markdown(report: &UnpackReport) -> String {
    let mut out = String::new();
    out.push_str("| side | median | min | max | every round (ms) | RSS after the install (MiB) |\n|---|---|---|---|---|---|\n");
    for side in &report.sides {
        let ms: Vec<String> = side.installs.iter().map(|d| d.as_millis().to_string()).collect();
        let min = side.installs.iter().min().map_or(0, |d| d.as_millis());
        let max = side.installs.iter().max().map_or(0, |d| d.as_millis());
        let rss: Vec<String> = side.rss.iter().map(|(l, m)| format!("{l} {m:.1}")).collect();
        out.push_str(&format!("| {} | **{:.0} ms** | {min} ms | {max} ms | {} | {} |\n", side.label, median_ms(&side.installs), ms.join(", "), rss.join("; ")));
    }
    for side in &report.sides {
        out.push_str(&format!("\nTimeline of the median round, {} (ms after the Subscription was created):\n\n", side.label));
        for (step, at) in &side.timeline {
            out.push_str(&format!("- {} ms: {step}\n", at.as_millis()));
        }
    }
    out.push_str(&format!("\nImages: bundle `{}`; upstream's util image `{}` (busybox-static as `/bin/cp`, upstream's `cpb`), opm image `{}` (opm on the distroless-like base of `olm dev image build`).\n", report.bundle_image, report.util_image, report.opm_image));
    out
}
