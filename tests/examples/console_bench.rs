//! Benchmark (issue #55): the console's catalog page for a real catalog, served by OLM's
//! package server on `olm dev up`, timed by the server and in a real browser.
//!
//! ```text
//! cargo build -p olm
//! cargo run -p olm-e2e --example console_bench -- [--fbc DIR] [--rounds N] [--port-base P]
//! ```
//!
//! `--fbc`: the catalog (default the real 745-bundle
//! /work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog; `OLM_BENCH_FBC`),
//! pushed as a catalog image to the environment's registry and served by a CatalogSource; the
//! run starts once the PackageManifest API lists every package of it ("after the server has
//! it"). Then, `--rounds` times each (default 20):
//! - **server**: `GET /` over plain HTTP with the session cookie, from connect to the last
//!   byte: the console lists the PackageManifests (as the user) and renders every card;
//! - **browser**: headless Chromium opens `/`; the Navigation Timing of each load: the first
//!   byte, DOMContentLoaded (the page usable) and load (icons in view included; the others are
//!   lazy).
//!
//! A throwaway environment (its own state directory and ports, from `--port-base`, default
//! 31800), removed at the end. Needs chromium and chromium-driver.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use fantoccini::Locator;
use olm_e2e::browser::{browser, browser_available, chromedriver, get_with_head, start_console};
use olm_e2e::dev_env::{DevEnvironment, kubectl, kubectl_paths, wait_for};

fn main() -> anyhow::Result<()> {
    let mut fbc = PathBuf::from(std::env::var("OLM_BENCH_FBC").unwrap_or_else(|_| "/work/shared/real-catalogs/community-operators-prod-fbc-v4.21/catalog".into()));
    let mut rounds = 20usize;
    let mut base = 31800u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--fbc" => fbc = PathBuf::from(value()?),
            "--rounds" => rounds = value()?.parse().context("--rounds")?,
            "--port-base" => base = value()?.parse().context("--port-base")?,
            other => bail!("unknown argument {other} (--fbc DIR, --rounds N, --port-base P)"),
        }
    }
    if !browser_available() {
        bail!("needs chromium and chromium-driver (apt-get install chromium chromium-driver)");
    }
    let (documents, _) = olm_catalog::load::load_fbc_documents(&fbc).with_context(|| format!("reading catalog {}", fbc.display()))?;
    let count = |schema: &str| documents.iter().filter(|d| d.value["schema"] == schema).count();
    let (packages, bundles) = (count("olm.package"), count("olm.bundle"));
    println!("catalog {}: {packages} packages, {bundles} bundles", fbc.display());

    let mut env = DevEnvironment::new(base);
    let up = env.olm(&["dev", "up"]);
    if !up.status.success() {
        bail!("olm dev up: {}", String::from_utf8_lossy(&up.stderr));
    }
    let result = measure(&env, &fbc, packages, rounds);
    let down = env.down();
    if !down.status.success() {
        eprintln!("olm dev down --purge: {}", String::from_utf8_lossy(&down.stderr));
    }
    result
}

fn measure(env: &DevEnvironment, fbc: &std::path::Path, packages: usize, rounds: usize) -> anyhow::Result<()> {
    let image = format!("127.0.0.1:{}/bench/console-catalog:v1", env.base + 500);
    olm_e2e::olm(&["catalog", "push", &fbc.display().to_string(), &image])?;
    let source = format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: bench\n  namespace: olm\nspec:\n  sourceType: grpc\n  image: {image}\n");
    let applied = kubectl(env, &["apply", "-f", "-"], Some(&source));
    if !applied.status.success() {
        bail!("creating the CatalogSource: {}", String::from_utf8_lossy(&applied.stderr));
    }
    let served = Instant::now();
    wait_for("every package served by the PackageManifest API", Duration::from_secs(600), || {
        let out = kubectl(env, &["get", "packagemanifests", "-n", "olm", "-l", "catalog=bench", "-o", "name"], None);
        let listed = String::from_utf8_lossy(&out.stdout).lines().count();
        if listed == packages { Ok(()) } else { Err(format!("{listed} of {packages} listed")) }
    });
    println!("CatalogSource created → {packages} PackageManifests listed: {:.1} s", served.elapsed().as_secs_f64());

    let (_, kubeconfig) = kubectl_paths(env);
    let (url, _console) = start_console(&kubeconfig, &[]);
    let port: u16 = url.trim_start_matches("http://127.0.0.1:").split('/').next().and_then(|p| p.parse().ok()).context("the console's port")?;
    let host = format!("127.0.0.1:{port}");
    let (driver_port, _driver) = chromedriver();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let client = browser(driver_port).await;
        client.goto(&url).await?;
        let cookie = client.get_named_cookie("olm_console").await?;
        let cookie = format!("olm_console={}", cookie.value());
        let cards = client.find_all(Locator::Css("li.card")).await?.len();
        let all_packages = kubectl(env, &["get", "packagemanifests", "-A", "-o", "name"], None);
        let shown = String::from_utf8_lossy(&all_packages.stdout).lines().count();
        println!("the catalog page shows {cards} cards (the cluster lists {shown} packages: the bench catalog's and the bundled one's)");
        if cards != shown {
            bail!("{cards} cards for {shown} packages");
        }

        let mut server = Vec::new();
        let mut bytes = 0;
        for _ in 0..rounds {
            let started = Instant::now();
            let (code, _, body) = get_with_head(port, "/", &[("Host", &host), ("Cookie", &cookie)]);
            server.push(started.elapsed().as_secs_f64() * 1000.0);
            if code != 200 {
                bail!("GET / answered {code}: {body}");
            }
            bytes = body.len();
        }
        let mut timings: [Vec<f64>; 3] = Default::default();
        for _ in 0..rounds {
            client.goto(&format!("http://{host}/")).await?;
            let t = client
                .execute(
                    "const n = performance.getEntriesByType('navigation')[0]; return [n.responseStart, n.domContentLoadedEventEnd, n.loadEventEnd];",
                    vec![],
                )
                .await?;
            for (i, series) in timings.iter_mut().enumerate() {
                series.push(t[i].as_f64().unwrap_or(f64::NAN));
            }
        }
        client.close().await?;
        println!("\n| catalog page `/` ({cards} cards, {} KiB of HTML), {rounds} rounds | median | max |\n|---|---|---|", bytes / 1024);
        let row = |what: &str, series: &mut Vec<f64>| {
            series.sort_by(f64::total_cmp);
            println!("| {what} | {:.0} ms | {:.0} ms |", series[series.len() / 2], series[series.len() - 1]);
        };
        row("server: request → last byte (list PackageManifests, render)", &mut server);
        let [first_byte, ready, load] = &mut timings;
        row("browser: first byte", first_byte);
        row("browser: DOMContentLoaded (usable)", ready);
        row("browser: load (icons in view)", load);
        Ok(())
    })
}
