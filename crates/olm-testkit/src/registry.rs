//! A CNCF distribution OCI registry for one test: [`registry`] builds the registry binary if
//! the cache lacks it (once per test process, under olm-dev's build lock, shared with
//! `olm dev cluster build`), then starts a registry on a free loopback port with its config and
//! storage in a temporary directory. Dropping the [`TestRegistry`] stops the process, then
//! deletes the directory.

use std::ops::Deref;
use std::sync::OnceLock;

use olm_dev::{Layout, Progress};

use crate::{Result, TestkitError, test_layout};

pub use olm_dev::registry::{Credentials, REALM, RegistryOptions, RegistryServer};

/// Outcome of building the registry, shared by all tests of one test binary.
static BUILT: OnceLock<std::result::Result<Layout, String>> = OnceLock::new();

fn ensure_built_blocking() -> std::result::Result<Layout, String> {
    BUILT
        .get_or_init(|| {
            let layout = test_layout().map_err(|e| e.to_string())?;
            olm_dev::ensure_registry_built(&layout, &Progress::new()).map_err(|e| e.to_string())?;
            Ok(layout)
        })
        .clone()
}

/// A running registry of one test. Derefs to [`RegistryServer`]: `addr()` is the
/// `127.0.0.1:PORT` of image references, `url()` its base URL, `credentials()` and `ca_pem()`
/// what a client needs when auth or TLS was asked for.
pub struct TestRegistry {
    // Fields drop in order: the process stops before its directory is deleted.
    server: RegistryServer,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRegistry")
            .field("addr", &self.server.addr())
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Deref for TestRegistry {
    type Target = RegistryServer;

    fn deref(&self) -> &RegistryServer {
        &self.server
    }
}

/// Starts a registry for the calling test (see the module docs). Needs no control plane.
pub async fn registry(options: RegistryOptions) -> Result<TestRegistry> {
    tokio::task::spawn_blocking(move || {
        let layout = ensure_built_blocking().map_err(TestkitError::Registry)?;
        let dir = tempfile::Builder::new()
            .prefix("olm-testkit-registry-")
            .tempdir()
            .map_err(|e| {
                TestkitError::Registry(format!("cannot create a temporary directory: {e}"))
            })?;
        let server = RegistryServer::start(&layout, dir.path(), options)
            .map_err(|e| TestkitError::Registry(e.to_string()))?;
        Ok(TestRegistry { server, dir })
    })
    .await
    .map_err(|e| TestkitError::Registry(format!("start task failed: {e}")))?
}
