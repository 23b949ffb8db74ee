//! Where things live on disk, which versions we build, and which loopback ports we use.

use std::path::{Path, PathBuf};

use crate::error::{DevError, Result};

/// Kubernetes release whose kube-apiserver, kube-controller-manager, kube-scheduler and kubectl we build.
pub const KUBERNETES_VERSION: &str = "v1.36.3";
/// etcd release (module `go.etcd.io/etcd/server/v3`); kubeadm pairs Kubernetes 1.36 with etcd 3.6.
pub const ETCD_VERSION: &str = "v3.6.16";
/// kwok release (`sigs.k8s.io/kwok/cmd/kwok`); its stage files ship inside the same module.
pub const KWOK_VERSION: &str = "v0.8.0";
/// CNCF distribution release whose OCI registry (`github.com/distribution/distribution/v3/cmd/registry`) we build.
pub const REGISTRY_VERSION: &str = "v3.0.0";
/// Helm, built from the Go module proxy for the tests that render OLM's chart.
pub const HELM_VERSION: &str = "v3.22.0";

/// cri-tools release whose `crictl` (`sigs.k8s.io/cri-tools/cmd/crictl`) stops a real node's pods
/// through the CRI when it is taken down.
pub const CRICTL_VERSION: &str = "v1.36.0";

/// CoreDNS release (`github.com/coredns/coredns`): the real node's cluster DNS, so that pods
/// resolve `<service>.<namespace>.svc` (a CatalogSource's address, for one).
pub const COREDNS_VERSION: &str = "v1.15.0";

/// Name of the fake node that kwok animates.
pub const NODE_NAME: &str = "kwok-node-0";

/// Service IP range of the API server; its first address is the `kubernetes` Service IP.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// First IP of [`SERVICE_CIDR`], put into the serving certificate.
pub const FIRST_SERVICE_IP: [u8; 4] = [10, 96, 0, 1];
/// Pod IP range kwok hands out; kept apart from the service range.
pub const POD_CIDR: &str = "10.244.0.0/16";

/// The published staging-module version matching a Kubernetes version: `v1.36.3` → `v0.36.3`.
pub fn staging_version(kubernetes_version: &str) -> Option<String> {
    let rest = kubernetes_version.strip_prefix("v1.")?;
    let mut parts = rest.split('.');
    let minor = parts.next()?;
    let patch = parts.next()?;
    if parts.next().is_some() || minor.parse::<u32>().is_err() || patch.parse::<u32>().is_err() {
        return None;
    }
    Some(format!("v0.{minor}.{patch}"))
}

/// The minor version number of a `v1.<minor>.<patch>` version.
pub fn minor_of(kubernetes_version: &str) -> Option<&str> {
    kubernetes_version.strip_prefix("v1.")?.split('.').next()
}

/// Default port base of the developer's control plane: an uncommon 28xxx range so a
/// developer's own cluster (6443, 2379, 10257, 10259) keeps working next to ours.
pub const DEFAULT_PORT_BASE: u16 = 28000;
/// Largest accepted port base: the highest offset (581) must stay a valid port.
pub const MAX_PORT_BASE: u16 = 64000;

/// Loopback ports of the control plane, derived from one base (`OLM_DEV_PORT_BASE`, default
/// 28000) so several environments (the developer's, the tests', a throwaway one) can run side by
/// side. The last three digits mirror the usual ports: etcd base+379/380, API server base+443,
/// controller-manager base+257, scheduler base+259, kwok base+247.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
    pub kwok: u16,
}

impl Ports {
    /// The ports for one base; `None` when the base is above [`MAX_PORT_BASE`].
    pub fn from_base(base: u16) -> Option<Self> {
        (base <= MAX_PORT_BASE).then_some(Ports {
            etcd_client: base + 379,
            etcd_peer: base + 380,
            apiserver: base + 443,
            controller_manager: base + 257,
            scheduler: base + 259,
            kwok: base + 247,
        })
    }
}

