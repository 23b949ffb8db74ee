//! A CNCF distribution OCI registry on loopback. [`RegistryServer::start`] writes its
//! `config.yml` (filesystem storage with deletes enabled, log level warn, optionally htpasswd
//! auth and TLS from a CA of its own), starts the `registry` binary built into the cache (see
//! [`crate::ensure_registry_built`]) and waits until `GET /v2/` answers; dropping the server
//! stops it. [`dev`] keeps the `olm dev up` environment's registry, which outlives `olm`.

mod dev;

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all, write_private};
use crate::pki::CertificateAuthority;
use crate::probe;
use crate::process::{spawn_logged, wait_until_healthy};

pub use dev::{
    DEV_REGISTRY_NAME, DevRegistry, RegistryStatus, dev_registry_env_lines, dev_registry_status,
    ensure_dev_registry, stop_dev_registry,
};

/// The realm of the `WWW-Authenticate: Basic` challenge when auth is on.
pub const REALM: &str = "olm-dev-registry";
/// The htpasswd hash's bcrypt cost: `htpasswd -B`'s default. The registry checks the hash on
/// every authenticated request, so a loopback test registry keeps it cheap.
const BCRYPT_COST: u32 = 5;
/// How long the registry may take to answer `GET /v2/` after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a start on a port picked by us is tried again when another process took the port
/// between our check and the registry's bind.
const START_ATTEMPTS: usize = 3;

/// A user name and password the registry accepts (HTTP basic auth against its htpasswd file).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// The `Authorization` header value: `Basic base64(user:password)`.
    pub fn basic_auth(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// What kind of registry to start. The default: plain HTTP, no auth, a free port.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Listen on `127.0.0.1:<port>`; `None` picks a free port.
    pub port: Option<u16>,
    /// Require these credentials (htpasswd with a bcrypt hash, realm [`REALM`]).
    pub auth: Option<Credentials>,
    /// Serve HTTPS with a certificate for `127.0.0.1` and `localhost` signed by a new CA
    /// (see [`RegistryServer::ca_pem`]).
    pub tls: bool,
}

impl RegistryOptions {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    pub fn htpasswd(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth = Some(Credentials {
            username: username.into(),
            password: password.into(),
        });
        self
    }

    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }
}

/// Where the process's log and pid go and whether it may outlive its starter.
pub(crate) struct Placement {
    pub(crate) log: PathBuf,
    pub(crate) pid_file: Option<PathBuf>,
    /// Own process group: survives the starter and the terminal's Ctrl-C (see [`spawn_logged`]).
    pub(crate) own_group: bool,
}

/// The files of one registry under its directory.
struct Files {
    config: PathBuf,
    storage: PathBuf,
    htpasswd: PathBuf,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Files {
    fn new(dir: &Path) -> Self {
        Files {
            config: dir.join("config.yml"),
            storage: dir.join("storage"),
            htpasswd: dir.join("htpasswd"),
            ca: dir.join("tls/ca.crt"),
            cert: dir.join("tls/tls.crt"),
            key: dir.join("tls/tls.key"),
        }
    }
}

/// A running registry. Dropping it kills the process (unless [`RegistryServer::detach`]ed);
/// its directory (config, storage) stays.
#[derive(Debug)]
pub struct RegistryServer {
    addr: String,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    credentials: Option<Credentials>,
    ca_pem: Option<String>,
    ca_file: Option<PathBuf>,
    pid: u32,
    child: Option<Child>,
}

impl RegistryServer {
    /// Starts a registry keeping its config, storage (`storage/`), credentials, certificates and
    /// log (`registry.log`) in `dir`, and waits until `GET /v2/` answers 200 (401 with auth).
    /// The registry binary must be built ([`crate::ensure_registry_built`]).
    pub fn start(layout: &Layout, dir: &Path, options: RegistryOptions) -> Result<Self> {
        let placement = Placement {
            log: dir.join("registry.log"),
            pid_file: None,
            own_group: false,
        };
        Self::start_placed(layout, dir, options, placement)
    }

