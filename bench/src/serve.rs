//! Catalog servers under test (`olm catalog serve`, `opm serve`), readiness, memory, and one
//! gRPC load generator used against both.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::tools::Tools;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `olm catalog serve` (gRPC only, no reload polling: opm does not watch either).
    Ours,
    /// `opm serve DIR` as a plain command line runs it: builds its cache at start.
    Opm,
    /// `opm serve DIR --cache-dir C` with C built beforehand (`--cache-only`), as catalog
    /// images ship it.
    OpmPrebuiltCache,
}

impl Server {
    pub fn label(self) -> &'static str {
        match self {
            Server::Ours => "olm catalog serve",
            Server::Opm => "opm serve",
            Server::OpmPrebuiltCache => "opm serve (pre-built cache)",
        }
    }
}

pub struct Running {
    pub child: Child,
    pub addr: String,
    pub ready: Duration,
}

impl Running {
    /// SIGTERM (opm removes its temporary cache on a graceful exit), then SIGKILL after 10 s.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Build opm's cache for `dir` into `cache_dir` (not timed as part of readiness).
pub fn prebuild_opm_cache(tools: &Tools, dir: &Path, cache_dir: &Path, log: &Path) -> anyhow::Result<Duration> {
    if cache_dir.exists() {
        std::fs::remove_dir_all(cache_dir)?;
    }
    let start = Instant::now();
    let status = Command::new(&tools.opm)
        .arg("serve")
        .arg(dir)
        .arg("--cache-dir")
        .arg(cache_dir)
        .arg("--cache-only")
        .arg("--pprof-addr")
        .arg(format!("127.0.0.1:{}", free_port()?))
        .arg("-t")
        .arg(log.with_extension("termination.log"))
        .stdout(File::create(log)?)
        .stderr(File::create(log.with_extension("err"))?)
        .status()
        .context("running opm serve --cache-only")?;
    if !status.success() {
        bail!("opm serve --cache-only failed; see {}", log.display());
    }
    Ok(start.elapsed())
}

pub async fn start(tools: &Tools, which: Server, dir: &Path, work: &Path, tag: &str) -> anyhow::Result<Running> {
    let port = free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let log = work.join(format!("{tag}.log"));
    let mut cmd = match which {
        Server::Ours => {
            let mut c = Command::new(&tools.olm);
            c.args(["catalog", "serve", "--http-addr", "none", "--reload-interval", "0", "--grpc-addr", &addr])
                .arg(format!("--catalog=bench={}", dir.display()));
            c
        }
        Server::Opm | Server::OpmPrebuiltCache => {
            let mut c = Command::new(&tools.opm);
            // Its start-up profiling endpoint gets a free port (the default 6060 may be taken) and
            // its termination log a file of ours (the default is /dev/termination-log).
            let pprof = format!("127.0.0.1:{}", free_port()?);
            c.arg("serve").arg(dir).args(["-p", &port.to_string(), "--pprof-addr", &pprof, "-t"]).arg(work.join(format!("{tag}.termination.log")));
            if which == Server::OpmPrebuiltCache {
                c.arg("--cache-dir").arg(work.join(format!("{tag}-cache")));
            }
            c
        }
    };
    cmd.stdin(Stdio::null()).stdout(File::create(&log)?).stderr(File::create(log.with_extension("err"))?);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {}", which.label()))?;
    let deadline = start + Duration::from_secs(300);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("{} exited before it was ready ({status}); see {}", which.label(), log.with_extension("err").display());
        }
        if serving(&addr).await {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{} not SERVING after 300 s; see {}", which.label(), log.display());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(Running { child, addr, ready: start.elapsed() })
}

async fn serving(addr: &str) -> bool {
    let Ok(endpoint) = Endpoint::from_shared(format!("http://{addr}")) else { return false };
    let Ok(channel) = endpoint.connect_timeout(Duration::from_millis(200)).connect().await else { return false };
    let mut health = HealthClient::new(channel);
    match tokio::time::timeout(Duration::from_secs(2), health.check(HealthCheckRequest { service: String::new() })).await {
        Ok(Ok(r)) => r.into_inner().status == ServingStatus::Serving as i32,
        _ => false,
    }
}

/// (VmRSS, VmHWM) in MiB.
pub fn memory_mib(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok((
        status_field_mib(&status, "VmRSS:").context("VmRSS missing")?,
        status_field_mib(&status, "VmHWM:").context("VmHWM missing")?,
    ))
}

/// RssAnon of a process, in MiB.
pub fn anon_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status_field_mib(&status, "RssAnon:").context("RssAnon missing")
}

