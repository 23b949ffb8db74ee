//! The `labelSelector` and `fieldSelector` query parameters, in the apimachinery string syntax:
//! `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas.
//!
//! [`LABEL_SELECTOR_PATTERN`] and [`FIELD_SELECTOR_PATTERN`] state the same grammar as regular
//! expressions for the OpenAPI document; the parsers accept exactly what they match (the
//! schema fuzzing of fuzz/http/run.sh checks both ways).

use std::collections::BTreeMap;

/// Whitespace between tokens, as apimachinery's selector lexer has it: not Unicode's.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn trim(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// What [`parse_label_selector`] accepts.
pub const LABEL_SELECTOR_PATTERN: &str = concat!(
    r"^[ \t\r\n]*$|^",
    r"[ \t\r\n]*(![ \t\r\n]*[A-Za-z0-9._/-]{1,317}|[A-Za-z0-9._/-]{1,317}[ \t\r\n]*(!=|==|=)[ \t\r\n]*[A-Za-z0-9._-]{0,63}|[A-Za-z0-9._/-]{1,317}[ \t\r\n]* (in|notin) [ \t\r\n]*\([ \t\r\n]*[A-Za-z0-9._-]{0,63}[ \t\r\n]*(,[ \t\r\n]*[A-Za-z0-9._-]{0,63}[ \t\r\n]*)*\)|[A-Za-z0-9._/-]{1,317})[ \t\r\n]*",
    r"(,[ \t\r\n]*(![ \t\r\n]*[A-Za-z0-9._/-]{1,317}|[A-Za-z0-9._/-]{1,317}[ \t\r\n]*(!=|==|=)[ \t\r\n]*[A-Za-z0-9._-]{0,63}|[A-Za-z0-9._/-]{1,317}[ \t\r\n]* (in|notin) [ \t\r\n]*\([ \t\r\n]*[A-Za-z0-9._-]{0,63}[ \t\r\n]*(,[ \t\r\n]*[A-Za-z0-9._-]{0,63}[ \t\r\n]*)*\)|[A-Za-z0-9._/-]{1,317})[ \t\r\n]*)*$",
);

/// What [`parse_field_selector`] accepts.
pub const FIELD_SELECTOR_PATTERN: &str = concat!(
    r"^[ \t\r\n]*$|^",
    r"[ \t\r\n]*metadata\.name[ \t\r\n]*(!=|==|=)[^,=!]*",
    r"(,[ \t\r\n]*metadata\.name[ \t\r\n]*(!=|==|=)[^,=!]*)*$",
);

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' in {text:?}"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in {text:?}"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn check_key(key: &str, whole: &str) -> Result<String, String> {
    let key = trim(key);
    let valid = !key.is_empty()
        && key.len() <= 317
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid { Ok(key.to_owned()) } else { Err(format!("invalid label key {key:?} in selector {whole:?}")) }
}

fn check_value(value: &str, whole: &str) -> Result<String, String> {
    let value = trim(value);
    let valid = value.len() <= 63 && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid { Ok(value.to_owned()) } else { Err(format!("invalid label value {value:?} in selector {whole:?}")) }
}

fn set_values(rest: &str, whole: &str) -> Result<Vec<String>, String> {
    let rest = trim(rest);
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised value list after in/notin in selector {whole:?}"))?;
    inner.split(',').map(|v| check_value(v, whole)).collect()
}

/// Parse a label selector string.
pub fn parse_label_selector(text: &str) -> Result<LabelSelector, String> {
    let mut requirements = Vec::new();
    if trim(text).is_empty() {
        return Ok(LabelSelector(requirements));
    }
    for part in split_top_level(text)? {
        let part = trim(part);
        if part.is_empty() {
            return Err(format!("empty requirement in selector {text:?}"));
        }
        let requirement = if let Some(key) = part.strip_prefix('!') {
            Requirement::DoesNotExist(check_key(key, text)?)
        } else if let Some((k, v)) = part.split_once("!=") {
            Requirement::NotEquals(check_key(k, text)?, check_value(v, text)?)
        } else if let Some((k, v)) = part.split_once("==") {
            Requirement::Equals(check_key(k, text)?, check_value(v, text)?)
        } else if let Some((k, v)) = part.split_once('=') {
            Requirement::Equals(check_key(k, text)?, check_value(v, text)?)
        } else if let Some((k, rest)) = part.split_once(" notin ") {
            Requirement::NotIn(check_key(k, text)?, set_values(rest, text)?)
        } else if let Some((k, rest)) = part.split_once(" in ") {
            Requirement::In(check_key(k, text)?, set_values(rest, text)?)
        } else {
            Requirement::Exists(check_key(part, text)?)
        };
        requirements.push(requirement);
    }
    Ok(LabelSelector(requirements))
}

