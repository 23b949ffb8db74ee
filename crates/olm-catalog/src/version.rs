//! Versions and version ranges as OLM understands them.
//!
//! Bundle versions are strict semver 2.0 (`semver::Version`; no leading `v`,
//! pre-release and build metadata allowed). Ranges (`olm.skipRange`,
//! `olm.package.required.versionRange`, dependency `version`) use the grammar of
//! blang/semver v4 `ParseRange`, reproduced here:
//!
//! * the string is split on spaces into comparators; a space directly after an
//!   operator character (`>`, `<`, `=`) does not split (`>= 1.0.0` is one comparator);
//! * a `||` element separates alternatives (OR); comparators within an alternative
//!   are ANDed; `||` may not be first or last; an empty range is an error;
//! * a comparator is an optional operator (`=`, `==`, empty = equal; `!=`, `!`;
//!   `>`, `>=`, `<`, `<=`) followed by a strict semver version;
//! * an `x` wildcard in the minor or patch position is expanded (`1.x` is
//!   `>=1.0.0 <2.0.0`, `<=1.2.x` is `<1.3.0`, `!=1.x` is `<1.0.0 || >=2.0.0` written
//!   as two ANDed comparators exactly as blang does, which therefore matches nothing).
//!
//! There is no `~` or `^` in blang v4. Comparison ignores build metadata (semver
//! precedence), like blang's `Compare`.

use std::cmp::Ordering;
use std::fmt;

pub use semver::Version;

/// Parse a bundle version (strict semver 2.0, as blang/semver `Parse`).
pub fn parse_version(text: &str) -> Result<Version, String> {
    Version::parse(text).map_err(|e| format!("{text:?} is not a valid semver version: {e}"))
}

/// Compare two versions by semver precedence (build metadata ignored).
pub fn cmp_versions(a: &Version, b: &Version) -> Ordering {
    a.cmp_precedence(b)
}

/// A comparison operator of a range comparator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "" | "=" | "==" => Op::Eq,
            "!=" | "!" => Op::Ne,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// One comparator: operator and version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Comparator {
    pub op: Op,
    pub version: Version,
}

impl Comparator {
    pub fn matches(&self, v: &Version) -> bool {
        let ord = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
        }
    }
}

/// A parsed blang/semver range: OR of ANDs of comparators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionRange {
    source: String,
    alternatives: Vec<Vec<Comparator>>,
}

/// Why a range string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version range {range:?}: {reason}")]
pub struct RangeError {
    pub range: String,
    pub reason: String,
}

impl VersionRange {
    /// Parse with the blang/semver v4 grammar (see module docs).
    pub fn parse(text: &str) -> Result<VersionRange, RangeError> {
        let err = |reason: String| RangeError {
            range: text.to_string(),
            reason,
        };
        let parts = split_and_trim(text);
        let mut alternatives_raw: Vec<Vec<String>> = Vec::new();
        let mut current: Vec<String> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if part == "||" {
                if i == 0 {
                    return Err(err("the range starts with '||'".into()));
                }
                alternatives_raw.push(std::mem::take(&mut current));
            } else {
                current.push(part.clone());
            }
        }
        if current.is_empty() {
            return Err(err(if parts.is_empty() {
                "the range is empty".into()
            } else {
                "the range ends with '||'".into()
            }));
        }
        alternatives_raw.push(current);

        let mut alternatives = Vec::with_capacity(alternatives_raw.len());
        for alt in alternatives_raw {
            let mut comparators = Vec::new();
            for part in expand_wildcards(&alt).map_err(err)? {
                let (op_text, version_text) = split_comparator(&part).map_err(err)?;
                let op = Op::parse(op_text)
                    .ok_or_else(|| err(format!("unknown operator {op_text:?} in {part:?}")))?;
                let version = Version::parse(version_text).map_err(|e| {
                    err(format!(
                        "{version_text:?} is not a valid semver version: {e}"
                    ))
                })?;
                comparators.push(Comparator { op, version });
            }
            alternatives.push(comparators);
        }
        Ok(VersionRange {
            source: text.to_string(),
            alternatives,
        })
    }

    /// Whether `v` satisfies the range.
    pub fn contains(&self, v: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|alt| alt.iter().all(|c| c.matches(v)))
    }

    /// The range text as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The parsed alternatives (OR of ANDs).
    pub fn alternatives(&self) -> &[Vec<Comparator>] {
        &self.alternatives
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Display for Comparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.op.as_str(), self.version)
    }
}

impl std::str::FromStr for VersionRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(s)
    }
}

/// blang's `splitAndTrim`: split on spaces, except a space following an operator character.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut result = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if i > last {
                result.push(s[last..i].replace(' ', ""));
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last < bytes.len() {
        result.push(s[last..].replace(' ', ""));
    }
    result.retain(|p| !p.is_empty());
    result
}

