//! `olm-bench --upstream-e2e`: upstream OLM's own end-to-end suite (Ginkgo, test/e2e of
//! operator-lifecycle-manager at the version bench/go/resolver-driver pins) run against olm-rs on
//! a private control plane; the results become CONFORMANCE.md (upstream_e2e_report.rs).
//!
//! The suite is compiled once into the olm-dev cache (tools::build_upstream_e2e) and listed by a
//! Ginkgo dry run (`--focus` is Ginkgo's own `-ginkgo.focus`, matched against each spec's full
//! text). Each selected spec then runs in a process of its own (`-ginkgo.focus-file=FILE:LINE`)
//! with `-ginkgo.timeout` set to `--spec-timeout`, so one hang costs one spec; its JSON report
//! gives the outcome. By default only the specs that need nothing but API objects run (class A of
//! bench/upstream-e2e/classes.tsv); the others need real pods, images or upstream's own
//! Deployments and are reported as not applicable (`--all` runs them too). Specs run one at a
//! time unless `--jobs N` or `--clusters N`. Upstream runs its parallel processes on separate
//! clusters, and specs sharing one do disturb each other (a spec's teardown deletes every CRD
//! OLM installed, the other spec's too), so `--clusters N` starts N private control planes
//! with olm-rs and runs one spec at a time on each; `--jobs N` runs N at a time on each.
//! `--ci` runs only CI's subset and writes no report (upstream_e2e_ci.rs); `--build-only`
//! builds the suite into the cache and stops (CI builds it at low priority while its tests run).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::upstream_e2e_report::{self as report, Outcome, Spec, SpecResult};

pub const USAGE: &str = "olm-bench --upstream-e2e [--ci] [--build-only] [--focus REGEX] [--out FILE] [--clusters N] [--jobs N] [--spec-timeout SECS] [--budget MINUTES] [--all] [--not-passing] [--keep] [--rerender]";

/// Private state and ports: `olm dev up` uses 28000, the tests 29000-31800, the other benchmarks
/// 24000-26000; cluster N (from 0) has ports from `PORT_BASE + N * CLUSTER_PORT_STRIDE`. All below
/// the kernel's ephemeral range (32768-60999), where an outgoing connection may take a port first.
const STATE_DIR: &str = "/tmp/upstream-e2e-state";
const PORT_BASE: u16 = 20400;
/// `olm run --configmap-server-image` of the OLM under test: the olm image manifests/ name.
pub const CONFIGMAP_SERVER_IMAGE: &str = "ghcr.io/olm-rs/olm:latest";
const CLUSTER_PORT_STRIDE: u16 = 1000;
const MAX_CLUSTERS: usize = 4;
/// The suite's `-namespace` (its OperatorGroup `opgroup` is made here, once, before any spec) and
/// olm-rs's global catalog namespace (`-olmNamespace`, `-catalogNamespace`).
const TEST_NAMESPACE: &str = "operators";
const OLM_NAMESPACE: &str = "olm";

pub struct Options {
    pub focus: Option<String>,
    pub out: PathBuf,
    pub jobs: usize,
    /// Private control planes the specs are shared out to.
    pub clusters: usize,
    pub spec_timeout: Duration,
    /// No spec starts after this long; those left are "not run" (their previous rows stay).
    pub budget: Option<Duration>,
    pub all: bool,
    /// Run only the specs whose row in the report (`--out`) does not say pass.
    pub not_passing: bool,
    /// Leave the control plane running afterwards (for looking at what a spec left behind).
    pub keep: bool,
    /// Write the report again from the last run's JSON reports, running nothing.
    pub rerender: bool,
    /// Also run `kubectl operator`'s OLM v0 commands on the environment (kubectl_operator.rs)
    /// and keep what they printed in [`KUBECTL_OPERATOR_RUN`].
    pub kubectl_operator: bool,
    /// Only CI's subset (upstream_e2e_ci.rs): a failed spec once more, no report written, and
    /// an error unless every spec passed.
    pub ci: bool,
    /// Build the suite (or find it built) and stop.
    pub build_only: bool,
    pub olm: PathBuf,
}

