//! The chaos run (issue #20): OLM as `olm dev up` runs it on a private control plane (its own
//! state directory and ports), a second `olm run` replica on the same Lease, and a workload of
//! installs and upgrades — OwnNamespace Subscriptions (Automatic and Manual, one with a
//! package dependency), an AllNamespaces operator, the catalog gaining a version mid-run —
//! while a monkey, from a seeded random generator, SIGKILLs `olm run` (either replica),
//! `olm catalog serve`, `olm packageserver`, kube-apiserver or etcd and starts it again.
//! Then it waits for convergence and checks what a cluster admin would look for
//! (`chaos_check`), and writes RELIABILITY.md. Replay a run with its seed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::chaos_catalog::{self as catalog, CHANNEL, GLOBAL, GLOBAL_NAMESPACE, INITIAL, UPDATE, Workload, workload};
use crate::chaos_check::{self, Outcome};
use crate::dev_env::{self, DevEnv};

pub struct ChaosOptions {
    pub seed: u64,
    pub kills: usize,
    pub namespaces: usize,
    pub out: PathBuf,
    pub olm: PathBuf,
    /// Longest wait for convergence after the last kill.
    pub settle_timeout: Duration,
}

/// What the monkey kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Controllers,
    Replica,
    CatalogServer,
    PackageServer,
    ApiServer,
    Etcd,
}

impl Target {
    pub const ALL: [Target; 6] =
        [Target::Controllers, Target::Replica, Target::CatalogServer, Target::PackageServer, Target::ApiServer, Target::Etcd];

    pub fn label(self) -> &'static str {
        match self {
            Target::Controllers => "olm run (replica 1)",
            Target::Replica => "olm run (replica 2)",
            Target::CatalogServer => "olm catalog serve",
            Target::PackageServer => "olm packageserver",
            Target::ApiServer => "kube-apiserver",
            Target::Etcd => "etcd",
        }
    }

    /// The pid file `olm dev up` keeps for it, for the processes it starts.
    fn dev_process(self) -> Option<&'static str> {
        match self {
            Target::Controllers => Some(dev_env::CONTROLLERS),
            Target::CatalogServer => Some(dev_env::CATALOG_SERVER),
            Target::PackageServer => Some(dev_env::PACKAGE_SERVER),
            _ => None,
        }
    }
}

pub struct Kill {
    pub at: Duration,
    pub target: Target,
    /// How long it was down (killed → running again).
    pub down: Duration,
}

pub struct ChaosRun {
    pub seed: u64,
    pub namespaces: usize,
    pub kills: Vec<Kill>,
    pub catalog_updated_at: Duration,
    pub last_kill_end: Duration,
    pub outcome: Outcome,
    /// Last kill → everything converged, or None when it did not within the timeout.
    pub converged_after: Option<Duration>,
    pub total: Duration,
    pub olm_binary: String,
}

/// Ports of its own: `olm dev up` uses 28000, the tests 29000, the e2e bench 25000, the
/// large-scale run 27000 (all below the ephemeral range).
const PORT_BASE: u16 = 26000;

/// A second `olm run` on the same leader Lease as the environment's.
fn replica(env: &DevEnv) -> anyhow::Result<Child> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(env.work.join("replica-2.log"))?;
    Ok(Command::new(&env.olm)
        .args(["run", "--leader-elect", "--metrics-addr", &crate::e2e::loopback_port()?, "--cluster-catalog-addr", &crate::e2e::loopback_port()?])
        .arg(format!("--kubeconfig={}", env.layout.kubeconfig().display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?)
}

fn sigkill(pid: u32) -> anyhow::Result<()> {
    let status = Command::new("kill").args(["-KILL", &pid.to_string()]).status()?;
    if !status.success() {
        bail!("kill -KILL {pid} failed");
    }
    Ok(())
}

fn manifests(work: &[Workload], grpc_port: u16) -> String {
    let mut out = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: chaos\n  namespace: olm\nspec:\n  sourceType: grpc\n  address: 127.0.0.1:{grpc_port}\n  updateStrategy:\n    registryPoll:\n      interval: 20s\n"
    );
    let subscription = |ns: &str, package: &str, manual: bool| {
        format!(
            "---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\n  namespace: {ns}\nspec:\n  source: chaos\n  sourceNamespace: olm\n  name: {package}\n  channel: {CHANNEL}\n  startingCSV: {}\n  installPlanApproval: {}\n",
            catalog::csv_name(package, INITIAL[0]),
            if manual { "Manual" } else { "Automatic" }
        )
    };
    out.push_str(&format!("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {GLOBAL_NAMESPACE}\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\n  namespace: {GLOBAL_NAMESPACE}\nspec: {{}}\n"));
    out.push_str(&subscription(GLOBAL_NAMESPACE, GLOBAL, false));
    for w in work {
        let ns = &w.namespace;
        out.push_str(&format!("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    olm-chaos: \"true\"\n---\napiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: own\n  namespace: {ns}\nspec:\n  targetNamespaces: [{ns}]\n"));
        out.push_str(&subscription(ns, w.package, w.manual));
    }
    out
}

