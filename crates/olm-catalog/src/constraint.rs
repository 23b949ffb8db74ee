//! Version constraints in Masterminds/semver v3's syntax: what OLM v1's
//! `ClusterExtension.spec.source.catalog.version` takes (operator-controller checks bundle
//! versions with it), beside [`crate::version`]'s blang ranges of OLM v0.
//!
//! * `||` separates alternatives (OR); within one, comparators separated by commas or spaces
//!   are ANDed; an operator may be followed by spaces (`>= 1.2`).
//! * Operators: `=` (or none), `!=`, `>`, `<`, `>=` (`=>`), `<=` (`=<`), `~` (`~>`), `^`.
//! * Versions may have a leading `v` and may be partial (`1`, `1.2`), with `x`, `X` or `*` for
//!   a part: a missing or wild part is a wildcard (`1.2` is `1.2.x`, `>1.2` is `>=1.3.0`,
//!   `<=1.2` is `<1.3.0`, `>=1.2` is `>=1.2.0`).
//! * `A - B` is `>=A <=B`.
//! * `~1.2.3` is `>=1.2.3 <1.3.0`, `~1` is `>=1.0.0 <2.0.0`; `^1.2.3` is `>=1.2.3 <2.0.0`,
//!   `^0.2.3` is `>=0.2.3 <0.3.0`, `^0.0.3` is `>=0.0.3 <0.0.4`, `^0` is `<1.0.0`.
//! * A version with a pre-release matches only a comparator that has one itself (`>=1.2.3`
//!   does not match `1.3.0-beta`; `>=1.2.3-0` does).

use std::cmp::Ordering;

use semver::{Prerelease, Version};

/// A parsed constraint: OR of ANDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    source: String,
    alternatives: Vec<Vec<Term>>,
}

/// Why a constraint does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version constraint {constraint:?}: {reason}")]
pub struct ConstraintError {
    pub constraint: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TermOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Tilde,
    Caret,
}

/// A version as a constraint writes it: parts may be wild (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    op: TermOp,
    version: Partial,
}

impl Constraint {
    /// Parse `text` (see the module docs).
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let fail = |reason: String| ConstraintError { constraint: text.to_owned(), reason };
        if text.trim().is_empty() {
            return Err(fail("it is empty".into()));
        }
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let terms = parse_alternative(alternative).map_err(fail)?;
            if terms.is_empty() {
                return Err(fail("`||` needs a constraint on each side".into()));
            }
            alternatives.push(terms);
        }
        Ok(Constraint { source: text.to_owned(), alternatives })
    }

    /// Whether `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|terms| terms.iter().all(|t| t.matches(version)))
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

/// The ANDed terms of one alternative.
fn parse_alternative(text: &str) -> Result<Vec<Term>, String> {
    let words: Vec<&str> = text.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).collect();
    let mut terms = Vec::new();
    let mut i = 0;
    while i < words.len() {
        // `A - B`
        if words.get(i + 1) == Some(&"-") {
            let (Some(low), Some(high)) = (words.get(i), words.get(i + 2)) else {
                return Err(format!("a range `A - B` needs a version after `-` (after {:?})", words[i]));
            };
            terms.push(Term { op: TermOp::Ge, version: parse_partial(low)? });
            terms.push(Term { op: TermOp::Le, version: parse_partial(high)? });
            i += 3;
            continue;
        }
        let word = words[i];
        let split = word.find(|c: char| !matches!(c, '=' | '!' | '>' | '<' | '~' | '^')).unwrap_or(word.len());
        let (op_text, mut version_text) = word.split_at(split);
        let op = match op_text {
            "" | "=" => TermOp::Eq,
            "!=" => TermOp::Ne,
            ">" => TermOp::Gt,
            ">=" | "=>" => TermOp::Ge,
            "<" => TermOp::Lt,
            "<=" | "=<" => TermOp::Le,
            "~" | "~>" => TermOp::Tilde,
            "^" => TermOp::Caret,
            other => return Err(format!("{other:?} is not an operator (use =, !=, >, >=, <, <=, ~ or ^)")),
        };
        i += 1;
        // An operator alone: its version is the next word (`>= 1.2`).
        if version_text.is_empty() {
            version_text = words.get(i).copied().ok_or_else(|| format!("operator {op_text:?} has no version after it"))?;
            i += 1;
        }
        terms.push(Term { op, version: parse_partial(version_text)? });
    }
    Ok(terms)
}