/// Where the last `kubectl operator` run is kept (CONFORMANCE.md includes it).
pub const KUBECTL_OPERATOR_RUN: &str = "bench/kubectl-operator-run.md";

fn options(workspace: &Path, args: &[String]) -> anyhow::Result<Options> {
    let mut opts = Options {
        focus: None,
        out: workspace.join("CONFORMANCE.md"),
        jobs: 1,
        clusters: 1,
        spec_timeout: Duration::from_secs(300),
        budget: None,
        all: false,
        not_passing: false,
        keep: false,
        rerender: false,
        kubectl_operator: false,
        ci: false,
        build_only: false,
        olm: crate::tools::find_olm(workspace)?,
    };
    let mut args = args.iter();
    let number = |flag: &str, v: Option<&String>| crate::whole_number(flag, v.map(String::as_str), USAGE);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--upstream-e2e" => {}
            "--focus" => opts.focus = Some(args.next().context("--focus needs a regular expression")?.clone()),
            "--out" => opts.out = PathBuf::from(args.next().context("--out needs a file")?),
            "--jobs" => opts.jobs = usize::try_from(number(a, args.next())?.max(1))?,
            "--clusters" => opts.clusters = usize::try_from(number(a, args.next())?.clamp(1, MAX_CLUSTERS as u64))?,
            "--spec-timeout" => opts.spec_timeout = Duration::from_secs(number(a, args.next())?.max(30)),
            "--budget" => opts.budget = Some(Duration::from_secs(60 * number(a, args.next())?)),
            "--all" => opts.all = true,
            "--not-passing" => opts.not_passing = true,
            "--keep" => opts.keep = true,
            "--rerender" => opts.rerender = true,
            "--kubectl-operator" => opts.kubectl_operator = true,
            "--ci" => opts.ci = true,
            "--build-only" => opts.build_only = true,
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    Ok(opts)
}

/// What every spec needs to run: the suite, where it runs, the cluster's kubeconfig.
struct Suite {
    bin: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    reports: PathBuf,
    timeout: Duration,
    /// No spec starts after this instant.
    deadline: Option<Instant>,
}

