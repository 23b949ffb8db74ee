//! `olm run`: run the OLM controllers (CSV, OperatorGroup, CatalogSource, Subscription, InstallPlan; v1's ClusterCatalog) against a cluster until SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use olm_controllers::manager::{ControllerKind, Manager, ManagerConfig};
use olm_runtime::LeaderElectionConfig;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Controllers to run, comma-separated (default: all). Known: operatorgroup, csv, catalogsource, subscription, installplan.
    #[arg(long, value_delimiter = ',')]
    controllers: Vec<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Address of the admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Elect a leader through a Lease so that several replicas can run; only the leader acts.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace OLM runs in (holds the leader Lease and ClusterExtensions' revision records).
    #[arg(long, default_value = "olm")]
    namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = "olm-operator-lock")]
    lease_name: String,
    /// Where ClusterCatalogs' content is served (catalogd's HTTP API: /catalogs/NAME/api/v1/all).
    #[arg(long, default_value = "0.0.0.0:8081")]
    cluster_catalog_addr: SocketAddr,
    /// The URL clients reach that server at, written into ClusterCatalogs' status.urls.base
    /// (default: http:// and the bound address; in a cluster, the Service's URL).
    #[arg(long)]
    cluster_catalog_url: Option<String>,
    /// Give each ConfigMap catalog (`sourceType: configmap`) a registry pod serving it over
    /// gRPC from this image (an olm image; it runs `olm catalog serve`) and a Service of the
    /// catalog's name, as upstream's `-configmapServerImage`. Without it OLM serves ConfigMap
    /// catalogs itself and makes no pod.
    #[arg(long, value_name = "IMAGE", env = "OLM_CONFIGMAP_SERVER_IMAGE")]
    configmap_server_image: Option<String>,
    #[command(flatten)]
    registry: super::image::RegistryArgs,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    init_logging();
    let controllers = args
        .controllers
        .iter()
        .filter(|name| !name.trim().is_empty())
        .map(|name| name.parse::<ControllerKind>())
        .collect::<Result<Vec<_>, _>>()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, controllers))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_runtime=warn"));
    // A second initialisation (tests) is harmless: keep the first subscriber.
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

/// The API client of `olm run` and `olm packageserver` (`olm_runtime::client`).
pub(super) async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {} is not usable", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no cluster configuration found: pass --kubeconfig or set KUBECONFIG")?,
    };
    olm_runtime::client::build(config).context("cannot build a Kubernetes client")
}

async fn serve(args: RunArgs, controllers: Vec<ControllerKind>) -> anyhow::Result<ExitCode> {
    let stop = super::shutdown::on_signal()?;
    let client = client(args.kubeconfig.as_ref()).await?;
    let leader_election = args.leader_elect.then(|| {
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "olm".to_owned());
        let identity = format!("{host}-{}", std::process::id());
        LeaderElectionConfig::new(args.namespace.clone(), args.lease_name.clone(), identity)
    });
    let images = std::sync::Arc::new(args.registry.client()?);
    let (catalog_server, publisher) = olm_controllers_v1::serve_catalogs(args.cluster_catalog_addr)
        .await
        .with_context(|| format!("cannot serve ClusterCatalog content on {}", args.cluster_catalog_addr))?;
    let bound = catalog_server.http_addr.unwrap_or(args.cluster_catalog_addr);
    let base_url = args.cluster_catalog_url.clone().unwrap_or_else(|| format!("http://{bound}"));
    let v1 = olm_controllers_v1::V1Controllers { images: images.clone(), publisher, base_url: base_url.clone(), namespace: args.namespace.clone() };
    // A cluster whose CRDs predate OLM v1's gets v0 alone (and stays ready), and is told why.
    let extra: Vec<std::sync::Arc<dyn olm_runtime::ControllerSet>> = if v1_crds_installed(&client).await? {
        vec![std::sync::Arc::new(v1)]
    } else {
        eprintln!("olm: the ClusterCatalog CRD (clustercatalogs.olm.operatorframework.io) is not installed: OLM v1's controllers do not run; apply manifests/crds/ (or `olm crds`) and restart");
        Vec::new()
    };
    let manager = Manager::start(
        client,
        ManagerConfig {
            controllers,
            admin_addr: Some(args.metrics_addr),
            leader_election,
            cache_thread_init: cache_thread_init(),
            images,
            extra,
            configmap_server_image: args.configmap_server_image.clone(),
        },
    )
    .await?;
    super::spawn_alloc_report();
    if let Some(addr) = manager.admin_addr() {
        eprintln!("olm: controllers running; admin server on http://{addr} (/metrics, /healthz, /readyz)");
    }
    eprintln!("olm: ClusterCatalog content served on http://{bound} as {base_url}");
    stop.await;
    eprintln!("olm: shutting down");
    manager.stop(Duration::from_secs(20)).await;
    catalog_server.shutdown();
    Ok(ExitCode::SUCCESS)
}

/// Whether the API server knows OLM v1's ClusterCatalog kind.
async fn v1_crds_installed(client: &kube::Client) -> anyhow::Result<bool> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let name = "clustercatalogs.olm.operatorframework.io";
    let found = crds.get_opt(name).await.with_context(|| format!("cannot read CRD {name}"))?;
    Ok(found.is_some())
}

/// With jemalloc, the caches' thread allocates from an arena of its own (see
/// `ManagerConfig::cache_thread_init`).
#[cfg(feature = "jemalloc")]
fn cache_thread_init() -> Option<fn()> {
    fn own_arena() {
        use tikv_jemalloc_ctl::{Access, AsName};
        let arena: Result<u32, _> = b"arenas.create\0".name().read();
        match arena.and_then(|arena| b"thread.arena\0".name().write(arena).map(|()| arena)) {
            Ok(arena) => super::CACHE_ARENA.store(arena, std::sync::atomic::Ordering::Relaxed),
            Err(err) => {
                eprintln!("olm: cannot give the caches an allocator arena of their own: {err}")
            }
        }
    }
    Some(own_arena)
}

#[cfg(not(feature = "jemalloc"))]
fn cache_thread_init() -> Option<fn()> {
    None
}