    pub(crate) fn start_placed(
        layout: &Layout,
        dir: &Path,
        options: RegistryOptions,
        placement: Placement,
    ) -> Result<Self> {
        let binary = layout.registry();
        if !binary.is_file() {
            return Err(DevError::RegistrySetup {
                dir: dir.to_path_buf(),
                reason: format!(
                    "{} is not built: run `olm dev cluster build` (tests: olm_dev::ensure_registry_built)",
                    binary.display()
                ),
            });
        }
        let files = Files::new(dir);
        create_dir_all(&files.storage)?;
        if let Some(parent) = placement.log.parent() {
            create_dir_all(parent)?;
        }
        if let Some(credentials) = &options.auth {
            write_private(&files.htpasswd, &htpasswd_line(dir, credentials)?)?;
        }
        let ca_pem = options.tls.then(|| write_tls(&files)).transpose()?;
        let tls = match ca_pem {
            Some(_) => Some(
                probe::tls_config(&files.ca).map_err(|reason| DevError::Pki {
                    what: "TLS configuration for the registry's health check".into(),
                    reason,
                })?,
            ),
            None => None,
        };
        let secret = random_hex(dir)?;

        let attempts = if options.port.is_some() {
            1
        } else {
            START_ATTEMPTS
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = match options.port {
                Some(port) => {
                    if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
                        return Err(DevError::PortInUse {
                            component: DEV_REGISTRY_NAME,
                            port,
                        });
                    }
                    port
                }
                None => free_port(dir)?,
            };
            let config = Config {
                port,
                storage: &files.storage,
                secret: &secret,
                htpasswd: options.auth.is_some().then_some(files.htpasswd.as_path()),
                tls: options
                    .tls
                    .then_some((files.cert.as_path(), files.key.as_path())),
            };
            std::fs::write(&files.config, config_yaml(&config))
                .map_err(|e| DevError::io("write", &files.config, e))?;

            let mut cmd = Command::new(&binary);
            cmd.arg("serve")
                .arg(&files.config)
                .current_dir(dir)
                // distribution exports traces over OTLP to localhost:4318 unless told not to.
                .env("OTEL_TRACES_EXPORTER", "none");
            let (mut child, command) = spawn_logged(
                cmd,
                &placement.log,
                placement.pid_file.as_deref(),
                placement.own_group,
            )?;
            let healthy = wait_until_healthy(
                DEV_REGISTRY_NAME,
                &mut child,
                &command,
                &placement.log,
                START_TIMEOUT,
                || probe_v2(port, tls.as_ref(), options.auth.is_some()),
            );
            match healthy {
                Ok(()) => {
                    return Ok(RegistryServer {
                        addr: format!("127.0.0.1:{port}"),
                        port,
                        dir: dir.to_path_buf(),
                        log: placement.log,
                        credentials: options.auth,
                        ca_pem,
                        ca_file: options.tls.then_some(files.ca),
                        pid: child.id(),
                        child: Some(child),
                    });
                }
                Err(err) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    if let Some(pid_file) = &placement.pid_file {
                        let _ = std::fs::remove_file(pid_file);
                    }
                    let port_taken = matches!(&err, DevError::ComponentExited { tail, .. }
                        if tail.contains("address already in use"));
                    if !(port_taken && attempt < attempts) {
                        return Err(err);
                    }
                }
            }
        }
    }

    /// `127.0.0.1:<port>`: the registry host of image references.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>` or `https://…` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The credentials it requires, when started with auth.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The PEM of the CA that signed its serving certificate, when started with TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The same CA as a file (`<dir>/tls/ca.crt`), for tools that take a path.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// Its directory: `config.yml`, `storage/`, `htpasswd`, `tls/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn log_file(&self) -> &Path {
        &self.log
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Leaves the process running after this value is gone (it keeps its pid file, if it has
    /// one); returns its pid.
    pub(crate) fn detach(mut self) -> u32 {
        // Dropping a `Child` neither kills nor waits for it.
        self.child.take();
        self.pid
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One `GET /v2/`: healthy when it answers 200, or 401 when auth is on.
pub(crate) fn probe_v2(
    port: u16,
    tls: Option<&Arc<rustls::ClientConfig>>,
    auth: bool,
) -> (bool, String) {
    let expected = if auth { 401 } else { 200 };
    match probe::get(port, "/v2/", tls) {
        Ok((code, _)) if code == expected => (true, format!("GET /v2/ {code}")),
        Ok((code, body)) => (
            false,
            format!(
                "GET /v2/ {code} (expected {expected}): {}",
                body.lines().next().unwrap_or("")
            ),
        ),
        Err(e) => (false, e),
    }
}

/// What `config.yml` says.
struct Config<'a> {
    port: u16,
    storage: &'a Path,
    secret: &'a str,
    htpasswd: Option<&'a Path>,
    /// Certificate and key files.
    tls: Option<(&'a Path, &'a Path)>,
}

/// A YAML double-quoted scalar (JSON strings are YAML).
fn quoted(path: &Path) -> String {
    serde_json::Value::String(path.display().to_string()).to_string()
}

fn config_yaml(config: &Config<'_>) -> String {
    let mut text = format!(
        "# Generated by olm-dev: a CNCF distribution registry on loopback.\n\
         version: 0.1\n\
         log:\n  level: warn\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n  \
         cache:\n    blobdescriptor: inmemory\n\
         http:\n  addr: 127.0.0.1:{port}\n  secret: {secret}\n  headers:\n    X-Content-Type-Options: [nosniff]\n",
        storage = quoted(config.storage),
        port = config.port,
        secret = config.secret,
    );
    if let Some((cert, key)) = config.tls {
        text.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            quoted(cert),
            quoted(key)
        ));
    }
    if let Some(path) = config.htpasswd {
        text.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: {REALM}\n    path: {}\n",
            quoted(path)
        ));
    }
    text
}