impl Default for Ports {
    fn default() -> Self {
        Ports {
            etcd_client: DEFAULT_PORT_BASE + 379,
            etcd_peer: DEFAULT_PORT_BASE + 380,
            apiserver: DEFAULT_PORT_BASE + 443,
            controller_manager: DEFAULT_PORT_BASE + 257,
            scheduler: DEFAULT_PORT_BASE + 259,
            kwok: DEFAULT_PORT_BASE + 247,
        }
    }
}

/// Loopback ports of the OLM host processes `olm dev up` starts, from the same base as
/// [`Ports`]: catalog gRPC base+550, catalog HTTP base+580, controllers admin base+581,
/// package server base+543, OCI registry base+500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPorts {
    /// The base everything was derived from (what `OLM_DEV_PORT_BASE` says).
    pub base: u16,
    /// `olm catalog serve` gRPC (the address of CatalogSource olm/community).
    pub catalog_grpc: u16,
    /// `olm catalog serve` HTTP.
    pub catalog_http: u16,
    /// `olm run` admin server (/metrics, /healthz, /readyz).
    pub controllers_admin: u16,
    /// `olm run`'s ClusterCatalog content server (catalogd's HTTP API).
    pub cluster_catalogs: u16,
    /// `olm packageserver` (HTTPS, behind the APIService).
    pub packageserver: u16,
    /// The distribution registry (plain HTTP; what `OLM_DEV_REGISTRY` names).
    pub registry: u16,
}

impl HostPorts {
    /// The ports for one base; `None` when the base is above [`MAX_PORT_BASE`].
    pub fn from_base(base: u16) -> Option<Self> {
        (base <= MAX_PORT_BASE).then_some(HostPorts {
            base,
            catalog_grpc: base + 550,
            catalog_http: base + 580,
            controllers_admin: base + 581,
            cluster_catalogs: base + 582,
            packageserver: base + 543,
            registry: base + 500,
        })
    }
}

impl Default for HostPorts {
    fn default() -> Self {
        HostPorts {
            base: DEFAULT_PORT_BASE,
            catalog_grpc: DEFAULT_PORT_BASE + 550,
            catalog_http: DEFAULT_PORT_BASE + 580,
            controllers_admin: DEFAULT_PORT_BASE + 581,
            cluster_catalogs: DEFAULT_PORT_BASE + 582,
            packageserver: DEFAULT_PORT_BASE + 543,
            registry: DEFAULT_PORT_BASE + 500,
        }
    }
}

/// Parses a port base from an environment variable's value, naming the variable on failure.
pub fn parse_port_base(variable: &'static str, value: &str) -> Result<u16> {
    value
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|b| *b <= MAX_PORT_BASE && *b >= 1024)
        .ok_or_else(|| DevError::BadPortBase {
            variable,
            value: value.to_owned(),
        })
}

/// Cache (binaries, Go caches, consumer modules) and state (certificates, etcd data, logs, pids,
/// kubeconfig) directories.
#[derive(Debug, Clone)]
pub struct Layout {
    pub cache_dir: PathBuf,
    pub state_dir: PathBuf,
    pub ports: Ports,
    pub host_ports: HostPorts,
}

impl Layout {
    /// Reads the directories from the environment:
    /// cache: `OLM_DEV_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/olm-dev`;
    /// state: `OLM_DEV_STATE_DIR`, else `${XDG_STATE_HOME:-~/.local/state}/olm-dev`;
    /// ports: from `OLM_DEV_PORT_BASE` (default 28000), see [`Ports`].
    pub fn from_env() -> Result<Self> {
        let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
        Self::from_vars(&env)
    }

