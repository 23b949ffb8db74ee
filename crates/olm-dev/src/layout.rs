//! Where things live on disk, which versions we build, and which loopback ports we use.

use std::path::{Path, PathBuf};

use crate::error::{DevError, Result};

/// Kubernetes release whose kube-apiserver, kube-controller-manager, kube-scheduler and kubectl we build.
pub const KUBERNETES_VERSION: &str = "v1.36.3";
/// etcd release (module `go.etcd.io/etcd/server/v3`); kubeadm pairs Kubernetes 1.36 with etcd 3.6.
pub const ETCD_VERSION: &str = "v3.6.16";
/// kwok release (`sigs.k8s.io/kwok/cmd/kwok`); its stage files ship inside the same module.
pub const KWOK_VERSION: &str = "v0.8.0";

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

/// Fixed loopback ports. An uncommon 28xxx range so a developer's own cluster (6443, 2379,
/// 10257, 10259) keeps working next to ours; the last three digits mirror the usual ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
    pub kwok: u16,
}

impl Default for Ports {
    fn default() -> Self {
        Ports {
            etcd_client: 28379,
            etcd_peer: 28380,
            apiserver: 28443,
            controller_manager: 28257,
            scheduler: 28259,
            kwok: 28247,
        }
    }
}

/// Cache (binaries, Go caches, consumer modules) and state (certificates, etcd data, logs, pids,
/// kubeconfig) directories.
#[derive(Debug, Clone)]
pub struct Layout {
    pub cache_dir: PathBuf,
    pub state_dir: PathBuf,
    pub ports: Ports,
}

impl Layout {
    /// Reads the directories from the environment:
    /// cache: `OLM_DEV_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/olm-dev`;
    /// state: `OLM_DEV_STATE_DIR`, else `${XDG_STATE_HOME:-~/.local/state}/olm-dev`.
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
        Ok(Layout {
            cache_dir,
            state_dir,
            ports: Ports::default(),
        })
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
    pub fn pids_dir(&self) -> PathBuf {
        self.state_dir.join("pids")
    }
    pub fn pid_file(&self, component: &str) -> PathBuf {
        self.pids_dir().join(format!("{component}.pid"))
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
}
