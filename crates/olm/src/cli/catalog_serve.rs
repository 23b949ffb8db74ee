//! `olm catalog serve`: serve catalog directories over HTTP (catalogd-compatible and our
//! package/bundle API) and over operator-registry's gRPC API.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

/// Serve catalogs over HTTP and gRPC, reloading them when their files change.
#[derive(Debug, Args)]
#[command(after_long_help = SERVE_HELP)]
pub struct ServeArgs {
    /// A catalog to serve, as NAME=DIR (repeatable). NAME appears in URLs
    /// (/catalogs/NAME/api/v1/all) and must be a DNS-1123 subdomain; DIR is a
    /// File-Based Catalog, a legacy package-manifest tree or a tree of bundle directories.
    #[arg(long = "catalog", value_name = "NAME=DIR", required = true)]
    pub catalogs: Vec<String>,

    /// HTTP listen address for every catalog (host:port or :port); "none" disables HTTP.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: String,

    /// gRPC listen address of the operator-registry API (repeatable). The API serves one
    /// catalog per address, as `opm serve` does: give NAME=ADDR per catalog, or a bare
    /// ADDR when exactly one catalog is served. Default with one catalog:
    /// 127.0.0.1:50051; with several, catalogs without an address get no gRPC server.
    #[arg(long = "grpc-addr", value_name = "[NAME=]ADDR")]
    pub grpc_addrs: Vec<String>,

    /// How often to check the catalog directories for edits, as a Go duration (e.g. 5s, 500ms);
    /// 0 disables reload.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub reload_interval: String,

    /// Time limit for one HTTP request or gRPC call, as a Go duration (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub request_timeout: String,

    /// Log format on stderr: text or json. The level comes from RUST_LOG (default info).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: String,
}

const SERVE_HELP: &str = "\
Endpoints (HTTP):
  /catalogs/NAME/api/v1/all                    the catalog as JSON lines (catalogd compatible)
  /catalogs/NAME/api/v1/metas?schema=&package=&name=
  /api/v1/catalogs                             served catalogs and their load status
  /api/v1/catalogs/NAME/packages[/PACKAGE]     packages; one package shaped like a PackageManifest
  /api/v1/catalogs/NAME/packages/PACKAGE/icon  the package icon as an image
  /api/v1/catalogs/NAME/bundles/BUNDLE         a bundle with its CSV and manifests
  /healthz /readyz /metrics /openapi.json

gRPC (per catalog): api.Registry (operator-registry), grpc.health.v1 (\"\" and \"Registry\"),
and server reflection, so `grpcurl -plaintext ADDR list` works without the proto.

Reload: the directories are polled; a valid edit replaces the served snapshot atomically,
an invalid one is logged and reported by /readyz and /metrics while the last good
snapshot keeps serving. SIGTERM/SIGINT stop the server gracefully.

Examples:
  olm catalog serve --catalog community=catalogs/community
  olm catalog serve --catalog a=dir/a --catalog b=dir/b --grpc-addr a=:50051 --grpc-addr b=:50052
";

/// "host:port", ":port" (all interfaces, as Go servers read it) or "[::1]:port".
fn parse_addr(text: &str) -> anyhow::Result<SocketAddr> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.to_socket_addrs()
        .with_context(|| format!("{text:?} is not a listen address; write host:port or :port"))?
        .next()
        .with_context(|| format!("{text:?} resolves to no address"))
}

fn valid_catalog_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
        })
}

fn build_config(args: &ServeArgs) -> anyhow::Result<olm_registry::ServeConfig> {
    let mut catalogs: Vec<(String, PathBuf)> = Vec::new();
    for spec in &args.catalogs {
        let Some((name, dir)) = spec.split_once('=') else {
            bail!("--catalog {spec:?}: write NAME=DIR, e.g. --catalog community=catalogs/community");
        };
        if !valid_catalog_name(name) {
            bail!("--catalog {spec:?}: catalog name {name:?} must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')");
        }
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            bail!("--catalog {spec:?}: {} is not a directory", dir.display());
        }
        if catalogs.iter().any(|(n, _)| n == name) {
            bail!("--catalog {name:?} is given twice; catalog names must be unique");
        }
        catalogs.push((name.to_string(), dir));
    }

    let mut grpc_addrs = Vec::new();
    for spec in &args.grpc_addrs {
        // NAME=ADDR, or a bare ADDR (which has no '=').
        match spec.split_once('=') {
            Some((name, addr)) => {
                if !catalogs.iter().any(|(n, _)| n == name) {
                    let names: Vec<&str> = catalogs.iter().map(|(n, _)| n.as_str()).collect();
                    bail!("--grpc-addr {spec:?}: no catalog named {name:?}; served catalogs: {}", names.join(", "));
                }
                grpc_addrs.push((name.to_string(), parse_addr(addr)?));
            }
            None => {
                if catalogs.len() != 1 {
                    bail!(
                        "--grpc-addr {spec:?}: with {} catalogs, say which catalog each gRPC address serves: --grpc-addr NAME=ADDR",
                        catalogs.len()
                    );
                }
                grpc_addrs.push((catalogs[0].0.clone(), parse_addr(spec)?));
            }
        }
    }
    if args.grpc_addrs.is_empty() && catalogs.len() == 1 {
        grpc_addrs.push((catalogs[0].0.clone(), parse_addr("127.0.0.1:50051")?));
    }

    let mut config = olm_registry::ServeConfig::new(catalogs);
    config.http_addr = if args.http_addr.eq_ignore_ascii_case("none") { None } else { Some(parse_addr(&args.http_addr)?) };
    config.grpc_addrs = grpc_addrs;
    let reload = super::duration_flag("--reload-interval", &args.reload_interval, "5s or 500ms (0 disables reload)")?;
    config.reload_interval = (!reload.is_zero()).then_some(reload);
    let timeout = super::duration_flag("--request-timeout", &args.request_timeout, "30s or 2m")?;
    if timeout.is_zero() {
        bail!("--request-timeout must be more than 0");
    }
    config.http_limits.request_timeout = timeout;
    config.grpc_limits.request_timeout = timeout;
    Ok(config)
}

