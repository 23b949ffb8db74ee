//! One bad package hurts only itself: a catalog with problems is served without the packages
//! they belong to, each left out with its problems, instead of not at all (opm refuses the
//! whole catalog). A problem that names no package but a file (a file that does not parse)
//! takes out the packages whose blobs come from that file's directory, since the file may
//! have held some of theirs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::{Catalog, Document, SCHEMA_PACKAGE};
use crate::Problem;

/// A package left out of a catalog, and why.
#[derive(Clone, Debug)]
pub struct LeftOut {
    /// The package.
    pub package: String,
    /// Its problems.
    pub problems: Vec<Problem>,
}

/// What isolating a catalog's problems gave.
#[derive(Debug)]
pub struct Isolated {
    /// The catalog without the left-out packages.
    pub catalog: Catalog,
    /// The packages left out, by name.
    pub left_out: Vec<LeftOut>,
    /// Problems that belong to no package and no file, and warnings: they leave everything served.
    pub unattributed: Vec<Problem>,
}

impl Catalog {
    /// This catalog without the packages `problems` belong to (see the module docs).
    pub fn isolate(self, problems: Vec<Problem>) -> Isolated {
        let mut bad: BTreeMap<String, Vec<Problem>> = BTreeMap::new();
        let mut unattributed = Vec::new();
        for problem in problems {
            if problem.warning {
                // It takes nothing out: reported, the package served.
                unattributed.push(problem);
            } else if let Some(package) = problem.package.clone().filter(|p| !p.is_empty()) {
                bad.entry(package).or_default().push(problem);
            } else if let Some(dir) = problem.file.as_deref().and_then(Path::parent) {
                let packages = self.packages_from(dir);
                for package in &packages {
                    bad.entry(package.clone()).or_default().push(problem.clone());
                }
                if packages.is_empty() {
                    unattributed.push(problem);
                }
            } else {
                unattributed.push(problem);
            }
        }
        if bad.is_empty() {
            return Isolated { catalog: self, left_out: Vec::new(), unattributed };
        }
        let documents: Vec<Document> = self
            .all_metas()
            .iter()
            .filter(|m| !bad.contains_key(package_of(m)))
            .filter_map(|m| {
                let value: Value = serde_json::from_str(&m.blob.text()).ok()?;
                Some(Document { value, source: m.source.clone() })
            })
            .collect();
        let (catalog, more) = Catalog::build(documents);
        unattributed.extend(more);
        let left_out = bad.into_iter().map(|(package, problems)| LeftOut { package, problems }).collect();
        Isolated { catalog, left_out, unattributed }
    }

    /// Packages with a blob from a file in `dir`.
    fn packages_from(&self, dir: &Path) -> BTreeSet<String> {
        self.all_metas()
            .iter()
            .filter(|m| m.source.as_deref().and_then(Path::parent) == Some(dir))
            .map(|m| package_of(m).to_owned())
            .filter(|p| !p.is_empty())
            .collect()
    }
}

/// The package a blob belongs to (an `olm.package` blob's is its name).
fn package_of(meta: &super::Meta) -> &str {
    if meta.schema == SCHEMA_PACKAGE { &meta.name } else { &meta.package }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn doc(value: Value, file: &str) -> Document {
        Document { value, source: Some(Arc::from(Path::new(file))) }
    }

    fn package(name: &str, dir: &str, heads: &[&str]) -> Vec<Document> {
        let file = format!("{dir}/catalog.yaml");
        let mut docs = vec![
            doc(json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"}), &file),
            doc(
                json!({"schema": "olm.channel", "package": name, "name": "stable",
                       "entries": heads.iter().map(|h| json!({"name": h})).collect::<Vec<_>>()}),
                &file,
            ),
        ];
        for (i, head) in heads.iter().enumerate() {
            docs.push(doc(
                json!({"schema": "olm.bundle", "name": head, "package": name, "image": format!("r/{name}:{i}"),
                       "properties": [{"type": "olm.package", "value": {"packageName": name, "version": format!("1.0.{i}")}}]}),
                &file,
            ));
        }
        docs
    }

    #[test]
    fn a_package_with_two_heads_is_left_out_and_the_others_stay() {
        let mut docs = package("good", "c/good", &["good.v1"]);
        // Two entries, neither replacing the other: two heads.
        docs.extend(package("bad", "c/bad", &["bad.v1", "bad.v2"]));
        let (catalog, problems) = Catalog::build(docs);
        assert!(!problems.is_empty());
        let isolated = catalog.isolate(problems);
        let names: Vec<&str> = isolated.catalog.packages().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert_eq!(isolated.left_out.len(), 1);
        assert_eq!(isolated.left_out[0].package, "bad");
        assert!(isolated.left_out[0].problems.iter().any(|p| p.code == "MultipleHeads"), "{:?}", isolated.left_out);
    }

    #[test]
    fn an_unreadable_file_takes_out_the_packages_of_its_directory() {
        let mut docs = package("good", "c/good", &["good.v1"]);
        docs.extend(package("other", "c/other", &["other.v1"]));
        let (catalog, problems) = Catalog::build(docs);
        assert!(problems.is_empty(), "{problems:?}");
        let unreadable = Problem::new("invalid YAML at line 3").file(Some(Path::new("c/other/broken.yaml")));
        let isolated = catalog.isolate(vec![unreadable]);
        let names: Vec<&str> = isolated.catalog.packages().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert_eq!(isolated.left_out[0].package, "other");
    }
}
