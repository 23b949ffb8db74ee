//! Removing what a real node left on the host once its processes are stopped: pod sandboxes
//! (through the CRI, so the CNI plugin deletes their veths, addresses and iptables rules),
//! kube-proxy's iptables chains, mounts under the node's directory, the bridge, and the
//! bridge plugin's rules that a killed sandbox never deleted.

use std::path::Path;
use std::process::Command;

use super::paths::{NodeNetwork, NodePaths};
use crate::layout::Layout;

/// One cleanup step's outcome, for the report: what was removed, or why it could not be.
pub(crate) type Removed = Vec<String>;

/// Stops and removes every pod sandbox of the node's containerd (which must still run).
pub(crate) fn remove_pod_sandboxes(layout: &Layout, paths: &NodePaths, removed: &mut Removed) {
    let crictl = |args: &[&str]| {
        Command::new(layout.crictl())
            .arg("--runtime-endpoint")
            .arg(paths.containerd_endpoint())
            .args(["--timeout", "30s"])
            .args(args)
            .output()
    };
    let Ok(out) = crictl(&["pods", "-q"]) else {
        return;
    };
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if ids.is_empty() {
        return;
    }
    let mut stop = vec!["stopp"];
    stop.extend(ids.iter().map(String::as_str));
    let _ = crictl(&stop);
    let mut remove = vec!["rmp", "--force"];
    remove.extend(ids.iter().map(String::as_str));
    match crictl(&remove) {
        Ok(out) if out.status.success() => removed.push(format!("{} pod sandbox(es)", ids.len())),
        Ok(out) => removed.push(format!(
            "pod sandboxes not all removed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => removed.push(format!("pod sandboxes not removed: {e}")),
    }
}

/// `kube-proxy --cleanup`: deletes the KUBE-* chains and rules it programmed. Their names are
/// global, so it is skipped while another kube-proxy (another environment's node) runs.
pub(crate) fn cleanup_kube_proxy(layout: &Layout, removed: &mut Removed) {
    if !layout.kube_proxy().is_file() {
        return;
    }
    if another_process_runs("kube-proxy") {
        removed.push("kube-proxy iptables chains NOT removed: another kube-proxy runs here".into());
        return;
    }
    let out = Command::new(layout.kube_proxy()).arg("--cleanup").output();
    if matches!(&out, Ok(o) if o.status.success()) {
        removed.push("kube-proxy iptables chains".into());
    }
}

/// Unmounts everything mounted under the node's directory (pod volumes under kubelet's root,
/// containerd's sandbox shm and overlay rootfs), deepest first, lazily so a busy mount cannot
/// block `down`.
pub(crate) fn unmount_all(paths: &NodePaths, removed: &mut Removed) {
    let mut mounts = mounts_under(&paths.root);
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    let count = mounts.len();
    for mount in mounts {
        let _ = Command::new("umount").args(["-l", &mount]).output();
    }
    if count > 0 {
        removed.push(format!("{count} mount(s) under {}", paths.root.display()));
    }
}

/// Mount points at or below `dir`, from /proc/self/mountinfo (field 5; spaces are `\040`).
fn mounts_under(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mount_points_under(&text, &dir.display().to_string())
}

fn mount_points_under(mountinfo: &str, dir: &str) -> Vec<String> {
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .filter(|p| p == dir || p.starts_with(&prefix))
        .collect()
}

/// Deletes the pods' bridge, and the NAT rules of the bridge plugin still naming this
/// environment's CNI network (those of sandboxes that died without a CNI DEL).
pub(crate) fn remove_network(net: &NodeNetwork, removed: &mut Removed) {
    let link = Command::new("ip")
        .args(["link", "delete", &net.bridge])
        .output();
    if matches!(&link, Ok(o) if o.status.success()) {
        removed.push(format!("bridge {}", net.bridge));
    }
    let Ok(save) = Command::new("iptables-save").args(["-t", "nat"]).output() else {
        return;
    };
    let text = String::from_utf8_lossy(&save.stdout);
    let (rules, chains) = stale_cni_rules(&text, &net.cni_network);
    for rule in &rules {
        let mut args = vec!["-t", "nat", "-D"];
        args.extend(rule.iter().map(String::as_str));
        let _ = Command::new("iptables").args(&args).output();
    }
    for chain in &chains {
        let _ = Command::new("iptables")
            .args(["-t", "nat", "-F", chain])
            .output();
        let _ = Command::new("iptables")
            .args(["-t", "nat", "-X", chain])
            .output();
    }
    if !chains.is_empty() {
        removed.push(format!("{} CNI iptables chain(s)", chains.len()));
    }
}

/// From `iptables-save -t nat`: the `-A` rules whose comment names CNI network `network` (as
/// argument vectors without the `-A`), and the CNI-* chains they jump to.
fn stale_cni_rules(save: &str, network: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let marker = format!("name: \\\"{network}\\\"");
    let mut rules = Vec::new();
    let mut chains = Vec::new();
    for line in save.lines() {
        let Some(rest) = line.strip_prefix("-A ") else {
            continue;
        };
        if !line.contains(&marker) {
            continue;
        }
        let words = shell_words(rest);
        if let Some(target) = words
            .iter()
            .skip_while(|w| *w != "-j")
            .nth(1)
            .filter(|t| t.starts_with("CNI-"))
        {
            chains.push(target.clone());
        }
        rules.push(words);
    }
    (rules, chains)
}

/// Splits an iptables-save rule into arguments: double-quoted words (comments) keep spaces.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            other => current.push(other),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Removes the KUBE-* chains kubelet itself writes (KUBE-FIREWALL, which drops non-local
/// traffic to 127.0.0.0/8, and the canaries) from every table of iptables and ip6tables, with
/// the rules of built-in chains that jump to them. Runs after `kube-proxy --cleanup`, so what is
/// left is kubelet's; skipped while any other kubelet runs on the host (they would be its).
pub(crate) fn remove_kubelet_chains(removed: &mut Removed) {
    if another_process_runs("kubelet") {
        removed.push("kubelet iptables chains NOT removed: another kubelet runs here".into());
        return;
    }
    let mut count = 0;
    for (save, tool) in [
        ("iptables-save", "iptables"),
        ("ip6tables-save", "ip6tables"),
    ] {
        let Ok(out) = Command::new(save).output() else {
            continue;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        for (table, rules, chains) in kube_chains(&text) {
            for rule in rules {
                let mut args = vec!["-t".to_string(), table.clone(), "-D".to_string()];
                args.extend(rule);
                let _ = Command::new(tool).args(&args).output();
            }
            for chain in chains {
                let _ = Command::new(tool)
                    .args(["-t", &table, "-F", &chain])
                    .output();
                let _ = Command::new(tool)
                    .args(["-t", &table, "-X", &chain])
                    .output();
                count += 1;
            }
        }
    }
    if count > 0 {
        removed.push(format!("{count} kubelet iptables chain(s)"));
    }
}

/// Whether a live process named `comm` exists (ours, just stopped, may linger as a zombie
/// until its parent reaps it: that one does not count).
fn another_process_runs(comm: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                return false;
            };
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let name = head.split_once('(').map(|(_, n)| n).unwrap_or_default();
            let state = rest.trim_start().chars().next();
            name == comm && !matches!(state, Some('Z') | Some('X'))
        })
}

