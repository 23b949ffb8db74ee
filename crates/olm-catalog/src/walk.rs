//! Listing catalog directories: the one place every loader (File-Based Catalogs, legacy
//! package manifests, bundle directories, the registry's reload watcher) reads directory
//! entries, so a hostile tree is handled the same way everywhere.
//!
//! Rules, all relative to the walker's root (the directory the user named; it may itself be
//! a link, which is resolved once):
//! * **Directory symlinks are not followed**, as opm's FBC loader (Go's `fs.WalkDir`) does not
//!   follow them. A link to a directory inside the root loses nothing, since its target is
//!   walked under its own path; the FBC walk reports it as a warning. So no link loop can
//!   make a walk revisit anything.
//! * **A symlink whose target resolves outside the root is refused**: a problem naming the
//!   link and its target. Nothing outside the catalog is read, listed or served.
//! * **A file symlink inside the root is read** as its target file.
//! * **A FIFO, socket or device** (directly or behind a link) is a problem naming it. It is
//!   never opened: opening a FIFO blocks until some writer comes.
//! * **Bounded**: directory depth, entries per walk and file size are limited
//!   ([`WalkLimits`]); going past one is a problem naming the limit.
//! * Entries come sorted by name; a name that is not UTF-8 is a problem.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::SystemTime;

use crate::error::{CatalogError, Problem};
use crate::ignore::IgnoreStack;

/// Limits of one walk. The defaults hold every real catalog with a wide margin (the
/// largest FBC has 745 bundles in a few dozen files; a bundle-directories tree of 997
/// bundles has about 13 500 entries, 7 levels deep; catalog files are at most tens of MB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkLimits {
    /// Deepest directory below the root whose entries are listed.
    pub max_depth: usize,
    /// Most directory entries looked at in one walk.
    pub max_entries: usize,
    /// Largest file read.
    pub max_file_bytes: u64,
}

/// Files larger than this are refused (bounded memory).
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Deepest directory nesting walked.
pub const MAX_DIR_DEPTH: usize = 32;
/// Most directory entries one walk looks at.
pub const MAX_ENTRIES: usize = 500_000;

impl Default for WalkLimits {
    fn default() -> Self {
        WalkLimits { max_depth: MAX_DIR_DEPTH, max_entries: MAX_ENTRIES, max_file_bytes: MAX_FILE_BYTES }
    }
}

/// What a directory entry is, after the rules above.
#[derive(Debug, Clone)]
pub enum EntryKind {
    /// A regular file, or a link to one inside the root.
    File { len: u64, modified: Option<SystemTime> },
    /// A real directory.
    Dir,
    /// A link to a directory inside the root: not followed.
    LinkedDir { target: PathBuf },
    /// Not read, and why.
    Refused(Box<Problem>),
}

/// One directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's path below the root (links are not resolved in it).
    pub path: PathBuf,
    pub name: String,
    pub kind: EntryKind,
}

/// Lists directories below one root by the rules of the module docs. Shareable between
/// threads; the entry limit counts over all listings of one walker.
#[derive(Debug)]
pub struct Walker {
    root: PathBuf,
    real_root: PathBuf,
    limits: WalkLimits,
    entries_seen: AtomicUsize,
    entry_limit_reported: AtomicBool,
}

impl Walker {
    /// A walker confined to `root`, with the default limits.
    pub fn new(root: &Path) -> Result<Walker, CatalogError> {
        Walker::with_limits(root, WalkLimits::default())
    }

