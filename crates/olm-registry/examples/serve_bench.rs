//! Catalog server benchmark: load-and-index time, server RSS, and HTTP/gRPC latency and
//! throughput for list packages, get package and get bundle, on loopback.
//!
//!     cargo run --release -p olm-registry --example serve_bench [-- FBC_DIR]
//!
//! Catalogs: the real community-operators-prod v4.21 FBC (745 bundles; skipped when
//! absent) and a synthetic catalog ten times its size (every package cloned under ten
//! new names). The server runs in a child process (this same binary with `--serve`),
//! so its RSS is not mixed with the load generator's. Prints tables; asserts nothing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;
use serde_json::Value;

// `--features bench-mimalloc`: measure with mimalloc instead of the system allocator.
#[cfg(feature = "bench-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_FBC: &str = "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog";
/// Requests per (endpoint, protocol) measurement.
const REQUESTS: usize = 2000;
/// Concurrent clients during a measurement.
const CONCURRENCY: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve") {
        serve_child(&args[2]);
        return;
    }
    let fbc = PathBuf::from(args.get(1).cloned().unwrap_or_else(|| DEFAULT_FBC.to_string()));
    if !fbc.is_dir() {
        println!("SKIP: {} not found; pass an FBC directory as the first argument", fbc.display());
        return;
    }
    println!("allocator: {}", if cfg!(feature = "bench-mimalloc") { "mimalloc" } else { "system (glibc)" });
    if cfg!(debug_assertions) {
        println!("note: debug build; run with --release for meaningful numbers");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let synthetic = tempfile::tempdir().expect("temp dir");
    let synthetic_dir = synthetic.path().join("catalog");
    let generated = make_synthetic(&fbc, &synthetic_dir, 10);
    println!("synthetic catalog: {generated} documents in {}", synthetic_dir.display());

    let mut rows = Vec::new();
    for (label, dir) in [("real (v4.21)", fbc.clone()), ("synthetic 10x", synthetic_dir.clone())] {
        rows.push(runtime.block_on(bench_catalog(label, &dir)));
    }

    println!();
    println!("| catalog | packages | bundles | load+index (in-process) | server load (child) | RSS after load | RSS after load test |");
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.0} ms | {:.0} ms | {:.1} MB | {:.1} MB |",
            r.label, r.packages, r.bundles, r.load_ms, r.child_load_ms, r.rss_idle_mb, r.rss_after_mb
        );
    }
    println!();
    println!("| catalog | endpoint | protocol | p50 | p99 | requests/s ({CONCURRENCY} clients, {REQUESTS} requests) |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        for m in &r.measurements {
            println!("| {} | {} | {} | {:.0} µs | {:.0} µs | {:.0} |", r.label, m.endpoint, m.protocol, m.p50_us, m.p99_us, m.rps);
        }
    }
}

struct Row {
    label: &'static str,
    packages: usize,
    bundles: usize,
    load_ms: f64,
    child_load_ms: f64,
    rss_idle_mb: f64,
    rss_after_mb: f64,
    measurements: Vec<Measurement>,
}

struct Measurement {
    endpoint: &'static str,
    protocol: &'static str,
    p50_us: f64,
    p99_us: f64,
    rps: f64,
}

/// Child mode: serve one catalog, print the addresses, exit when stdin closes.
fn serve_child(dir: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let mut config = olm_registry::ServeConfig::new(vec![("bench".into(), PathBuf::from(dir))]);
        config.http_addr = Some("127.0.0.1:0".parse().expect("addr"));
        config.grpc_addrs = vec![("bench".into(), "127.0.0.1:0".parse().expect("addr"))];
        config.reload_interval = None;
        let started = Instant::now();
        let server = olm_registry::start(config).await.expect("server starts");
        let load_ms = started.elapsed().as_secs_f64() * 1000.0;
        if server.catalogs.get("bench").and_then(|c| c.snapshot()).is_none() {
            eprintln!("catalog failed to load: {:?}", server.catalogs.get("bench").map(|c| c.status().last_error));
            std::process::exit(1);
        }
        println!("READY {} {} {load_ms}", server.http_addr.expect("http"), server.grpc_addrs["bench"]);
        let _ = std::io::stdout().flush();
        // Wait for the parent to close stdin.
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        })
        .await;
        server.shutdown();
        let _ = server.wait().await;
    });
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