/// Per table of an `iptables-save`: the rules of built-in chains jumping to a KUBE-* chain
/// (argument vectors without the `-A`), and the KUBE-* chains.
fn kube_chains(save: &str) -> Vec<(String, Vec<Vec<String>>, Vec<String>)> {
    let mut tables = Vec::new();
    for line in save.lines() {
        if let Some(table) = line.strip_prefix('*') {
            tables.push((table.to_string(), Vec::new(), Vec::new()));
            continue;
        }
        let Some((_, rules, chains)) = tables.last_mut() else {
            continue;
        };
        if let Some(chain) = line.strip_prefix(':').and_then(|l| l.split(' ').next())
            && chain.starts_with("KUBE-")
        {
            chains.push(chain.to_string());
        } else if let Some(rest) = line.strip_prefix("-A ") {
            let words = shell_words(rest);
            let from_builtin = words.first().is_some_and(|c| !c.starts_with("KUBE-"));
            let to_kube = words
                .iter()
                .skip_while(|w| *w != "-j")
                .nth(1)
                .is_some_and(|t| t.starts_with("KUBE-"));
            if from_builtin && to_kube {
                rules.push(words);
            }
        }
    }
    tables.retain(|(_, rules, chains)| !rules.is_empty() || !chains.is_empty());
    tables
}

/// Removes kubelet's symlinks in /var/log/containers (a fixed path) that point into this
/// node's pod log directory.
pub(crate) fn remove_container_log_links(paths: &NodePaths, removed: &mut Removed) {
    let ours = paths.pod_logs_dir();
    let mut count = 0;
    for entry in std::fs::read_dir("/var/log/containers")
        .into_iter()
        .flatten()
        .flatten()
    {
        let link = entry.path();
        if std::fs::read_link(&link).is_ok_and(|target| target.starts_with(&ours))
            && std::fs::remove_file(&link).is_ok()
        {
            count += 1;
        }
    }
    if count > 0 {
        removed.push(format!("{count} link(s) in /var/log/containers"));
    }
}

