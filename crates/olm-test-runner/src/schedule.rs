//! Which job runs first and which lane may take it: pure, so it is tested without running
//! anything.
//!
//! Jobs are taken from one queue by whichever lane is free (so a slow job does not hold up a
//! lane's list), longest first as the last run measured them: the longest job starts at once
//! and the short ones fill the gaps at the end. A job never measured goes before every measured
//! one (it may be long; the first run of a fresh clone has no measurements at all), end-to-end
//! suites before the rest. Jobs on the real node (containerd, a kubelet, iptables: one per
//! machine) run only in lane 0, one after another.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The end-to-end suites that start a real kubelet node: never two at once.
pub const REAL_NODE_SUITES: [&str; 3] = ["in_cluster", "real_node", "real_node_migrate"];

/// The package of the end-to-end suites (tests/).
pub const E2E_PACKAGE: &str = "olm-e2e";

/// One test binary, or the doctests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// `<package>/<target>`, as printed and as keyed in the durations file.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Where it runs: its package's directory, as `cargo test` runs it.
    pub dir: PathBuf,
    pub real_node: bool,
    pub end_to_end: bool,
}

/// The queue in the order lanes take jobs from it.
pub fn order(mut jobs: Vec<Job>, measured: &HashMap<String, Duration>) -> Vec<Job> {
    jobs.sort_by(|a, b| {
        let rank = |job: &Job| {
            let known = measured.get(&job.name).copied();
            // Unmeasured first, end-to-end suites first among those; then longest first.
            (
                known.is_some(),
                !job.end_to_end,
                std::cmp::Reverse(known.unwrap_or_default()),
            )
        };
        rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name))
    });
    jobs
}

/// Takes the next job lane `lane` may run: lane 0 takes the real node's jobs before anything
/// else (they cannot share the node, so they have one lane, and starting them early keeps that
/// lane from finishing last); other lanes never take them.
pub fn take(queue: &mut Vec<Job>, lane: usize) -> Option<Job> {
    let position = if lane == 0 {
        queue
            .iter()
            .position(|job| job.real_node)
            .or(if queue.is_empty() { None } else { Some(0) })
    } else {
        queue.iter().position(|job| !job.real_node)
    };
    position.map(|index| queue.remove(index))
}

/// The durations file: one `name<TAB>seconds` per line. Lines that do not parse are skipped
/// (the file only orders the queue).
pub fn parse_durations(text: &str) -> HashMap<String, Duration> {
    text.lines()
        .filter_map(|line| {
            let (name, seconds) = line.split_once('\t')?;
            let seconds: f64 = seconds.trim().parse().ok()?;
            (seconds.is_finite() && seconds >= 0.0)
                .then(|| (name.to_owned(), Duration::from_secs_f64(seconds)))
        })
        .collect()
}

pub fn format_durations(durations: &HashMap<String, Duration>) -> String {
    let mut names: Vec<_> = durations.keys().collect();
    names.sort();
    names
        .iter()
        .map(|name| format!("{name}\t{:.1}\n", durations[*name].as_secs_f64()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> Job {
        let target = name.rsplit('/').next().unwrap_or(name);
        Job {
            name: name.to_owned(),
            program: PathBuf::from(name),
            args: Vec::new(),
            dir: PathBuf::from("."),
            real_node: REAL_NODE_SUITES.contains(&target),
            end_to_end: name.starts_with(E2E_PACKAGE),
        }
    }

    fn names(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(|j| j.name.as_str()).collect()
    }

    fn secs(pairs: &[(&str, u64)]) -> HashMap<String, Duration> {
        pairs
            .iter()
            .map(|(n, s)| ((*n).to_owned(), Duration::from_secs(*s)))
            .collect()
    }

    #[test]
    fn measured_jobs_go_longest_first() {
        let jobs = vec![
            job("olm-api/kinds"),
            job("olm-e2e/conformance"),
            job("olm-e2e/quickstart"),
        ];
        let measured = secs(&[
            ("olm-api/kinds", 1),
            ("olm-e2e/conformance", 335),
            ("olm-e2e/quickstart", 70),
        ]);
        assert_eq!(
            names(&order(jobs, &measured)),
            ["olm-e2e/conformance", "olm-e2e/quickstart", "olm-api/kinds"]
        );
    }

    #[test]
    fn unmeasured_jobs_go_first_end_to_end_suites_before_the_rest() {
        let jobs = vec![
            job("olm-api/kinds"),
            job("olm-e2e/conformance"),
            job("olm-e2e/new_suite"),
            job("olm/catalog_cli"),
        ];
        let measured = secs(&[("olm-e2e/conformance", 335)]);
        assert_eq!(
            names(&order(jobs, &measured)),
            [
                "olm-e2e/new_suite",
                "olm-api/kinds",
                "olm/catalog_cli",
                "olm-e2e/conformance"
            ]
        );
    }

    #[test]
    fn a_fresh_clone_orders_by_kind_then_name() {
        let jobs = vec![
            job("olm/olm"),
            job("olm-e2e/quickstart"),
            job("olm-e2e/conformance"),
        ];
        assert_eq!(
            names(&order(jobs, &HashMap::new())),
            ["olm-e2e/conformance", "olm-e2e/quickstart", "olm/olm"]
        );
    }

    #[test]
    fn only_lane_zero_takes_the_real_node_and_takes_it_first() {
        let mut queue = vec![
            job("olm-e2e/conformance"),
            job("olm-e2e/in_cluster"),
            job("olm-e2e/real_node"),
            job("olm/olm"),
        ];
        assert_eq!(
            take(&mut queue, 1).map(|j| j.name),
            Some("olm-e2e/conformance".into())
        );
        assert_eq!(
            take(&mut queue, 0).map(|j| j.name),
            Some("olm-e2e/in_cluster".into())
        );
        assert_eq!(take(&mut queue, 1).map(|j| j.name), Some("olm/olm".into()));
        // Only the real node's job is left: lane 1 has nothing it may take, lane 0 takes it.
        assert_eq!(take(&mut queue, 1), None);
        assert_eq!(
            take(&mut queue, 0).map(|j| j.name),
            Some("olm-e2e/real_node".into())
        );
        assert_eq!(take(&mut queue, 0), None);
    }

    #[test]
    fn lane_zero_takes_ordinary_jobs_when_no_real_node_job_is_left() {
        let mut queue = vec![job("olm-e2e/conformance"), job("olm/olm")];
        assert_eq!(
            take(&mut queue, 0).map(|j| j.name),
            Some("olm-e2e/conformance".into())
        );
    }

    #[test]
    fn durations_round_trip_and_bad_lines_are_skipped() {
        let measured = secs(&[("olm-e2e/conformance", 335), ("olm/olm", 2)]);
        assert_eq!(parse_durations(&format_durations(&measured)), measured);
        let parsed = parse_durations("a\t1.5\nno tab\nb\tNaN\nc\t-3\nd\tx\n");
        assert_eq!(
            parsed,
            HashMap::from([("a".to_owned(), Duration::from_millis(1500))])
        );
    }
}