async fn bench_catalog(label: &'static str, dir: &Path) -> Row {
    // In-process load-and-index, best of three (the first run also warms the page cache).
    let mut best = f64::MAX;
    let mut counts = (0, 0, 0);
    for _ in 0..3 {
        let started = Instant::now();
        let snapshot = olm_registry::load_snapshot(dir).unwrap_or_else(|e| panic!("{} does not load: {e}", dir.display()));
        best = best.min(started.elapsed().as_secs_f64() * 1000.0);
        counts = snapshot.catalog.counts();
    }
    let (package_names, bundle_keys) = {
        let snapshot = olm_registry::load_snapshot(dir).expect("loads");
        let packages: Vec<String> = snapshot.catalog.packages().iter().map(|p| p.name.clone()).collect();
        let bundles: Vec<(String, String, String)> = snapshot
            .catalog
            .packages()
            .iter()
            .filter_map(|p| {
                let ch = p.default_channel()?;
                let head = ch.head()?;
                Some((p.name.clone(), ch.name.clone(), head.name.clone()))
            })
            .collect();
        (packages, bundles)
    };

    let exe = std::env::current_exe().expect("current exe");
    let mut child: Child = Command::new(exe)
        .arg("--serve")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("server output");
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts.first(), Some(&"READY"), "server said {line:?}");
    let http_addr = parts[1].to_string();
    let grpc_addr = parts[2].to_string();
    let child_load_ms: f64 = parts[3].parse().unwrap_or(f64::NAN);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_idle_mb = rss_mb(child.id());

    let packages = Arc::new(package_names);
    let bundles = Arc::new(bundle_keys);
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut measurements = Vec::new();

    let base = format!("http://{http_addr}");
    measurements.push(
        measure("list packages", "HTTP", {
            let (http, base) = (http.clone(), base.clone());
            move |_| http_get(http.clone(), format!("{base}/api/v1/catalogs/bench/packages"))
        })
        .await,
    );
    measurements.push(
        measure("get package", "HTTP", {
            let (http, base, packages) = (http.clone(), base.clone(), packages.clone());
            move |i| http_get(http.clone(), format!("{base}/api/v1/catalogs/bench/packages/{}", packages[i % packages.len()]))
        })
        .await,
    );
    measurements.push(
        measure("get bundle", "HTTP", {
            let (http, base, bundles) = (http.clone(), base.clone(), bundles.clone());
            move |i| {
                let (p, _, b) = &bundles[i % bundles.len()];
                http_get(http.clone(), format!("{base}/api/v1/catalogs/bench/bundles/{b}?package={p}"))
            }
        })
        .await,
    );

    let channel = tonic::transport::Channel::from_shared(format!("http://{grpc_addr}")).expect("uri").connect().await.expect("gRPC");
    let grpc = RegistryClient::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    measurements.push(
        measure("list packages", "gRPC", {
            let grpc = grpc.clone();
            move |_| {
                let mut c = grpc.clone();
                async move {
                    let mut stream = c.list_packages(pb::ListPackageRequest {}).await.expect("ListPackages").into_inner();
                    let mut n = 0;
                    while stream.message().await.expect("stream").is_some() {
                        n += 1;
                    }
                    assert!(n > 0);
                }
            }
        })
        .await,
    );
    measurements.push(
        measure("get package", "gRPC", {
            let (grpc, packages) = (grpc.clone(), packages.clone());
            move |i| {
                let mut c = grpc.clone();
                let name = packages[i % packages.len()].clone();
                async move {
                    c.get_package(pb::GetPackageRequest { name }).await.expect("GetPackage");
                }
            }
        })
        .await,
    );
    measurements.push(
        measure("get bundle", "gRPC", {
            let (grpc, bundles) = (grpc.clone(), bundles.clone());
            move |i| {
                let mut c = grpc.clone();
                let (p, ch, b) = bundles[i % bundles.len()].clone();
                async move {
                    c.get_bundle(pb::GetBundleRequest { pkg_name: p, channel_name: ch, csv_name: b }).await.expect("GetBundle");
                }
            }
        })
        .await,
    );

    let rss_after_mb = rss_mb(child.id());
    drop(child.stdin.take());
    let _ = child.wait();
    Row {
        label,
        packages: counts.0,
        bundles: counts.2,
        load_ms: best,
        child_load_ms,
        rss_idle_mb,
        rss_after_mb,
        measurements,
    }
}

