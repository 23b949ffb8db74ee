//! `olm-bench --large-scale`: options, the run (large_scale.rs), and its report, a section for
//! BENCHMARKS.md (a separate run: its own command and commit).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::large_scale::{self, LargeOptions, LargeRun, OPERATORS, Variant};

pub const USAGE: &str = "olm-bench --large-scale [--namespaces N] [--subscriptions N] [--copies on|off|both] [--catalog-updates SECS] [--settle-timeout SECS] [--steady-after SECS] [--create-concurrency N] [--out FILE]";

/// The published upstream figures the run is set against (../shared/research/field-2026.md §6:
/// OpenShift's control-plane sizing for OLM).
const UPSTREAM_10K_IDLE_GIB: f64 = 9.9;
const UPSTREAM_10K_FIVE_OPERATORS_GIB: f64 = 21.6;

fn options(workspace: &Path, args: &[String]) -> anyhow::Result<LargeOptions> {
    let mut opts = LargeOptions {
        namespaces: 10_000,
        subscriptions: 1_000,
        copies: vec![true, false],
        catalog_updates: Duration::from_secs(120),
        settle_timeout: Duration::from_secs(3600),
        steady_after: Duration::from_secs(120),
        create_concurrency: 16,
        olm: crate::tools::find_olm(workspace)?,
        out: workspace.join("target/olm-bench/large-scale.md"),
    };
    let mut args = args.iter();
    let number = |flag: &str, v: Option<&String>| crate::whole_number(flag, v.map(String::as_str), USAGE);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--large-scale" => {}
            "--namespaces" => opts.namespaces = usize::try_from(number(a, args.next())?)?,
            "--subscriptions" => opts.subscriptions = usize::try_from(number(a, args.next())?)?,
            "--copies" => {
                opts.copies = match args.next().map(String::as_str) {
                    Some("on") => vec![true],
                    Some("off") => vec![false],
                    Some("both") => vec![true, false],
                    other => bail!("--copies takes on, off or both, not {other:?}; {USAGE}"),
                }
            }
            "--catalog-updates" => opts.catalog_updates = Duration::from_secs(number(a, args.next())?.max(10)),
            "--settle-timeout" => opts.settle_timeout = Duration::from_secs(number(a, args.next())?),
            "--steady-after" => opts.steady_after = Duration::from_secs(number(a, args.next())?),
            "--create-concurrency" => opts.create_concurrency = usize::try_from(number(a, args.next())?.max(1))?,
            "--out" => opts.out = PathBuf::from(args.next().context("--out needs a file")?),
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    Ok(opts)
}

pub fn main(workspace: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut opts = options(workspace, args)?;
    opts.olm = crate::tools::private_copy(&opts.olm, &workspace.join("target/olm-bench"), "olm-large-scale")?;
    let commit = git(workspace, &["rev-parse", "--short", "HEAD"]);
    let dirty = !git(workspace, &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let date = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string();
    let run = large_scale::run(workspace, &opts)?;
    let command = format!("bench/run.sh {}", args.join(" "));
    let text = markdown(&run, &command, &format!("{commit}{}", if dirty { " (with uncommitted changes)" } else { "" }), &date);
    if let Some(parent) = opts.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&opts.out, &text).with_context(|| format!("writing {}", opts.out.display()))?;
    println!("{text}");
    eprintln!("wrote {} in {:.0} s", opts.out.display(), run.total.as_secs_f64());
    Ok(())
}

pub(crate) fn git(workspace: &Path, args: &[&str]) -> String {
    std::process::Command::new("git")
        .args(args)
        .current_dir(workspace)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn mib(v: f64) -> String {
    format!("{v:.1} MiB")
}

/// The processes OLM runs (the rest is the control plane).
fn is_olm(name: &str) -> bool {
    name.starts_with("olm-")
}

pub fn markdown(run: &LargeRun, command: &str, commit: &str, date: &str) -> String {
    let o = &run.options;
    let mut s = String::new();
    let _ = writeln!(s, "## {} namespaces (ours only, a separate run)\n", thousands(o.namespaces));
    let _ = writeln!(
        s,
        "Run on {date} at commit `{commit}` in {:.0} s with:\n\n```sh\n{command}\n```\n",
        run.total.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "OLM as `olm dev up` runs it (`olm run`, `olm catalog serve`, `olm packageserver` behind its APIService) on a private \
         control plane with fake (kwok) nodes. {} namespaces; five real AllNamespaces operators ({}) subscribed in `operators`; \
         in {} of the namespaces an OperatorGroup and a Subscription to etcd; the catalog gets a new bundle every {} s \
         (a package nobody subscribes to: every Subscription resolves again). Objects are created by {} concurrent `kubectl create`. \
         Settled = every Subscription's CSV and the five operators Succeeded and, with copies on, a Succeeded copy of each of \
         the five in every namespace; steady = {} s later, the catalog updates going on. Each variant runs on a fresh control plane. Upstream is not in this run (its 200-namespace \
         run above took 803 s); its published figures at 10,000 namespaces are {UPSTREAM_10K_IDLE_GIB} GB idle and \
         {UPSTREAM_10K_FIVE_OPERATORS_GIB} GB with five operators (OpenShift's sizing guidance for OLM).\n",
        thousands(o.namespaces),
        OPERATORS.join(", "),
        thousands(o.subscriptions),
        o.catalog_updates.as_secs(),
        o.create_concurrency,
        o.steady_after.as_secs()
    );
    let _ = writeln!(s, "| copied CSVs | objects created in | time to settle | catalog updates until settled | copies Succeeded at settle | OLM's memory settled / steady | vs upstream's {UPSTREAM_10K_FIVE_OPERATORS_GIB} GB | etcd storage | CSVs in the cluster |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for v in &run.variants {
        match v {
            Ok(v) => {
                let olm = |f: fn(&large_scale::ProcReading) -> f64| v.processes.iter().filter(|p| is_olm(&p.name)).map(f).sum::<f64>();
                let (settled, steady) = (olm(|p| p.settled_mib), olm(|p| p.steady_mib));
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} / {} | 1/{:.0} | {} | {} |",
                    on_off(v.copies),
                    secs(v.create),
                    v.settle.as_ref().map_or_else(|e| format!("**{e}**"), |d| format!("**{}**", secs(*d))),
                    v.catalog_updates,
                    thousands(v.copied_at_settle),
                    mib(settled),
                    mib(steady),
                    UPSTREAM_10K_FIVE_OPERATORS_GIB * 1024.0 / steady.max(settled),
                    v.storage_mib.map_or("—".into(), mib),
                    thousands(v.csvs_stored),
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| failed: {} | | | | | | | | |", e.replace('\n', " ").replace('|', "\\|"));
            }
        }
    }
    for v in run.variants.iter().flatten() {
        variant_section(&mut s, v, o.namespaces);
    }
    s
}

