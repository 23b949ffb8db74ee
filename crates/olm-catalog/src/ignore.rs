//! `.indexignore` matching: gitignore semantics, as opm uses, by the `ignore` crate's gitignore
//! matcher (ripgrep's). Later patterns win; a deeper `.indexignore` is consulted after the
//! shallower ones, its patterns relative to its own directory. A line that is not a valid
//! pattern is skipped, as git skips it.

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

#[derive(Debug, Default)]
pub(crate) struct IgnoreStack {
    /// (directory relative to the root, the matcher of its `.indexignore`)
    levels: Vec<(PathBuf, Gitignore)>,
}

impl IgnoreStack {
    pub(crate) fn push(&mut self, dir: PathBuf, text: &str) {
        let mut builder = GitignoreBuilder::new("");
        for line in text.lines() {
            // An invalid glob (an unclosed class) is no pattern at all.
            let _ = builder.add_line(None, line);
        }
        let matcher = builder.build().unwrap_or_else(|_| Gitignore::empty());
        self.levels.push((dir, matcher));
    }

    pub(crate) fn pop(&mut self) {
        self.levels.pop();
    }

    /// Whether `rel` (relative to the catalog root) is ignored.
    pub(crate) fn is_ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let mut ignored = false;
        for (dir, matcher) in &self.levels {
            let Ok(sub) = rel.strip_prefix(dir) else {
                continue;
            };
            match matcher.matched(sub, is_dir) {
                Match::Ignore(_) => ignored = true,
                Match::Whitelist(_) => ignored = false,
                Match::None => {}
            }
        }
        ignored
    }
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

    #[test]
    fn classes_escapes_and_invalid_lines() {
        let mut s = IgnoreStack::default();
        s.push(PathBuf::new(), "[ab].yaml\n\\!bang.json\n[unclosed\n?.json\n");
        assert!(s.is_ignored(Path::new("a.yaml"), false));
        assert!(!s.is_ignored(Path::new("c.yaml"), false));
        assert!(s.is_ignored(Path::new("!bang.json"), false));
        assert!(s.is_ignored(Path::new("x.json"), false), "the invalid line does not take the others with it");
        assert!(!s.is_ignored(Path::new("xy.json"), false));
    }
}
