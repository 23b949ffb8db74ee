//! `olm bundle push` and `olm catalog push`: build a bundle or catalog image from a directory
//! and push it, with no Docker; and the registry flags shared with `olm run` and
//! `olm packageserver` (how to reach registries, where to cache pulled images).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use olm_image::{Credentials, ImageClient, Limits, RegistryConfig};

/// How OLM reaches registries.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// A YAML file `{registries: {HOST[:PORT]: {plainHTTP, insecureSkipVerify, caFile}}}`: how to
    /// reach each registry (loopback registries are plain HTTP unless named here).
    #[arg(long, env = "OLM_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// A Docker config file (a dockerconfigjson) with OLM's own credentials, used for registries
    /// that a catalog's pull secrets do not name: what a node's global pull secret is to the
    /// kubelet.
    #[arg(long, env = "OLM_REGISTRY_AUTH_FILE")]
    pub registry_auth_file: Option<PathBuf>,
    /// Where pulled images are cached (content-addressed; least recently used go first).
    #[arg(long, env = "OLM_IMAGE_CACHE_DIR")]
    pub image_cache_dir: Option<PathBuf>,
    /// Most bytes the image cache keeps.
    #[arg(long, default_value_t = Limits::default().cache_bytes)]
    pub image_cache_bytes: u64,
    /// Largest layer (as stored, compressed) OLM pulls.
    #[arg(long, default_value_t = Limits::default().max_layer_bytes)]
    pub image_max_layer_bytes: u64,
    /// Install a bundle whose digest is cached without asking its registry. By default OLM asks
    /// first (one HEAD request, with the catalog's pull secrets) whether the repository the
    /// catalog names serves that digest, so that content pulled for one catalog from a private
    /// repository is never installed for another; a disconnected cluster whose registries are
    /// gone once its images are cached may turn that check off.
    #[arg(long, env = "OLM_TRUST_IMAGE_CACHE")]
    pub trust_image_cache: bool,
}

impl RegistryArgs {
    /// The image client these flags describe.
    pub fn client(&self) -> anyhow::Result<ImageClient> {
        let config = match &self.registry_config {
            Some(path) => RegistryConfig::from_file(path)?,
            None => RegistryConfig::default(),
        };
        let cache = self
            .image_cache_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("olm-image-cache-{}", rustix::process::getuid().as_raw())));
        let limits = Limits {
            cache_bytes: self.image_cache_bytes,
            max_layer_bytes: self.image_max_layer_bytes,
            max_image_bytes: Limits::default().max_image_bytes.max(self.image_max_layer_bytes),
            ..Limits::default()
        };
        let node_creds = match &self.registry_auth_file {
            Some(path) => read_auth_file(path)?,
            None => Credentials::anonymous(),
        };
        Ok(ImageClient::new(&cache, config, limits)?.with_node_credentials(node_creds).trusting_cache(self.trust_image_cache))
    }
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    #[command(subcommand)]
    command: BundleCommand,
}

#[derive(Debug, Subcommand)]
enum BundleCommand {
    /// Build a bundle image from a bundle directory (manifests/ and metadata/) and push it.
    Push(PushArgs),
}

/// `push DIR IMAGE`.
#[derive(Debug, Args)]
#[command(after_long_help = PUSH_HELP)]
pub struct PushArgs {
    /// The directory: a bundle (manifests/ and metadata/) or a File-Based Catalog root.
    dir: PathBuf,
    /// Where to push: REGISTRY/REPOSITORY:TAG (for the local cluster, $OLM_DEV_REGISTRY/NAME:TAG).
    image: String,
    /// A Docker config file (`.docker/config.json`, a dockerconfigjson) with credentials.
    #[arg(long, env = "REGISTRY_AUTH_FILE")]
    auth_file: Option<PathBuf>,
    /// `olm catalog push` only: push the catalog's inline bundles (olm.bundle.object) as bundle
    /// images under REGISTRY/PREFIX (bundle B of package P to REGISTRY/PREFIX/P:B) and push the
    /// catalog naming them by digest, with only olm.csv.metadata, as published catalogs do.
    #[arg(long, value_name = "REGISTRY/PREFIX")]
    push_bundles_to: Option<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

const PUSH_HELP: &str = "\
Prints the pushed image by digest (REGISTRY/REPOSITORY@sha256:...): reference that in a
catalog so that what is installed is exactly what was pushed. The same directory always
builds the same digest.

Examples:
  olm bundle push bundles/etcd/0.9.4 $OLM_DEV_REGISTRY/etcd-bundle:0.9.4
  olm catalog push catalog/ $OLM_DEV_REGISTRY/my-catalog:latest
  olm catalog push catalogs/community $OLM_DEV_REGISTRY/olm/community:latest --push-bundles-to $OLM_DEV_REGISTRY/olm/bundles";

pub fn run_bundle(args: BundleArgs) -> anyhow::Result<ExitCode> {
    super::warnings_to_stderr();
    match args.command {
        BundleCommand::Push(push) => run_push(push, Kind::Bundle),
    }
}

pub fn run_catalog_push(args: PushArgs) -> anyhow::Result<ExitCode> {
    run_push(args, Kind::Catalog)
}

#[derive(Clone, Copy)]
enum Kind {
    Bundle,
    Catalog,
}

fn run_push(args: PushArgs, kind: Kind) -> anyhow::Result<ExitCode> {
    let creds = match &args.auth_file {
        Some(path) => read_auth_file(path)?,
        None => Credentials::anonymous(),
    };
    let client = args.registry.client()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let pushed = match (kind, &args.push_bundles_to) {
        (Kind::Bundle, Some(_)) => anyhow::bail!("--push-bundles-to is for `olm catalog push`"),
        (Kind::Bundle, None) => runtime.block_on(client.push(&olm_image::build_bundle(&args.dir)?, &args.image, &creds))?,
        (Kind::Catalog, None) => runtime.block_on(client.push(&olm_image::build_catalog(&args.dir)?, &args.image, &creds))?,
        (Kind::Catalog, Some(prefix)) => {
            let mirrored = runtime.block_on(olm_image::mirror::push_catalog_with_bundles(&client, &args.dir, &args.image, prefix, &creds))?;
            for (bundle, image) in &mirrored.bundles {
                eprintln!("pushed bundle {bundle}: {image}");
            }
            mirrored.catalog
        }
    };
    println!("{pushed}");
    Ok(ExitCode::SUCCESS)
}

fn read_auth_file(path: &Path) -> anyhow::Result<Credentials> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read the auth file {}", path.display()))?;
    Credentials::parse_docker_config(&path.display().to_string(), &bytes).map_err(anyhow::Error::msg)
}