/// `v1`, `1.2`, `1.2.x`, `*`, `1.2.3-rc.1+build`: build metadata is ignored.
fn parse_partial(text: &str) -> Result<Partial, String> {
    let bare = text.strip_prefix(['v', 'V']).unwrap_or(text);
    let bare = bare.split('+').next().unwrap_or(bare);
    let (core, pre) = match bare.split_once('-') {
        Some((core, pre)) => (core, Prerelease::new(pre).map_err(|e| format!("{text:?}: pre-release {pre:?}: {e}"))?),
        None => (bare, Prerelease::EMPTY),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("{text:?} is not a version (MAJOR[.MINOR[.PATCH]], parts may be x or *)"));
    }
    let part = |i: usize| -> Result<Option<u64>, String> {
        match parts.get(i) {
            None | Some(&("x" | "X" | "*")) => Ok(None),
            Some(p) => {
                if p.len() > 1 && p.starts_with('0') {
                    return Err(format!("{text:?}: {p:?} has a leading zero"));
                }
                p.parse().map(Some).map_err(|_| format!("{text:?}: {p:?} is not a number, x or *"))
            }
        }
    };
    let (major, minor, patch) = (part(0)?, part(1)?, part(2)?);
    // A wild part makes every later one wild (`1.x.3` is `1.x`).
    let minor = major.and(minor);
    let patch = minor.and(patch);
    Ok(Partial { major, minor, patch, pre })
}

impl Partial {
    /// Whether a part is wild or missing.
    fn dirty(&self) -> bool {
        self.patch.is_none()
    }

    /// Wild parts as zeros.
    fn floor(&self) -> Version {
        Version { major: self.major.unwrap_or(0), minor: self.minor.unwrap_or(0), patch: self.patch.unwrap_or(0), pre: self.pre.clone(), build: Default::default() }
    }
}

impl Term {
    fn matches(&self, v: &Version) -> bool {
        let c = &self.version;
        // Pre-releases only for a constraint that names one.
        if !v.pre.is_empty() && c.pre.is_empty() {
            return false;
        }
        let cmp = |w: &Version| v.cmp_precedence(w);
        let in_wild = || c.major.is_none_or(|m| v.major == m) && c.minor.is_none_or(|m| v.minor == m) && c.patch.is_none_or(|p| v.patch == p);
        match self.op {
            TermOp::Eq if c.dirty() => in_wild(),
            TermOp::Eq => cmp(&c.floor()) == Ordering::Equal,
            TermOp::Ne if c.dirty() => !in_wild(),
            TermOp::Ne => cmp(&c.floor()) != Ordering::Equal,
            TermOp::Gt if c.dirty() => match (c.major, c.minor) {
                (None, _) => false,
                (Some(major), None) => v.major > major,
                (Some(major), Some(minor)) => v.major > major || (v.major == major && v.minor > minor),
            },
            TermOp::Gt => cmp(&c.floor()) == Ordering::Greater,
            TermOp::Ge => cmp(&c.floor()) != Ordering::Less,
            TermOp::Lt => cmp(&c.floor()) == Ordering::Less,
            TermOp::Le if c.dirty() => match (c.major, c.minor) {
                (None, _) => true,
                (Some(major), None) => v.major <= major,
                (Some(major), Some(minor)) => v.major < major || (v.major == major && v.minor <= minor),
            },
            TermOp::Le => cmp(&c.floor()) != Ordering::Greater,
            TermOp::Tilde => {
                cmp(&c.floor()) != Ordering::Less
                    && match (c.major, c.minor) {
                        (None, _) => true,
                        (Some(major), None) => v.major == major,
                        (Some(major), Some(minor)) => v.major == major && v.minor == minor,
                    }
            }
            TermOp::Caret => {
                cmp(&c.floor()) != Ordering::Less
                    && match (c.major, c.minor, c.patch) {
                        (None, _, _) => true,
                        (Some(major), _, _) if major > 0 => v.major == major,
                        (Some(_), None, _) => v.major == 0,
                        (Some(_), Some(minor), _) if minor > 0 => v.major == 0 && v.minor == minor,
                        (Some(_), Some(_), None) => v.major == 0 && v.minor == 0,
                        (Some(_), Some(_), Some(patch)) => v.major == 0 && v.minor == 0 && v.patch == patch,
                    }
            }
        }
    }
}

#[cfg(test)]
mod tests;
