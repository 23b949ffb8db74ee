//! A real local Kubernetes control plane for tests and `olm dev`: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler (built once from the Go module proxy into a versioned
//! cache) and kwok animating one fake node, all on loopback with generated certificates.
//!
//! The same cache holds a CNCF distribution OCI registry: [`registry::RegistryServer`] runs one
//! (tests), [`registry::ensure_dev_registry`] the `olm dev up` environment's.
//!
//! Entry points: [`up`], [`down`], [`status`], [`env_lines`], with paths from [`Layout::from_env`].

mod builder;
mod cluster;
mod component;
mod debian;
mod error;
mod fault;
mod image_build;
mod kubeconfig;
mod layout;
mod node;
pub mod pki;
mod probe;
mod process;
pub mod registry;
mod run;

pub use builder::{ensure_built, ensure_helm_built, ensure_node_built, ensure_registry_built, is_built};
pub use cluster::{
    AUDITED_NAMESPACE, ClusterStatus, ComponentStatus, DownReport, UpOptions, UpReport, down, kubectl, status, up, up_with,
};
pub use component::Component;
pub use debian::ensure_packages as ensure_debian_packages;
pub use error::{DevError, Result};
pub use fault::{kill_component, restart_component};
pub use image_build::{BuiltOlmImage, OLM_IMAGE_REPOSITORY, OLM_IMAGE_TAG, SmallBase, SmallFile, build_olm_image, build_small_image};
pub use kubeconfig::env_lines;
pub use node::{
    NodeProcess, NodeProcessStatus, REAL_NODE_LABEL, REAL_NODE_NAME, REAL_NODE_TAINT_KEY, RealNodeStatus,
    real_node_namespace_annotations,
};
pub use layout::{
    COREDNS_VERSION, CRICTL_VERSION, DEFAULT_PORT_BASE, ETCD_VERSION, HostPorts, KUBERNETES_VERSION, KWOK_VERSION, Layout, MAX_PORT_BASE, NODE_NAME,
    HELM_VERSION, POD_CIDR, Ports, REGISTRY_VERSION, SERVICE_CIDR, parse_port_base,
};
pub use process::{ProcessState, process_runs};
pub use run::{Progress, format_duration};
