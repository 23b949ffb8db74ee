//! `up`/`status`/`down` on throwaway state directories and their own ports, next to (not
//! touching) the shared development cluster. Uses the shared binary cache (builds it if absent).

use std::path::Path;

use olm_dev::{Component, HostPorts, Layout, Ports, ProcessState, Progress};

/// A layout with its own state directory and free loopback ports (asked from the kernel, so
/// they collide neither with the shared cluster nor with other tools on fixed ports).
fn layout_with(state: &Path) -> Layout {
    let shared = Layout::from_env().expect("cache location");
    // Hold all listeners at once so the kernel hands out distinct ports.
    let listeners: Vec<std::net::TcpListener> = (0..12)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("free port"))
        .collect();
    let port = |i: usize| listeners[i].local_addr().expect("port").port();
    Layout {
        cache_dir: shared.cache_dir,
        state_dir: state.to_path_buf(),
        ports: Ports {
            etcd_client: port(0),
            etcd_peer: port(1),
            apiserver: port(2),
            controller_manager: port(3),
            scheduler: port(4),
            kwok: port(5),
        },
        host_ports: HostPorts {
            // Not a base: every port here is picked by the kernel.
            base: 0,
            catalog_grpc: port(6),
            catalog_http: port(7),
            controllers_admin: port(8),
            packageserver: port(9),
            registry: port(10),
            cluster_catalogs: port(11),
        },
    }
}

/// Pids of processes whose command line mentions `needle` (e.g. a test's state directory).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if !zombie {
                found.push(pid);
            }
        }
    }
    found
}

/// `kubectl` against the test's cluster: its output; a failure fails the test.
fn kubectl(layout: &Layout, args: &[&str], stdin: Option<&str>) -> String {
    olm_dev::kubectl(layout, args, stdin).unwrap_or_else(|err| panic!("{err}"))
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    for _ in 0..300 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

/// A pod as an operator's Deployment makes it, asking for ephemeral storage.
const STORAGE_POD: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "storage", "namespace": "default"},
 "spec": {"containers": [{"name": "operator", "image": "example.com/operator:1",
  "resources": {"requests": {"ephemeral-storage": "5Gi"}}}]}}"#;

#[test]
fn failed_start_names_the_command_shows_the_log_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout_with(dir.path());
    // Valid certificates everywhere except the API server's serving certificate.
    olm_dev::pki::ensure_pki(&layout).unwrap();
    std::fs::write(layout.pki_file("apiserver.crt"), "not a certificate\n").unwrap();

    let err = olm_dev::up(&layout, &Progress::quiet()).expect_err("kube-apiserver cannot start");
    let text = err.to_string();
    eprintln!("error shown to the user:\n{text}");
    assert!(
        matches!(err.category(), "ComponentExited" | "ComponentUnhealthy"),
        "{}: {text}",
        err.category()
    );
    assert!(text.contains("kube-apiserver"), "{text}");
    assert!(
        text.contains("--tls-cert-file="),
        "the failing command is shown: {text}"
    );
    assert!(text.contains("last lines of the log"), "{text}");
    assert!(
        text.to_lowercase().contains("pem") || text.contains("certificate"),
        "log tail explains the cause: {text}"
    );

    // etcd had been started before the API server failed; it must be gone, with no pid files left.
    let state = dir.path().display().to_string();
    assert_eq!(
        processes_mentioning(&state),
        Vec::<u32>::new(),
        "leftover processes"
    );
    for component in Component::ALL {
        assert!(
            !layout.pid_file(component.name()).exists(),
            "{} pid file left",
            component.name()
        );
    }
}

#[test]
fn port_in_use_is_named_and_nothing_starts() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout_with(dir.path());
    let _squatter = std::net::TcpListener::bind(("127.0.0.1", layout.ports.apiserver)).unwrap();

    let err = olm_dev::up(&layout, &Progress::quiet()).expect_err("port is taken");
    let text = err.to_string();
    assert_eq!(err.category(), "PortInUse", "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{}", layout.ports.apiserver)),
        "{text}"
    );
    assert!(text.contains("kube-apiserver"), "{text}");
    assert_eq!(
        processes_mentioning(&dir.path().display().to_string()),
        Vec::<u32>::new()
    );
}

