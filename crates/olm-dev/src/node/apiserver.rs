//! What a real node changes in the control plane: the node IP it recorded, and the API
//! server's arguments for it. Apart from the rest of `node` so that the control plane's
//! component definitions can read it without depending on the node's processes.

use std::net::Ipv4Addr;

use super::paths::NodePaths;
use crate::layout::Layout;

/// Whether this environment has a real node, and its IP (what the API server advertises).
pub(crate) fn real_node_ip(layout: &Layout) -> Option<Ipv4Addr> {
    std::fs::read_to_string(NodePaths::new(layout).node_ip_file())
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The API server's arguments, changed for an environment with a real node: it listens on
/// every address and advertises the node IP (pods reach it through the `kubernetes` Service,
/// whose endpoint the lease reconciler then keeps), reaches kubelets on their InternalIP with
/// the admin client certificate, and honours namespace-level node selectors and default
/// tolerations (how a namespace's pods are sent to the real node without changing them).
pub(crate) fn apiserver_args(layout: &Layout, mut args: Vec<String>) -> Vec<String> {
    let Some(ip) = real_node_ip(layout) else {
        return args;
    };
    args.retain(|a| a != "--endpoint-reconciler-type=none");
    for arg in &mut args {
        if arg == "--bind-address=127.0.0.1" {
            *arg = "--bind-address=0.0.0.0".into();
        } else if arg == "--advertise-address=127.0.0.1" {
            *arg = format!("--advertise-address={ip}");
        }
    }
    let pki = |f: &str| layout.pki_file(f).display().to_string();
    args.extend([
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!("--kubelet-client-certificate={}", pki("admin.crt")),
        format!("--kubelet-client-key={}", pki("admin.key")),
        "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction".into(),
    ]);
    args
}