pub fn main(workspace: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut opts = options(workspace, args)?;
    let started = Instant::now();
    // The commit of the olm binary run, taken now: a commit made during the run is not in it.
    let commit = git_commit(workspace);
    let version = crate::tools::olm_upstream_version(workspace)?;
    let (bin, dir) = crate::tools::build_upstream_e2e(&version)?;
    let built = started.elapsed();
    if opts.build_only {
        eprintln!("upstream e2e {version}: {} (built or found in {:.0} s)", bin.display(), built.as_secs_f64());
        return Ok(());
    }
    let state = PathBuf::from(STATE_DIR);
    let mut specs = list_specs(&bin, &dir, opts.focus.as_deref(), &state)?;
    if opts.ci {
        crate::upstream_e2e_ci::select(&mut specs, &crate::upstream_e2e_ci::listed(workspace)?)?;
    }
    if opts.not_passing {
        let passing = report::passing(&std::fs::read_to_string(&opts.out).unwrap_or_default());
        for spec in &mut specs {
            spec.selected &= !report::passed(&passing, spec);
        }
    }
    // CI's run keeps its reports apart: a full run's stay for `--rerender`.
    let reports = state.join(if opts.ci { "reports-ci" } else { "reports" });
    if opts.rerender {
        return rerender(&opts, specs, &reports);
    }
    let (to_run, not_run): (Vec<Spec>, Vec<Spec>) = specs.into_iter().partition(|s| s.selected && s.runnable && (opts.all || crate::upstream_e2e_report::runs_by_default(&s.class)));
    eprintln!("upstream e2e {version}: {} specs, {} to run (suite built or found in {:.0} s)", to_run.len() + not_run.len(), to_run.len(), built.as_secs_f64());
    opts.olm = crate::tools::private_copy(&opts.olm, &state, "olm")?;

    let envs: Vec<Env> = (0..opts.clusters).map(|n| Env::new(&opts.olm, &state, n)).collect();
    for env in &envs {
        let _ = env.dev(&["down", "--purge"]);
    }
    let _ = std::fs::remove_dir_all(&reports);
    std::fs::create_dir_all(&reports)?;
    let results = if to_run.is_empty() && !opts.kubectl_operator {
        Ok((Vec::new(), Vec::new()))
    } else {
        let prepared: anyhow::Result<Vec<PathBuf>> = envs
            .iter()
            .map(|env| {
                eprintln!("starting olm-rs on a private control plane (state {}, ports from {})", env.state_dir.display(), env.port_base);
                prepare_cluster(env, workspace)
            })
            .collect();
        prepared.map(|kubeconfigs| {
            if opts.kubectl_operator {
                record_kubectl_operator(workspace, &envs[0], &kubeconfigs[0]);
            }
            let deadline = opts.budget.map(|b| started + b);
            let suites: Vec<Suite> = kubeconfigs
                .into_iter()
                .map(|kubeconfig| Suite { bin: bin.clone(), dir: dir.clone(), kubeconfig, reports: reports.clone(), timeout: opts.spec_timeout, deadline })
                .collect();
            let workers: Vec<&Suite> = suites.iter().flat_map(|s| std::iter::repeat_n(s, opts.jobs)).collect();
            let results = run_specs(&workers, to_run);
            if opts.ci { crate::upstream_e2e_ci::retry_failed(results, |specs| run_specs(&workers, specs)) } else { (results, Vec::new()) }
        })
    };
    for env in &envs {
        if opts.keep {
            eprintln!("--keep: the control plane still runs; stop it with OLM_DEV_STATE_DIR={} OLM_DEV_PORT_BASE={} {} dev down --purge", env.state_dir.display(), env.port_base, opts.olm.display());
        } else {
            let _ = env.dev(&["down", "--purge"]);
        }
    }
    let (mut results, flaky) = results?;
    if opts.ci {
        return crate::upstream_e2e_ci::verdict(&results, &flaky, started.elapsed(), &reports);
    }
    results.extend(not_run.into_iter().map(|spec| not_ran(&opts, spec)));
    let run = report::RunInfo {
        upstream_version: version,
        commit,
        date: jiff::Zoned::now().strftime("%Y-%m-%d %H:%M %Z").to_string(),
        command: command_line(args),
        jobs: opts.jobs,
        clusters: opts.clusters,
        spec_timeout: opts.spec_timeout,
        elapsed: started.elapsed(),
    };
    std::fs::write(reports.join("run.json"), serde_json::to_string_pretty(&run.to_json())?)?;
    write_report(&opts, &run, &results)
}

fn write_report(opts: &Options, run: &report::RunInfo, results: &[SpecResult]) -> anyhow::Result<()> {
    let previous = std::fs::read_to_string(&opts.out).unwrap_or_default();
    let mut text = report::render(run, results, &previous);
    // The last `kubectl operator` run (--kubectl-operator), as it printed.
    let workspace = opts.out.parent().unwrap_or(Path::new("."));
    if let Ok(run) = std::fs::read_to_string(workspace.join(KUBECTL_OPERATOR_RUN)) {
        text.push_str(&format!("\n<!-- From {KUBECTL_OPERATOR_RUN} (`--kubectl-operator` regenerates it). -->\n\n"));
        text.push_str(run.trim_start_matches(|c| c != '#'));
    }
    std::fs::write(&opts.out, &text).with_context(|| format!("writing {}", opts.out.display()))?;
    eprintln!("wrote {}", opts.out.display());
    Ok(())
}

/// A spec this run did not run: pending upstream, not applicable (a class not selected), or
/// left out by the budget.
fn not_ran(opts: &Options, spec: Spec) -> SpecResult {
    let outcome = if !spec.runnable {
        Outcome::Pending
    } else if !opts.all && !crate::upstream_e2e_report::runs_by_default(&spec.class) {
        Outcome::NotApplicable
    } else {
        Outcome::NotRun
    };
    SpecResult { spec, outcome, seconds: 0.0 }
}