    fn from_vars(env: &dyn Fn(&str) -> Option<PathBuf>) -> Result<Self> {
        // The XDG spec says relative values must be ignored.
        let absolute = |name: &str| env(name).filter(|p| p.is_absolute());
        let home = env("HOME").filter(|p| p.is_absolute());
        let cache_dir = match absolute("OLM_DEV_CACHE_DIR") {
            Some(dir) => dir,
            None => match absolute("XDG_CACHE_HOME") {
                Some(dir) => dir.join("olm-dev"),
                None => home.as_ref().map(|h| h.join(".cache/olm-dev")).ok_or(
                    DevError::NoHomeDirectory {
                        what: "cache",
                        variable: "OLM_DEV_CACHE_DIR or XDG_CACHE_HOME",
                    },
                )?,
            },
        };
        let state_dir = match absolute("OLM_DEV_STATE_DIR") {
            Some(dir) => dir,
            None => match absolute("XDG_STATE_HOME") {
                Some(dir) => dir.join("olm-dev"),
                None => home
                    .as_ref()
                    .map(|h| h.join(".local/state/olm-dev"))
                    .ok_or(DevError::NoHomeDirectory {
                        what: "state",
                        variable: "OLM_DEV_STATE_DIR or XDG_STATE_HOME",
                    })?,
            },
        };
        let base = match env("OLM_DEV_PORT_BASE") {
            Some(value) if !value.as_os_str().is_empty() => {
                parse_port_base("OLM_DEV_PORT_BASE", &value.to_string_lossy())?
            }
            _ => DEFAULT_PORT_BASE,
        };
        let mut layout = Layout {
            cache_dir,
            state_dir,
            ports: Ports::default(),
            host_ports: HostPorts::default(),
        };
        layout.set_port_base(base)?;
        Ok(layout)
    }

    /// Derives every port (control plane and host processes) from `base`.
    pub fn set_port_base(&mut self, base: u16) -> Result<()> {
        let bad = || DevError::BadPortBase {
            variable: "port base",
            value: base.to_string(),
        };
        self.ports = Ports::from_base(base).ok_or_else(bad)?;
        self.host_ports = HostPorts::from_base(base).ok_or_else(bad)?;
        Ok(())
    }