/// Approve every InstallPlan waiting for approval (the Manual Subscriptions' admin).
fn approve_pending(env: &DevEnv) -> usize {
    let Ok(listing) = env.kubectl(
        &["get", "installplans", "-A", "-o", "jsonpath={range .items[?(@.spec.approved==false)]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}"],
        None,
    ) else {
        return 0;
    };
    let mut approved = 0;
    for line in listing.lines().filter(|l| !l.is_empty()) {
        if let Some((ns, name)) = line.split_once('/')
            && env.kubectl(&["patch", "installplan", name, "-n", ns, "--type=merge", "-p", r#"{"spec":{"approved":true}}"#], None).is_ok()
        {
            approved += 1;
        }
    }
    approved
}

pub fn run(workspace: &Path, opts: &ChaosOptions) -> anyhow::Result<ChaosRun> {
    let work = workspace.join("target/olm-bench/chaos");
    let env = DevEnv::fresh(&work, &opts.olm, &work.join("catalog"), PORT_BASE)?;
    catalog::write(&env.catalog_dir, &INITIAL)?;
    eprintln!("chaos: seed {} — starting OLM with olm dev up on ports from {PORT_BASE} ({})", opts.seed, env.work.display());
    env.up()?;
    let result = drive(&env, opts);
    eprintln!("chaos: stopping the environment");
    let _ = env.down();
    result
}

fn drive(env: &DevEnv, opts: &ChaosOptions) -> anyhow::Result<ChaosRun> {
    let begin = Instant::now();
    let mut replica = replica(env)?;
    let work = workload(opts.namespaces);
    env.kubectl(&["apply", "-f", "-"], Some(&manifests(&work, env.layout.host_ports.catalog_grpc)))?;
    let mut rng = fastrand::Rng::with_seed(opts.seed);
    let mut kills = Vec::new();
    let mut catalog_updated_at = None;
    // Every component at least once, the rest at random.
    let mut schedule: Vec<Target> = Target::ALL.to_vec();
    while schedule.len() < opts.kills {
        schedule.push(Target::ALL[rng.usize(..Target::ALL.len())]);
    }
    rng.shuffle(&mut schedule);
    for (index, target) in schedule.iter().copied().enumerate() {
        // A random pause, approving plans meanwhile; the catalog gains a version halfway.
        let pause = Duration::from_millis(rng.u64(1_000..8_000));
        let pause_begin = Instant::now();
        while pause_begin.elapsed() < pause {
            approve_pending(env);
            std::thread::sleep(Duration::from_millis(700));
        }
        if index == schedule.len() / 2 {
            let mut versions = INITIAL.to_vec();
            versions.push(UPDATE);
            catalog::write(&env.catalog_dir, &versions)?;
            catalog_updated_at = Some(begin.elapsed());
            eprintln!("chaos: {:>6.1}s catalog gains {UPDATE} of every package", begin.elapsed().as_secs_f64());
        }
        let at = begin.elapsed();
        let down_for = Duration::from_millis(rng.u64(500..4_000));
        let killed = Instant::now();
        kill(env, target, &mut replica)?;
        std::thread::sleep(down_for);
        restore(env, target, &mut replica).with_context(|| format!("restarting {} after kill {}", target.label(), index + 1))?;
        let down = killed.elapsed();
        eprintln!("chaos: {:>6.1}s kill {:>2}: {} (down {:.1}s)", at.as_secs_f64(), index + 1, target.label(), down.as_secs_f64());
        kills.push(Kill { at, target, down });
    }
    let last_kill_end = begin.elapsed();
    let settle_begin = Instant::now();
    let expected = chaos_check::Expected::new(&work);
    let mut outcome = chaos_check::check(&env.layout, &expected)?;
    while !outcome.converged() && settle_begin.elapsed() < opts.settle_timeout {
        approve_pending(env);
        std::thread::sleep(Duration::from_secs(3));
        outcome = chaos_check::check(&env.layout, &expected)?;
    }
    let converged_after = outcome.converged().then(|| settle_begin.elapsed());
    // Let anything that would still happen happen, then look again for duplicates and orphans.
    if converged_after.is_some() {
        std::thread::sleep(Duration::from_secs(10));
        outcome = chaos_check::check(&env.layout, &expected)?;
    }
    let _ = replica.kill();
    let _ = replica.wait();
    Ok(ChaosRun {
        seed: opts.seed,
        namespaces: opts.namespaces,
        kills,
        catalog_updated_at: catalog_updated_at.unwrap_or_default(),
        last_kill_end,
        outcome,
        converged_after,
        total: begin.elapsed(),
        olm_binary: opts.olm.display().to_string(),
    })
}

fn kill(env: &DevEnv, target: Target, replica: &mut Child) -> anyhow::Result<()> {
    match target {
        Target::Replica => {
            replica.kill()?;
            replica.wait()?;
        }
        Target::ApiServer | Target::Etcd => {
            let component = if target == Target::Etcd { olm_dev::Component::Etcd } else { olm_dev::Component::ApiServer };
            olm_dev::kill_component(&env.layout, component)?;
        }
        _ => {
            sigkill(env.pid(target.dev_process().context("an olm dev process")?)?)?;
        }
    }
    Ok(())
}

fn restore(env: &DevEnv, target: Target, replica: &mut Child) -> anyhow::Result<()> {
    match target {
        Target::Replica => *replica = self::replica(env)?,
        Target::ApiServer => drop(olm_dev::restart_component(&env.layout, olm_dev::Component::ApiServer)?),
        Target::Etcd => drop(olm_dev::restart_component(&env.layout, olm_dev::Component::Etcd)?),
        // `olm dev up` starts what is missing and leaves the rest running.
        _ => env.up()?,
    }
    Ok(())
}