/// `--rerender`: the report from the JSON reports the last run left in `reports` (for a change
/// of how reports are read or written), with that run's date, commit and command.
fn rerender(opts: &Options, specs: Vec<Spec>, reports: &Path) -> anyhow::Result<()> {
    let run_json = reports.join("run.json");
    let text = std::fs::read_to_string(&run_json).with_context(|| format!("reading {}: no finished run to render again", run_json.display()))?;
    let run = report::RunInfo::from_json(&serde_json::from_str(&text)?).context("run.json")?;
    let files: Vec<PathBuf> = std::fs::read_dir(reports)?.filter_map(|e| Some(e.ok()?.path())).collect();
    let mut results = Vec::new();
    let mut groups: Vec<(String, Vec<Spec>)> = Vec::new();
    for spec in specs {
        match groups.iter_mut().find(|(l, _)| *l == spec.location) {
            Some((_, g)) => g.push(spec),
            None => groups.push((spec.location.clone(), vec![spec])),
        }
    }
    for (location, specs) in groups {
        let suffix = format!("-{}.json", stem(&location));
        let found = files.iter().find(|f| f.file_name().is_some_and(|n| n.to_string_lossy().ends_with(&suffix)));
        let report = found.and_then(|f| serde_json::from_str::<Value>(&std::fs::read_to_string(f).ok()?).ok());
        match report {
            Some(report) => results.extend(outcomes(&report, specs, 0.0)),
            None => results.extend(specs.into_iter().map(|spec| not_ran(opts, spec))),
        }
    }
    write_report(opts, &run, &results)
}

fn stem(location: &str) -> String {
    location.replace([':', '.'], "_")
}

fn command_line(args: &[String]) -> String {
    let mut line = String::from("bench/run.sh");
    for a in args {
        line.push(' ');
        if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,".contains(c)) {
            line.push_str(a);
        } else {
            line.push_str(&format!("'{}'", a.replace('\'', "'\\''")));
        }
    }
    line
}

fn git_commit(workspace: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git").current_dir(workspace).args(args).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty { format!("{commit} (with uncommitted changes)") } else { commit }
}

