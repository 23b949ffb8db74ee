//! Where the real node keeps its files (all under `<state>/node/`, so `olm dev down --purge`
//! of one state directory removes exactly its node), and the per-environment names and
//! addresses that keep two environments' nodes apart: bridge, CNI network, pod subnet, ports.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::layout::{KUBERNETES_VERSION, Layout};

/// The node's files under the state directory.
#[derive(Debug, Clone)]
pub(crate) struct NodePaths {
    pub(crate) root: PathBuf,
    /// The CA that signs everything (the control plane's).
    pub(crate) ca_cert: PathBuf,
    /// The pause image as an OCI archive, built once per cache.
    pub(crate) pause_archive: PathBuf,
}

impl NodePaths {
    pub(crate) fn new(layout: &Layout) -> Self {
        NodePaths {
            root: layout.state_dir.join("node"),
            ca_cert: layout.pki_file("ca.crt"),
            pause_archive: layout
                .cache_dir
                .join("images")
                .join(format!("pause-{KUBERNETES_VERSION}.oci.tar")),
        }
    }
    /// Present while the environment has a real node: the node IP the API server advertises.
    pub(crate) fn node_ip_file(&self) -> PathBuf {
        self.root.join("node-ip")
    }
    pub(crate) fn containerd_dir(&self) -> PathBuf {
        self.root.join("containerd")
    }
    pub(crate) fn containerd_config(&self) -> PathBuf {
        self.containerd_dir().join("config.toml")
    }
    /// Images and snapshots: kept by `down`, removed by `down --purge`.
    pub(crate) fn containerd_root(&self) -> PathBuf {
        self.containerd_dir().join("root")
    }
    pub(crate) fn containerd_state(&self) -> PathBuf {
        self.containerd_dir().join("state")
    }
    pub(crate) fn containerd_socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock")
    }
    pub(crate) fn containerd_endpoint(&self) -> String {
        format!("unix://{}", self.containerd_socket().display())
    }
    /// containerd's registry `config_path`: one `hosts.toml` per registry host.
    pub(crate) fn certs_d(&self) -> PathBuf {
        self.containerd_dir().join("certs.d")
    }
    pub(crate) fn cni_conf_dir(&self) -> PathBuf {
        self.root.join("cni/net.d")
    }
    /// host-local IPAM's allocations (default /var/lib/cni/networks, shared by every runtime).
    pub(crate) fn cni_ipam_dir(&self) -> PathBuf {
        self.root.join("cni/ipam")
    }
    /// kubelet's `--root-dir` (pods' volumes are mounted below it).
    pub(crate) fn kubelet_dir(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    pub(crate) fn kubelet_config(&self) -> PathBuf {
        self.root.join("kubelet-config.yaml")
    }
    pub(crate) fn kubelet_kubeconfig(&self) -> PathBuf {
        self.root.join("kubelet.kubeconfig")
    }
    pub(crate) fn pod_logs_dir(&self) -> PathBuf {
        self.root.join("pod-logs")
    }
    pub(crate) fn kube_proxy_config(&self) -> PathBuf {
        self.root.join("kube-proxy-config.yaml")
    }
    pub(crate) fn kube_proxy_kubeconfig(&self) -> PathBuf {
        self.root.join("kube-proxy.kubeconfig")
    }
    /// CoreDNS's configuration.
    pub(crate) fn corefile(&self) -> PathBuf {
        self.root.join("Corefile")
    }
    pub(crate) fn pki_file(&self, name: &str) -> PathBuf {
        self.root.join("pki").join(name)
    }
}

/// The node's network and ports, derived from the environment's port base so that two
/// environments (the developer's and a test's) never share a bridge, subnet or port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeNetwork {
    /// The host address the kubelet registers and the API server advertises (never loopback:
    /// pods reach the API server through it and the API server reaches the kubelet on it).
    pub(crate) node_ip: Ipv4Addr,
    /// Linux bridge of the pods, e.g. `olm28000`.
    pub(crate) bridge: String,
    /// CNI network name, also in the comments of the iptables rules the bridge plugin writes.
    pub(crate) cni_network: String,
    /// Pod subnet of the node, `10.88.<n>.0/24`: apart from kwok's 10.244.0.0/16 and the
    /// services' 10.96.0.0/16.
    pub(crate) pod_subnet: String,
    /// kubelet's API (logs, exec), on the node IP: base+250.
    pub(crate) kubelet_port: u16,
    /// kubelet's /healthz on 127.0.0.1: base+248.
    pub(crate) kubelet_healthz_port: u16,
    /// kube-proxy's /healthz on 127.0.0.1: base+256.
    pub(crate) kube_proxy_healthz_port: u16,
    /// kube-proxy's /metrics on 127.0.0.1: base+249.
    pub(crate) kube_proxy_metrics_port: u16,
    /// CoreDNS's /health on 127.0.0.1: base+251 (it answers DNS on the node IP, port 53).
    pub(crate) dns_health_port: u16,
}

impl NodeNetwork {
    pub(crate) fn new(layout: &Layout, node_ip: Ipv4Addr) -> Self {
        let base = layout.host_ports.base;
        let subnet_octet = (base / 100) % 250 + 1;
        NodeNetwork {
            node_ip,
            bridge: format!("olm{base}"),
            cni_network: format!("olm-dev-{base}"),
            pod_subnet: format!("10.88.{subnet_octet}.0/24"),
            kubelet_port: base + 250,
            kubelet_healthz_port: base + 248,
            kube_proxy_healthz_port: base + 256,
            kube_proxy_metrics_port: base + 249,
            dns_health_port: base + 251,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::test_layout;

    #[test]
    fn names_and_ports_follow_the_port_base() {
        let dir = tempfile::tempdir().unwrap();
        let mut layout = test_layout(dir.path());
        layout.set_port_base(31500).unwrap();
        let net = NodeNetwork::new(&layout, Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(net.bridge, "olm31500");
        assert!(
            net.bridge.len() <= 15,
            "Linux interface names are at most 15 bytes"
        );
        assert_eq!(net.pod_subnet, "10.88.66.0/24");
        assert_eq!(net.kubelet_port, 31750);
        let other = {
            layout.set_port_base(29000).unwrap();
            NodeNetwork::new(&layout, net.node_ip)
        };
        assert_ne!(other.pod_subnet, net.pod_subnet);
        assert_ne!(other.bridge, net.bridge);
    }
}
