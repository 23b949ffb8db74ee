//! Building the control-plane binaries from the Go module proxy, once, into a versioned cache.
//!
//! Kubernetes and etcd cannot be built with `go install pkg@version` because their own go.mod
//! files carry replace directives; each gets a dedicated consumer module under `src/`. The
//! Kubernetes consumer replaces every staging module (derived from k/k's own go.mod, so the list
//! is right for whichever version we pin) with its published `v0.<minor>.<patch>` release.
//!
//! This module keeps the cache bookkeeping (stamps, version checks); [`go`] runs the go command
//! and reads go.mod files; [`recipes`] says how each component is built (the control plane's
//! and the distribution registry's).

mod go;
mod node_recipes;
mod recipes;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all};
use crate::run::{Progress, describe, format_duration};
use node_recipes::{CoreDns, Crictl, KubernetesNode};
use recipes::{Etcd, Helm, Kubernetes, Kwok, Registry};

/// Name of the stamp file written into a component's bin directory after its binaries' versions
/// were checked.
const STAMP_FILE: &str = ".stamp";

/// Everything `olm dev cluster build` builds, in build order.
const ALL: [&dyn Component; 4] = [&Kubernetes, &Etcd, &Kwok, &Registry];

/// Builds whatever is missing; a second call finds every stamp and builds nothing.
pub fn ensure_built(layout: &Layout, progress: &Progress) -> Result<()> {
    ensure(layout, progress, &ALL)
}

/// Builds the real node's binaries (kubelet, kube-proxy, crictl, CoreDNS) if they are missing;
/// only `--real-node` needs them, so `olm dev cluster build` alone does not build them.
pub fn ensure_node_built(layout: &Layout, progress: &Progress) -> Result<()> {
    ensure(layout, progress, &[&KubernetesNode, &Crictl, &CoreDns])
}

/// Builds only the distribution registry if it is missing (what a test that needs a registry but
/// no control plane waits for).
pub fn ensure_registry_built(layout: &Layout, progress: &Progress) -> Result<()> {
    ensure(layout, progress, &[&Registry])
}

/// Builds helm if it is missing (only the chart's tests need it).
pub fn ensure_helm_built(layout: &Layout, progress: &Progress) -> Result<()> {
    ensure(layout, progress, &[&Helm])
}

/// Builds the missing ones of `components` under the cache's build lock.
fn ensure(layout: &Layout, progress: &Progress, components: &[&dyn Component]) -> Result<()> {
    create_dir_all(&layout.cache_dir)?;
    let lock_path = layout.build_lock();
    let lock = File::create(&lock_path).map_err(|e| DevError::io("create", &lock_path, e))?;
    if lock.try_lock().is_err() {
        progress.say(format!(
            "another build holds {}; waiting for it",
            lock_path.display()
        ));
        lock.lock()
            .map_err(|e| DevError::io("lock", &lock_path, e))?;
    }
    for component in components {
        ensure_component(layout, progress, *component)?;
    }
    Ok(())
}

/// Whether every component's stamp is present (i.e. `ensure_built` would build nothing).
pub fn is_built(layout: &Layout) -> bool {
    ALL.iter().all(|c| stamp_matches(layout, *c))
}

trait Component {
    /// Directory name under `src/` and `bin/`, e.g. `k8s-v1.36.3`.
    fn dir_name(&self) -> String;
    /// Human name with version.
    fn title(&self) -> String;
    /// Files that must exist in the bin directory.
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf>;
    /// Runs every binary's version command and checks the output; returns a summary.
    fn verify(&self, layout: &Layout) -> Result<String>;
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()>;
}

fn stamp_path(layout: &Layout, component: &dyn Component) -> PathBuf {
    layout.bin_dir(&component.dir_name()).join(STAMP_FILE)
}

fn stamp_matches(layout: &Layout, component: &dyn Component) -> bool {
    let Ok(text) = std::fs::read_to_string(stamp_path(layout, component)) else {
        return false;
    };
    text.lines().next() == Some(component.title().as_str())
        && component.outputs(layout).iter().all(|p| p.is_file())
}

fn ensure_component(layout: &Layout, progress: &Progress, component: &dyn Component) -> Result<()> {
    let title = component.title();
    if stamp_matches(layout, component) {
        progress.say(format!(
            "{title}: cached in {}",
            layout.bin_dir(&component.dir_name()).display()
        ));
        return Ok(());
    }
    // Binaries built earlier without a stamp (e.g. by hand) are accepted once their versions check out.
    if component.outputs(layout).iter().all(|p| p.is_file())
        && let Ok(summary) = component.verify(layout)
    {
        write_stamp(layout, component, &summary)?;
        progress.say(format!(
            "{title}: found existing binaries with the right version; stamped"
        ));
        return Ok(());
    }
    let started = Instant::now();
    progress.say(format!(
        "{title}: building (log: {})",
        layout.build_log(&component.dir_name()).display()
    ));
    component.build(layout, progress)?;
    let summary = component.verify(layout)?;
    write_stamp(layout, component, &summary)?;
    progress.say(format!(
        "{title}: built and verified in {}",
        format_duration(started.elapsed())
    ));
    Ok(())
}

fn write_stamp(layout: &Layout, component: &dyn Component, summary: &str) -> Result<()> {
    let path = stamp_path(layout, component);
    let text = format!("{}\n{summary}\n", component.title());
    std::fs::write(&path, text).map_err(|e| DevError::io("write", &path, e))
}

/// Runs `<binary> <args>` and checks that its output contains `expected`.
pub(super) fn check_version(binary: &Path, args: &[&str], expected: &str) -> Result<String> {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    let command = describe(&cmd);
    let output = cmd.output().map_err(|source| DevError::Spawn {
        command: command.clone(),
        source,
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = text.trim().to_string();
    if !output.status.success() || !text.contains(expected) {
        return Err(DevError::WrongVersion {
            command,
            expected: expected.to_string(),
            output: text,
        });
    }
    Ok(format!(
        "{}: {}",
        binary.display(),
        text.lines().next().unwrap_or("")
    ))
}

pub(super) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| DevError::io("read", path, e))
}

pub(super) fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| DevError::io("write", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_requires_title_and_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            cache_dir: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            ports: Default::default(),
            host_ports: Default::default(),
        };
        assert!(!stamp_matches(&layout, &Etcd));
        std::fs::create_dir_all(layout.etcd().parent().unwrap()).unwrap();
        write_stamp(&layout, &Etcd, "summary").unwrap();
        // Stamp without the binary: not built.
        assert!(!stamp_matches(&layout, &Etcd));
        std::fs::write(layout.etcd(), "").unwrap();
        assert!(stamp_matches(&layout, &Etcd));
        std::fs::write(stamp_path(&layout, &Etcd), "etcd v0.0.1\n").unwrap();
        assert!(!stamp_matches(&layout, &Etcd));
    }
}
