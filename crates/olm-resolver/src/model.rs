//! The resolver's own input view of catalog content.
//!
//! This is deliberately small and flat, like upstream's resolver cache entry: one
//! [`Entry`] per (bundle, channel) pair with exactly the fields resolution looks at.
//! [`crate::adapter`] builds it from `olm_catalog` snapshots; tests build it directly.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

pub use olm_catalog::graph::UpgradeEdges;

use olm_catalog::cel::CelRule;
use olm_catalog::quote::quoted;
pub use olm_catalog::version::{Version, VersionRange};

/// A Kubernetes API identified by group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Gvk {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The form people know from `kubectl api-resources`: Kind (group/version).
        write!(f, "{} ({}/{})", self.kind, self.group, self.version)
    }
}

/// What a bundle needs from another operator (a predicate over entries).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// Some operator provides this API (`olm.gvk.required`, constraint `gvk`).
    Gvk(Gvk),
    /// An operator of this package whose version is in the range
    /// (`olm.package.required`, constraint `package`).
    Package { name: String, range: VersionRange },
    /// An operator carrying this `olm.label` (`olm.label.required`).
    Label(String),
    /// Every one of these holds for the same operator (constraint `all`).
    All(Vec<Requirement>),
    /// At least one of these holds (constraint `any`).
    Any(Vec<Requirement>),
    /// None of these holds (constraint `not`).
    Not(Vec<Requirement>),
    /// A CEL rule (constraint `cel`), in the subset [`olm_catalog::cel`] evaluates.
    Cel(CelRule),
}

impl Requirement {
    /// Whether the requirement contains a CEL rule anywhere.
    pub fn uses_cel(&self) -> bool {
        match self {
            Requirement::Cel(_) => true,
            Requirement::All(v) | Requirement::Any(v) | Requirement::Not(v) => v.iter().any(Requirement::uses_cel),
            _ => false,
        }
    }

    /// Whether a CEL rule in the requirement ran out of its evaluation budget.
    pub fn cel_over_budget(&self) -> bool {
        match self {
            Requirement::Cel(rule) => rule.exceeded_budget(),
            Requirement::All(v) | Requirement::Any(v) | Requirement::Not(v) => v.iter().any(Requirement::cel_over_budget),
            _ => false,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, items: &[Requirement], sep: &str) -> fmt::Result {
            for (i, r) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{r}")?;
            }
            Ok(())
        }
        match self {
            Requirement::Gvk(g) => write!(f, "an operator providing the API {g}"),
            Requirement::Package { name, range } => {
                write!(f, "an operator from package {name} with version in range {}", range.as_str())
            }
            Requirement::Label(l) => write!(f, "an operator labelled {l:?}"),
            Requirement::All(v) => {
                f.write_str("all of [")?;
                list(f, v, "; ")?;
                f.write_str("]")
            }
            Requirement::Any(v) => {
                f.write_str("any of [")?;
                list(f, v, "; ")?;
                f.write_str("]")
            }
            Requirement::Not(v) => {
                f.write_str("none of [")?;
                list(f, v, "; ")?;
                f.write_str("]")
            }
            Requirement::Cel(rule) => write!(f, "an operator matching the CEL rule {}", quoted(rule.as_str())),
        }
    }
}

/// One dependency of a bundle: a requirement plus the author's own failure text
/// (`olm.constraint` `failureMessage`), shown when it cannot be met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub requirement: Requirement,
    pub failure_message: Option<String>,
}

impl Dependency {
    pub fn new(requirement: Requirement) -> Dependency {
        Dependency { requirement, failure_message: None }
    }
}

/// One bundle as it appears in one channel of one package.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    /// The bundle (CSV) name, e.g. `etcdoperator.v0.9.4`.
    pub name: String,
    pub package: String,
    /// Empty for installed operators (they belong to no channel).
    pub channel: String,
    /// Whether `channel` is the package's default channel.
    pub default_channel: bool,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    pub skip_range: Option<VersionRange>,
    pub version: Option<Version>,
    pub provided_gvks: Vec<Gvk>,
    pub labels: Vec<String>,
    pub dependencies: Vec<Dependency>,
    /// The legacy `olm.deprecated` property: never chosen.
    pub deprecated: bool,
    /// The install modes its CSV supports (`OwnNamespace`, `SingleNamespace`,
    /// `MultiNamespace`, `AllNamespaces`); `None` when the catalog does not say.
    pub install_modes: Option<Vec<String>>,
    /// The bundle's properties as (type, JSON value) for CEL rules, without the large
    /// `olm.bundle.object` / `olm.csv.metadata` ones. When empty, CEL sees properties
    /// rebuilt from the fields above.
    pub properties: Vec<(String, String)>,
    /// A dependency property that could not be understood (malformed JSON, an
    /// unknown constraint type, an unparsable range). Resolution that reaches this
    /// entry fails with this text, as upstream does.
    pub invalid: Option<String>,
}

