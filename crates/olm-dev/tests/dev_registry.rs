//! The registry of the `olm dev up` environment, on throwaway state directories and free ports
//! (never the developer's): started once on its port, left alone while healthy, in its own
//! process group so it outlives its starter, stopped by its recorded pid, storage purged.
//! Uses the shared binary cache (builds the registry if absent).

use olm_dev::registry::{
    DEV_REGISTRY_NAME, dev_registry_env_lines, dev_registry_status, ensure_dev_registry,
    stop_dev_registry,
};
use olm_dev::{Layout, ProcessState, Progress};

fn layout_with(state: &std::path::Path) -> Layout {
    let mut layout = Layout::from_env().expect("cache location");
    olm_dev::ensure_registry_built(&layout, &Progress::new()).expect("registry binary");
    layout.state_dir = state.to_path_buf();
    layout.host_ports.registry = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    layout
}

/// The process group of `pid` (field 5 of /proc/<pid>/stat).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn dev_registry_starts_once_outlives_its_starter_and_stops_by_pid() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout_with(dir.path());
    let addr = format!("127.0.0.1:{}", layout.host_ports.registry);

    let first = ensure_dev_registry(&layout, &Progress::quiet()).unwrap();
    assert!(!first.already_running);
    assert_eq!(first.addr, addr);
    let recorded = std::fs::read_to_string(layout.pid_file(DEV_REGISTRY_NAME)).unwrap();
    assert_eq!(recorded.trim(), first.pid.to_string());
    assert_eq!(
        process_group(first.pid),
        Some(first.pid),
        "own process group"
    );
    assert!(layout.registry_dir().join("config.yml").is_file());
    assert!(layout.registry_dir().join("storage").is_dir());
    assert!(layout.log_file(DEV_REGISTRY_NAME).is_file());

    let status = dev_registry_status(&layout).unwrap();
    assert!(status.healthy, "{}", status.render());
    assert_eq!(status.state, ProcessState::Running);
    assert!(
        status.render().contains("GET /v2/ 200"),
        "{}",
        status.render()
    );
    assert_eq!(
        dev_registry_env_lines(&layout),
        format!("export OLM_DEV_REGISTRY={addr}\n")
    );

    // Healthy: a second call starts nothing.
    let second = ensure_dev_registry(&layout, &Progress::quiet()).unwrap();
    assert!(second.already_running);
    assert_eq!(second.pid, first.pid);

    let stopped = stop_dev_registry(&layout, &Progress::quiet(), true).unwrap();
    assert_eq!(stopped, Some(first.pid));
    assert!(!olm_dev::process_runs(first.pid, &layout.registry()));
    assert!(!layout.pid_file(DEV_REGISTRY_NAME).exists());
    assert!(
        !layout.registry_dir().exists(),
        "--purge deletes the storage"
    );
    assert_eq!(
        dev_registry_status(&layout).unwrap().state,
        ProcessState::NotStarted
    );
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "{addr} still answers"
    );
}

#[test]
fn dev_registry_port_in_use_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout_with(dir.path());
    let _squatter = std::net::TcpListener::bind(("127.0.0.1", layout.host_ports.registry)).unwrap();
    let err = ensure_dev_registry(&layout, &Progress::quiet()).unwrap_err();
    assert_eq!(err.category(), "PortInUse", "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{}", layout.host_ports.registry)),
        "{text}"
    );
    assert!(text.contains("registry"), "{text}");
    assert!(!layout.pid_file(DEV_REGISTRY_NAME).exists());
}
