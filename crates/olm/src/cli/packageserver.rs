//! `olm packageserver`: serve the PackageManifest API (`packages.operators.coreos.com/v1`) as an
//! aggregated API behind the APIService `v1.packages.operators.coreos.com`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use olm_packageserver::cluster::{Authorization, Config, ServingSource};

/// Serve `kubectl get packagemanifests` from the cluster's CatalogSources.
#[derive(Debug, clap::Args)]
#[command(after_long_help = HELP)]
pub struct PackageServerArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// HTTPS listen address.
    #[arg(long, default_value = "0.0.0.0:5443")]
    bind: SocketAddr,
    /// Namespace whose CatalogSources every namespace sees.
    #[arg(long, env = "OLM_GLOBAL_CATALOG_NAMESPACE", default_value = "olm")]
    global_namespace: String,
    /// Serving certificate (PEM); with --tls-private-key-file.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM); with --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Otherwise: a Secret NAMESPACE/NAME holding the serving certificate, generated (with its
    /// own CA) when missing; the CA is written to --apiservice's caBundle.
    #[arg(long, default_value = "olm/packageserver-serving-cert")]
    serving_cert_secret: String,
    /// DNS names of a generated serving certificate (the aggregator checks `<service>.<namespace>.svc`).
    #[arg(long, value_delimiter = ',', default_value = "packageserver.olm.svc,packageserver.olm.svc.cluster.local")]
    serving_cert_dns_names: Vec<String>,
    /// The APIService whose caBundle to keep in sync with a generated certificate ("" for none).
    #[arg(long, default_value = "v1.packages.operators.coreos.com")]
    apiservice: String,
    #[command(flatten)]
    registry: super::image::RegistryArgs,
    /// Authorization: "sar" (SubjectAccessReview per request, cached 10s) or "authenticated"
    /// (every request the API server forwards is allowed).
    #[arg(long, default_value = "sar")]
    authorization: String,
    /// How often healthy catalogs are read again, as a Go duration (e.g. 5m, 30s).
    #[arg(long, default_value = "5m")]
    refresh: String,
}

const HELP: &str = "\
Answers get and list of packagemanifests (per namespace: the namespace's CatalogSources plus the
global namespace's; cluster-wide: all), label and metadata.name field selectors, Table output,
the icon subresource (and ?icons=true on a get), discovery and OpenAPI.

Requests must come through kube-apiserver: the front-proxy client certificate is checked against
kube-system/extension-apiserver-authentication and X-Remote-User/X-Remote-Group are then
authorized with a SubjectAccessReview. /healthz and /readyz need no authentication.

A failing catalog never makes the API unavailable: its packages are left out (or served from the
last successful read) and a Warning header says so.
";

pub fn run(args: PackageServerArgs) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_runtime=warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
    let authorization = match args.authorization.as_str() {
        "sar" => Authorization::SubjectAccessReview,
        "authenticated" => Authorization::AllowAuthenticated,
        other => bail!("--authorization {other:?}: use sar or authenticated"),
    };
    let serving = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => ServingSource::Files { cert: cert.clone(), key: key.clone() },
        _ => {
            let Some((namespace, name)) = args.serving_cert_secret.split_once('/') else {
                bail!("--serving-cert-secret {:?}: write NAMESPACE/NAME", args.serving_cert_secret);
            };
            ServingSource::Secret {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                dns_names: args.serving_cert_dns_names.clone(),
                apiservice: (!args.apiservice.is_empty()).then(|| args.apiservice.clone()),
            }
        }
    };
    let config = Config {
        bind: args.bind,
        global_namespace: args.global_namespace.clone(),
        serving,
        authorization,
        refresh: super::duration_flag("--refresh", &args.refresh, "30s or 5m")?,
        images: std::sync::Arc::new(args.registry.client()?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let stop = super::shutdown::on_signal()?;
        let client = super::run::client(args.kubeconfig.as_ref()).await?;
        let stop = async move {
            stop.await;
            eprintln!("olm packageserver: shutting down");
        };
        olm_packageserver::cluster::run(client, config, stop)
            .await
            .context("package server")?;
        Ok(ExitCode::SUCCESS)
    })
}
