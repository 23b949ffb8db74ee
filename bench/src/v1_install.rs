//! `olm-bench --v1-vs-v0`: one operator installed through OLM v1's API (a ClusterExtension) and
//! through OLM v0's (a Subscription) on the same engine: `olm dev up` on a private control plane,
//! a fresh one for every install. Per install: from the object's ADDED event to its installed
//! state (ClusterExtension `Installed` True; CSV `Succeeded`) and to the operator's Deployment
//! `Available` True, all as they arrive on `kubectl get -w` streams started before it, and
//! `olm run`'s memory 2 s later. Both read the same catalog image from the same registry (v0
//! through its CatalogSource, v1 through a ClusterCatalog Serving before the clock starts).
//! Upstream's v1 (operator-controller and catalogd) is not in it: its Deployments need real
//! pods; docs/olmv1.md has what upstream's own e2e suite shows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::dev_env::{CONTROLLERS, DevEnv};
use crate::e2e::{Watches, wait_for, watch_args};
use crate::figures::median;
use crate::serve::memory_mib;

pub const USAGE: &str = "olm-bench --v1-vs-v0 [--runs N] [--out FILE]";
/// Below the ephemeral range (32768 up), where an outgoing connection may hold a port.
const PORT_BASE: u16 = 23000;
const PACKAGE: &str = "etcd";
const CHANNEL: &str = "clusterwide-alpha";
const HEAD: &str = "etcdoperator.v0.9.4-clusterwide";
const DEPLOYMENT: &str = "etcd-operator";
/// Where the v0 install goes (`olm dev up`'s AllNamespaces OperatorGroup) and the v1 one.
const V0_NAMESPACE: &str = "operators";
const V1_NAMESPACE: &str = "etcd-v1";
const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    V0,
    V1,
}

impl Api {
    fn label(self) -> &'static str {
        match self {
            Api::V0 => "v0: Subscription → CSV Succeeded",
            Api::V1 => "v1: ClusterExtension → Installed",
        }
    }
}

/// One install, times since the object's ADDED event.
struct Run {
    installed: Duration,
    available: Duration,
    rss_mib: f64,
}

pub fn main(workspace: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut runs = 5usize;
    let mut out = workspace.join("target/olm-bench/v1-vs-v0.md");
    let mut rest = args.iter().filter(|a| *a != "--v1-vs-v0");
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--runs" => runs = rest.next().and_then(|n| n.parse().ok()).filter(|n| *n > 0).context("--runs takes a positive number")?,
            "--out" => out = PathBuf::from(rest.next().context("--out takes a file")?),
            other => bail!("unknown argument {other:?}; usage: {USAGE}"),
        }
    }
    let olm = std::env::var_os("OLM_BENCH_OLM").map_or_else(|| workspace.join("target/release/olm"), PathBuf::from);
    let olm = crate::tools::private_copy(&olm, &workspace.join("target/olm-bench"), "olm-v1-vs-v0")?;
    let catalog = workspace.join("catalogs/community");
    let started = Instant::now();
    let mut results: Vec<(Api, Vec<Run>)> = vec![(Api::V0, Vec::new()), (Api::V1, Vec::new())];
    // Alternating, so that a slow spell of the machine falls on both.
    for i in 0..runs {
        for (api, done) in &mut results {
            eprintln!("v1-vs-v0: run {} of {runs}, {}", i + 1, api.label());
            let work = workspace.join(format!("target/olm-bench/v1-vs-v0/{}-{i}", if *api == Api::V0 { "v0" } else { "v1" }));
            let env = DevEnv::fresh(&work, &olm, &catalog, PORT_BASE)?;
            env.up()?;
            let run = install(&env, *api, &work);
            let _ = env.down();
            done.push(run?);
        }
    }
    let commit = crate::large_scale_report::git(workspace, &["rev-parse", "--short", "HEAD"]);
    let when = format!("on {} at commit `{commit}`", jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"));
    let text = markdown(&results, &format!("bench/run.sh --v1-vs-v0 --runs {runs}"), &when, started.elapsed());
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
    println!("{text}");
    Ok(())
}