/// The specs a Ginkgo dry run selects (all of them, or those `focus` matches), with their classes.
fn list_specs(bin: &Path, dir: &Path, focus: Option<&str>, state: &Path) -> anyhow::Result<Vec<Spec>> {
    std::fs::create_dir_all(state)?;
    let json = state.join("dry-run.json");
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args(["-ginkgo.dry-run", "-ginkgo.no-color"]).arg(format!("-ginkgo.json-report={}", json.display()));
    if let Some(focus) = focus {
        cmd.arg(format!("-ginkgo.focus={focus}"));
    }
    let out = cmd.stdin(Stdio::null()).output().context("running the suite's dry run")?;
    let text = std::fs::read_to_string(&json).with_context(|| {
        format!("the dry run wrote no report ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr))
    })?;
    let classes = report::classes();
    let mut specs = Vec::new();
    for r in spec_reports(&serde_json::from_str(&text)?) {
        if r.get("LeafNodeType").and_then(Value::as_str) != Some("It") {
            continue;
        }
        // In a dry run every spec --focus selects "passes"; the others are skipped.
        let state = r.get("State").and_then(Value::as_str).unwrap_or("");
        let location = leaf_location(r);
        let class = classes.get(location.as_str()).cloned().unwrap_or_else(|| "?".into());
        let pending = state == "pending" || class == "S" || class.starts_with("P:");
        specs.push(Spec { location, text: spec_text(r), class, runnable: !pending, selected: state != "skipped" });
    }
    if !specs.iter().any(|s| s.selected) {
        bail!("the dry run selected no spec (--focus {focus:?})");
    }
    Ok(specs)
}

fn spec_reports(report: &Value) -> Vec<&Value> {
    report.as_array().into_iter().flatten().filter_map(|s| s.get("SpecReports")?.as_array()).flatten().collect()
}

/// `file.go:LINE` of a spec report's It or Entry.
fn leaf_location(r: &Value) -> String {
    let l = &r["LeafNodeLocation"];
    let file = l["FileName"].as_str().unwrap_or("");
    let file = file.rsplit('/').next().unwrap_or(file);
    format!("{file}:{}", l["LineNumber"].as_u64().unwrap_or(0))
}

fn spec_text(r: &Value) -> String {
    let mut parts: Vec<&str> = r["ContainerHierarchyTexts"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    parts.extend(r["LeafNodeText"].as_str());
    parts.join(" / ")
}

/// Run `kubectl operator` (built once from the Go module proxy) on the environment and keep
/// what it printed in [`KUBECTL_OPERATOR_RUN`]; a failure to build or start it is said, and the
/// previous run is kept.
fn record_kubectl_operator(workspace: &Path, env: &Env, kubeconfig: &Path) {
    let section = env.layout().and_then(|layout| {
        let kubectl_dir = layout.kubectl().parent().map(Path::to_path_buf).context("kubectl's directory")?;
        let mut path = kubectl_dir.into_os_string();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        crate::kubectl_operator::run(&crate::kubectl_operator::build()?, kubeconfig, &path)
    });
    match section {
        Ok(section) => {
            let header = format!(
                "<!-- Written by `olm-bench --upstream-e2e --kubectl-operator` on {} against olm-rs {}. -->\n\n",
                jiff::Zoned::now().strftime("%Y-%m-%d %H:%M %Z"),
                git_commit(workspace)
            );
            let file = workspace.join(KUBECTL_OPERATOR_RUN);
            match std::fs::write(&file, header + &section) {
                Ok(()) => eprintln!("wrote {}", file.display()),
                Err(err) => eprintln!("cannot write {}: {err}", file.display()),
            }
        }
        Err(err) => eprintln!("kubectl operator did not run: {err:#}; {KUBECTL_OPERATOR_RUN} keeps the previous run"),
    }
}

/// The private environment: `olm dev up` on its own state directory and ports.
struct Env {
    olm: PathBuf,
    state_dir: PathBuf,
    log: PathBuf,
    port_base: u16,
}

impl Env {
    /// Cluster `n` (from 0): the first keeps the paths of single-cluster runs.
    fn new(olm: &Path, state: &Path, n: usize) -> Env {
        let suffix = if n == 0 { String::new() } else { format!("-{n}") };
        Env {
            olm: olm.to_path_buf(),
            state_dir: state.join(format!("state{suffix}")),
            log: state.join(format!("olm-dev{suffix}.log")),
            port_base: PORT_BASE + CLUSTER_PORT_STRIDE * u16::try_from(n).unwrap_or(0),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.olm);
        cmd.args(args).env("OLM_DEV_STATE_DIR", &self.state_dir).env("OLM_DEV_PORT_BASE", self.port_base.to_string()).stdin(Stdio::null());
        // ConfigMap catalogs get registry pods, as upstream's install makes them (the suite
        // waits on them); kwok runs them, so the image is only a name here.
        cmd.env("OLM_CONFIGMAP_SERVER_IMAGE", CONFIGMAP_SERVER_IMAGE);
        cmd
    }

    fn dev(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut full = vec!["dev"];
        full.extend_from_slice(args);
        let output = self.command(&full).output().with_context(|| format!("running olm dev {}", args.join(" ")))?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let mut log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.push_str(&format!("\n$ olm dev {}\n{text}", args.join(" ")));
        std::fs::write(&self.log, log)?;
        if !output.status.success() {
            bail!("olm dev {} failed:\n{text}", args.join(" "));
        }
        Ok(text)
    }

    fn layout(&self) -> anyhow::Result<olm_dev::Layout> {
        let mut layout = olm_dev::Layout::from_env().context("olm-dev layout")?;
        layout.state_dir.clone_from(&self.state_dir);
        layout.set_port_base(self.port_base).context("port base")?;
        Ok(layout)
    }
}

/// What the suite's BeforeSuite expects: the namespace `operators` with one reconciled
/// OperatorGroup, and a CatalogSource `operatorhubio-catalog` in the global catalog namespace
/// that is READY with `status.registryService` set (here the bundled catalog's image, which
/// `olm dev up` pushed to its registry). Returns the kubeconfig.
fn prepare_cluster(env: &Env, workspace: &Path) -> anyhow::Result<PathBuf> {
    let catalog = workspace.join("catalogs/community").display().to_string();
    env.dev(&["up", "--catalog", &catalog])?;
    let layout = env.layout()?;
    let kubectl = |args: &[&str], stdin: Option<&str>| olm_dev::kubectl(&layout, args, stdin).map_err(|e| anyhow::anyhow!("kubectl {}: {e}", args.join(" ")));
    let image = kubectl(&["get", "catalogsource", "community", "-n", OLM_NAMESPACE, "-o", "jsonpath={.spec.image}"], None)?;
    // `olm dev up` makes `operators` with its OperatorGroup `global-operators`, as upstream's
    // install does; the suite wants exactly one there.
    let mut manifests = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {TEST_NAMESPACE}\n---\n\
         apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: operatorhubio-catalog\n  namespace: {OLM_NAMESPACE}\n\
         spec:\n  sourceType: grpc\n  image: {}\n  displayName: Community Operators\n  publisher: OperatorHub.io\n",
        image.trim()
    );
    if kubectl(&["get", "operatorgroups", "-n", TEST_NAMESPACE, "-o", "name"], None).unwrap_or_default().trim().is_empty() {
        manifests.push_str(&format!("---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: opgroup\n  namespace: {TEST_NAMESPACE}\n"));
    }
    kubectl(&["apply", "-f", "-"], Some(&manifests))?;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let status = kubectl(&["get", "catalogsource", "operatorhubio-catalog", "-n", OLM_NAMESPACE, "-o", "json"], None)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|c| c["status"].clone())
            .unwrap_or(Value::Null);
        let connection = &status["connectionState"];
        if !status["registryService"].is_null() && connection["lastObservedState"] == "READY" && !connection["lastConnect"].is_null() {
            break;
        }
        if Instant::now() > deadline {
            bail!("CatalogSource {OLM_NAMESPACE}/operatorhubio-catalog is not READY with a registryService after 3 minutes: {status}");
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    Ok(layout.kubeconfig())
}

/// Run every spec, one per worker at a time (a worker is a cluster's suite), each in its own
/// process, taking the files in turn (so that a budget leaves every file some specs); specs the
/// budget leaves out are "not run".
fn run_specs(workers: &[&Suite], specs: Vec<Spec>) -> Vec<SpecResult> {
    // Specs sharing a line (table entries) run together.
    let mut groups: Vec<(String, Vec<Spec>)> = Vec::new();
    for spec in specs {
        match groups.iter_mut().find(|(l, _)| *l == spec.location) {
            Some((_, g)) => g.push(spec),
            None => groups.push((spec.location.clone(), vec![spec])),
        }
    }
    let mut by_file: Vec<VecDeque<(String, Vec<Spec>)>> = Vec::new();
    for g in groups {
        let file = g.0.split(':').next().unwrap_or("").to_owned();
        match by_file.iter_mut().find(|f| f.front().is_some_and(|(l, _)| l.starts_with(&format!("{file}:")))) {
            Some(f) => f.push_back(g),
            None => by_file.push(VecDeque::from([g])),
        }
    }
    let mut groups = Vec::new();
    while by_file.iter().any(|f| !f.is_empty()) {
        groups.extend(by_file.iter_mut().filter_map(VecDeque::pop_front));
    }
    let total = groups.len();
    let queue = Mutex::new(groups.into_iter().enumerate().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for &suite in workers.iter().take(total) {
            let (queue, done) = (&queue, &done);
            s.spawn(move || {
                loop {
                    if suite.deadline.is_some_and(|d| Instant::now() > d) {
                        break;
                    }
                    let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                    let Some((index, (location, specs))) = next else { break };
                    let begin = Instant::now();
                    let results = run_one(suite, index, &location, specs);
                    for r in &results {
                        eprintln!("[{}/{total}] {:<40} {:<12} {:>5.0} s  {}", index + 1, r.spec.location, r.outcome.word(), begin.elapsed().as_secs_f64(), r.outcome.reason());
                    }
                    if let Ok(mut d) = done.lock() {
                        d.push((index, results));
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_default();
    done.sort_by_key(|(i, _)| *i);
    let left = queue.into_inner().unwrap_or_default().into_iter().flat_map(|(_, (_, specs))| specs);
    done.into_iter().flat_map(|(_, r)| r).chain(left.map(|spec| SpecResult { spec, outcome: Outcome::NotRun, seconds: 0.0 })).collect()
}

/// Specs that wait longer than any sensible `--spec-timeout` when they pass, with the time
/// they need: catalog_e2e_test.go:1788 holds two 5-minute `Consistently` checks and waits up to
/// 8 minutes after them.
const LONG_SPECS: &[(&str, Duration)] = &[("catalog_e2e_test.go:1788", Duration::from_secs(25 * 60))];

/// The suite timeout for the spec at `location`.
fn timeout_for(suite: &Suite, location: &str) -> Duration {
    LONG_SPECS.iter().filter(|(l, _)| *l == location).map(|(_, t)| *t).fold(suite.timeout, Duration::max)
}

fn run_one(suite: &Suite, index: usize, location: &str, specs: Vec<Spec>) -> Vec<SpecResult> {
    let stem = format!("{index:03}-{}", stem(location));
    let timeout = timeout_for(suite, location);
    let json = suite.reports.join(format!("{stem}.json"));
    let log_path = suite.reports.join(format!("{stem}.log"));
    let begin = Instant::now();
    let outcome = (|| -> anyhow::Result<Value> {
        let log = std::fs::File::create(&log_path)?;
        let mut child = Command::new(&suite.bin)
            .current_dir(&suite.dir)
            .arg(format!("-kubeconfig={}", suite.kubeconfig.display()))
            .args([&format!("-namespace={TEST_NAMESPACE}"), &format!("-olmNamespace={OLM_NAMESPACE}"), &format!("-catalogNamespace={OLM_NAMESPACE}")])
            .arg(format!("-ginkgo.focus-file=/{location}"))
            .arg(format!("-ginkgo.timeout={}s", timeout.as_secs()))
            .args(["-ginkgo.v", "-ginkgo.no-color", "-ginkgo.poll-progress-after=120s", "-ginkgo.poll-progress-interval=120s"])
            .arg(format!("-ginkgo.json-report={}", json.display()))
            .env("KUBECONFIG", &suite.kubeconfig)
            .env_remove("SKIP_CLEANUP")
            .env_remove("ARTIFACT_DIR")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting e2e.test")?;
        // Ginkgo ends the suite at its timeout; a process stuck beyond that is killed.
        let hard = timeout + Duration::from_secs(120);
        while child.try_wait()?.is_none() {
            if begin.elapsed() > hard {
                let _ = child.kill();
                let _ = child.wait();
                bail!("e2e.test did not end {} s after its suite timeout; killed", 120);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let text = std::fs::read_to_string(&json).context("e2e.test wrote no JSON report")?;
        Ok(serde_json::from_str(&text)?)
    })();
    let seconds = begin.elapsed().as_secs_f64();
    match outcome {
        Ok(report) => outcomes(&report, specs, seconds),
        Err(e) => {
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_owned();
            let reason = format!("{e:#}; last log line: {last}");
            specs.into_iter().map(|spec| SpecResult { spec, outcome: Outcome::Failed { reason: reason.clone(), at: String::new() }, seconds }).collect()
        }
    }
}

/// Each spec's outcome from a run's JSON report; a failed BeforeSuite fails them all.
fn outcomes(report: &Value, specs: Vec<Spec>, seconds: f64) -> Vec<SpecResult> {
    let reports = spec_reports(report);
    let failure = |r: &Value| {
        let f = &r["Failure"];
        let message = f["Message"].as_str().unwrap_or("");
        // Gomega's first line is often just "Expected" or "Timed out after 60.000s.": take
        // lines until the sentence says something.
        let mut first = String::new();
        for line in message.lines().map(str::trim).filter(|l| !l.is_empty()).take(8) {
            if first.len() >= 60 {
                break;
            }
            if !first.is_empty() {
                first.push(' ');
            }
            first.push_str(line);
        }
        // testify's require: "Error Trace: …", then "Error: …" (and "Messages: …"), then "Test: …".
        let lines: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if let Some(e) = lines.iter().position(|l| l.starts_with("Error:")) {
            let said: Vec<&str> = lines[e..]
                .iter()
                .take_while(|l| !l.starts_with("Test:"))
                .map(|l| l.trim_start_matches("Error:").trim_start_matches("Messages:").trim())
                .collect();
            first = said.join(" ");
        }
        if first.is_empty() {
            first.push_str("(no message)");
        }
        let at = &f["Location"];
        let file = at["FileName"].as_str().unwrap_or("");
        let at = format!("{}:{}", file.rsplit('/').next().unwrap_or(file), at["LineNumber"].as_u64().unwrap_or(0));
        (first, at)
    };
    let before_suite = reports
        .iter()
        .find(|r| r["LeafNodeType"] == "BeforeSuite" && !matches!(r["State"].as_str(), Some("passed" | "skipped")))
        .map(|r| failure(r));
    specs
        .into_iter()
        .map(|spec| {
            let mine = reports.iter().find(|r| r["LeafNodeType"] == "It" && leaf_location(r) == spec.location && spec_text(r) == spec.text);
            let outcome = match (mine, &before_suite) {
                (_, Some((reason, at))) => Outcome::Failed { reason: format!("BeforeSuite failed: {reason}"), at: at.clone() },
                (None, None) => Outcome::Failed { reason: "the spec is not in the run's report".into(), at: String::new() },
                (Some(r), None) => {
                    let seconds = r["RunTime"].as_f64().map_or(seconds, |ns| ns / 1e9);
                    let outcome = match r["State"].as_str().unwrap_or("") {
                        "passed" => Outcome::Passed,
                        "pending" => Outcome::Pending,
                        "skipped" => Outcome::Skipped(failure(r).0),
                        "failed" => {
                            let (reason, at) = failure(r);
                            Outcome::Failed { reason, at }
                        }
                        state => match interrupted(&r["Failure"]["ProgressReport"], seconds) {
                            Some((reason, at)) => Outcome::Failed { reason, at },
                            None => {
                                let (reason, at) = failure(r);
                                Outcome::Failed { reason: format!("{state}: {reason}"), at }
                            }
                        },
                    };
                    return SpecResult { spec, outcome, seconds };
                }
            };
            SpecResult { spec, outcome, seconds }
        })
        .collect()
}

/// A spec the suite timeout interrupted: the step it was in and the suite's functions it was
/// waiting in (innermost first), from Ginkgo's progress report; and where the innermost one waits.
fn interrupted(progress: &Value, seconds: f64) -> Option<(String, String)> {
    let spec = progress["Goroutines"].as_array()?.iter().find(|g| g["IsSpecGoroutine"] == true)?;
    let mut waits: Vec<(String, String)> = Vec::new();
    for frame in spec["Stack"].as_array()? {
        let file = frame["Filename"].as_str().unwrap_or("");
        if !file.contains("/test/e2e/") {
            continue;
        }
        let function = frame["Function"].as_str().unwrap_or("");
        let function = function.rsplit('/').next().unwrap_or(function);
        let function = function.split_once('.').map_or(function, |(_, f)| f);
        let function = function.split(".func").next().unwrap_or(function).split('(').next().unwrap_or(function).to_owned();
        let at = format!("{}:{}", file.rsplit('/').next().unwrap_or(file), frame["Line"].as_u64().unwrap_or(0));
        if waits.last().is_none_or(|(f, _)| *f != function) {
            waits.push((function, at));
        }
    }
    let step = progress["CurrentStepText"].as_str().unwrap_or("");
    let chain: Vec<String> = waits.iter().take(3).map(|(f, at)| format!("{f} ({at})")).collect();
    let reason = format!("timed out after {seconds:.0} s in step \"{step}\", waiting in {}", chain.join(" called from "));
    Some((reason, waits.first().map(|(_, at)| at.clone()).unwrap_or_default()))
}
