//! How BENCHMARKS.md writes the figures several sections show: a duration in milliseconds, ours
//! against theirs as a ratio, the median of some runs.

use std::time::Duration;

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

pub(crate) fn ratio(ours: f64, theirs: f64) -> String {
    if theirs > 0.0 && ours.is_finite() && theirs.is_finite() { format!("{:.3}", ours / theirs) } else { "n/a".into() }
}

/// The median of `values` (the upper one of an even count); NaN when there are none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