/// One kB field (e.g. `RssAnon:`) of a /proc/PID/status text, in MiB.
pub fn status_field_mib(status: &str, name: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

pub async fn client(addr: &str) -> anyhow::Result<RegistryClient<Channel>> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))?.connect().await?;
    Ok(RegistryClient::new(channel).max_decoding_message_size(256 << 20))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    ListPackages,
    GetPackage,
    GetBundleForChannel,
    ListBundles,
}

impl Rpc {
    pub const ALL: [Rpc; 4] = [Rpc::ListPackages, Rpc::GetPackage, Rpc::GetBundleForChannel, Rpc::ListBundles];
    pub fn name(self) -> &'static str {
        match self {
            Rpc::ListPackages => "ListPackages",
            Rpc::GetPackage => "GetPackage",
            Rpc::GetBundleForChannel => "GetBundleForChannel",
            Rpc::ListBundles => "ListBundles",
        }
    }
}

/// What the load generator asks for: every package and every (package, channel) of the
/// catalog, cycled through in order.
pub struct Targets {
    pub packages: Vec<String>,
    pub channels: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct LoadResult {
    pub requests: usize,
    pub errors: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub per_second: f64,
    pub first_error: Option<String>,
}

/// Send at most `requests` calls of `rpc` from `concurrency` clients (one HTTP/2 connection
/// each), stopping early after `time_cap`. Streams are read to the end.
pub async fn load(
    addr: &str,
    rpc: Rpc,
    targets: Arc<Targets>,
    requests: usize,
    concurrency: usize,
    time_cap: Duration,
) -> anyhow::Result<LoadResult> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let mut c = client(addr).await?;
        let next = next.clone();
        let targets = targets.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            let mut first_error = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests || started.elapsed() > time_cap {
                    break;
                }
                let t = Instant::now();
                let outcome = call(&mut c, rpc, &targets, i).await;
                latencies.push(t.elapsed());
                if let Err(e) = outcome {
                    errors += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            (latencies, errors, first_error)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for w in workers {
        let (l, e, f) = w.await?;
        latencies.extend(l);
        errors += e;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let wall = started.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1e6
    };
    Ok(LoadResult {
        requests: latencies.len(),
        errors,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        per_second: latencies.len() as f64 / wall.as_secs_f64(),
        first_error,
    })
}

async fn call(c: &mut RegistryClient<Channel>, rpc: Rpc, t: &Targets, i: usize) -> Result<(), tonic::Status> {
    match rpc {
        Rpc::ListPackages => {
            let mut s = c.list_packages(pb::ListPackageRequest {}).await?.into_inner();
            while s.message().await?.is_some() {}
        }
        Rpc::GetPackage => {
            let name = t.packages[i % t.packages.len()].clone();
            c.get_package(pb::GetPackageRequest { name }).await?;
        }
        Rpc::GetBundleForChannel => {
            let (pkg_name, channel_name) = t.channels[i % t.channels.len()].clone();
            #[allow(deprecated)]
            c.get_bundle_for_channel(pb::GetBundleInChannelRequest { pkg_name, channel_name }).await?;
        }
        Rpc::ListBundles => {
            let mut s = c.list_bundles(pb::ListBundlesRequest {}).await?.into_inner();
            while s.message().await?.is_some() {}
        }
    }
    Ok(())
}