    pub fn go_mod_cache(&self) -> PathBuf {
        self.cache_dir.join("go/mod")
    }
    pub fn go_build_cache(&self) -> PathBuf {
        self.cache_dir.join("go/build")
    }
    /// Consumer-module directory for one component, e.g. `src/k8s-v1.36.3`.
    pub fn src_dir(&self, component_dir: &str) -> PathBuf {
        self.cache_dir.join("src").join(component_dir)
    }
    /// Binary directory for one component, e.g. `bin/k8s-v1.36.3`.
    pub fn bin_dir(&self, component_dir: &str) -> PathBuf {
        self.cache_dir.join("bin").join(component_dir)
    }
    pub fn k8s_bin_dir(&self) -> PathBuf {
        self.bin_dir(&format!("k8s-{KUBERNETES_VERSION}"))
    }
    pub fn kubectl(&self) -> PathBuf {
        self.k8s_bin_dir().join("kubectl")
    }
    pub fn kube_apiserver(&self) -> PathBuf {
        self.k8s_bin_dir().join("kube-apiserver")
    }
    pub fn kube_controller_manager(&self) -> PathBuf {
        self.k8s_bin_dir().join("kube-controller-manager")
    }
    pub fn kube_scheduler(&self) -> PathBuf {
        self.k8s_bin_dir().join("kube-scheduler")
    }
    /// kubelet and kube-proxy (the real node's, `--real-node`), same Kubernetes version.
    pub fn k8s_node_bin_dir(&self) -> PathBuf {
        self.bin_dir(&format!("k8s-node-{KUBERNETES_VERSION}"))
    }
    pub fn kubelet(&self) -> PathBuf {
        self.k8s_node_bin_dir().join("kubelet")
    }
    pub fn kube_proxy(&self) -> PathBuf {
        self.k8s_node_bin_dir().join("kube-proxy")
    }
    pub fn crictl(&self) -> PathBuf {
        self.bin_dir(&format!("crictl-{CRICTL_VERSION}")).join("crictl")
    }
    pub fn coredns(&self) -> PathBuf {
        self.bin_dir(&format!("coredns-{COREDNS_VERSION}")).join("coredns")
    }
    pub fn etcd(&self) -> PathBuf {
        self.bin_dir(&format!("etcd-{ETCD_VERSION}")).join("etcd")
    }
    pub fn kwok_bin_dir(&self) -> PathBuf {
        self.bin_dir(&format!("kwok-{KWOK_VERSION}"))
    }
    pub fn kwok(&self) -> PathBuf {
        self.kwok_bin_dir().join("kwok")
    }
    pub fn kwok_stages(&self) -> PathBuf {
        self.kwok_bin_dir().join("stages.yaml")
    }
    pub fn registry_bin_dir(&self) -> PathBuf {
        self.bin_dir(&format!("registry-{REGISTRY_VERSION}"))
    }
    /// The distribution registry binary.
    pub fn registry(&self) -> PathBuf {
        self.registry_bin_dir().join("registry")
    }
    pub fn helm_bin_dir(&self) -> PathBuf {
        self.bin_dir(&format!("helm-{HELM_VERSION}"))
    }
    /// The helm binary.
    pub fn helm(&self) -> PathBuf {
        self.helm_bin_dir().join("helm")
    }
    /// Build logs, one per component.
    pub fn build_log(&self, component_dir: &str) -> PathBuf {
        self.cache_dir
            .join("logs")
            .join(format!("build-{component_dir}.log"))
    }
    pub fn build_lock(&self) -> PathBuf {
        self.cache_dir.join("build.lock")
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.state_dir.join("kubeconfig")
    }
    pub fn pki_dir(&self) -> PathBuf {
        self.state_dir.join("pki")
    }
    pub fn pki_file(&self, name: &str) -> PathBuf {
        self.pki_dir().join(name)
    }
    pub fn etcd_data_dir(&self) -> PathBuf {
        self.state_dir.join("etcd")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }
    pub fn log_file(&self, component: &str) -> PathBuf {
        self.logs_dir().join(format!("{component}.log"))
    }
    /// The API server's audit policy: what OLM's own ServiceAccounts ask (`cluster::AUDIT_POLICY`).
    pub fn audit_policy(&self) -> PathBuf {
        self.state_dir.join("audit-policy.yaml")
    }
    /// The API server's audit log (JSON lines).
    pub fn audit_log(&self) -> PathBuf {
        self.logs_dir().join("audit.log")
    }
    pub fn pids_dir(&self) -> PathBuf {
        self.state_dir.join("pids")
    }
    pub fn pid_file(&self, component: &str) -> PathBuf {
        self.pids_dir().join(format!("{component}.pid"))
    }
    /// The dev environment's registry (`olm dev up`): config, credentials and `storage/`.
    pub fn registry_dir(&self) -> PathBuf {
        self.state_dir.join("registry")
    }
    pub fn state_lock(&self) -> PathBuf {
        self.state_dir.join("cluster.lock")
    }
    /// URL of the API server.
    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.apiserver)
    }
}

/// Creates a directory and its parents, naming it on failure.
pub(crate) fn create_dir_all(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| DevError::io("create directory", path, e))
}

/// Writes a file readable only by its owner (keys, and kubeconfigs that embed them).
pub(crate) fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| DevError::io("create", path, e))?;
    file.write_all(content.as_bytes())
        .map_err(|e| DevError::io("write", path, e))
}

