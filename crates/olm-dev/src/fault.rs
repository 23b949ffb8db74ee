//! Faults on purpose: one component of a running control plane killed with SIGKILL (a crash,
//! not a shutdown) and started again, as the fault tests and the chaos run do (issue #20).
//! Everything else keeps running; etcd keeps its data directory, so a restarted etcd or API
//! server serves the cluster as it was.

use std::time::{Duration, Instant};

use crate::component::Component;
use crate::error::{DevError, Result};
use crate::layout::Layout;
use crate::process::{kill_pid, lock_state, read_pid, start, wait_healthy};
use crate::probe;
use crate::run::Progress;

/// SIGKILLs `component` when its recorded process runs; returns its pid, or None when it
/// was not running. Returns once the process has exited and its ports are closed.
pub fn kill_component(layout: &Layout, component: Component) -> Result<Option<u32>> {
    let _lock = lock_state(layout, &Progress::quiet())?;
    let pid_path = layout.pid_file(component.name());
    let Some(pid) = read_pid(&pid_path)? else {
        return Ok(None);
    };
    let killed = kill_pid(component.name(), pid, &component.binary(layout))?;
    std::fs::remove_file(&pid_path).map_err(|e| DevError::io("remove", &pid_path, e))?;
    Ok(killed.then_some(pid))
}

/// Starts `component` again (after [`kill_component`]) and waits until it is healthy; returns
/// how long that took. The rest of the control plane must be running as `up` left it.
pub fn restart_component(layout: &Layout, component: Component) -> Result<Duration> {
    let begin = Instant::now();
    let _lock = lock_state(layout, &Progress::quiet())?;
    let tls = probe::tls_config(&layout.pki_file("ca.crt")).map_err(|reason| DevError::Pki {
        what: "TLS configuration for health checks".into(),
        reason,
    })?;
    let mut started = start(layout, component)?;
    wait_healthy(layout, &mut started, &tls)?;
    // The process outlives this call, like the ones `up` starts; whoever started it reaps it
    // when it exits (or init does, once that process is gone).
    drop(started);
    Ok(begin.elapsed())
}