fn init_logging(format: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match format {
        "text" => builder.try_init(),
        "json" => builder.json().try_init(),
        other => bail!("--log-format {other:?}: use text or json"),
    };
    // Already initialized (e.g. by a test harness): keep that one.
    let _ = result;
    Ok(())
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_format)?;
    let config = build_config(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(async move {
        let stop = super::shutdown::on_signal()?;
        let server = olm_registry::start(config).await.context("starting the catalog server")?;
        super::spawn_alloc_report();
        for catalog in server.catalogs.iter() {
            match catalog.snapshot() {
                Some(s) => {
                    let (p, c, b) = s.catalog.counts();
                    println!(
                        "catalog {}: {} packages, {} channels, {} bundles from {} (loaded in {} ms)",
                        catalog.name,
                        p,
                        c,
                        b,
                        catalog.origin(),
                        s.load_duration.as_millis()
                    );
                }
                None => println!(
                    "catalog {}: NOT LOADED from {}: {}",
                    catalog.name,
                    catalog.origin(),
                    catalog.status().last_error.unwrap_or_default()
                ),
            }
        }
        if let Some(addr) = server.http_addr {
            println!("HTTP on http://{addr} (catalogs: http://{addr}/api/v1/catalogs, API: http://{addr}/openapi.json)");
        }
        for (name, addr) in &server.grpc_addrs {
            println!("gRPC api.Registry for catalog {name} on {addr}");
        }
        stop.await;
        println!("shutting down");
        server.shutdown();
        server.wait().await.context("catalog server")?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(catalogs: &[&str], grpc: &[&str]) -> ServeArgs {
        ServeArgs {
            catalogs: catalogs.iter().map(|s| s.to_string()).collect(),
            http_addr: "127.0.0.1:0".into(),
            grpc_addrs: grpc.iter().map(|s| s.to_string()).collect(),
            reload_interval: "5s".into(),
            request_timeout: "30s".into(),
            log_format: "text".into(),
        }
    }

    #[test]
    fn durations_are_go_durations() {
        let dir = std::env::temp_dir().display().to_string();
        let with = |reload: &str, timeout: &str| {
            let mut a = args(&[&format!("a={dir}")], &[]);
            a.reload_interval = reload.into();
            a.request_timeout = timeout.into();
            build_config(&a)
        };
        let config = with("250ms", "2m").unwrap();
        assert_eq!(config.reload_interval, Some(Duration::from_millis(250)));
        assert_eq!(config.http_limits.request_timeout, Duration::from_secs(120));
        assert_eq!(with("0", "1h30m").unwrap().reload_interval, None);
        // A bare number has no unit, as Go's flags say.
        let err = with("3", "30s").unwrap_err().to_string();
        assert!(err.starts_with("--reload-interval \"3\": missing unit") && err.contains("such as 5s"), "{err}");
        let err = with("5s", "5 parsecs").unwrap_err().to_string();
        assert!(err.starts_with("--request-timeout \"5 parsecs\": unknown unit"), "{err}");
        assert!(with("5s", "0").unwrap_err().to_string().contains("must be more than 0"));
    }

    #[test]
    fn grpc_addresses_per_catalog() {
        let dir = std::env::temp_dir();
        let d = dir.display().to_string();
        let one = build_config(&args(&[&format!("a={d}")], &[])).unwrap();
        assert_eq!(one.grpc_addrs, vec![("a".to_string(), "127.0.0.1:50051".parse().unwrap())]);
        let bare = build_config(&args(&[&format!("a={d}")], &[":6000"])).unwrap();
        assert_eq!(bare.grpc_addrs[0].1, "0.0.0.0:6000".parse().unwrap());
        let two = [format!("a={d}"), format!("b={d}")];
        let two: Vec<&str> = two.iter().map(String::as_str).collect();
        let err = build_config(&args(&two, &[":6000"])).unwrap_err().to_string();
        assert!(err.contains("--grpc-addr NAME=ADDR"), "{err}");
        let named = build_config(&args(&two, &["b=127.0.0.1:6001"])).unwrap();
        assert_eq!(named.grpc_addrs, vec![("b".to_string(), "127.0.0.1:6001".parse().unwrap())]);
        let err = build_config(&args(&two, &["c=:1"])).unwrap_err().to_string();
        assert!(err.contains("no catalog named \"c\""), "{err}");
        let err = build_config(&args(&["Bad=/tmp"], &[])).unwrap_err().to_string();
        assert!(err.contains("DNS-1123"), "{err}");
        let err = build_config(&args(&["nodir"], &[])).unwrap_err().to_string();
        assert!(err.contains("NAME=DIR"), "{err}");
    }
}
