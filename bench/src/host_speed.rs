//! How fast the host runs the API server on the day of a scale run. The same requests cost the
//! API server ~1.5× the CPU from one day to the next on this machine kind (BENCHMARKS.md,
//! session 30), which moves the time to settle as much as a change of ours does; so the report
//! puts, next to it, what a fixed batch of writes costs the idle API server and the API
//! server's CPU until settled.

use std::time::{Duration, Instant};

/// ConfigMaps applied for the probe.
pub const PROBE_WRITES: usize = 200;
/// How long the idle API server is watched first (its own background use is subtracted).
const IDLE_SPAN: Duration = Duration::from_secs(10);
const PROBE_NAMESPACE: &str = "host-speed-probe";
/// Linux reports process times in USER_HZ ticks, 100 a second on every architecture it runs on
/// (part of its ABI, unlike the kernel's internal HZ).
const TICKS_PER_SECOND: f64 = 100.0;

/// What the probe measured on the idle private control plane.
pub struct HostSpeed {
    /// API server CPU per server-side apply of a small ConfigMap, its idle use subtracted (ms).
    pub apply_ms: f64,
    /// The idle API server's own use (ms of CPU a second).
    pub idle_ms_per_s: f64,
}

/// The API server's CPU time so far (user + system), in seconds; `None` when its pid file or
/// process cannot be read.
pub fn api_server_cpu_s(layout: &olm_dev::Layout) -> Option<f64> {
    let pid = std::fs::read_to_string(layout.pid_file("kube-apiserver")).ok()?;
    cpu_s(pid.trim().parse().ok()?)
}

/// A process's CPU time so far (user + system), in seconds.
pub fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start at its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// Apply [`PROBE_WRITES`] ConfigMaps (server-side, one request each) to the idle control plane
/// and measure the API server's CPU; the namespace is deleted (and gone) after.
pub fn probe(layout: &olm_dev::Layout) -> anyhow::Result<HostSpeed> {
    let cpu = || api_server_cpu_s(layout).ok_or_else(|| anyhow::anyhow!("cannot read the API server's CPU time from /proc"));
    crate::kubectl::kubectl(layout, &["create", "namespace", PROBE_NAMESPACE], None)?;
    let idle_start = cpu()?;
    std::thread::sleep(IDLE_SPAN);
    let idle_per_s = (cpu()? - idle_start) / IDLE_SPAN.as_secs_f64();
    let objects: String = (0..PROBE_WRITES)
        .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: probe-{i:03}, namespace: {PROBE_NAMESPACE}}}\ndata: {{n: \"{i}\"}}\n---\n"))
        .collect();
    let (started, start_cpu) = (Instant::now(), cpu()?);
    crate::kubectl::kubectl(layout, &["apply", "--server-side", "--field-manager=host-speed-probe", "-f", "-"], Some(&objects))?;
    let used = cpu()? - start_cpu - idle_per_s * started.elapsed().as_secs_f64();
    // Gone before the run starts: deleting it during the run cost the busy API server (its
    // collection deletes timed out) and the namespace controller while the installs ran.
    crate::kubectl::kubectl(layout, &["delete", "namespace", PROBE_NAMESPACE, "--wait=true", "--timeout=180s"], None)?;
    Ok(HostSpeed { apply_ms: used.max(0.0) * 1000.0 / PROBE_WRITES as f64, idle_ms_per_s: idle_per_s * 1000.0 })
}
