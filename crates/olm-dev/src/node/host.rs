//! What the host must have for a real node: root, containerd + runc + the CNI plugins (Debian
//! packages, installed when missing), and a non-loopback address for the node.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::error::{DevError, Result};
use crate::layout::Layout;
use crate::run::{Progress, describe};

/// The Debian packages a real node runs on, and a file each one installs.
const PACKAGES: [(&str, &str); 4] = [
    ("containerd", "/usr/bin/containerd"),
    ("runc", "/usr/sbin/runc"),
    ("containernetworking-plugins", "/usr/lib/cni/bridge"),
    // kube-proxy programs Services with it; the bridge plugin masquerades with it.
    ("iptables", "/usr/sbin/iptables"),
];

/// containerd's binary (Debian's).
pub(crate) const CONTAINERD: &str = "/usr/bin/containerd";
/// containerd's client, to import the pause image.
pub(crate) const CTR: &str = "/usr/bin/ctr";

/// Fails unless we are root: containerd, kubelet, bridges, iptables and mounts all need it.
pub(crate) fn require_root() -> Result<()> {
    crate::run::require_root("--real-node (containerd, kubelet, a bridge, iptables rules and mounts; without the flag nothing needs root)")
}

/// Installs the missing ones of containerd, runc and the CNI plugins with apt-get.
pub(crate) fn ensure_packages(layout: &Layout, progress: &Progress) -> Result<()> {
    crate::debian::ensure_packages(layout, progress, "real-node", &PACKAGES)
}

/// The node's IP: `OLM_DEV_NODE_IP`, else the IPv4 address of the interface of the default
/// route (eth0 here). Never loopback: pods reach the API server through it.
pub(crate) fn node_ip() -> Result<Ipv4Addr> {
    if let Ok(value) = std::env::var("OLM_DEV_NODE_IP") {
        return value
            .trim()
            .parse::<Ipv4Addr>()
            .ok()
            .filter(|ip| !ip.is_loopback())
            .ok_or_else(|| DevError::UnexpectedOutput {
                command: "OLM_DEV_NODE_IP".into(),
                reason: format!("{value:?} is not a non-loopback IPv4 address"),
            });
    }
    let routes = ip_output(&["-4", "-o", "route", "show", "default"])?;
    let device = routes
        .split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .unwrap_or("eth0")
        .to_string();
    let addresses = ip_output(&["-4", "-o", "addr", "show", "dev", &device])?;
    first_ipv4(&addresses).ok_or_else(|| DevError::UnexpectedOutput {
        command: format!("ip -4 -o addr show dev {device}"),
        reason: "no IPv4 address for the node: set OLM_DEV_NODE_IP to the host's address".into(),
    })
}

fn ip_output(args: &[&str]) -> Result<String> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    let command = describe(&cmd);
    let out = cmd
        .output()
        .map_err(|source| DevError::Spawn { command, source })?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first non-loopback address in `ip -4 -o addr` output (`... inet 192.0.2.2/24 ...`).
fn first_ipv4(text: &str) -> Option<Ipv4Addr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip_while(|w| *w != "inet");
            words.nth(1)?.split('/').next()?.parse::<Ipv4Addr>().ok()
        })
        .find(|ip| !ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_is_read_from_ip_output() {
        let text = "4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever preferred_lft forever\n";
        assert_eq!(first_ipv4(text), Some(Ipv4Addr::new(192, 0, 2, 2)));
        assert_eq!(first_ipv4("1: lo    inet 127.0.0.1/8 scope host lo"), None);
    }
}