/// Kills containerd shims still serving this node's containerd (its socket is in their
/// command line) after a sandbox could not be removed through the CRI; their containers' init
/// processes die with the pod cgroups' tasks below.
pub(crate) fn kill_leftover_shims(paths: &NodePaths, removed: &mut Removed) {
    let socket = paths.containerd_socket().display().to_string();
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_shim = args.first().is_some_and(|a| a.contains("containerd-shim"));
        let ours = args
            .windows(2)
            .any(|w| w[0] == "-address" && w[1] == socket);
        if is_shim
            && ours
            && let Some(target) = rustix::process::Pid::from_raw(pid)
            && rustix::process::kill_process(target, rustix::process::Signal::KILL).is_ok()
        {
            killed += 1;
        }
    }
    if killed > 0 {
        removed.push(format!("{killed} leftover containerd shim(s)"));
    }
}

/// Removes the (empty) `kubepods` cgroups kubelet created in every cgroup v1 hierarchy and the
/// unified one, deepest first; a cgroup that still has tasks stays (and is reported).
pub(crate) fn remove_kubepods_cgroups(removed: &mut Removed) {
    let mut left = 0;
    let mut gone = 0;
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let top = hierarchy.path().join("kubepods");
        if !top.is_dir() {
            continue;
        }
        let mut dirs = Vec::new();
        collect_dirs(&top, &mut dirs);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            if std::fs::remove_dir(&dir).is_ok() {
                gone += 1;
            } else {
                left += 1;
            }
        }
    }
    if gone > 0 {
        removed.push(format!("{gone} kubepods cgroup(s)"));
    }
    if left > 0 {
        removed.push(format!(
            "{left} kubepods cgroup(s) NOT removed (still in use)"
        ));
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    out.push(dir.to_path_buf());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            collect_dirs(&entry.path(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_below_the_node_directory_only() {
        let info = "36 25 0:32 / /tmp/s/node/kubelet/pods/x/volumes/tok rw - tmpfs tmpfs rw\n\
                    37 25 0:33 / /tmp/s/nodeother rw - tmpfs tmpfs rw\n\
                    38 25 0:34 / /tmp/s/node/containerd/state/with\\040space rw - shm shm rw\n";
        assert_eq!(
            mount_points_under(info, "/tmp/s/node"),
            vec![
                "/tmp/s/node/kubelet/pods/x/volumes/tok".to_string(),
                "/tmp/s/node/containerd/state/with space".to_string()
            ]
        );
    }

    #[test]
    fn kubelet_chains_and_their_jumps_are_found() {
        let save = "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FIREWALL - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n\
                    -A INPUT -j KUBE-FIREWALL\n-A INPUT -j ACCEPT\n\
                    -A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -j DROP\nCOMMIT\n\
                    *nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
        let tables = kube_chains(save);
        assert_eq!(tables.len(), 1);
        let (table, rules, chains) = &tables[0];
        assert_eq!(table, "filter");
        assert_eq!(
            rules,
            &vec![vec![
                "INPUT".to_string(),
                "-j".into(),
                "KUBE-FIREWALL".into()
            ]]
        );
        assert_eq!(
            chains,
            &vec!["KUBE-FIREWALL".to_string(), "KUBE-KUBELET-CANARY".into()]
        );
    }

    #[test]
    fn only_this_networks_cni_rules_are_picked() {
        let save = r#"*nat
:POSTROUTING ACCEPT [0:0]
:CNI-abc - [0:0]
-A POSTROUTING -s 10.88.66.5/32 -m comment --comment "name: \"olm-dev-31500\" id: \"123\"" -j CNI-abc
-A POSTROUTING -s 10.88.70.5/32 -m comment --comment "name: \"olm-dev-31800\" id: \"456\"" -j CNI-def
-A CNI-abc -d 10.88.66.0/24 -m comment --comment "name: \"olm-dev-31500\" id: \"123\"" -j ACCEPT
COMMIT
"#;
        let (rules, chains) = stale_cni_rules(save, "olm-dev-31500");
        assert_eq!(chains, vec!["CNI-abc".to_string()]);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0][0], "POSTROUTING");
        assert!(
            rules[0].contains(&"name: \"olm-dev-31500\" id: \"123\"".to_string()),
            "{:?}",
            rules[0]
        );
    }
}