fn install(env: &DevEnv, api: Api, work: &Path) -> anyhow::Result<Run> {
    let image = env.kubectl(&["get", "catalogsource", "community", "-n", "olm", "-o", "jsonpath={.spec.image}"], None)?;
    let (namespace, kind, jsonpath, object) = match api {
        Api::V0 => (
            V0_NAMESPACE,
            "csv",
            "{.type} {.object.metadata.name} {.object.status.phase}",
            format!(
                "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: {PACKAGE}, namespace: {V0_NAMESPACE}}}\n\
                 spec: {{name: {PACKAGE}, channel: {CHANNEL}, source: community, sourceNamespace: olm, installPlanApproval: Automatic}}\n"
            ),
        ),
        Api::V1 => {
            let catalog = format!(
                "apiVersion: olm.operatorframework.io/v1\nkind: ClusterCatalog\nmetadata: {{name: community}}\nspec:\n  source:\n    type: Image\n    image: {{ref: {}}}\n",
                image.trim()
            );
            env.kubectl(&["apply", "-f", "-"], Some(&catalog))?;
            wait_for("the ClusterCatalog Serving", TIMEOUT, || {
                let serving = env.kubectl(&["get", "clustercatalog", "community", "-o", "jsonpath={.status.conditions[?(@.type==\"Serving\")].status}"], None)?;
                Ok(serving.trim() == "True")
            })?;
            env.kubectl(&["create", "namespace", V1_NAMESPACE], None)?;
            env.kubectl(&["create", "serviceaccount", "installer", "-n", V1_NAMESPACE], None)?;
            env.kubectl(&["create", "clusterrolebinding", "etcd-installer", "--clusterrole=cluster-admin", &format!("--serviceaccount={V1_NAMESPACE}:installer")], None)?;
            (
                V1_NAMESPACE,
                "clusterextension",
                "{.type} {.object.metadata.name} {.object.status.conditions[?(@.type==\"Installed\")].status}",
                format!(
                    "apiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata: {{name: {PACKAGE}}}\nspec:\n  namespace: {V1_NAMESPACE}\n  serviceAccount: {{name: installer}}\n  \
                     source:\n    sourceType: Catalog\n    catalog: {{packageName: {PACKAGE}, channels: [{CHANNEL}]}}\n"
                ),
            )
        }
    };
    let installed_when = match api {
        Api::V0 => format!("{HEAD} Succeeded"),
        Api::V1 => format!("{PACKAGE} True"),
    };
    let streams = [
        watch_args(kind, (api == Api::V0).then_some(namespace), jsonpath),
        watch_args("deployment", Some(namespace), "{.type} {.object.metadata.name} {.object.status.conditions[?(@.type==\"Available\")].status}"),
        watch_args(if api == Api::V0 { "subscription" } else { "clusterextension" }, (api == Api::V0).then_some(namespace), "{.type} {.object.metadata.name}"),
    ];
    let watches = Watches::start(&env.layout, &streams, &work.join("watch.log"))?;
    // Let the watches be established before the object exists.
    std::thread::sleep(Duration::from_millis(700));
    while watches.rx.try_recv().is_ok() {}
    env.kubectl(&["apply", "-f", "-"], Some(&object))?;
    let deadline = Instant::now() + TIMEOUT;
    let (mut created, mut installed, mut available) = (None, None, None);
    while installed.is_none() || available.is_none() {
        match watches.rx.recv_timeout(Duration::from_millis(500)) {
            Ok((at, stream, line)) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                let rest = words.get(1..).unwrap_or_default().join(" ");
                match stream {
                    2 if words.first() == Some(&"ADDED") && rest == PACKAGE => created = created.or(Some(at)),
                    0 if rest == installed_when => installed = installed.or(Some(at)),
                    1 if rest == format!("{DEPLOYMENT} True") => available = available.or(Some(at)),
                    _ => {}
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the kubectl watches ended"),
        }
        if Instant::now() > deadline {
            bail!("{} not done after {} s (installed {installed:?}, Deployment available {available:?}); see {}", api.label(), TIMEOUT.as_secs(), work.display());
        }
    }
    drop(watches);
    let created = created.context("the object's ADDED event never arrived")?;
    std::thread::sleep(Duration::from_secs(2));
    let (rss_mib, _) = memory_mib(env.pid(CONTROLLERS)?)?;
    let since = |at: Option<Instant>| at.map(|at| at.saturating_duration_since(created)).unwrap_or_default();
    Ok(Run { installed: since(installed), available: since(available), rss_mib })
}

fn markdown(results: &[(Api, Vec<Run>)], command: &str, when: &str, elapsed: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## OLM v1's API beside v0's: one operator (ours only, a separate run)\n");
    let _ = writeln!(s, "Run {when} in {:.0} s with:\n\n```sh\n{command}\n```\n", elapsed.as_secs_f64());
    let _ = writeln!(
        s,
        "etcd from the bundled catalog (channel `{CHANNEL}`, head `{HEAD}`), installed for all namespaces through a Subscription \
         (in `{V0_NAMESPACE}`, `olm dev up`'s global OperatorGroup) and through a ClusterExtension (into `{V1_NAMESPACE}`, as a \
         ServiceAccount bound to cluster-admin), each on a fresh `olm dev up` (private control plane, kwok node), alternating. \
         Times are from the object's ADDED event to the first event showing the state, on `kubectl get -w` streams started \
         before it; `olm run`'s RSS 2 s after. The median run of each; every run listed. `Installed` says the bundle's \
         objects are applied (as upstream's does); a CSV is `Succeeded` once its Deployment is Available too: the operator \
         Deployment's column is the like-for-like one.\n"
    );
    let _ = writeln!(s, "| API | installed (median) | operator Deployment Available (median) | `olm run` RSS (median) | every run: installed / Available |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (api, runs) in results {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let every: Vec<String> = runs.iter().map(|r| format!("{:.0} / {:.0} ms", ms(r.installed), ms(r.available))).collect();
        let _ = writeln!(
            s,
            "| {} | {:.0} ms | {:.0} ms | {:.1} MiB | {} |",
            api.label(),
            median(runs.iter().map(|r| ms(r.installed)).collect()),
            median(runs.iter().map(|r| ms(r.available)).collect()),
            median(runs.iter().map(|r| r.rss_mib).collect()),
            every.join(", ")
        );
    }
    s
}
