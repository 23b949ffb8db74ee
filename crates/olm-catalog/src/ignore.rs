//! `.indexignore` matching (gitignore pattern syntax, as opm uses).
//!
//! Supported: blank lines and `#` comments, `!` negation, trailing `/` (directories
//! only), leading or inner `/` (anchored to the `.indexignore` directory), `*`, `?`,
//! `[...]` classes and `**`. Later patterns win; a deeper `.indexignore` is
//! consulted after the shallower ones.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
struct Pattern {
    negated: bool,
    dir_only: bool,
    anchored: bool,
    glob: String,
}

#[derive(Debug, Default)]
pub(crate) struct IgnoreStack {
    /// (directory relative to the root, its patterns)
    levels: Vec<(PathBuf, Vec<Pattern>)>,
}

impl IgnoreStack {
    pub(crate) fn push(&mut self, dir: PathBuf, text: &str) {
        let mut patterns = Vec::new();
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, rest) = match line.strip_prefix('!') {
                Some(r) => (true, r),
                None => (false, line.strip_prefix('\\').unwrap_or(line)),
            };
            let (dir_only, rest) = match rest.strip_suffix('/') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let anchored = rest.contains('/');
            let glob = rest.trim_start_matches('/').to_string();
            if glob.is_empty() {
                continue;
            }
            patterns.push(Pattern {
                negated,
                dir_only,
                anchored,
                glob,
            });
        }
        self.levels.push((dir, patterns));
    }

    pub(crate) fn pop(&mut self) {
        self.levels.pop();
    }

    /// Whether `rel` (relative to the catalog root) is ignored.
    pub(crate) fn is_ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let mut ignored = false;
        for (dir, patterns) in &self.levels {
            let Ok(sub) = rel.strip_prefix(dir) else {
                continue;
            };
            let sub = sub.to_string_lossy().replace('\\', "/");
            let base = sub.rsplit('/').next().unwrap_or(&sub);
            for p in patterns {
                if p.dir_only && !is_dir {
                    continue;
                }
                let hit = if p.anchored {
                    glob_match(&p.glob, &sub)
                } else {
                    glob_match(&p.glob, base)
                };
                if hit {
                    ignored = !p.negated;
                }
            }
        }
        ignored
    }
}

/// Glob match where `*` and `?` do not cross `/`, and `**` does.
fn glob_match(pattern: &str, text: &str) -> bool {
    fn rec(p: &[u8], t: &[u8], budget: &mut u32) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match p.first() {
            None => t.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => {
                let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
                (0..=t.len()).any(|i| rec(rest, &t[i..], budget))
            }
            Some(b'*') => {
                let mut i = 0;
                loop {
                    if rec(&p[1..], &t[i..], budget) {
                        return true;
                    }
                    if i >= t.len() || t[i] == b'/' {
                        return false;
                    }
                    i += 1;
                }
            }
            Some(b'?') => !t.is_empty() && t[0] != b'/' && rec(&p[1..], &t[1..], budget),
            Some(b'[') => {
                let Some(end) = p.iter().skip(1).position(|&c| c == b']').map(|e| e + 1) else {
                    return t.first() == Some(&b'[') && rec(&p[1..], &t[1..], budget);
                };
                let Some(&c) = t.first() else { return false };
                let class = &p[1..end];
                let (negate, class) = match class.first() {
                    Some(b'!') | Some(b'^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut matched = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == b'-' {
                        if class[i] <= c && c <= class[i + 2] {
                            matched = true;
                        }
                        i += 3;
                    } else {
                        if class[i] == c {
                            matched = true;
                        }
                        i += 1;
                    }
                }
                matched != negate && rec(&p[end + 1..], &t[1..], budget)
            }
            Some(&c) => t.first() == Some(&c) && rec(&p[1..], &t[1..], budget),
        }
    }
    let mut budget = 100_000;
    rec(pattern.as_bytes(), text.as_bytes(), &mut budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_subset() {
        let mut s = IgnoreStack::default();
        s.push(
            PathBuf::new(),
            "# c\n*.md\n/top.yaml\nskip/\n!keep.md\ndocs/**/x.json\n",
        );
        assert!(s.is_ignored(Path::new("README.md"), false));
        assert!(s.is_ignored(Path::new("a/b/NOTES.md"), false));
        assert!(!s.is_ignored(Path::new("keep.md"), false));
        assert!(s.is_ignored(Path::new("top.yaml"), false));
        assert!(!s.is_ignored(Path::new("a/top.yaml"), false));
        assert!(s.is_ignored(Path::new("a/skip"), true));
        assert!(!s.is_ignored(Path::new("a/skip"), false));
        assert!(s.is_ignored(Path::new("docs/q/r/x.json"), false));
        assert!(s.is_ignored(Path::new("docs/x.json"), false));
        assert!(!s.is_ignored(Path::new("catalog.yaml"), false));
        s.push(PathBuf::from("pkg"), "catalog.yaml\n");
        assert!(s.is_ignored(Path::new("pkg/catalog.yaml"), false));
        assert!(!s.is_ignored(Path::new("other/catalog.yaml"), false));
    }
}
