//! Go durations (`time.ParseDuration`), the one parser of them in olm-rs: upstream writes time
//! spans as Go durations in its API (`spec.updateStrategy.registryPoll.interval`, a
//! `metav1.Duration`), in annotations (an OperatorGroup's `bundle-unpack-timeout`) and in its
//! commands' flags, so OLM's own flags take them too.
//!
//! Why our own: the crate that ports Go's function, `go-parse-duration` (0.1.1, 2021), indexes
//! bytes by character (`chars().nth(i)` against `len()`), so `"1µs"` panics, and its overflow
//! bound is `1 << 62` (`1 << 63 - 1` parses as `1 << 62`). This is Go's function line by line,
//! with Go's bounds, in about eighty lines and tests of what Go accepts and refuses.

use std::fmt;
use std::time::Duration;

/// Why a text is not a Go duration; `Display` says it as Go does, after the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or nothing at all.
    Invalid(String),
    /// A number without its unit (`"10"`; `"0"` alone is the one exception).
    MissingUnit(String),
    /// A unit that is not `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`.
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// More than Go's largest duration, 2⁶³−1 ns (about 292 years).
    Overflow(String),
    /// A valid Go duration below zero, which no caller here can use.
    Negative(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid(text) => write!(f, "invalid duration {text:?}"),
            DurationError::MissingUnit(text) => write!(f, "missing unit in duration {text:?}"),
            DurationError::UnknownUnit { text, unit } => {
                write!(f, "unknown unit {unit:?} in duration {text:?} (units: ns, us, ms, s, m, h)")
            }
            DurationError::Overflow(text) => write!(f, "duration {text:?} is longer than 292 years"),
            DurationError::Negative(text) => write!(f, "duration {text:?} is negative"),
        }
    }
}

impl std::error::Error for DurationError {}

/// One nanosecond per unit.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // U+00B5 (micro sign) and U+03BC (Greek mu), as Go.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parse `text` as Go's `time.ParseDuration` does: an optional sign, then one or more decimal
/// numbers, each with an optional fraction and a unit (`300ms`, `1.5h`, `2h45m`), or `0` alone.
/// Nothing is trimmed. A negative duration is refused ([`DurationError::Negative`]): a
/// `std::time::Duration` cannot hold one and nothing here means anything by it; `-0s` is zero.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let overflow = || DurationError::Overflow(text.to_owned());
    const LIMIT: u64 = 1 << 63;
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // The integer part; past 2⁶³ it is an error, as in Go.
        let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let mut whole: u64 = 0;
        for digit in s[..digits].bytes() {
            if whole > LIMIT / 10 {
                return Err(invalid());
            }
            whole = whole * 10 + u64::from(digit - b'0');
            if whole > LIMIT {
                return Err(invalid());
            }
        }
        let before_point = digits > 0;
        s = &s[digits..];
        // The fraction: precision stops accumulating where it would overflow, as in Go.
        let (mut fraction, mut scale, mut after_point) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let mut full = false;
            for digit in rest[..digits].bytes() {
                if full || fraction > (LIMIT - 1) / 10 {
                    full = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(digit - b'0');
                if next > LIMIT {
                    full = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            after_point = digits > 0;
            s = &rest[digits..];
        }
        if !before_point && !after_point {
            // No digits at all (".s", "-.s").
            return Err(invalid());
        }
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let Some(nanos) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit { text: text.to_owned(), unit: unit.to_owned() });
        };
        if whole > LIMIT / nanos {
            return Err(overflow());
        }
        let mut value = whole * nanos;
        if fraction > 0 {
            // As Go: float64 keeps fractions of an hour accurate to the nanosecond.
            let part = (fraction as f64 * (nanos as f64 / scale)) as u64;
            value += part;
            if value > LIMIT {
                return Err(overflow());
            }
        }
        total += value;
        if total > LIMIT {
            return Err(overflow());
        }
    }
    if negative {
        return if total == 0 { Ok(Duration::ZERO) } else { Err(DurationError::Negative(text.to_owned())) };
    }
    if total > LIMIT - 1 {
        return Err(overflow());
    }
    Ok(Duration::from_nanos(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: u64 = 1;
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    const M: u64 = 60 * S;
    const H: u64 = 60 * M;

    #[test]
    fn what_go_accepts() {
        // Go's own table (time_test.go, parseDurationTests), the positive half.
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("+5s", 5 * S),
            ("+0", 0),
            ("-0", 0),
            ("-0s", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000 * NS),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", (1 << 63) - 1),
            ("9223372036854775.807us", (1 << 63) - 1),
            ("9223372036s854ms775us807ns", (1 << 63) - 1),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827 * NS),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_go_duration(text), Ok(Duration::from_nanos(*nanos)), "{text}");
        }
    }

    #[test]
    fn what_go_refuses() {
        use DurationError::*;
        let invalid = |t: &str| Invalid(t.to_owned());
        let cases: Vec<(&str, DurationError)> = vec![
            ("", invalid("")),
            ("3", MissingUnit("3".into())),
            ("1", MissingUnit("1".into())),
            ("10", MissingUnit("10".into())),
            ("00", MissingUnit("00".into())),
            ("-", invalid("-")),
            ("s", invalid("s")),
            (".", invalid(".")),
            ("-.", invalid("-.")),
            (".s", invalid(".s")),
            ("+.s", invalid("+.s")),
            ("1.5.5s", MissingUnit("1.5.5s".into())),
            ("1d", UnknownUnit { text: "1d".into(), unit: "d".into() }),
            ("5 s", UnknownUnit { text: "5 s".into(), unit: " s".into() }),
            ("ten minutes", invalid("ten minutes")),
            (" 5s", invalid(" 5s")),
            ("5s ", UnknownUnit { text: "5s ".into(), unit: "s ".into() }),
            ("1e3s", UnknownUnit { text: "1e3s".into(), unit: "e".into() }),
            ("9223372036854775808ns", Overflow("9223372036854775808ns".into())),
            ("9223372036854775.808us", Overflow("9223372036854775.808us".into())),
            ("9223372036854ms775us808ns", Overflow("9223372036854ms775us808ns".into())),
            ("3000000h", Overflow("3000000h".into())),
            ("99999999999999999999s", invalid("99999999999999999999s")),
            // Valid in Go, refused here: nothing that reads a duration can go back in time.
            ("-5s", Negative("-5s".into())),
            ("-1.5h", Negative("-1.5h".into())),
            ("-9223372036854775808ns", Negative("-9223372036854775808ns".into())),
        ];
        for (text, error) in cases {
            assert_eq!(parse_go_duration(text), Err(error), "{text:?}");
        }
    }

    #[test]
    fn errors_name_the_text() {
        assert_eq!(parse_go_duration("1").unwrap_err().to_string(), "missing unit in duration \"1\"");
        assert_eq!(
            parse_go_duration("2d").unwrap_err().to_string(),
            "unknown unit \"d\" in duration \"2d\" (units: ns, us, ms, s, m, h)"
        );
        assert_eq!(parse_go_duration("-1s").unwrap_err().to_string(), "duration \"-1s\" is negative");
    }
}
