//! How to talk to each registry host, in the spirit of containerd's `hosts.toml`: plain HTTP
//! or HTTPS, an extra CA, or no certificate check. Loopback registries (`localhost`,
//! `127.0.0.0/8`, `[::1]`) are plain HTTP unless configured otherwise, as Docker treats them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::ImageError;

/// The settings of one registry host.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostConfig {
    /// Speak plain HTTP.
    #[serde(default, rename = "plainHTTP")]
    pub plain_http: bool,
    /// Do not verify the server's certificate (only for tests and labs).
    #[serde(default)]
    pub insecure_skip_verify: bool,
    /// A PEM file with the CA(s) that signed the server's certificate.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// The CA PEM itself (read from `ca_file`, or given in code).
    #[serde(skip)]
    pub ca_pem: Option<Vec<u8>>,
}

/// Settings by registry host (`host` or `host:port`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryConfig {
    hosts: BTreeMap<String, HostConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    registries: BTreeMap<String, HostConfig>,
}

impl RegistryConfig {
    /// Read a YAML or JSON file `{registries: {HOST: {plainHTTP, insecureSkipVerify, caFile}}}`;
    /// CA files are read now, relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<RegistryConfig, ImageError> {
        let text = std::fs::read_to_string(path).map_err(|err| ImageError::local(path.display(), err))?;
        let file: ConfigFile = serde_saphyr::from_str(&text).map_err(|err| {
            ImageError::local(
                path.display(),
                format!("not a registry configuration ({{registries: {{HOST: {{plainHTTP, insecureSkipVerify, caFile}}}}}}): {err}"),
            )
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = RegistryConfig::default();
        for (host, mut settings) in file.registries {
            if let Some(ca) = &settings.ca_file {
                let ca_path = base.join(ca);
                let pem = std::fs::read(&ca_path).map_err(|err| {
                    ImageError::local(ca_path.display(), format!("caFile of registry {host}: {err}"))
                })?;
                settings.ca_pem = Some(pem);
            }
            config.hosts.insert(host.to_ascii_lowercase(), settings);
        }
        Ok(config)
    }

    /// Set one host's settings.
    pub fn with_host(mut self, host: &str, settings: HostConfig) -> RegistryConfig {
        self.hosts.insert(host.to_ascii_lowercase(), settings);
        self
    }

    /// The settings for `registry`: configured, else plain HTTP for loopback, else HTTPS.
    pub fn host(&self, registry: &str) -> HostConfig {
        let registry = registry.to_ascii_lowercase();
        if let Some(settings) = self.hosts.get(&registry) {
            return settings.clone();
        }
        HostConfig {
            plain_http: is_loopback(&registry),
            ..HostConfig::default()
        }
    }
}

fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_plain_http_unless_configured() {
        let config = RegistryConfig::default();
        assert!(config.host("127.0.0.1:5000").plain_http);
        assert!(config.host("localhost:5000").plain_http);
        assert!(config.host("[::1]:5000").plain_http);
        assert!(!config.host("quay.io").plain_http);
        let config = config.with_host("127.0.0.1:5000", HostConfig::default());
        assert!(!config.host("127.0.0.1:5000").plain_http);
    }

    #[test]
    fn the_file_names_hosts_and_reads_their_ca() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), "PEM").unwrap();
        let file = dir.path().join("registries.yaml");
        std::fs::write(
            &file,
            "registries:\n  Reg.Lab:5000: {plainHTTP: true}\n  secure.lab: {caFile: ca.pem}\n",
        )
        .unwrap();
        let config = RegistryConfig::from_file(&file).unwrap();
        assert!(config.host("reg.lab:5000").plain_http);
        assert_eq!(config.host("secure.lab").ca_pem.as_deref(), Some(&b"PEM"[..]));
        std::fs::write(&file, "registries:\n  a: {caFile: missing.pem}\n").unwrap();
        let err = RegistryConfig::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("missing.pem") && err.contains("caFile of registry a"), "{err}");
        std::fs::write(&file, "registries:\n  a: {plainHttp: true}\n").unwrap();
        let err = RegistryConfig::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("registries.yaml"), "{err}");
    }
}