/// A layout under `dir` (`cache/`, `state/`) with the default ports, for tests.
#[cfg(test)]
pub(crate) fn test_layout(dir: &Path) -> Layout {
    Layout {
        cache_dir: dir.join("cache"),
        state_dir: dir.join("state"),
        ports: Default::default(),
        host_ports: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn layout(vars: &[(&str, &str)]) -> Result<Layout> {
        let map: HashMap<String, PathBuf> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        Layout::from_vars(&|name| map.get(name).cloned())
    }

    #[test]
    fn staging_version_maps_major_one_to_zero() {
        assert_eq!(staging_version("v1.36.3").as_deref(), Some("v0.36.3"));
        assert_eq!(staging_version("v1.34.10").as_deref(), Some("v0.34.10"));
        assert_eq!(staging_version("1.36.3"), None);
        assert_eq!(staging_version("v1.36"), None);
        assert_eq!(staging_version("v1.36.3-rc.0"), None);
        assert_eq!(minor_of("v1.36.3"), Some("36"));
    }

    #[test]
    fn directories_follow_xdg_and_overrides() {
        let l = layout(&[("HOME", "/home/u")]).unwrap();
        assert_eq!(l.cache_dir, PathBuf::from("/home/u/.cache/olm-dev"));
        assert_eq!(l.state_dir, PathBuf::from("/home/u/.local/state/olm-dev"));
        assert_eq!(
            l.kubectl(),
            PathBuf::from("/home/u/.cache/olm-dev/bin/k8s-v1.36.3/kubectl")
        );
        assert_eq!(
            l.kubeconfig(),
            PathBuf::from("/home/u/.local/state/olm-dev/kubeconfig")
        );

        let l = layout(&[
            ("HOME", "/home/u"),
            ("XDG_CACHE_HOME", "/c"),
            ("XDG_STATE_HOME", "relative/is/ignored"),
        ])
        .unwrap();
        assert_eq!(l.cache_dir, PathBuf::from("/c/olm-dev"));
        assert_eq!(l.state_dir, PathBuf::from("/home/u/.local/state/olm-dev"));

        let l = layout(&[("OLM_DEV_STATE_DIR", "/s"), ("OLM_DEV_CACHE_DIR", "/k")]).unwrap();
        assert_eq!(l.state_dir, PathBuf::from("/s"));
        assert_eq!(l.cache_dir, PathBuf::from("/k"));
        assert_eq!(l.pid_file("etcd"), PathBuf::from("/s/pids/etcd.pid"));

        let err = layout(&[]).unwrap_err();
        assert_eq!(err.category(), "NoHomeDirectory");
    }

    #[test]
    fn ports_derive_from_one_base() {
        let l = layout(&[("HOME", "/home/u")]).unwrap();
        assert_eq!(l.ports.apiserver, 28443);
        assert_eq!(l.ports.etcd_client, 28379);
        assert_eq!(l.ports.etcd_peer, 28380);
        assert_eq!(l.ports.controller_manager, 28257);
        assert_eq!(l.ports.scheduler, 28259);
        assert_eq!(l.ports.kwok, 28247);
        assert_eq!(l.host_ports.catalog_grpc, 28550);
        assert_eq!(l.host_ports.catalog_http, 28580);
        assert_eq!(l.host_ports.controllers_admin, 28581);
        assert_eq!(l.host_ports.cluster_catalogs, 28582);
        assert_eq!(l.host_ports.packageserver, 28543);
        assert_eq!(l.host_ports.registry, 28500);
        assert_eq!(l.apiserver_url(), "https://127.0.0.1:28443");

        let l = layout(&[("HOME", "/home/u"), ("OLM_DEV_PORT_BASE", "30000")]).unwrap();
        assert_eq!(l.ports.apiserver, 30443);
        assert_eq!(l.host_ports.packageserver, 30543);
        assert_eq!(l.ports.etcd_peer, 30380);

        let err = layout(&[("HOME", "/home/u"), ("OLM_DEV_PORT_BASE", "65000")]).unwrap_err();
        assert_eq!(err.category(), "BadPortBase");
        assert!(err.to_string().contains("OLM_DEV_PORT_BASE"), "{err}");
        let err = layout(&[("HOME", "/home/u"), ("OLM_DEV_PORT_BASE", "abc")]).unwrap_err();
        assert_eq!(err.category(), "BadPortBase");
    }
}
