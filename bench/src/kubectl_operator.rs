//! operator-framework's `kubectl operator` plugin (github.com/operator-framework/kubectl-operator)
//! against olm-rs: its OLM v0 commands — `catalog list|add|remove`, `list-available`, `describe`,
//! `install` (with `--channel`, `--approval`, `--version`, `--create-operator-group`, `--watch`),
//! `list`, `upgrade`, `list-operands`, `uninstall` (each operand strategy,
//! `--delete-operator-groups`, `--delete-all`) — run as a cluster admin runs them, on a running
//! olm-rs environment (`olm dev up`), and what they print checked.
//!
//! `build` compiles the plugin once into the olm-dev cache from the Go module proxy, through a
//! throwaway consumer module as tools.rs does for opm (`go install pkg@version` would ask the
//! proxy for the module's version list, which it refuses). `run` links it as `kubectl-operator`
//! into a directory put first on PATH and drives `kubectl operator …`; it returns a Markdown
//! section: every command with its exit code, trimmed output and a verdict with its reason, and
//! the `kubectl` checks of what the command changed in the cluster.
//!
//! The plugin reads, in order: CatalogSources (`catalog list`); PackageManifests with their
//! `catalog`/`catalog-namespace` labels and `status.channels[].currentCSVDesc` (installModes,
//! annotations `repository`/`description`, version, provider) and `entries` (`--version` maps a
//! version to a startingCSV); OperatorGroups and their `status.namespaces`; the Subscription's
//! `status.installPlanRef`, `installedCSV`, `currentCSV`, `state`; the InstallPlan's
//! `status.phase` (Complete) and `status.plan[].resource` (the ClusterServiceVersion step names the
//! installed CSV); the `operators.coreos.com/v1` Operator `<package>.<namespace>` and its
//! `status.components.refs` (the CSV ref for `list-operands`, every ref deleted by
//! `uninstall --delete-operator`); the CSV's `spec.customresourcedefinitions.owned` and phase.
//!
//! Two habits of the plugin the run works around, as an admin would (upstream OLM behaves the
//! same): `upgrade` approves the InstallPlan the Subscription names only while `installedCSV`
//! differs from `currentCSV`, so the run waits for the state UpgradePending first; and
//! `list-operands` (which `uninstall` runs first) reads the first CSV among the Operator's refs,
//! sorted by name, and refuses when it is not Succeeded, so the run waits until a replaced CSV
//! is gone and the installed one has Succeeded.
//!
//! Wiring (not done here): `mod kubectl_operator;` in main.rs, then
//! `kubectl_operator::run(&kubectl_operator::build()?, kubeconfig, path)` with the KUBECONFIG and
//! PATH that `olm dev env` prints for the environment under test. bench/kubectl-operator-run.md
//! is one run's output.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The only kubectl-operator version the Go module proxy here serves (others answer 403).
pub const VERSION: &str = "v0.6.0";
const MODULE: &str = "github.com/operator-framework/kubectl-operator";

/// A command that has not finished after this long is killed (the plugin's own `--timeout`
/// is one minute).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(150);
/// How long a Subscription may take to reach the state the next command needs.
const STATE_TIMEOUT: Duration = Duration::from_secs(120);
/// Lines of a command's output kept in the report.
const KEPT_LINES: usize = 40;

// The Go build caches and commands are tools.rs's, shared with opm and upstream's operators.
use crate::tools::{cache_root, go, run as go_run};

/// Build `kubectl-operator` VERSION once into
/// `~/.cache/olm-dev/bin/kubectl-operator-VERSION/kubectl-operator` (a `.ok` marker beside it
/// says the build finished). cgo as upstream's Makefile builds it; the pure-Go OpenPGP of
/// containers/image instead of gpgme, and no btrfs/devicemapper graph drivers, so no C headers
/// beyond libc are needed. The version is stamped as the Makefile stamps it from git.
/// First build: about 5 minutes on 2 shared cores (5 min 8 s measured, most modules downloaded).
/// How long the run waits for Kubernetes' garbage collector to remove what an uninstall left to
/// it: two of its 30-second discovery resyncs.
const GC_WAIT: Duration = Duration::from_secs(75);

pub fn build() -> anyhow::Result<PathBuf> {
    let cache = cache_root()?;
    let bin_dir = cache.join(format!("bin/kubectl-operator-{VERSION}"));
    let bin = bin_dir.join("kubectl-operator");
    if bin_dir.join(".ok").exists() && bin.exists() {
        return Ok(bin);
    }
    eprintln!("building kubectl-operator {VERSION} from the Go module proxy (first run only; several minutes)");
    let src = cache.join(format!("src/kubectl-operator-{VERSION}"));
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(&bin_dir)?;
    if !src.join("go.mod").exists() {
        go_run(go(&cache).current_dir(&src).args(["mod", "init", "local.invalid/kubectl-operator-bin"]), "go mod init")?;
    }
    go_run(go(&cache).current_dir(&src).args(["mod", "edit", &format!("-require={MODULE}@{VERSION}")]), "go mod edit")?;
    go_run(
        go(&cache)
            .current_dir(&src)
            .env("CGO_ENABLED", "1")
            .args([
                "build",
                "-tags",
                "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper",
                "-trimpath",
                "-ldflags",
                &format!("-s -w -X '{MODULE}/internal/version.GitVersion={VERSION}'"),
                "-o",
            ])
            .arg(&bin)
            .arg(MODULE),
        "building kubectl-operator",
    )?;
    std::fs::write(bin_dir.join(".ok"), "")?;
    Ok(bin)
}

/// What one command printed.
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    timed_out: bool,
}

impl Output {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }
    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
    fn exit(&self) -> String {
        match (self.code, self.timed_out) {
            (_, true) => "killed (timeout)".into(),
            (Some(c), _) => c.to_string(),
            (None, _) => "signal".into(),
        }
    }
}