/// blang's `splitComparatorVersion`: operator is everything before the first digit.
fn split_comparator(s: &str) -> Result<(&str, &str), String> {
    match s.find(|c: char| c.is_ascii_digit()) {
        Some(i) => Ok((s[..i].trim(), &s[i..])),
        None => Err(format!("could not find a version in {s:?}")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Minor,
    Patch,
}

fn wildcard_type(version: &str) -> Wildcard {
    let parts: Vec<&str> = version.split('.').collect();
    if parts.last() != Some(&"x") {
        return Wildcard::None;
    }
    match parts.len() {
        2 => Wildcard::Minor,
        3 => Wildcard::Patch,
        _ => Wildcard::None,
    }
}

fn flatten_wildcard(version: &str) -> String {
    let v = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v.split('.').count() == 2 {
        format!("{v}.0")
    } else {
        v
    }
}

fn increment(version: &str, index: usize) -> Result<String, String> {
    let mut parts: Vec<String> = version.split('.').map(str::to_string).collect();
    let n: u64 = parts
        .get(index)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("cannot expand wildcard version {version:?}"))?;
    parts[index] = (n + 1).to_string();
    if index == 0 {
        // blang's incrementMajorVersion resets minor to 0 and drops nothing else.
        if parts.len() > 1 {
            parts[1] = "0".into();
        }
    }
    Ok(parts.join("."))
}

/// blang's `expandWildcardVersion` for one AND-group.
fn expand_wildcards(parts: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in parts {
        if !part.contains('x') {
            out.push(part.clone());
            continue;
        }
        let (op, version) = split_comparator(part)?;
        let kind = wildcard_type(version);
        let flat = flatten_wildcard(version);
        let (result_op, bump) = match op {
            ">" => (">=", true),
            ">=" => (">=", false),
            "<" => ("<", false),
            "<=" => ("<", true),
            "" | "=" | "==" => {
                out.push(format!(">={flat}"));
                ("<", true)
            }
            "!=" | "!" => {
                out.push(format!("<{flat}"));
                (">=", true)
            }
            other => return Err(format!("unknown operator {other:?} in {part:?}")),
        };
        let result_version = if bump {
            match kind {
                Wildcard::Patch => increment(&flat, 1)?,
                Wildcard::Minor => increment(&flat, 0)?,
                Wildcard::None => String::new(),
            }
        } else {
            flat
        };
        out.push(format!("{result_op}{result_version}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn r(s: &str) -> VersionRange {
        VersionRange::parse(s).unwrap()
    }

    #[test]
    fn and_or_and_spacing() {
        let range = r(">=0.9.0 <0.9.2 || 1.x");
        assert!(range.contains(&v("0.9.0")));
        assert!(range.contains(&v("0.9.1")));
        assert!(!range.contains(&v("0.9.2")));
        assert!(range.contains(&v("1.5.3")));
        assert!(!range.contains(&v("2.0.0")));
        let spaced = r(">= 1.0.0 <  2.0.0");
        assert!(spaced.contains(&v("1.2.3")));
        assert!(!spaced.contains(&v("2.0.0")));
    }

    #[test]
    fn prerelease_idiom_and_build_metadata() {
        let range = r(">=0.2.0-0 <0.3.1-0");
        assert!(range.contains(&v("0.2.0-alpha")));
        assert!(range.contains(&v("0.3.0")));
        assert!(!range.contains(&v("0.3.1")));
        // without -0, pre-releases of the lower bound fall outside
        assert!(!r(">=0.2.0").contains(&v("0.2.0-alpha")));
        // build metadata does not affect matching
        assert!(r("=1.0.0").contains(&v("1.0.0+build.5")));
        // etcd: 0.9.2-clusterwide < 0.9.2
        assert!(r("<0.9.2").contains(&v("0.9.2-clusterwide")));
    }

    #[test]
    fn operators() {
        assert!(r("!=1.0.0").contains(&v("1.0.1")));
        assert!(!r("!1.0.0").contains(&v("1.0.0")));
        assert!(r("1.0.0").contains(&v("1.0.0")));
        assert!(r("==1.0.0").contains(&v("1.0.0")));
        assert!(r("<=1.0.0").contains(&v("1.0.0")));
        assert!(!r(">1.0.0").contains(&v("1.0.0")));
    }

    #[test]
    fn wildcards_expand_like_blang() {
        assert!(r("<=1.2.x").contains(&v("1.2.9")));
        assert!(!r("<=1.2.x").contains(&v("1.3.0")));
        assert!(r(">1.2.x").contains(&v("1.3.0")));
        assert!(!r(">1.2.x").contains(&v("1.2.5")));
        assert!(!r("<1.x").contains(&v("1.0.0")));
        assert!(r(">=1.x").contains(&v("1.0.0")));
        assert!(r("1.2.x").contains(&v("1.2.7")));
        assert!(!r("1.2.x").contains(&v("1.3.0")));
    }

    #[test]
    fn rejects_bad_ranges() {
        for bad in [
            "", "   ", "|| 1.0.0", "1.0.0 ||", ">=1.0", "v1.0.0", "~1.0.0", "^1.0.0", ">=a.b.c",
            ">=01.0.0",
        ] {
            assert!(
                VersionRange::parse(bad).is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn display_keeps_source() {
        assert_eq!(r(">=1.0.0 <2.0.0").to_string(), ">=1.0.0 <2.0.0");
    }
}
