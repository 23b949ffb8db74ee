//! `olm dev …`: developer tooling, currently the local control plane (`olm dev cluster`).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use olm_dev::{format_duration, Layout, Progress};

/// Where `olm dev` keeps things and which ports it uses; shown under `olm dev --help`.
const ENVIRONMENT_HELP: &str = "\
Environment:
  OLM_DEV_CACHE_DIR   built binaries (default ${XDG_CACHE_HOME:-~/.cache}/olm-dev)
  OLM_DEV_STATE_DIR   kubeconfig, pki/, etcd/, registry/, logs/, pids/ (default ${XDG_STATE_HOME:-~/.local/state}/olm-dev)
  OLM_DEV_PORT_BASE   port base (default 28000); every port is base + offset on 127.0.0.1:
                      etcd +379/+380, API server +443, controller-manager +257, scheduler +259,
                      kwok +247; `olm dev up` adds catalog gRPC +550, catalog HTTP +580,
                      controllers admin +581, package server +543, OCI registry +500.
                      With --real-node: kubelet +250 (on the node IP), kubelet healthz +248,
                      kube-proxy healthz +256 and metrics +249, CoreDNS health +251 (DNS on
                      the node IP, port 53); bridge olm<base>.
  OLM_DEV_NODE_IP     the real node's IP (default: the default route's interface address)
  OLM_DEV_IMAGE_OPT_LEVEL  cargo opt-level of `olm dev image build` (default 3, as users build;
                      CI uses 0: a cold build in half the time)
  OLM_DEV_DEBIAN_MIRROR    debootstrap's mirror (default http://deb.debian.org/debian)
  OLM_DEV_KWOK_CONFIG kwok configuration files for the fake node (colon-separated), such as a
                      ClusterPortForward from a fake pod's port to a host process
  OLM_DEV_PROFILING=1 the API server, controller-manager and scheduler serve /debug/pprof/
                      (off by default; for finding where a benchmark's CPU goes)
                      The test suite uses its own environment (olm-dev-test, base 29000).";

#[derive(Debug, Args)]
#[command(after_long_help = ENVIRONMENT_HELP)]
pub struct DevArgs {
    #[command(subcommand)]
    command: DevCommand,
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Start the local control plane and OLM on it: CRDs, namespaces olm and operators,
    /// OperatorGroups, a CatalogSource for the bundled catalog, the PackageManifest APIService,
    /// the catalog server, controllers and package server as host processes, and a local OCI
    /// registry (plain HTTP; `olm dev env` names it in OLM_DEV_REGISTRY), with pids and logs
    /// under the olm-dev state directory. Safe to run again.
    Up {
        /// The File-Based Catalog to serve as CatalogSource olm/community
        /// (default: ./catalogs/community, else the source tree's).
        #[arg(long, value_name = "DIR", conflicts_with = "in_cluster")]
        catalog: Option<std::path::PathBuf>,
        /// Also run one real kubelet node (containerd, kubelet, kube-proxy; needs root) next to
        /// the kwok node; see `olm dev cluster up --help`.
        #[arg(long)]
        real_node: bool,
        /// Run OLM as cluster admins do, as pods (implies --real-node; needs root): build the
        /// repository's Dockerfile with buildah (`olm dev image build`), push it to the registry,
        /// and apply manifests/ (CRDs, RBAC, the Deployments, APIService, CatalogSource,
        /// OLMConfig) with only the image changed; waits until every OLM pod is Ready.
        #[arg(long)]
        in_cluster: bool,
        /// With --in-cluster: the repository (Dockerfile, manifests/); default: the current
        /// directory, else the source tree this binary was built from.
        #[arg(long, value_name = "DIR", requires = "in_cluster")]
        source: Option<std::path::PathBuf>,
        /// With --in-cluster: install OLM with its Helm chart (the chart `olm release` writes;
        /// helm is built from the Go module proxy into the cache) instead of applying
        /// manifests/: `helm upgrade --install olm` in the OLM namespace with the image built
        /// here. Takes over the objects an earlier `--in-cluster` applied.
        #[arg(long, requires = "in_cluster")]
        helm: bool,
    },
    /// Stop everything `olm dev up` started: the OLM host processes, the registry, then the
    /// control plane (the APIService is removed first so namespace deletion never hangs).
    Down {
        /// Also delete cluster data, registry storage, certificates, logs and the kubeconfig.
        #[arg(long)]
        purge: bool,
    },
    /// Show the control plane, the registry, the OLM host processes and the APIService. Exits 1
    /// when not healthy.
    Status,
    /// Print shell lines for `eval "$(olm dev env)"`: those of `olm dev cluster env` plus
    /// OLM_DEV_REGISTRY (the registry's 127.0.0.1:PORT).
    Env,
    /// OLM's container image.
    #[command(subcommand)]
    Image(ImageCommand),
    /// A local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler, kwok with one fake node) on loopback, built from Go modules.
    ///
    /// Binaries: ${XDG_CACHE_HOME:-~/.cache}/olm-dev (or $OLM_DEV_CACHE_DIR).
    /// State (kubeconfig, pki/, etcd/, logs/, pids/): ${XDG_STATE_HOME:-~/.local/state}/olm-dev
    /// (or $OLM_DEV_STATE_DIR). Ports (127.0.0.1) from $OLM_DEV_PORT_BASE (default 28000):
    /// API server base+443 (28443), etcd base+379/380, controller-manager base+257,
    /// scheduler base+259, kwok base+247.
    #[command(subcommand, after_long_help = ENVIRONMENT_HELP)]
    Cluster(ClusterCommand),
}

#[derive(Debug, Subcommand)]
enum ImageCommand {
    /// Build the repository's Dockerfile with buildah (Debian's, installed when missing; needs
    /// root) and push it to the dev registry; prints the image by digest. Public base images
    /// cannot be pulled here, so BUILD_IMAGE and RUNTIME_IMAGE are made locally: a Debian
    /// bookworm rootfs (debootstrap) with this machine's Rust toolchain, and a distroless-like
    /// image of libc6, libgcc-s1 and CA certificates. buildah's storage and the build's cargo
    /// caches stay in the olm-dev cache, so a second build only recompiles what changed.
    Build {
        /// The repository (Dockerfile); default: the current directory, else the source tree
        /// this binary was built from.
        #[arg(long, value_name = "DIR")]
        source: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Build the binaries (the control plane's and the OCI registry's) into the cache if they are
    /// missing and verify their versions, showing progress; starts nothing. Run it before
    /// `cargo test` so no test waits on a Go build.
    Build,
    /// Build the binaries if needed (once), then start the control plane and wait until it is
    /// ready. Does nothing if it already runs and is healthy.
    Up {
        /// Also run one real kubelet node, olm-dev-real-node, that runs real containers:
        /// containerd, runc and the CNI plugins (Debian packages, installed when missing),
        /// kubelet and kube-proxy (built like the control plane). Needs root. The node is tainted
        /// olm.dev/real-node=true:NoSchedule and labelled olm.dev/node=real: a pod runs there
        /// only with a toleration for the taint (and the node selector to run nowhere else);
        /// everything else stays on the kwok node. Pods pull from OLM_DEV_REGISTRY over plain
        /// HTTP, and an image of any other registry from OLM_DEV_REGISTRY first, under the same
        /// path (a mirror: push REGISTRY/kuadrant/authorino:v1 to stand in for
        /// quay.io/kuadrant/authorino:v1). The node stays on later `up`s until `down`, which
        /// removes its bridge, iptables chains and mounts.
        #[arg(long)]
        real_node: bool,
    },
    /// Stop the processes `up` started (by recorded pid).
    Down {
        /// Also delete etcd data, certificates, logs and the kubeconfig.
        #[arg(long)]
        purge: bool,
    },
    /// Show which components run, their pids, ports and health. Exits 1 when not healthy.
    Status,
    /// Print shell lines for `eval "$(olm dev cluster env)"`: KUBECONFIG and PATH with kubectl.
    Env,
}

pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let command = match args.command {
        DevCommand::Cluster(command) => command,
        DevCommand::Up { in_cluster: true, source, helm, .. } => {
            let installer = if helm { super::dev_in_cluster::Installer::HelmChart } else { super::dev_in_cluster::Installer::Manifests };
            return super::dev_in_cluster::up(source.as_deref(), installer);
        }
        DevCommand::Up { catalog, real_node, .. } => return super::dev_up::up(catalog.as_deref(), real_node),
        DevCommand::Image(ImageCommand::Build { source }) => return super::dev_in_cluster::image_build(source.as_deref()),
        DevCommand::Down { purge } => return super::dev_up::down(purge),
        DevCommand::Status => return super::dev_up::status(),
        DevCommand::Env => return super::dev_up::env(),
    };
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    match command {
        ClusterCommand::Build => {
            let progress = Progress::new();
            let started = std::time::Instant::now();
            let was_built = olm_dev::is_built(&layout);
            olm_dev::ensure_built(&layout, &progress).context("olm dev cluster build")?;
            if was_built {
                println!(
                    "binaries already built and verified under {} (checked in {})",
                    layout.cache_dir.display(),
                    format_duration(started.elapsed())
                );
            } else {
                println!(
                    "binaries built under {} in {}",
                    layout.cache_dir.display(),
                    format_duration(started.elapsed())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Up { real_node } => {
            let progress = Progress::new();
            let options = olm_dev::UpOptions { real_node };
            let report = olm_dev::up_with(&layout, &progress, options).context("olm dev cluster up")?;
            if report.already_running {
                println!(
                    "control plane already running (checked in {})",
                    format_duration(report.elapsed)
                );
            } else {
                println!(
                    "control plane ready: started in {} (total {})",
                    format_duration(report.start_elapsed),
                    format_duration(report.elapsed)
                );
            }
            println!("kubeconfig: {}", report.kubeconfig.display());
            println!("use it with: eval \"$(olm dev cluster env)\"");
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Down { purge } => {
            let report = olm_dev::down(&layout, &Progress::new(), purge).context("olm dev cluster down")?;
            if report.stopped.is_empty() {
                println!("nothing was running");
            } else {
                let names: Vec<String> = report
                    .stopped
                    .iter()
                    .map(|(c, pid)| format!("{} (pid {pid})", c.name()))
                    .collect();
                println!("stopped {}", names.join(", "));
            }
            if !report.node_stopped.is_empty() {
                let names: Vec<String> = report.node_stopped.iter().map(|(name, pid)| format!("{name} (pid {pid})")).collect();
                println!("stopped the real node: {}", names.join(", "));
            }
            for what in &report.node_removed {
                println!("removed {what}");
            }
            for (component, pid) in &report.stale {
                println!(
                    "removed stale pid file of {} (pid {pid} no longer runs it)",
                    component.name()
                );
            }
            if report.purged {
                println!("deleted etcd data, certificates, logs and kubeconfig under {}", layout.state_dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Status => {
            let status = olm_dev::status(&layout).context("olm dev cluster status")?;
            print!("{}", status.render());
            if !olm_dev::is_built(&layout) {
                println!("binaries: not built yet (`olm dev cluster up` builds them)");
            }
            Ok(if status.all_healthy() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        ClusterCommand::Env => {
            print!("{}", olm_dev::env_lines(&layout));
            Ok(ExitCode::SUCCESS)
        }
    }
}