/// Where the commands run: kubectl from `path`, the plugin linked first on it, `kubeconfig`.
/// How long after `since` the PackageManifests of the catalog `ko-extra` in `namespace` were
/// listed (`present`) or gone (not `present`); Err after 60 s.
fn catalog_listing(env: &Env, namespace: &str, present: bool, since: Instant) -> Result<Duration, ()> {
    let selector = format!("catalog=ko-extra,catalog-namespace={namespace}");
    while since.elapsed() < Duration::from_secs(60) {
        let listed = env
            .get(&["get", "packagemanifests.packages.operators.coreos.com", "-n", namespace, "-l", &selector, "-o", "name"])
            .contains("etcd");
        if listed == present {
            return Ok(since.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(())
}

struct Env {
    kubectl: PathBuf,
    path: OsString,
    kubeconfig: PathBuf,
}

impl Env {
    fn exec(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
        let start = Instant::now();
        let mut child = Command::new(&self.kubectl)
            .args(args)
            .env("PATH", &self.path)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.kubectl.display()))?;
        if let Some(text) = stdin {
            use std::io::Write as _;
            let mut pipe = child.stdin.take().context("stdin")?;
            pipe.write_all(text.as_bytes())?;
        }
        let mut out = child.stdout.take().context("stdout")?;
        let mut err = child.stderr.take().context("stderr")?;
        let out_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = err.read_to_end(&mut s);
            s
        });
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if start.elapsed() > COMMAND_TIMEOUT {
                timed_out = true;
                let _ = child.kill();
                break child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
        let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
        Ok(Output { code: status.code(), stdout, stderr, elapsed: start.elapsed(), timed_out })
    }

    /// `kubectl get … -o jsonpath=…`, trimmed; empty when the object is absent.
    fn get(&self, args: &[&str]) -> String {
        match self.exec(args, None) {
            Ok(o) if o.ok() => o.stdout.trim().to_string(),
            _ => String::new(),
        }
    }

    /// Whether `kubectl get KIND NAME [-n NS]` finds the object.
    fn exists(&self, kind: &str, name: &str, namespace: Option<&str>) -> bool {
        let mut args = vec!["get", kind, name, "-o", "name"];
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        self.exec(&args, None).map(|o| o.ok()).unwrap_or(false)
    }

    /// Poll `left` (what is still there) until it is empty, for at most [`GC_WAIT`]: the objects
    /// OLM made for a CSV or Subscription go by Kubernetes' garbage collector after `kubectl
    /// operator uninstall` returns, and a collector that started before OLM's CRDs existed learns
    /// of them at its next discovery resync (every 30 s), as with upstream OLM.
    fn wait_collected(&self, left: impl Fn() -> Vec<String>) -> Result<Duration, Vec<String>> {
        let start = Instant::now();
        loop {
            let now_left = left();
            if now_left.is_empty() {
                return Ok(start.elapsed());
            }
            if start.elapsed() > GC_WAIT {
                return Err(now_left);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Wait until `csv` is the only CSV of `namespace` and the only one among the component refs of
    /// the Operator `etcd.<namespace>`.
    fn wait_single_csv(&self, namespace: &str, csv: &str) -> Result<Duration, String> {
        let start = Instant::now();
        let (mut csvs, mut refs) = (String::new(), String::new());
        while start.elapsed() < STATE_TIMEOUT {
            csvs = self.get(&[
                "get",
                "clusterserviceversions.operators.coreos.com",
                "-n",
                namespace,
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ]);
            refs = self.get(&[
                "get",
                "operators.operators.coreos.com",
                &format!("etcd.{namespace}"),
                "-o",
                "jsonpath={range .status.components.refs[?(@.kind==\"ClusterServiceVersion\")]}{.name} {end}",
            ]);
            if csvs == csv && refs.trim() == csv {
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("after {} s: CSVs `{csvs}`, the Operator's CSV refs `{}`", STATE_TIMEOUT.as_secs(), refs.trim()))
    }

    /// Wait until the Operator `etcd.<namespace>` lists `csv` among its component refs (the
    /// plugin's list-operands, and so uninstall, read the CSV from there).
    fn wait_operator_csv(&self, namespace: &str, csv: &str) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < STATE_TIMEOUT {
            last = self.get(&[
                "get",
                "operators.operators.coreos.com",
                &format!("etcd.{namespace}"),
                "-o",
                "jsonpath={range .status.components.refs[?(@.kind==\"ClusterServiceVersion\")]}{.name} {end}",
            ]);
            if last.split_whitespace().any(|name| name == csv) {
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("after {} s the Operator etcd.{namespace} lists the CSVs `{}`", STATE_TIMEOUT.as_secs(), last.trim()))
    }

    /// Wait until the CSV's `status.phase` is `phase`.
    fn wait_csv_phase(&self, namespace: &str, csv: &str, phase: &str) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < STATE_TIMEOUT {
            last = self.get(&[
                "get",
                "clusterserviceversions.operators.coreos.com",
                csv,
                "-n",
                namespace,
                "-o",
                "jsonpath={.status.phase} {.status.reason}: {.status.message}",
            ]);
            if last.split(' ').next() == Some(phase) {
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("CSV {namespace}/{csv} is `{last}` after {} s, not {phase}", STATE_TIMEOUT.as_secs()))
    }

    /// Wait until the Subscription's `status.state` is `state`; the last state seen otherwise.
    fn wait_state(&self, namespace: &str, sub: &str, state: &str) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < STATE_TIMEOUT {
            last = self.get(&["get", "subscriptions.operators.coreos.com", sub, "-n", namespace, "-o", "jsonpath={.status.state}"]);
            if last == state {
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("Subscription {namespace}/{sub} still in state {last:?} after {} s, not {state}", STATE_TIMEOUT.as_secs()))
    }
}

/// `kubectl-operator` linked into a directory of its own, removed when dropped.
struct PluginDir(PathBuf);

impl PluginDir {
    fn new(plugin: &Path) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("olm-bench-kubectl-operator-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let plugin = std::fs::canonicalize(plugin).with_context(|| format!("{} not found", plugin.display()))?;
        std::os::unix::fs::symlink(&plugin, dir.join("kubectl-operator"))?;
        Ok(Self(dir))
    }
}

impl Drop for PluginDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn find_in_path(path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Pass, or fail with why.
type Verdict = Result<String, String>;

fn contains_all(out: &Output, needles: &[&str]) -> Result<(), String> {
    let all = out.all();
    let missing: Vec<&str> = needles.iter().copied().filter(|n| !all.contains(n)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("output lacks {}", missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")))
    }
}

fn expect_ok(out: &Output, needles: &[&str], what: &str) -> Verdict {
    if !out.ok() {
        return Err(format!("exit {}: {}", out.exit(), first_line(&out.all())));
    }
    contains_all(out, needles)?;
    Ok(what.to_string())
}

fn expect_fail(out: &Output, needles: &[&str], what: &str) -> Verdict {
    if out.ok() {
        return Err(format!("exit 0 where a refusal was expected ({what})"));
    }
    contains_all(out, needles)?;
    Ok(format!("refused as upstream refuses: {what}"))
}

fn first_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    if line.chars().count() > 300 { format!("{}…", line.chars().take(300).collect::<String>()) } else { line.to_string() }
}

fn trimmed(out: &Output) -> String {
    let mut text = out.stdout.clone();
    if !out.stderr.trim().is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&out.stderr);
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut kept: Vec<String> = lines
        .iter()
        .take(KEPT_LINES)
        .map(|l| if l.chars().count() > 220 { format!("{}…", l.chars().take(220).collect::<String>()) } else { (*l).to_string() })
        .collect();
    if lines.len() > KEPT_LINES {
        kept.push(format!("… ({} more lines)", lines.len() - KEPT_LINES));
    }
    kept.join("\n").replace("```", "'''")
}

/// The report as it is built: a table row and a section per step.
struct Report {
    rows: Vec<(String, String, bool, String)>,
    details: String,
    passed: usize,
    failed: usize,
}

impl Report {
    fn step(&mut self, command: &str, out: Option<&Output>, verdict: Verdict) {
        let n = self.rows.len() + 1;
        let (pass, reason) = match verdict {
            Ok(r) => (true, r),
            Err(r) => (false, r),
        };
        if pass {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        let exit = out.map_or("—".to_string(), Output::exit);
        self.rows.push((format!("`{command}`"), exit.clone(), pass, reason.clone()));
        let _ = writeln!(self.details, "#### {n}. `{command}` — {}\n", if pass { "pass" } else { "**FAIL**" });
        match out {
            Some(o) => {
                let _ = writeln!(self.details, "exit {exit}, {:.1} s. {reason}\n", o.elapsed.as_secs_f64());
                let _ = writeln!(self.details, "```\n{}\n```\n", trimmed(o));
            }
            None => {
                let _ = writeln!(self.details, "{reason}\n");
            }
        }
    }

    fn markdown(&self, header: &str) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "{header}");
        let _ = writeln!(md, "{} of {} steps pass, {} fail.\n", self.passed, self.passed + self.failed, self.failed);
        let _ = writeln!(md, "| # | command | exit | result |\n|---|---|---|---|");
        for (i, (cmd, exit, pass, reason)) in self.rows.iter().enumerate() {
            let reason = reason.replace('|', "\\|").replace('\n', " ");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {}: {} |",
                i + 1,
                cmd.replace('|', "\\|"),
                exit,
                if *pass { "pass" } else { "**FAIL**" },
                reason
            );
        }
        let _ = writeln!(md, "\n### Commands and what they printed\n");
        md.push_str(&self.details);
        md
    }
}

const OPERAND: &str = "apiVersion: etcd.database.coreos.com/v1beta2
kind: EtcdCluster
metadata:
  name: example
spec:
  size: 3
  version: 3.2.13
";

/// Run the plugin's OLM v0 commands against the olm-rs environment whose admin kubeconfig is
/// `kubeconfig` and whose `kubectl` is on `path` (what `olm dev env` exports), with the plugin
/// binary `kubectl_operator` (from `build`). Needs the bundled catalog as CatalogSource
/// `olm/community` (package etcd). Creates namespaces `ko-<n>-{a,b,c,d,e,e-watched}` and deletes them at the
/// end; installs into and uninstalls from `operators` (its global OperatorGroup stays); deletes
/// etcd's CRDs (`uninstall --delete-all` does) and an EtcdCluster in `default`. Returns a Markdown section; an
/// `Err` only when the commands cannot be started at all.
pub fn run(kubectl_operator: &Path, kubeconfig: &Path, path: &OsStr) -> anyhow::Result<String> {
    let started = Instant::now();
    let plugin_dir = PluginDir::new(kubectl_operator)?;
    let mut full_path = OsString::from(plugin_dir.0.as_os_str());
    full_path.push(":");
    full_path.push(path);
    let kubectl = find_in_path(path, "kubectl").context("no kubectl on the given PATH (eval \"$(olm dev env)\" puts one there)")?;
    let env = Env { kubectl, path: full_path, kubeconfig: kubeconfig.to_path_buf() };
    let mut r = Report { rows: Vec::new(), details: String::new(), passed: 0, failed: 0 };

    let server_version = serde_json::from_str::<serde_json::Value>(&env.get(&["version", "-o", "json"]))
        .ok()
        .and_then(|v| v["serverVersion"]["gitVersion"].as_str().map(|s| format!("Kubernetes {s}")))
        .unwrap_or_else(|| "server version unknown".into());
    let run_id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() % 100_000).unwrap_or(0);
    let ns_a = format!("ko-{run_id}-a");
    let ns_b = format!("ko-{run_id}-b");
    let ns_c = format!("ko-{run_id}-c");

    // kubectl's plugin discovery and the plugin's own version.
    let o = env.exec(&["plugin", "list", "--name-only"], None)?;
    let v = if o.all().contains("kubectl-operator") {
        Ok("kubectl finds kubectl-operator on PATH".into())
    } else {
        Err("kubectl-operator not listed".into())
    };
    r.step("kubectl plugin list --name-only", Some(&o), v);
    let o = env.exec(&["operator", "version"], None)?;
    let v = expect_ok(&o, &[VERSION], "the plugin runs as `kubectl operator`");
    r.step("kubectl operator version", Some(&o), v);

    // Catalogs and packages.
    for args in [&["operator", "catalog", "list", "-A"][..], &["operator", "catalog", "list", "-n", "olm"][..]] {
        let o = env.exec(args, None)?;
        let v = expect_ok(
            &o,
            &["community", "Community Operators", "grpc"],
            "CatalogSource olm/community listed with display name, type and publisher",
        );
        r.step(&format!("kubectl {}", args.join(" ")), Some(&o), v);
    }
    let available: [(&[&str], &str); 3] = [
        (&["operator", "list-available", "-n", "olm"], "PackageManifests of the namespace, one row per channel"),
        (
            &["operator", "list-available", "-n", "olm", "--catalog", "olm/community"],
            "the labels `catalog`/`catalog-namespace` select the catalog's packages",
        ),
        (&["operator", "list-available", "etcd", "-n", "default"], "a global catalog's package is seen from any namespace"),
    ];
    for (args, what) in available {
        let o = env.exec(args, None)?;
        let v = expect_ok(&o, &["etcd", "Community Operators", "singlenamespace-alpha", "etcdoperator.v0.9.4", "clusterwide-alpha"], what);
        r.step(&format!("kubectl {}", args.join(" ")), Some(&o), v);
    }
    let o = env.exec(&["operator", "describe", "etcd", "-n", "olm"], None)?;
    let v = expect_ok(
        &o,
        &[
            "== Package ==",
            "etcd 0.9.4 (by CNCF)",
            "== Repository ==",
            "https://github.com/coreos/etcd-operator",
            "Community Operators",
            "singlenamespace-alpha (default) (shown)",
            "OwnNamespace\nSingleNamespace",
            "== Description ==",
        ],
        "package, repository, catalog, channels (default, shown), install modes and description of the default channel's head",
    );
    r.step("kubectl operator describe etcd -n olm", Some(&o), v);
    let o = env.exec(&["operator", "describe", "etcd", "-n", "olm", "-C", "clusterwide-alpha", "-L"], None)?;
    let v = expect_ok(
        &o,
        &["0.9.4-clusterwide", "clusterwide-alpha (shown)", "AllNamespaces", "== Long Description =="],
        "another channel, with the long description",
    );
    r.step("kubectl operator describe etcd -n olm -C clusterwide-alpha -L", Some(&o), v);

    // Install 0.9.0 with Manual approval; the plugin approves the first InstallPlan itself.
    let o = env.exec(&["create", "namespace", &ns_a], None)?;
    let v = expect_ok(&o, &[], "setup");
    r.step(&format!("kubectl create namespace {ns_a}"), Some(&o), v);
    let cmd = format!(
        "kubectl operator install etcd -n {ns_a} --create-operator-group --channel singlenamespace-alpha --approval Manual --version 0.9.0"
    );
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let o = env.exec(&args, None)?;
    let v = expect_ok(
        &o,
        &[&format!("operatorgroup \"{ns_a}\" created"), "subscription \"etcd\" created", "installed csv is \"etcdoperator.v0.9.0\""],
        "OperatorGroup and Subscription created, the first InstallPlan approved and Complete, CSV named from its steps",
    )
    .and_then(|what| {
        let spec = env.get(&[
            "get",
            "subscriptions.operators.coreos.com",
            "etcd",
            "-n",
            &ns_a,
            "-o",
            "jsonpath={.spec.channel} {.spec.installPlanApproval} {.spec.startingCSV} {.spec.source}/{.spec.sourceNamespace}",
        ]);
        let og = env.get(&["get", "operatorgroups.operators.coreos.com", &ns_a, "-n", &ns_a, "-o", "jsonpath={.spec.targetNamespaces}"]);
        let phase = env.get(&[
            "get",
            "clusterserviceversions.operators.coreos.com",
            "etcdoperator.v0.9.0",
            "-n",
            &ns_a,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        if spec != "singlenamespace-alpha Manual etcdoperator.v0.9.0 community/olm" {
            return Err(format!("Subscription spec is `{spec}`"));
        }
        if !og.contains(&ns_a) {
            return Err(format!("OperatorGroup targetNamespaces `{og}`"));
        }
        Ok(format!("{what}; Subscription `{spec}`, OperatorGroup targets `{og}`, CSV phase `{phase}`"))
    });
    r.step(&cmd, Some(&o), v);

    let o = env.exec(&["operator", "list", "-n", &ns_a], None)?;
    let v = expect_ok(&o, &["PACKAGE", "etcd", "etcdoperator.v0.9.0"], "the Subscription with its installed CSV");
    r.step(&format!("kubectl operator list -n {ns_a}"), Some(&o), v);

    // Upgrades: each waits (as an admin watching `list` would) for the next plan to be waiting.
    for (to, from) in [("etcdoperator.v0.9.2", "etcdoperator.v0.9.0"), ("etcdoperator.v0.9.4", "etcdoperator.v0.9.2")] {
        let waited = env.wait_state(&ns_a, "etcd", "UpgradePending");
        r.step(
            &format!("(wait) Subscription {ns_a}/etcd state UpgradePending"),
            None,
            waited.map(|d| format!("after {:.1} s: the InstallPlan to {to} waits for approval", d.as_secs_f64())),
        );
        if from == "etcdoperator.v0.9.0" {
            let o = env.exec(&["operator", "list", "-A"], None)?;
            let v = expect_ok(&o, &["NAMESPACE", &ns_a, from, to, "UpgradePending"], "all namespaces: installed and current CSV, state");
            r.step("kubectl operator list -A", Some(&o), v);
        }
        let o = env.exec(&["operator", "upgrade", "etcd", "-n", &ns_a], None)?;
        let v = expect_ok(&o, &[&format!("installed csv is \"{to}\"")], &format!("the waiting InstallPlan approved, {from} → {to}"));
        r.step(&format!("kubectl operator upgrade etcd -n {ns_a}"), Some(&o), v);
    }
    let waited = env.wait_state(&ns_a, "etcd", "AtLatestKnown");
    r.step(
        &format!("(wait) Subscription {ns_a}/etcd state AtLatestKnown"),
        None,
        waited.map(|d| format!("after {:.1} s", d.as_secs_f64())),
    );
    let o = env.exec(&["operator", "upgrade", "etcd", "-n", &ns_a], None)?;
    let v = expect_fail(&o, &["operator is already at latest version"], "installedCSV equals currentCSV");
    r.step(&format!("kubectl operator upgrade etcd -n {ns_a}"), Some(&o), v);

    // Operands. The plugin reads the first ClusterServiceVersion among the Operator's component
    // refs (sorted by name, as upstream sorts them): until the replaced CSV is gone that is the
    // old one (Replacing/Deleting, or already deleted), and list-operands refuses. An admin
    // waits for `kubectl get csv` to show one CSV; so does this run.
    let waited = env.wait_single_csv(&ns_a, "etcdoperator.v0.9.4");
    r.step(
        &format!("(wait) only etcdoperator.v0.9.4 left in {ns_a} and in the Operator's refs"),
        None,
        waited.map(|d| format!("after {:.1} s (the replaced CSVs deleted)", d.as_secs_f64())),
    );
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", &ns_a], None)?;
    let v = expect_ok(&o, &["No resources found"], "Operator etcd.<ns> → its CSV → owned CRDs → no EtcdCluster yet");
    r.step(&format!("kubectl operator list-operands etcd -n {ns_a}"), Some(&o), v);
    let o = env.exec(&["apply", "-n", &ns_a, "-f", "-"], Some(OPERAND))?;
    let v = expect_ok(&o, &[], "setup: an operand");
    r.step(&format!("kubectl apply -n {ns_a} -f - (EtcdCluster example)"), Some(&o), v);
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", &ns_a], None)?;
    let v = expect_ok(
        &o,
        &["etcd.database.coreos.com/v1beta2", "EtcdCluster", &ns_a, "example"],
        "the EtcdCluster in the OperatorGroup's namespace",
    );
    r.step(&format!("kubectl operator list-operands etcd -n {ns_a}"), Some(&o), v);
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", &ns_a, "-o", "yaml"], None)?;
    let v = expect_ok(&o, &["kind: EtcdCluster", "name: example", "kind: List"], "as YAML");
    r.step(&format!("kubectl operator list-operands etcd -n {ns_a} -o yaml"), Some(&o), v);

    // Uninstall: abort (default), then delete the operands and the operator, keeping the CRDs.
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", &ns_a], None)?;
    let v = expect_fail(&o, &["operand deletion aborted"], "operands exist and the strategy is abort").and_then(|what| {
        if env.exists("subscriptions.operators.coreos.com", "etcd", Some(&ns_a)) {
            Ok(format!("{what}; the Subscription is still there"))
        } else {
            Err("aborted, yet the Subscription is gone".into())
        }
    });
    r.step(&format!("kubectl operator uninstall etcd -n {ns_a}"), Some(&o), v);
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", &ns_a, "--operand-strategy", "delete", "--delete-operator-groups"], None)?;
    let v = expect_ok(
        &o,
        &["subscription \"etcd\" deleted", "\"example\" deleted", "\"etcdoperator.v0.9.4\" deleted"],
        "Subscription, operand, CSV deleted",
    )
    .and_then(|what| {
        let left: Vec<&str> = [
            ("csv", env.exists("clusterserviceversions.operators.coreos.com", "etcdoperator.v0.9.4", Some(&ns_a))),
            ("operand", env.exists("etcdclusters.etcd.database.coreos.com", "example", Some(&ns_a))),
            ("operatorgroup", env.exists("operatorgroups.operators.coreos.com", &ns_a, Some(&ns_a))),
        ]
        .iter()
        .filter(|(_, there)| *there)
        .map(|(what, _)| *what)
        .collect();
        let crd = env.exists("crd", "etcdclusters.etcd.database.coreos.com", None);
        if !left.is_empty() {
            return Err(format!("still there after uninstall: {}", left.join(", ")));
        }
        if !crd {
            return Err("the CRD was deleted without --delete-operator".into());
        }
        let deployment = || if env.exists("deployments", "etcd-operator", Some(&ns_a)) { vec!["deployment etcd-operator".to_owned()] } else { Vec::new() };
        let collected = env
            .wait_collected(deployment)
            .map_err(|left| format!("still there {} s after uninstall: {}", GC_WAIT.as_secs(), left.join(", ")))?;
        Ok(format!("{what}; OperatorGroup gone, CRDs kept; the operator Deployment collected by the garbage collector {:.1} s later", collected.as_secs_f64()))
    });
    r.step(&format!("kubectl operator uninstall etcd -n {ns_a} --operand-strategy delete --delete-operator-groups"), Some(&o), v);

    // Automatic approval, the default channel; uninstall leaving the operand in place.
    let o = env.exec(&["create", "namespace", &ns_b], None)?;
    let v = expect_ok(&o, &[], "setup");
    r.step(&format!("kubectl create namespace {ns_b}"), Some(&o), v);
    let o = env.exec(&["operator", "install", "etcd", "-n", &ns_b, "-C", "--approval", "Automatic"], None)?;
    let installed_at = Instant::now();
    let v = expect_ok(&o, &["installed csv is \"etcdoperator.v0.9.4\""], "the default channel's head, approved automatically");
    r.step(&format!("kubectl operator install etcd -n {ns_b} -C --approval Automatic"), Some(&o), v);
    let waited = env.wait_csv_phase(&ns_b, "etcdoperator.v0.9.4", "Succeeded");
    r.step(
        &format!("(wait) CSV {ns_b}/etcdoperator.v0.9.4 Succeeded (list-operands, which uninstall runs first, refuses other phases)"),
        None,
        waited.map(|d| format!("after {:.1} s", d.as_secs_f64())),
    );
    // Right after the install, as an admin following `install` with `list-operands` would: the
    // plugin reads the CSV from the Operator's status.components.
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", &ns_b], None)?;
    let v = expect_ok(&o, &["No resources found"], "right after the install (CSV Succeeded), the Operator already names the CSV").map_err(|e| {
        if o.all().contains("could not find underlying components") {
            format!(
                "{e}: the Operator etcd.{ns_b} exists but has no status.components yet, {:.1} s after `install` returned (its status is written once its components stop changing for a second)",
                installed_at.elapsed().as_secs_f64()
            )
        } else {
            e
        }
    });
    r.step(&format!("kubectl operator list-operands etcd -n {ns_b}"), Some(&o), v);
    let waited = env.wait_operator_csv(&ns_b, "etcdoperator.v0.9.4");
    r.step(
        &format!("(wait) Operator etcd.{ns_b} lists etcdoperator.v0.9.4 in status.components"),
        None,
        waited.map(|_| format!("{:.1} s after `install` returned", installed_at.elapsed().as_secs_f64())),
    );
    let o = env.exec(&["apply", "-n", &ns_b, "-f", "-"], Some(OPERAND))?;
    let v = expect_ok(&o, &[], "setup: an operand");
    r.step(&format!("kubectl apply -n {ns_b} -f - (EtcdCluster example)"), Some(&o), v);
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", &ns_b, "--operand-strategy", "ignore"], None)?;
    let v = expect_ok(&o, &["\"example/", "orphaned", "\"etcdoperator.v0.9.4\" deleted"], "operand left, Subscription and CSV deleted")
        .and_then(|what| {
            if !env.exists("etcdclusters.etcd.database.coreos.com", "example", Some(&ns_b)) {
                return Err("the operand was deleted".into());
            }
            if env.exists("clusterserviceversions.operators.coreos.com", "etcdoperator.v0.9.4", Some(&ns_b)) {
                return Err("the CSV is still there".into());
            }
            Ok(format!("{what}; the EtcdCluster is still there"))
        });
    r.step(&format!("kubectl operator uninstall etcd -n {ns_b} --operand-strategy ignore"), Some(&o), v);

    // AllNamespaces: the global OperatorGroup of `operators` (status.namespaces [""]); operands
    // anywhere are the operator's; its cluster RBAC goes with the CSV. The OperatorGroup of
    // {ns_b} stays (no --delete-operator-groups): its provided APIs must have been released, or
    // this install conflicts with it.
    let o = env.exec(&["operator", "install", "etcd", "-n", "operators", "-c", "singlenamespace-alpha"], None)?;
    let v = expect_fail(
        &o,
        &["not installable", "AllNamespaces"],
        "the OperatorGroup of `operators` targets all namespaces, the channel's CSV cannot",
    );
    r.step("kubectl operator install etcd -n operators -c singlenamespace-alpha", Some(&o), v);
    let o = env.exec(&["operator", "install", "etcd", "-n", "operators", "-c", "clusterwide-alpha", "-a", "Automatic"], None)?;
    let v = expect_ok(&o, &["installed csv is \"etcdoperator.v0.9.4-clusterwide\""], "into the existing global OperatorGroup");
    r.step("kubectl operator install etcd -n operators -c clusterwide-alpha -a Automatic", Some(&o), v);
    let waited = env.wait_csv_phase("operators", "etcdoperator.v0.9.4-clusterwide", "Succeeded");
    r.step(
        "(wait) CSV operators/etcdoperator.v0.9.4-clusterwide Succeeded",
        None,
        waited.map(|d| format!("after {:.1} s", d.as_secs_f64())),
    );
    let waited = env.wait_operator_csv("operators", "etcdoperator.v0.9.4-clusterwide");
    r.step(
        "(wait) Operator etcd.operators lists etcdoperator.v0.9.4-clusterwide in status.components",
        None,
        waited.map(|d| format!("after {:.1} s more", d.as_secs_f64())),
    );
    let o = env.exec(&["apply", "-n", "default", "-f", "-"], Some(&OPERAND.replace("name: example", "name: in-default")))?;
    let v = expect_ok(&o, &[], "setup: an operand in another namespace");
    r.step("kubectl apply -n default -f - (EtcdCluster in-default)", Some(&o), v);
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", "operators"], None)?;
    let v = expect_ok(
        &o,
        &["default", "in-default", &ns_b],
        "operands in every namespace, the one orphaned in {ns_b} among them".replace("{ns_b}", &ns_b).as_str(),
    );
    r.step("kubectl operator list-operands etcd -n operators", Some(&o), v);
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", "operators", "--operand-strategy", "delete"], None)?;
    let v = expect_ok(
        &o,
        &["\"in-default\" deleted", "\"etcdoperator.v0.9.4-clusterwide\" deleted"],
        "operands in every namespace and the CSV deleted",
    )
    .and_then(|what| {
        let start = Instant::now();
        let mut rbac = String::new();
        while start.elapsed() < Duration::from_secs(30) {
            rbac = env.get(&["get", "clusterroles,clusterrolebindings", "-l", "olm.owner=etcdoperator.v0.9.4-clusterwide", "-o", "name"]);
            if rbac.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if !rbac.is_empty() {
            return Err(format!("cluster RBAC of the CSV left: {}", rbac.replace('\n', " ")));
        }
        if !env.exists("operatorgroups.operators.coreos.com", "global-operators", Some("operators")) {
            return Err("the global OperatorGroup was deleted".into());
        }
        Ok(format!("{what}; its ClusterRole and ClusterRoleBinding gone, the global OperatorGroup kept"))
    });
    r.step("kubectl operator uninstall etcd -n operators --operand-strategy delete", Some(&o), v);

    // SingleNamespace: `--watch` another namespace; the OperatorGroup's status.namespaces says
    // which, the operand there is the operator's, the copied CSV there goes with the CSV.
    let ns_e = format!("ko-{run_id}-e");
    let ns_w = format!("ko-{run_id}-e-watched");
    for ns in [&ns_e, &ns_w] {
        let o = env.exec(&["create", "namespace", ns], None)?;
        let v = expect_ok(&o, &[], "setup");
        r.step(&format!("kubectl create namespace {ns}"), Some(&o), v);
    }
    let o = env.exec(&["operator", "install", "etcd", "-n", &ns_e, "-C", "-w", &ns_w, "-a", "Automatic"], None)?;
    let v = expect_ok(
        &o,
        &[&format!("operatorgroup \"{ns_e}\" created"), "installed csv is \"etcdoperator.v0.9.4\""],
        "an OperatorGroup targeting the watched namespace",
    )
    .and_then(|what| {
        let og = env.get(&[
            "get",
            "operatorgroups.operators.coreos.com",
            &ns_e,
            "-n",
            &ns_e,
            "-o",
            "jsonpath={.spec.targetNamespaces} {.status.namespaces}",
        ]);
        if og == format!("[\"{ns_w}\"] [\"{ns_w}\"]") {
            Ok(format!("{what}; spec.targetNamespaces and status.namespaces `{og}`"))
        } else {
            Err(format!("OperatorGroup targets/status `{og}`"))
        }
    });
    r.step(&format!("kubectl operator install etcd -n {ns_e} -C -w {ns_w} -a Automatic"), Some(&o), v);
    let waited = env.wait_csv_phase(&ns_w, "etcdoperator.v0.9.4", "Succeeded");
    r.step(
        &format!("(wait) copied CSV {ns_w}/etcdoperator.v0.9.4 Succeeded"),
        None,
        waited.map(|d| format!("after {:.1} s", d.as_secs_f64())),
    );
    let waited = env.wait_operator_csv(&ns_e, "etcdoperator.v0.9.4");
    r.step(
        &format!("(wait) Operator etcd.{ns_e} lists etcdoperator.v0.9.4 in status.components"),
        None,
        waited.map(|d| format!("after {:.1} s more", d.as_secs_f64())),
    );
    let o = env.exec(&["apply", "-n", &ns_w, "-f", "-"], Some(&OPERAND.replace("name: example", "name: watched")))?;
    let v = expect_ok(&o, &[], "setup: an operand in the watched namespace");
    r.step(&format!("kubectl apply -n {ns_w} -f - (EtcdCluster watched)"), Some(&o), v);
    let o = env.exec(&["operator", "list-operands", "etcd", "-n", &ns_e], None)?;
    let v = expect_ok(&o, &[&ns_w, "watched"], "the operand in the watched namespace").and_then(|what| {
        if o.stdout.contains(&format!("{ns_b} ")) {
            Err(format!("lists the operand of {ns_b}, outside the OperatorGroup"))
        } else {
            Ok(format!("{what}, not the one of {ns_b}"))
        }
    });
    r.step(&format!("kubectl operator list-operands etcd -n {ns_e}"), Some(&o), v);
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", &ns_e, "-s", "delete", "--delete-operator-groups"], None)?;
    let v = expect_ok(
        &o,
        &["\"watched\" deleted", "\"etcdoperator.v0.9.4\" deleted", &format!("operatorgroup \"{ns_e}\" deleted")],
        "operand, CSV, OperatorGroup deleted",
    )
    .and_then(|what| {
        let start = Instant::now();
        while env.exists("clusterserviceversions.operators.coreos.com", "etcdoperator.v0.9.4", Some(&ns_w)) {
            if start.elapsed() > Duration::from_secs(30) {
                return Err(format!("the copied CSV in {ns_w} is still there 30 s later"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(format!("{what}; the copied CSV in {ns_w} gone after {:.1} s", start.elapsed().as_secs_f64()))
    });
    r.step(&format!("kubectl operator uninstall etcd -n {ns_e} -s delete --delete-operator-groups"), Some(&o), v);

    // --delete-all: operands, every object the Operator references (CRDs among them), the
    // Operator, the OperatorGroup.
    let o = env.exec(&["create", "namespace", &ns_c], None)?;
    let v = expect_ok(&o, &[], "setup");
    r.step(&format!("kubectl create namespace {ns_c}"), Some(&o), v);
    let o = env.exec(&["operator", "install", "etcd", "-n", &ns_c, "-C", "-c", "singlenamespace-alpha", "-a", "Manual"], None)?;
    let v = expect_ok(&o, &["installed csv is \"etcdoperator.v0.9.4\""], "the channel head, its first plan approved by the plugin");
    r.step(&format!("kubectl operator install etcd -n {ns_c} -C -c singlenamespace-alpha -a Manual"), Some(&o), v);
    let waited = env.wait_csv_phase(&ns_c, "etcdoperator.v0.9.4", "Succeeded");
    r.step(
        &format!("(wait) CSV {ns_c}/etcdoperator.v0.9.4 Succeeded (list-operands, which uninstall runs first, refuses other phases)"),
        None,
        waited.map(|d| format!("after {:.1} s", d.as_secs_f64())),
    );
    let waited = env.wait_operator_csv(&ns_c, "etcdoperator.v0.9.4");
    r.step(
        &format!("(wait) Operator etcd.{ns_c} lists etcdoperator.v0.9.4 in status.components"),
        None,
        waited.map(|d| format!("after {:.1} s more", d.as_secs_f64())),
    );
    let o = env.exec(&["apply", "-n", &ns_c, "-f", "-"], Some(OPERAND))?;
    let v = expect_ok(&o, &[], "setup: an operand");
    r.step(&format!("kubectl apply -n {ns_c} -f - (EtcdCluster example)"), Some(&o), v);
    let refs = env.get(&[
        "get",
        "operators.operators.coreos.com",
        &format!("etcd.{ns_c}"),
        "-o",
        "jsonpath={range .status.components.refs[*]}{.kind}/{.name} {end}",
    ]);
    r.step(
        &format!("kubectl get operator etcd.{ns_c} (its component refs)"),
        None,
        if refs.contains("ClusterServiceVersion/") && refs.contains("CustomResourceDefinition/") {
            Ok(format!("refs: {refs}"))
        } else {
            Err(format!("refs lack the CSV or the CRDs: `{refs}`"))
        },
    );
    let o = env.exec(&["operator", "uninstall", "etcd", "-n", &ns_c, "--delete-all"], None)?;
    let v = expect_ok(
        &o,
        &["subscription \"etcd\" deleted", "\"example\" deleted", "\"etcdoperator.v0.9.4\" deleted"],
        "operands, Subscription, CSV, the Operator's references, the Operator and the OperatorGroup deleted",
    )
    .and_then(|what| {
        let left: Vec<&str> = [
            ("CRD etcdclusters", env.exists("crd", "etcdclusters.etcd.database.coreos.com", None)),
            ("Operator", env.exists("operators.operators.coreos.com", &format!("etcd.{ns_c}"), None)),
            ("OperatorGroup", env.exists("operatorgroups.operators.coreos.com", &ns_c, Some(&ns_c))),
            ("Deployment etcd-operator", env.exists("deployments", "etcd-operator", Some(&ns_c))),
        ]
        .iter()
        .filter(|(_, there)| *there)
        .map(|(what, _)| *what)
        .collect();
        if !left.is_empty() {
            return Err(format!("still there after --delete-all: {}", left.join(", ")));
        }
        if !env.exists("namespace", &ns_c, None) {
            return Err("the namespace itself was deleted".into());
        }
        Ok(format!("{what}; CRDs, Operator, OperatorGroup gone, the namespace kept"))
    });
    r.step(&format!("kubectl operator uninstall etcd -n {ns_c} --delete-all"), Some(&o), v);

    // Refusals the plugin words itself, from what the API answers.
    let refusals: [(&[&str], &[&str], &str); 4] = [
        (
            &["operator", "install", "etcd", "-n", "default", "-c", "beta"],
            &["channel \"beta\" does not exist for package \"etcd\""],
            "no such channel in the PackageManifest",
        ),
        (
            &["operator", "install", "no-such-package", "-n", "default"],
            &["packagemanifests.packages.operators.coreos.com \"no-such-package\" not found"],
            "the package server answers 404 NotFound",
        ),
        (
            &["operator", "list-available", "no-such-package", "-n", "olm"],
            &["\"no-such-package\" not found"],
            "the package server answers 404 NotFound",
        ),
        (&["operator", "uninstall", "etcd", "-n", "default"], &["package \"etcd\" not found"], "no Subscription to etcd in the namespace"),
    ];
    for (args, needles, what) in refusals {
        let o = env.exec(args, None)?;
        let v = expect_fail(&o, needles, what);
        r.step(&format!("kubectl {}", args.join(" ")), Some(&o), v);
    }

    // `catalog add` pulls the index image itself (containerd's resolver, HTTPS only in v0.6.0:
    // the dev registry is plain HTTP) for its display-name and publisher labels, creates a grpc
    // CatalogSource with spec.image and waits for status.connectionState.lastObservedState
    // READY. Where the pull fails, the same CatalogSource is made with kubectl and waited for the
    // same way, so what follows an add is still what is checked.
    let ns_d = format!("ko-{run_id}-d");
    let o = env.exec(&["create", "namespace", &ns_d], None)?;
    let v = expect_ok(&o, &[], "setup");
    r.step(&format!("kubectl create namespace {ns_d}"), Some(&o), v);
    let image = env.get(&["get", "catalogsources.operators.coreos.com", "community", "-n", "olm", "-o", "jsonpath={.spec.image}"]);
    let cmd = format!("kubectl operator catalog add ko-extra {image} -n {ns_d} -d Extra -p ko");
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let o = env.exec(&args, None)?;
    let added = o.ok();
    let v = if added {
        expect_ok(&o, &["created catalogsource \"ko-extra\""], "pulled, created, READY")
    } else if o.all().contains("server gave HTTP response to HTTPS client") {
        Ok("not applicable: the plugin pulls the image over HTTPS only and the dev registry is plain HTTP (a limitation of kubectl-operator v0.6.0, no CatalogSource created); the CatalogSource it would create is made with kubectl next".into())
    } else {
        Err(format!("exit {}: {}", o.exit(), first_line(&o.all())))
    };
    r.step(&cmd, Some(&o), v);
    if !added {
        let catalog = format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: ko-extra\n  namespace: {ns_d}\nspec:\n  sourceType: grpc\n  image: {image}\n  displayName: Extra\n  publisher: ko\n"
        );
        let o = env.exec(&["apply", "-f", "-"], Some(&catalog))?;
        let v = expect_ok(&o, &[], "setup: the CatalogSource `catalog add` creates").and_then(|what| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                if env.get(&[
                    "get",
                    "catalogsources.operators.coreos.com",
                    "ko-extra",
                    "-n",
                    &ns_d,
                    "-o",
                    "jsonpath={.status.connectionState.lastObservedState}",
                ]) == "READY"
                {
                    return Ok(format!(
                        "{what}; connectionState READY after {:.1} s (what `catalog add` waits for)",
                        start.elapsed().as_secs_f64()
                    ));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            Err("the CatalogSource never became READY".into())
        });
        r.step(&format!("kubectl apply -f - (CatalogSource {ns_d}/ko-extra, spec.image {image}) and wait for READY"), Some(&o), v);
    }
    let ready_at = Instant::now();
    let cmd = format!("kubectl operator list-available -n {ns_d} --catalog {ns_d}/ko-extra");
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let o = env.exec(&args, None)?;
    let v = expect_ok(&o, &["etcd", "Extra", "singlenamespace-alpha"], "right after READY, the new catalog's packages").map_err(|e| {
        format!("{e}: the CatalogSource is READY but the package server has not read it yet (a package server that polls CatalogSources instead of watching them)")
    });
    r.step(&cmd, Some(&o), v);
    let listed = catalog_listing(&env, &ns_d, true, ready_at)
        .map_err(|()| String::from("the package server never listed the catalog's packages within 60 s"));
    r.step(
        &format!("(wait) PackageManifests of {ns_d}/ko-extra listed"),
        None,
        listed.map(|d| format!("{:.1} s after the CatalogSource was READY", d.as_secs_f64())),
    );
    let o = env.exec(&["operator", "list-available", "-n", &ns_d], None)?;
    let v = expect_ok(&o, &["Extra", "Community Operators"], "the namespace's own catalog and the global one");
    r.step(&format!("kubectl operator list-available -n {ns_d}"), Some(&o), v);
    let o = env.exec(&["operator", "catalog", "list", "-n", &ns_d], None)?;
    let v = expect_ok(&o, &["ko-extra", "Extra", "grpc", "ko"], "the namespace's CatalogSource");
    r.step(&format!("kubectl operator catalog list -n {ns_d}"), Some(&o), v);
    let o = env.exec(&["operator", "catalog", "remove", "ko-extra", "-n", &ns_d], None)?;
    let v = expect_ok(&o, &["catalogsource \"ko-extra\" removed"], "deleted and waited for");
    r.step(&format!("kubectl operator catalog remove ko-extra -n {ns_d}"), Some(&o), v);
    let removed_at = Instant::now();
    let cmd = format!("kubectl operator list-available -n {ns_d} --catalog {ns_d}/ko-extra");
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let o = env.exec(&args, None)?;
    let v = expect_ok(&o, &["No resources found"], "right after the removal, no packages of the removed catalog").map_err(|e| {
        format!("{e}: the CatalogSource is deleted but the package server still serves its packages (a package server that polls CatalogSources instead of watching them)")
    });
    r.step(&cmd, Some(&o), v);
    let unlisted = catalog_listing(&env, &ns_d, false, removed_at)
        .map_err(|()| String::from("the package server still lists the removed catalog's packages after 60 s"));
    r.step(
        &format!("(wait) PackageManifests of {ns_d}/ko-extra gone"),
        None,
        unlisted.map(|d| format!("{:.1} s after `catalog remove` returned", d.as_secs_f64())),
    );

    // Nothing of etcd left in the namespaces the plugin uninstalled from.
    let leftovers = || -> Vec<String> {
        [&ns_a, &ns_b, &ns_c, &ns_e, &ns_w]
            .iter()
            .filter_map(|ns| {
                let objs = env.get(&["get", "subscriptions.operators.coreos.com,installplans.operators.coreos.com,clusterserviceversions.operators.coreos.com,deployments,serviceaccounts,roles,rolebindings", "-n", ns, "-o", "name"]);
                let objs: Vec<&str> = objs.lines().filter(|l| !l.ends_with("/default")).collect();
                (!objs.is_empty()).then(|| format!("{ns}: {}", objs.join(" ")))
            })
            .collect()
    };
    r.step(
        "kubectl get subscriptions,installplans,csv,deployments,serviceaccounts,roles,rolebindings (each namespace)",
        None,
        match env.wait_collected(leftovers) {
            Ok(waited) => Ok(format!("nothing OLM made for etcd is left after the uninstalls (garbage collection done {:.1} s after this check began)", waited.as_secs_f64())),
            Err(left) => Err(format!("left behind {} s after the check began: {}", GC_WAIT.as_secs(), left.join("; "))),
        },
    );

    // What a failed uninstall may have left in `operators`, whose namespace stays.
    let _ = env.exec(&["delete", "subscriptions.operators.coreos.com", "etcd", "-n", "operators", "--ignore-not-found"], None);
    let _ = env.exec(
        &[
            "delete",
            "clusterserviceversions.operators.coreos.com",
            "etcdoperator.v0.9.4-clusterwide",
            "-n",
            "operators",
            "--ignore-not-found",
        ],
        None,
    );
    for ns in [&ns_a, &ns_b, &ns_c, &ns_d, &ns_e, &ns_w] {
        let _ = env.exec(&["delete", "namespace", ns, "--wait=false"], None);
    }

    // `version.Info{GitVersion:"v0.6.0", …, GoVersion:"go1.26.8", …}`
    let info = env.exec(&["operator", "version"], None).map(|o| o.stdout).unwrap_or_default();
    let field = |name: &str| info.split(&format!("{name}:\"")).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("?").to_string();
    let plugin_version = format!("`kubectl operator version`: GitVersion {}, built with {}", field("GitVersion"), field("GoVersion"));
    let header = format!(
        "## `kubectl operator` {VERSION} against olm-rs\n\nkubectl-operator ({}) as a kubectl plugin, on the cluster of `{}` ({}); {}. The etcd package of the bundled catalog (CatalogSource olm/community), namespaces {ns_a}, {ns_b}, {ns_c}, {ns_d}, {ns_e}, {ns_w}, operators; {:.0} s in all.\n",
        kubectl_operator.display(),
        kubeconfig.display(),
        server_version,
        plugin_version,
        started.elapsed().as_secs_f64(),
    );
    Ok(r.markdown(&header))
}
