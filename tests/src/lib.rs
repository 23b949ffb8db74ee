//! The harness of the end-to-end suites in `tests/tests/`: each suite drives the whole system
//! against a real control plane (`olm_testkit::cluster()` starts it once and every suite reuses
//! it; each test gets its own namespaces, removed afterwards).
//!
//! - [`browser`]: headless Chromium over WebDriver and `olm console`, for the console's suites.
//! - [`controllers`]: OLM's controllers in-process (one manager per suite binary), the CRDs, the
//!   etcd catalog on a catalog server, CSV fixtures, and waits that print the namespace's
//!   Subscriptions, InstallPlans and CSVs with their conditions, and its Events, on timeout.
//! - [`dev_env`]: a throwaway `olm dev` environment for the README flow (`olm dev up` with its
//!   host processes), on its own state directory and ports.
//! - [`images`]: bundle and catalog images pushed to a test registry, hostile images built by
//!   hand, a slow registry.
//! - [`stand_in`]: images standing in for public ones on the real node (a program of this
//!   build and its libraries), e.g. [`stand_in::push_operator_stand_in`].
//! - [`upstream`]: upstream OLM v0.46's operators as the OLM under test, to judge against.
//! - [`widget`]: a test operator without Deployments and a ConfigMap catalog for it.
//! - [`olm_bin`]: the `olm` binary under test.
//!
//! Run one suite alone: `cargo build -p olm && cargo test -p olm-e2e --test quickstart`.

use std::path::{Path, PathBuf};

pub mod admin;
pub mod browser;
pub mod controllers;
pub mod dev_env;
pub mod faults;
pub mod images;
pub mod journey;
pub mod olmv1;
pub mod stand_in;
pub mod upstream;
pub mod widget;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

/// The `olm` binary of this build: `OLM_BIN` when set, else `target/<profile>/olm` beside this
/// test executable (`cargo test --workspace` builds it, as the `olm` crate has tests of its
/// own; to run a suite alone, `cargo build -p olm` first).
pub fn olm_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("OLM_BIN") {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/<suite>-<hash> → target/<profile>/olm
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let olm = profile_dir.join(format!("olm{}", std::env::consts::EXE_SUFFIX));
    assert!(
        olm.is_file(),
        "{} does not exist: build the binary first (`cargo build -p olm`), or set OLM_BIN",
        olm.display()
    );
    olm
}

/// The largest layer the in-process controllers pull (`olm run --image-max-layer-bytes`):
/// far above any test image, low enough for a test to push one over it in a second.
pub const E2E_MAX_LAYER_BYTES: u64 = 16 << 20;

/// The image client of in-process controllers: anonymous, loopback registries over plain
/// HTTP, layers up to [`E2E_MAX_LAYER_BYTES`], its cache shared by the test processes
/// (content-addressed, written by rename: safe to share; bounded like any image cache).
pub fn image_client() -> anyhow::Result<std::sync::Arc<olm_image::ImageClient>> {
    let cache = std::env::temp_dir().join("olm-e2e-image-cache");
    let limits = olm_image::Limits { max_layer_bytes: E2E_MAX_LAYER_BYTES, ..olm_image::Limits::default() };
    let client = olm_image::ImageClient::new(&cache, olm_image::RegistryConfig::default(), limits)?;
    Ok(std::sync::Arc::new(client))
}

/// Run the `olm` binary ([`olm_bin`]) with `args`: its stdout, or an error with its stderr.
pub fn olm(args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new(olm_bin()).args(args).output()?;
    if !output.status.success() {
        anyhow::bail!("olm {} failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8(output.stdout)?)
}