/// The field selector: only `metadata.name` is supported, as upstream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// `metadata.name=<x>` / `==`.
    pub name_equals: Option<String>,
    /// `metadata.name!=<x>`.
    pub name_not_equals: Vec<String>,
}

impl FieldSelector {
    /// Whether an object named `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        self.name_equals.as_deref().is_none_or(|n| n == name) && !self.name_not_equals.iter().any(|n| n == name)
    }
}

/// Parse a field selector; any field other than `metadata.name` is an error.
pub fn parse_field_selector(text: &str) -> Result<FieldSelector, String> {
    let mut selector = FieldSelector::default();
    if trim(text).is_empty() {
        return Ok(selector);
    }
    for part in text.split(',') {
        let part = trim(part);
        let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once("==") {
            (f, v, false)
        } else if let Some((f, v)) = part.split_once('=') {
            (f, v, false)
        } else {
            return Err(format!("invalid field selector requirement {part:?}: write metadata.name=<name>"));
        };
        if trim(field) != "metadata.name" {
            return Err(format!(
                "field label not supported: {:?} (packagemanifests only support metadata.name)",
                trim(field)
            ));
        }
        // A package name has neither; refusing them keeps the grammar one regular expression
        // (FIELD_SELECTOR_PATTERN) instead of "the first `!=`, else the first `==`, else …".
        if value.contains(['=', '!']) {
            return Err(format!(
                "invalid field selector requirement {part:?}: the name after the operator may not contain '=' or '!'; write metadata.name=<name>"
            ));
        }
        if negated {
            selector.name_not_equals.push(trim(value).to_owned());
        } else {
            selector.name_equals = Some(trim(value).to_owned());
        }
    }
    Ok(selector)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selector_forms() {
        let l = labels(&[("catalog", "community"), ("operatorframework.io/arch.amd64", "supported")]);
        for (sel, expected) in [
            ("", true),
            ("catalog=community", true),
            ("catalog==community", true),
            ("catalog!=community", false),
            ("catalog in (a,community)", true),
            ("catalog notin (a,community)", false),
            ("operatorframework.io/arch.amd64", true),
            ("!operatorframework.io/arch.arm64", true),
            ("operatorframework.io/arch.arm64=supported", false),
            ("catalog=community,provider=x", false),
            ("provider notin (x)", true),
        ] {
            let parsed = parse_label_selector(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(parsed.matches(&l), expected, "{sel}");
        }
    }

    #[test]
    fn bad_selectors_are_explained() {
        assert!(parse_label_selector("a in b").unwrap_err().contains("parenthesised"));
        assert!(parse_label_selector("a=(b").unwrap_err().contains("unbalanced"));
        assert!(parse_label_selector("a b=c").unwrap_err().contains("invalid label key"));
        let err = parse_field_selector("status.packageName=etcd").unwrap_err();
        assert!(err.contains("field label not supported"), "{err}");
    }

    #[test]
    fn only_ascii_whitespace_separates_tokens() {
        assert!(parse_label_selector(" \tcatalog = community ,\n!x ").is_ok());
        // A no-break space is not whitespace to apimachinery: it is part of the key.
        assert!(parse_label_selector("\u{a0}catalog=community").is_err());
        assert!(parse_field_selector("\u{a0}metadata.name=etcd").is_err());
        assert!(parse_field_selector("\r\n").unwrap().matches("etcd"));
    }

    #[test]
    fn field_selector_values_are_names() {
        for bad in ["metadata.name=a=b", "metadata.name!==x", "metadata.name=!x"] {
            let err = parse_field_selector(bad).unwrap_err();
            assert!(err.contains("metadata.name=<name>"), "{bad}: {err}");
        }
        // Split at the first `!=`: the field is then "metadata.name=a".
        assert!(parse_field_selector("metadata.name=a!=b").unwrap_err().contains("field label not supported"));
    }

    #[test]
    fn field_selector_on_name() {
        let f = parse_field_selector("metadata.name=etcd").expect("parses");
        assert!(f.matches("etcd"));
        assert!(!f.matches("other"));
        let f = parse_field_selector("metadata.name!=etcd").expect("parses");
        assert!(!f.matches("etcd"));
        assert!(f.matches("other"));
    }
}
