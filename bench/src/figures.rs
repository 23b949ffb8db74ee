//! How BENCHMARKS.md writes the figures `report` and `report_e2e` both show: a duration in
//! milliseconds, and ours against theirs as a ratio.

use std::time::Duration;

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

pub(crate) fn ratio(ours: f64, theirs: f64) -> String {
    if theirs > 0.0 && ours.is_finite() && theirs.is_finite() { format!("{:.3}", ours / theirs) } else { "n/a".into() }
}