    pub fn with_limits(root: &Path, limits: WalkLimits) -> Result<Walker, CatalogError> {
        let real_root = fs::canonicalize(root).map_err(|source| CatalogError::Io { path: root.to_path_buf(), source })?;
        Ok(Walker {
            root: root.to_path_buf(),
            real_root,
            limits,
            entries_seen: AtomicUsize::new(0),
            entry_limit_reported: AtomicBool::new(false),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn limits(&self) -> WalkLimits {
        self.limits
    }

    /// The entries of `dir` (the root or a directory below it), sorted by name. An entry
    /// that is not read is listed as [`EntryKind::Refused`] so the caller can apply its
    /// ignore rules before reporting it. The error case is a directory that cannot be
    /// listed at all: unreadable, too deep, outside the root, or past the entry limit.
    pub fn list(&self, dir: &Path) -> Result<Vec<Entry>, CatalogError> {
        let depth = dir.strip_prefix(&self.root).map(|rel| rel.components().count()).unwrap_or(0);
        if depth > self.limits.max_depth {
            return Err(refused(
                dir,
                format!("directory is nested deeper than the {} levels allowed; its contents are not read", self.limits.max_depth),
                "move its files nearer the catalog root",
                "TooDeep",
            ));
        }
        // The directory itself may have been reached through a link a caller chose to
        // follow (a bundle's `manifests`): it must still be inside the root.
        if depth == 0 || fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            let real = fs::canonicalize(dir).map_err(|source| CatalogError::Io { path: dir.to_path_buf(), source })?;
            if !real.starts_with(&self.real_root) {
                return Err(outside(dir, &real));
            }
        }
        let read = fs::read_dir(dir).map_err(|source| CatalogError::Io { path: dir.to_path_buf(), source })?;
        let mut raw: Vec<fs::DirEntry> = Vec::new();
        for item in read {
            let item = item.map_err(|source| CatalogError::Io { path: dir.to_path_buf(), source })?;
            if self.entries_seen.fetch_add(1, Ordering::Relaxed) >= self.limits.max_entries {
                if self.entry_limit_reported.swap(true, Ordering::Relaxed) {
                    return Ok(Vec::new());
                }
                return Err(refused(
                    dir,
                    format!(
                        "the catalog holds more than the {} files and directories allowed; this directory and the rest are not read",
                        self.limits.max_entries
                    ),
                    "split the catalog or remove files it does not need",
                    "TooManyFiles",
                ));
            }
            raw.push(item);
        }
        raw.sort_by_key(fs::DirEntry::file_name);
        Ok(raw.into_iter().map(|item| self.classify(item)).collect())
    }

    fn classify(&self, item: fs::DirEntry) -> Entry {
        let path = item.path();
        let Some(name) = item.file_name().to_str().map(str::to_owned) else {
            let problem = Problem::new("file name is not UTF-8; it is not read").file(Some(&path)).fix("rename it").code("NotUtf8Name");
            return Entry { path, name: String::new(), kind: EntryKind::Refused(Box::new(problem)) };
        };
        let kind = match item.file_type() {
            Err(e) => EntryKind::Refused(Box::new(cannot_read(&path, &e))),
            Ok(t) if t.is_dir() => EntryKind::Dir,
            Ok(t) if t.is_symlink() => self.classify_link(&path),
            Ok(t) if t.is_file() => match item.metadata() {
                Ok(meta) => self.file_kind(&path, &meta),
                Err(e) => EntryKind::Refused(Box::new(cannot_read(&path, &e))),
            },
            Ok(t) => EntryKind::Refused(Box::new(not_regular(&path, special_kind(&t), None))),
        };
        Entry { path, name, kind }
    }

    fn classify_link(&self, link: &Path) -> EntryKind {
        let real = match fs::canonicalize(link) {
            Ok(real) => real,
            Err(e) => {
                let target = fs::read_link(link).map(|t| quoted(&t)).unwrap_or_else(|_| "?".into());
                let problem = Problem::new(format!("symlink to {target} cannot be resolved ({e}); it is not read"))
                    .file(Some(link))
                    .fix("point it at a file inside the catalog or remove it")
                    .code("BrokenSymlink");
                return EntryKind::Refused(Box::new(problem));
            }
        };
        if !real.starts_with(&self.real_root) {
            return EntryKind::Refused(Box::new(*outside_problem(link, &real)));
        }
        match fs::metadata(&real) {
            Err(e) => EntryKind::Refused(Box::new(cannot_read(link, &e))),
            Ok(meta) if meta.is_dir() => EntryKind::LinkedDir { target: real },
            Ok(meta) if meta.is_file() => self.file_kind(link, &meta),
            Ok(meta) => EntryKind::Refused(Box::new(not_regular(link, special_kind(&meta.file_type()), Some(&real)))),
        }
    }

    fn file_kind(&self, path: &Path, meta: &fs::Metadata) -> EntryKind {
        if meta.len() > self.limits.max_file_bytes {
            let problem = Problem::new(format!(
                "file is {} bytes, more than the {} allowed; it is not read",
                meta.len(),
                self.limits.max_file_bytes
            ))
            .file(Some(path))
            .fix("split it into smaller files")
            .code("FileTooLarge");
            return EntryKind::Refused(Box::new(problem));
        }
        EntryKind::File { len: meta.len(), modified: meta.modified().ok() }
    }

    /// Every file below the root that a File-Based Catalog loader parses, in lexical
    /// order, `.indexignore` rules applied (the `.indexignore` files themselves are not
    /// catalog files), with a problem for every entry refused and every directory link.
    pub fn fbc_files(&self) -> (Vec<PathBuf>, Vec<Problem>) {
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut ignores = IgnoreStack::default();
        self.fbc_walk(&self.root, &mut ignores, &mut files, &mut problems);
        (files, problems)
    }

    fn fbc_walk(&self, dir: &Path, ignores: &mut IgnoreStack, files: &mut Vec<PathBuf>, problems: &mut Vec<Problem>) {
        let entries = match self.list(dir) {
            Ok(entries) => entries,
            Err(e) => {
                problems.extend(e.problems());
                return;
            }
        };
        let ignore_file = entries.iter().find(|e| e.name == ".indexignore");
        let pushed = match ignore_file.map(|e| (&e.kind, &e.path)) {
            Some((EntryKind::File { .. }, path)) => match fs::read_to_string(path) {
                Ok(text) => {
                    ignores.push(dir.strip_prefix(&self.root).unwrap_or(Path::new("")).to_path_buf(), &text);
                    true
                }
                Err(e) => {
                    problems.push(cannot_read(path, &e));
                    false
                }
            },
            Some((EntryKind::Refused(problem), _)) => {
                problems.push((**problem).clone());
                false
            }
            _ => false,
        };
        for entry in entries {
            if entry.name == ".indexignore" {
                continue;
            }
            let rel = entry.path.strip_prefix(&self.root).unwrap_or(&entry.path);
            let is_dir = matches!(entry.kind, EntryKind::Dir | EntryKind::LinkedDir { .. });
            if !entry.name.is_empty() && ignores.is_ignored(rel, is_dir) {
                continue;
            }
            match entry.kind {
                EntryKind::File { .. } => files.push(entry.path),
                EntryKind::Dir => self.fbc_walk(&entry.path, ignores, files, problems),
                EntryKind::LinkedDir { target } => problems.push(linked_dir_warning(&entry.path, &target)),
                EntryKind::Refused(problem) => problems.push(*problem),
            }
        }
        if pushed {
            ignores.pop();
        }
    }

    /// The regular files directly in `dir` whose names do not start with `.`, sorted;
    /// subdirectories (and links to them) are not part of it. A refused entry makes the
    /// whole listing an error naming every refused entry: the files of a bundle are read
    /// all or not at all.
    pub fn visible_files(&self, dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
        let mut files = Vec::new();
        let mut problems = Vec::new();
        for entry in self.list(dir)? {
            if entry.name.starts_with('.') {
                continue;
            }
            match entry.kind {
                EntryKind::File { .. } => files.push(entry.path),
                EntryKind::Dir | EntryKind::LinkedDir { .. } => {}
                EntryKind::Refused(problem) => problems.push(*problem),
            }
        }
        match problems.len() {
            0 => Ok(files),
            1 => Err(CatalogError::Refused(Box::new(problems.remove(0)))),
            _ => Err(CatalogError::Invalid(problems)),
        }
    }

    /// The real subdirectories of `dir` whose names do not start with `.`, sorted (links to
    /// directories are not followed). An unreadable `dir` has none.
    pub fn visible_subdirs(&self, dir: &Path) -> Vec<PathBuf> {
        self.list(dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| matches!(e.kind, EntryKind::Dir) && !e.name.starts_with('.'))
            .map(|e| e.path)
            .collect()
    }
}

/// `path` quoted for a message, cut to about 200 characters.
pub(crate) fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    if text.chars().count() <= 200 {
        return format!("{text:?}");
    }
    let cut: String = text.chars().take(200).collect();
    format!("{cut:?}…")
}

fn refused(path: &Path, message: String, fix: &str, code: &'static str) -> CatalogError {
    CatalogError::Refused(Box::new(Problem::new(message).file(Some(path)).fix(fix).code(code)))
}

fn outside_problem(link: &Path, real: &Path) -> Box<Problem> {
    Box::new(
        Problem::new(format!("symlink points outside the catalog, to {}; it is not read", quoted(real)))
            .file(Some(link))
            .fix("copy what it points to into the catalog directory, or remove the link")
            .code("OutsideCatalog"),
    )
}

fn outside(link: &Path, real: &Path) -> CatalogError {
    CatalogError::Refused(outside_problem(link, real))
}

fn linked_dir_warning(link: &Path, target: &Path) -> Problem {
    Problem::new(format!(
        "symlink to the directory {} is not followed (directory links never are, as in opm); the directory is read where it is",
        quoted(target)
    ))
    .file(Some(link))
    .fix("remove the link")
    .code("DirectorySymlink")
    .warning()
}

fn cannot_read(path: &Path, e: &std::io::Error) -> Problem {
    Problem::new(format!("cannot read: {e}")).file(Some(path)).code("Unreadable")
}

fn special_kind(t: &fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

/// A FIFO, socket or device: named, never opened.
pub(crate) fn not_regular(path: &Path, kind: &str, behind_link: Option<&Path>) -> Problem {
    let through = behind_link.map(|t| format!(" (the link's target {})", quoted(t))).unwrap_or_default();
    Problem::new(format!("is {kind}{through}, not a regular file; it is not read"))
        .file(Some(path))
        .fix("replace it with a regular file or remove it")
        .code("NotARegularFile")
}

/// Refuses to open anything but a regular file (a FIFO would block the open).
pub(crate) fn check_regular(path: &Path, meta: &fs::Metadata) -> Result<(), CatalogError> {
    if meta.is_file() || meta.is_dir() {
        return Ok(());
    }
    Err(CatalogError::Refused(Box::new(not_regular(path, special_kind(&meta.file_type()), None))))
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
