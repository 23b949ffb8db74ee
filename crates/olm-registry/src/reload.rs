//! Watching catalog directories and reloading them.
//!
//! We poll a cheap fingerprint (path, size, mtime of every file) instead of using
//! inotify: catalog directories are often Kubernetes volumes (ConfigMaps swap a
//! `..data` symlink, image volumes and NFS/overlay mounts may deliver no events at
//! all), editors replace files by rename, and inotify watches are a limited per-user
//! resource. A stat walk of a catalog costs well under a millisecond per hundred
//! files, so a poll every few seconds is cheap. A change is loaded only once the
//! fingerprint is stable across two looks (debounce), and a failed load is retried
//! only after the files change again — never in a hot loop.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use olm_catalog::walk::{EntryKind, Walker};
use tokio::sync::watch;

use crate::store::ServedCatalog;

/// Fingerprint of the files under `dir`: changes when a file is added, removed,
/// resized or rewritten. Errors are folded in, so "unreadable" is a state too. The walk is
/// the catalog loaders' own ([`olm_catalog::walk`]): directory links are not followed (a
/// link loop cannot make a poll endless), nothing outside `dir` is looked at, FIFOs are
/// never opened, and the walk is bounded.
pub fn fingerprint(dir: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    match Walker::new(dir) {
        Ok(walker) => walk(&walker, dir, &mut hasher),
        Err(e) => e.to_string().hash(&mut hasher),
    }
    hasher.finish()
}

fn walk(walker: &Walker, dir: &Path, hasher: &mut DefaultHasher) {
    let entries = match walker.list(dir) {
        Ok(entries) => entries,
        Err(e) => {
            e.to_string().hash(hasher);
            return;
        }
    };
    for entry in entries {
        entry.path.hash(hasher);
        match entry.kind {
            EntryKind::File { len, modified } => {
                len.hash(hasher);
                modified.hash(hasher);
            }
            EntryKind::Dir => walk(walker, &entry.path, hasher),
            // A swapped `..data` link (ConfigMap volumes) changes the target.
            EntryKind::LinkedDir { target } => target.hash(hasher),
            EntryKind::Refused(problem) => problem.message.hash(hasher),
        }
    }
}

/// What the poller knows about one catalog.
#[derive(Debug, Clone, Copy)]
struct WatchState {
    /// Fingerprint of the files the last load attempt read.
    attempted: u64,
    /// A newer fingerprint seen once, waiting to be confirmed stable.
    pending: Option<u64>,
}

/// Called after every load attempt (e.g. to update gRPC health).
pub type AfterLoad = Arc<dyn Fn(&ServedCatalog) + Send + Sync>;

/// Poll `catalogs` every `interval` until `shutdown` flips; reload on change.
/// `initial` holds the fingerprints taken just before the first load.
pub async fn poll_loop(
    catalogs: Vec<(Arc<ServedCatalog>, u64)>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
    after_load: AfterLoad,
) {
    let mut states: Vec<(Arc<ServedCatalog>, WatchState)> =
        catalogs.into_iter().map(|(c, fp)| (c, WatchState { attempted: fp, pending: None })).collect();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        for (catalog, state) in states.iter_mut() {
            let Some(dir) = catalog.dir.clone() else { continue };
            let Ok(current) = tokio::task::spawn_blocking(move || fingerprint(&dir)).await else { continue };
            if current == state.attempted {
                state.pending = None;
                continue;
            }
            if state.pending != Some(current) {
                // First sighting: an edit may still be in progress; confirm next poll.
                state.pending = Some(current);
                continue;
            }
            state.attempted = current;
            state.pending = None;
            let served = catalog.clone();
            let result = tokio::task::spawn_blocking(move || served.reload()).await;
            match result {
                Ok(Ok(true)) => tracing::info!(catalog = %catalog.name, dir = %catalog.origin(), "catalog reloaded; serving the new snapshot"),
                Ok(Ok(false)) => tracing::debug!(catalog = %catalog.name, "catalog files changed but content is the same"),
                Ok(Err(message)) => tracing::error!(
                    catalog = %catalog.name,
                    dir = %catalog.origin(),
                    category = "InvalidCatalog",
                    "catalog edit rejected; still serving the last good snapshot: {message}"
                ),
                Err(e) => tracing::error!(catalog = %catalog.name, "catalog reload task failed: {e}"),
            }
            after_load(catalog);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_changes_with_content_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "one").unwrap();
        let first = fingerprint(dir.path());
        assert_eq!(first, fingerprint(dir.path()), "stable when nothing changes");
        std::fs::write(&file, "three").unwrap();
        let second = fingerprint(dir.path());
        assert_ne!(first, second, "size change");
        std::fs::write(dir.path().join("b.yaml"), "x").unwrap();
        assert_ne!(second, fingerprint(dir.path()), "new file");
        let missing = fingerprint(&dir.path().join("nope"));
        assert_ne!(missing, first);
    }

    /// Two loop links made the old walk (which followed links) visit 2^32 paths.
    #[test]
    fn link_loops_and_fifos_end_the_walk_at_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "one").unwrap();
        let before = fingerprint(dir.path());
        std::os::unix::fs::symlink(".", dir.path().join("self")).unwrap();
        std::os::unix::fs::symlink(".", dir.path().join("again")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        let status = std::process::Command::new("mkfifo").arg(dir.path().join("pipe.yaml")).status().unwrap();
        assert!(status.success());
        let after = fingerprint(dir.path());
        assert_ne!(before, after);
        assert_eq!(after, fingerprint(dir.path()), "stable");
    }
}