impl UpgradeEdges for Entry {
    fn name(&self) -> &str {
        &self.name
    }
    fn replaces(&self) -> Option<&str> {
        self.replaces.as_deref()
    }
    fn skips(&self) -> &[String] {
        &self.skips
    }
    fn skip_range(&self) -> Option<&VersionRange> {
        self.skip_range.as_ref()
    }
}

/// Identity of a catalog (a CatalogSource): name and namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CatalogKey {
    pub name: String,
    pub namespace: String,
}

impl CatalogKey {
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> CatalogKey {
        CatalogKey { name: name.into(), namespace: namespace.into() }
    }
}

impl fmt::Display for CatalogKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Information-only deprecation notice from an `olm.deprecations` blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deprecation {
    /// `olm.package`, `olm.channel` or `olm.bundle`.
    pub scope: String,
    pub package: String,
    /// Channel or bundle name; empty for a package deprecation.
    pub name: String,
    pub message: String,
}

/// The content of one catalog: every (bundle, channel) entry, plus per-package
/// default channels and deprecation notices.
#[derive(Debug, Clone, Default)]
pub struct CatalogSnapshot {
    pub key: CatalogKey,
    pub priority: i32,
    pub entries: Vec<Entry>,
    pub deprecations: Vec<Deprecation>,
    /// Packages the catalog has but that were left out of it for their problems, with why:
    /// a Subscription to one is told that, not that the package does not exist.
    pub left_out: BTreeMap<String, String>,
}

impl CatalogSnapshot {
    pub fn new(key: CatalogKey, priority: i32, entries: Vec<Entry>) -> CatalogSnapshot {
        CatalogSnapshot { key, priority, entries, deprecations: Vec::new(), left_out: BTreeMap::new() }
    }
}

/// Whether an entry satisfies the rule (evaluation errors count as "no").
pub fn cel_matches(rule: &CelRule, e: &Entry) -> bool {
    rule.matches_properties(properties_of(e))
}

/// The properties a rule sees, rebuilt from the entry.
fn properties_of(e: &Entry) -> Vec<Value> {
    if !e.properties.is_empty() {
        return e
            .properties
            .iter()
            .map(|(t, v)| {
                let mut m = Map::new();
                m.insert("type".into(), Value::String(t.clone()));
                m.insert("value".into(), serde_json::from_str(v).unwrap_or(Value::Null));
                Value::Object(m)
            })
            .collect();
    }
    let prop = |t: &str, v: Value| {
        let mut m = Map::new();
        m.insert("type".into(), Value::String(t.into()));
        m.insert("value".into(), v);
        Value::Object(m)
    };
    let mut out = Vec::new();
    if !e.package.is_empty() {
        let mut v = Map::new();
        v.insert("packageName".into(), Value::String(e.package.clone()));
        v.insert("version".into(), Value::String(e.version.as_ref().map(Version::to_string).unwrap_or_default()));
        out.push(prop("olm.package", Value::Object(v)));
    }
    for g in &e.provided_gvks {
        let mut v = Map::new();
        v.insert("group".into(), Value::String(g.group.clone()));
        v.insert("kind".into(), Value::String(g.kind.clone()));
        v.insert("version".into(), Value::String(g.version.clone()));
        out.push(prop("olm.gvk", Value::Object(v)));
    }
    for l in &e.labels {
        let mut v = Map::new();
        v.insert("label".into(), Value::String(l.clone()));
        out.push(prop("olm.label", Value::Object(v)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            name: "b.v1.0.1".into(),
            package: "another-package".into(),
            version: Some(Version::new(1, 0, 1)),
            provided_gvks: vec![Gvk::new("g", "v", "k")],
            ..Entry::default()
        }
    }

    #[test]
    fn upstream_style_rules_evaluate() {
        let gvk = CelRule::compile(
            "properties.exists(p, p.type == 'olm.gvk' && p.value == {'group': 'g', 'version': 'v', 'kind': 'k'})",
        )
        .expect("compiles");
        assert!(cel_matches(&gvk, &entry()));
        let gvk2 = CelRule::compile(
            "properties.exists(p, p.type == 'olm.gvk' && p.value == {'group': 'g2', 'version': 'v', 'kind': 'k'})",
        )
        .expect("compiles");
        assert!(!cel_matches(&gvk2, &entry()));
        let pkg = CelRule::compile("properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'another-package' && (semver_compare(p.value.version, '1.0.1') == 0))").expect("compiles");
        assert!(cel_matches(&pkg, &entry()));
        let mut older = entry();
        older.version = Some(Version::new(1, 0, 0));
        assert!(!cel_matches(&pkg, &older));
    }
}