#[test]
fn up_is_idempotent_and_down_stops_exactly_what_up_started() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout_with(dir.path());
    let state = dir.path().display().to_string();

    let first = olm_dev::up(&layout, &Progress::quiet()).unwrap();
    assert!(!first.already_running);
    let status = olm_dev::status(&layout).unwrap();
    assert!(status.all_healthy(), "{}", status.render());
    // An operator's pod that requests ephemeral storage is scheduled on the fake node.
    // (Created once kube-controller-manager has made the namespace's default ServiceAccount.)
    wait_for("the pod to be created", || olm_dev::kubectl(&layout, &["create", "-f", "-"], Some(STORAGE_POD)).is_ok());
    wait_for("the pod requesting ephemeral storage to be scheduled", || {
        !kubectl(&layout, &["get", "pod", "storage", "-n", "default", "-o", "jsonpath={.spec.nodeName}"], None).trim().is_empty()
    });
    let pids: Vec<u32> = status.components.iter().filter_map(|c| c.pid).collect();
    assert_eq!(pids.len(), Component::ALL.len());

    // A node made before it declared ephemeral storage (a cluster of an older olm, whose
    // node's status neither `kubectl apply` nor a healthy `up` rewrites) gets it from `up`.
    let node_storage = || kubectl(&layout, &["get", "node", "-o", "jsonpath={.items[*].status.allocatable.ephemeral-storage}"], None);
    assert_eq!(node_storage().trim(), "1Ti");
    let strip = r#"[{"op": "remove", "path": "/status/capacity/ephemeral-storage"}, {"op": "remove", "path": "/status/allocatable/ephemeral-storage"}]"#;
    let nodes = kubectl(&layout, &["get", "node", "-o", "name"], None);
    kubectl(&layout, &["patch", nodes.trim(), "--subresource=status", "--type=json", "-p", strip], None);
    assert_eq!(node_storage().trim(), "");

    // A second `up` notices everything is healthy and starts nothing.
    let second = olm_dev::up(&layout, &Progress::quiet()).unwrap();
    assert!(second.already_running);
    assert_eq!(node_storage().trim(), "1Ti", "the node's ephemeral storage is declared again");
    let again = olm_dev::status(&layout).unwrap();
    assert_eq!(
        again
            .components
            .iter()
            .filter_map(|c| c.pid)
            .collect::<Vec<_>>(),
        pids
    );

    // Kill one component: `up` repairs by restarting cleanly.
    let scheduler = again
        .components
        .iter()
        .find(|c| c.component == Component::Scheduler)
        .and_then(|c| c.pid)
        .unwrap();
    let target = rustix::process::Pid::from_raw(scheduler as i32).unwrap();
    rustix::process::kill_process(target, rustix::process::Signal::KILL).unwrap();
    // up() dropped its handle: the process stays a zombie of this test; process_runs says gone.
    let scheduler_binary = layout.kube_scheduler();
    for _ in 0..50 {
        if !olm_dev::process_runs(scheduler, &scheduler_binary) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let broken = olm_dev::status(&layout).unwrap();
    assert!(!broken.all_healthy());
    let scheduler_state = broken
        .components
        .iter()
        .find(|c| c.component == Component::Scheduler)
        .map(|c| c.state.clone());
    assert_eq!(scheduler_state, Some(ProcessState::Gone));
    let repaired = olm_dev::up(&layout, &Progress::quiet()).unwrap();
    assert!(!repaired.already_running);
    assert!(olm_dev::status(&layout).unwrap().all_healthy());

    let report = olm_dev::down(&layout, &Progress::quiet(), false).unwrap();
    assert_eq!(report.stopped.len(), Component::ALL.len());
    assert_eq!(
        processes_mentioning(&state),
        Vec::<u32>::new(),
        "leftover processes"
    );
    let after = olm_dev::status(&layout).unwrap();
    assert!(
        after
            .components
            .iter()
            .all(|c| c.state == ProcessState::NotStarted)
    );
    // The shared development cluster (other ports, other state) is untouched by all of this.
}