fn on_off(copies: bool) -> &'static str {
    if copies { "on" } else { "off (OLMConfig `disableCopiedCSVs: true`)" }
}

fn variant_section(s: &mut String, v: &Variant, namespaces: usize) {
    let _ = writeln!(s, "\n### Copied CSVs {}\n", on_off(v.copies));
    let _ = writeln!(s, "| process | idle | settled | steady | peak (VmHWM) | CPU from the first create until settled |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for p in &v.processes {
        let _ = writeln!(s, "| {} | {} | {} | {} | {} | {:.0} s |", p.name, mib(p.idle_mib), mib(p.settled_mib), mib(p.steady_mib), mib(p.peak_mib), p.cpu_until_settled_s);
    }
    let per_ns = |n: u64| n as f64 / namespaces as f64;
    let _ = writeln!(s, "\nRequests from the first create until settled, per namespace (of {}), the 12 most frequent:\n", thousands(namespaces));
    let _ = writeln!(s, "| OLM's (`olm run`) | per namespace | all clients' (the API server's count) | per namespace |");
    let _ = writeln!(s, "|---|---|---|---|");
    for i in 0..12 {
        let (a, b) = (v.olm_requests.get(i), v.all_requests.get(i));
        if a.is_none() && b.is_none() {
            break;
        }
        let cell = |r: Option<&(String, u64)>| r.map_or((String::new(), String::new()), |(k, n)| (format!("{k} ({})", thousands_u64(*n)), format!("{:.2}", per_ns(*n))));
        let ((ak, an), (bk, bn)) = (cell(a), cell(b));
        let _ = writeln!(s, "| {ak} | {an} | {bk} | {bn} |");
    }
    let total = |r: &[(String, u64)]| r.iter().map(|(_, n)| n).sum::<u64>();
    let _ = writeln!(s, "| **all** ({}) | **{:.2}** | **all** ({}) | **{:.2}** |", thousands_u64(total(&v.olm_requests)), per_ns(total(&v.olm_requests)), thousands_u64(total(&v.all_requests)), per_ns(total(&v.all_requests)));
    let mut pm: Vec<Duration> = v.packagemanifests.clone();
    pm.sort();
    let _ = writeln!(
        s,
        "\n- `kubectl get packagemanifests` in a namespace (kubectl's own start included), 5 runs after settling: median {} (fastest {}, slowest {}), {} rows.",
        pm.get(pm.len() / 2).map_or("—".into(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3)),
        pm.first().map_or("—".into(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3)),
        pm.last().map_or("—".into(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3)),
        v.packagemanifest_rows
    );
    let _ = writeln!(
        s,
        "- One more Subscription at that size (a new namespace, OperatorGroup and Subscription to etcd → CSV Succeeded): {}.",
        v.probe_install.as_ref().map_or_else(|e| format!("failed: {e}"), |d| format!("{:.2} s", d.as_secs_f64()))
    );
    match &v.restart {
        Ok(r) => {
            let writes = |w: &[(String, u64)]| {
                if w.is_empty() { "none".to_owned() } else { w.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ") }
            };
            let _ = writeln!(
                s,
                "- Restart of `olm run` (SIGTERM, started again by `olm dev up`): ready (every cache synced) {} after the kill; writes in the 60 s before: {}; in the 60 s after ready: {}; its RSS then {} (peak {}).",
                secs(r.ready_after),
                writes(&r.writes_before),
                writes(&r.writes_after),
                mib(r.rss_mib),
                mib(r.peak_mib)
            );
        }
        Err(e) => {
            let _ = writeln!(s, "- Restart of `olm run`: failed: {e}");
        }
    }
}

fn thousands(n: usize) -> String {
    thousands_u64(n as u64)
}

fn thousands_u64(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands_u64(1_234_567), "1,234,567");
    }
}