/// `user:$2y$…` as `htpasswd -B` writes it.
fn htpasswd_line(dir: &Path, credentials: &Credentials) -> Result<String> {
    let bad = |reason: String| DevError::RegistrySetup {
        dir: dir.to_path_buf(),
        reason,
    };
    let user = &credentials.username;
    if user.is_empty() || user.contains([':', '\n', '\r']) {
        return Err(bad(format!(
            "user name {user:?} cannot go into an htpasswd file: use a non-empty name without ':' or line breaks"
        )));
    }
    let hash = bcrypt::non_truncating_hash_with_result(&credentials.password, BCRYPT_COST)
        .map_err(|e| {
            bad(format!(
                "cannot hash the password of {user:?} ({e}): bcrypt takes at most 72 bytes"
            ))
        })?;
    Ok(format!(
        "{user}:{}\n",
        hash.format_for_version(bcrypt::Version::TwoY)
    ))
}

/// A new CA and a serving certificate for 127.0.0.1 and localhost, written under `tls/`;
/// returns the CA's PEM.
fn write_tls(files: &Files) -> Result<String> {
    if let Some(parent) = files.ca.parent() {
        create_dir_all(parent)?;
    }
    let ca = CertificateAuthority::new("olm-dev-registry-ca")?;
    let serving = ca.issue_server("olm-dev-registry", &["localhost", "127.0.0.1"])?;
    std::fs::write(&files.ca, ca.cert_pem()).map_err(|e| DevError::io("write", &files.ca, e))?;
    std::fs::write(&files.cert, &serving.cert_pem)
        .map_err(|e| DevError::io("write", &files.cert, e))?;
    write_private(&files.key, &serving.key_pem)?;
    Ok(ca.cert_pem().to_string())
}

/// A port nobody listens on now (the kernel's pick).
fn free_port(dir: &Path) -> Result<u16> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| DevError::RegistrySetup {
            dir: dir.to_path_buf(),
            reason: format!("cannot find a free port on 127.0.0.1: {e}"),
        })
}

/// 32 random bytes as hex: the secret that signs upload state.
fn random_hex(dir: &Path) -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| DevError::RegistrySetup {
            dir: dir.to_path_buf(),
            reason: format!("cannot read /dev/urandom for the HTTP secret: {e}"),
        })?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_storage_address_and_optional_auth_and_tls() {
        let plain = config_yaml(&Config {
            port: 5123,
            storage: Path::new("/tmp/a dir/storage"),
            secret: "s3cr3t",
            htpasswd: None,
            tls: None,
        });
        assert!(plain.contains("  addr: 127.0.0.1:5123\n"), "{plain}");
        assert!(
            plain.contains("rootdirectory: \"/tmp/a dir/storage\"\n"),
            "{plain}"
        );
        assert!(plain.contains("  delete:\n    enabled: true\n"), "{plain}");
        assert!(plain.contains("  level: warn\n"), "{plain}");
        assert!(!plain.contains("auth:"), "{plain}");
        assert!(!plain.contains("tls:"), "{plain}");

        let secured = config_yaml(&Config {
            port: 5123,
            storage: Path::new("/s"),
            secret: "s",
            htpasswd: Some(Path::new("/d/htpasswd")),
            tls: Some((Path::new("/d/tls.crt"), Path::new("/d/tls.key"))),
        });
        assert!(
            secured.contains(&format!(
                "auth:\n  htpasswd:\n    realm: {REALM}\n    path: \"/d/htpasswd\"\n"
            )),
            "{secured}"
        );
        assert!(
            secured.contains("  tls:\n    certificate: \"/d/tls.crt\"\n    key: \"/d/tls.key\"\n"),
            "{secured}"
        );
    }

    #[test]
    fn htpasswd_holds_a_bcrypt_hash_of_the_password() {
        let credentials = Credentials {
            username: "olm".into(),
            password: "pass word".into(),
        };
        let line = htpasswd_line(Path::new("/d"), &credentials).unwrap();
        let hash = line.trim_end().strip_prefix("olm:").unwrap();
        assert!(hash.starts_with("$2y$05$"), "{line}");
        assert!(bcrypt::verify("pass word", hash).unwrap());
        assert!(!bcrypt::verify("password", hash).unwrap());
        assert_eq!(credentials.basic_auth(), "Basic b2xtOnBhc3Mgd29yZA==");
        assert!(!format!("{credentials:?}").contains("pass word"));

        for username in ["", "a:b"] {
            let err = htpasswd_line(
                Path::new("/d"),
                &Credentials {
                    username: username.into(),
                    password: "p".into(),
                },
            )
            .unwrap_err();
            assert_eq!(err.category(), "RegistrySetupFailed", "{err}");
        }
    }

    #[test]
    fn missing_binary_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::layout::test_layout(dir.path());
        let err = RegistryServer::start(&layout, &dir.path().join("r"), RegistryOptions::new())
            .unwrap_err();
        assert!(err.to_string().contains("olm dev cluster build"), "{err}");
    }
}