async fn http_get(client: Client<HttpConnector, Empty<Bytes>>, url: String) {
    let uri: hyper::Uri = url.parse().expect("uri");
    let resp = client.get(uri).await.expect("HTTP request");
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let _ = resp.into_body().collect().await.expect("body");
}

async fn measure<F, Fut>(endpoint: &'static str, protocol: &'static str, call: F) -> Measurement
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    // Warm-up: connections, caches.
    for i in 0..50 {
        call(i).await;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..CONCURRENCY {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(REQUESTS / CONCURRENCY);
            let mut i = worker;
            while i < REQUESTS {
                let t = Instant::now();
                call(i).await;
                latencies.push(t.elapsed());
                i += CONCURRENCY;
            }
            latencies
        }));
    }
    let mut all: Vec<Duration> = Vec::with_capacity(REQUESTS);
    for t in tasks {
        all.extend(t.await.expect("worker"));
    }
    let wall = started.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)].as_secs_f64() * 1e6;
    Measurement { endpoint, protocol, p50_us: pct(0.50), p99_us: pct(0.99), rps: all.len() as f64 / wall.as_secs_f64() }
}

/// Write `copies` renamed clones of every package of `src` into `dst`, one directory
/// per new package. Returns the number of documents written.
fn make_synthetic(src: &Path, dst: &Path, copies: usize) -> usize {
    let (documents, problems) = olm_catalog::load::load_fbc_documents(src).expect("source catalog loads");
    assert!(problems.is_empty(), "source catalog has problems: {problems:?}");
    let mut by_package: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for doc in documents {
        let schema = doc.value.get("schema").and_then(Value::as_str).unwrap_or("").to_string();
        let package = if schema == "olm.package" { doc.value.get("name") } else { doc.value.get("package") };
        let package = package.and_then(Value::as_str).unwrap_or("").to_string();
        by_package.entry(package).or_default().push(doc.value);
    }
    let mut written = 0;
    for (package, docs) in &by_package {
        for copy in 0..copies {
            let new_name = format!("{package}-c{copy}");
            let out_dir = dst.join(&new_name);
            std::fs::create_dir_all(&out_dir).expect("mkdir");
            let mut text = String::new();
            for doc in docs {
                let mut doc = doc.clone();
                rename_package(&mut doc, package, &new_name);
                text.push_str(&doc.to_string());
                text.push('\n');
                written += 1;
            }
            std::fs::write(out_dir.join("catalog.json"), text).expect("write");
        }
    }
    written
}

fn rename_package(doc: &mut Value, old: &str, new: &str) {
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(obj) = doc.as_object_mut() else { return };
    if schema == "olm.package" {
        obj.insert("name".into(), Value::String(new.into()));
    } else if obj.get("package").and_then(Value::as_str) == Some(old) {
        obj.insert("package".into(), Value::String(new.into()));
    }
    if let Some(Value::Array(props)) = obj.get_mut("properties") {
        for p in props {
            if p.get("type").and_then(Value::as_str) == Some("olm.package")
                && let Some(v) = p.get_mut("value").and_then(Value::as_object_mut) {
                    v.insert("packageName".into(), Value::String(new.into()));
                }
        }
    }
}
