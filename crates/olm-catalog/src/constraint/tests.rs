//! Masterminds/semver v3's documented examples, each with versions just inside and outside.

use super::*;

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

/// (constraint, versions it matches, versions it does not)
const CASES: &[(&str, &[&str], &[&str])] = &[
    ("1.2.3", &["1.2.3"], &["1.2.4", "1.2.2"]),
    ("=1.2.3", &["1.2.3"], &["1.2.4"]),
    ("v1.2.3", &["1.2.3"], &["1.3.0"]),
    ("!=1.2.3", &["1.2.4", "1.2.2"], &["1.2.3"]),
    (">1.2.3", &["1.2.4", "2.0.0"], &["1.2.3", "1.0.0"]),
    (">= 1.2.3", &["1.2.3", "1.3.0"], &["1.2.2"]),
    ("=>1.2.3", &["1.2.3"], &["1.2.2"]),
    ("<1.2.3", &["1.2.2"], &["1.2.3"]),
    ("<=1.2.3", &["1.2.3"], &["1.2.4"]),
    ("=<1.2.3", &["1.2.3"], &["1.2.4"]),
    // Partial versions and wildcards.
    ("1.2", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]),
    ("1.2.x", &["1.2.0", "1.2.9"], &["1.3.0"]),
    ("1.x", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.0"]),
    ("*", &["0.0.1", "9.9.9"], &[]),
    (">1.2", &["1.3.0"], &["1.2.9"]),
    (">1", &["2.0.0"], &["1.9.9"]),
    (">=1.2", &["1.2.0"], &["1.1.9"]),
    ("<1.2", &["1.1.9"], &["1.2.0"]),
    ("<=1.2", &["1.2.9"], &["1.3.0"]),
    ("<=1.x", &["1.9.0"], &["2.0.0"]),
    ("!=1.2.x", &["1.3.0", "1.1.0"], &["1.2.5"]),
    // AND, OR and hyphen ranges.
    (">= 1.2, < 3.0.0 || >= 4.2.3", &["1.2.0", "2.9.9", "4.2.3", "5.0.0"], &["3.0.0", "4.2.2", "1.1.0"]),
    (">=1.2 <3", &["2.0.0"], &["3.0.0"]),
    ("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.4.6", "1.1.9"]),
    ("2.3.4 - 4.5", &["2.3.4", "4.5.9"], &["4.6.0", "2.3.3"]),
    // Tilde.
    ("~1.2.3", &["1.2.3", "1.2.9"], &["1.3.0", "1.2.2"]),
    ("~1", &["1.0.0", "1.9.0"], &["2.0.0"]),
    ("~2.3", &["2.3.0", "2.3.9"], &["2.4.0"]),
    ("~1.x", &["1.5.0"], &["2.0.0"]),
    ("~>1.2.3", &["1.2.4"], &["1.3.0"]),
    // Caret.
    ("^1.2.3", &["1.2.3", "1.9.9"], &["2.0.0", "1.2.2"]),
    ("^1.2", &["1.2.0", "1.9.0"], &["2.0.0", "1.1.0"]),
    ("^2.x", &["2.0.0", "2.9.0"], &["3.0.0"]),
    ("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0", "0.2.2"]),
    ("^0.0.3", &["0.0.3"], &["0.0.4"]),
    ("^0.0", &["0.0.9"], &["0.1.0"]),
    ("^0", &["0.9.9"], &["1.0.0"]),
    // Pre-releases only where the constraint names one.
    (">=1.2.3", &["1.3.0"], &["1.3.0-beta.1"]),
    (">=1.2.3-0", &["1.3.0-beta.1", "1.2.3-alpha"], &["1.2.2"]),
    // Build metadata is not a version's order.
    ("1.2.3", &["1.2.3+build.5"], &[]),
];

#[test]
fn the_documented_examples_match_what_they_say() {
    for (text, inside, outside) in CASES {
        let constraint = Constraint::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        for version in *inside {
            assert!(constraint.matches(&v(version)), "{text} should match {version}");
        }
        for version in *outside {
            assert!(!constraint.matches(&v(version)), "{text} should not match {version}");
        }
    }
}

#[test]
fn bad_constraints_say_what_is_wrong() {
    let cases = [
        ("", "empty"),
        ("   ", "empty"),
        (">>1.0", "not an operator"),
        ("1.0 ||", "each side"),
        ("|| 1.0", "each side"),
        (">=", "no version after it"),
        ("1.2.3.4", "not a version"),
        ("1.a", "not a number"),
        ("01.2", "leading zero"),
        ("1.2 -", "after `-`"),
    ];
    for (text, expected) in cases {
        let err = Constraint::parse(text).expect_err(text).to_string();
        assert!(err.contains(expected), "{text:?}: expected {expected:?} in {err}");
        assert!(err.starts_with(&format!("invalid version constraint {text:?}")), "{err}");
    }
}
