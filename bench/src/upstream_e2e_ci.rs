//! `olm-bench --upstream-e2e --ci`: the subset of upstream's e2e suite that CI runs
//! (bench/upstream-e2e/ci.tsv). The specs listed are selected, run as the full run runs them
//! (upstream_e2e.rs), a failed one once more, and the run fails when any fails twice or when a
//! listed spec is no longer in the suite. Nothing is written to CONFORMANCE.md.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::bail;

use crate::upstream_e2e_report::{Outcome, Spec, SpecResult};

/// The list, relative to the workspace.
pub const LIST: &str = "bench/upstream-e2e/ci.tsv";

/// The locations (`file.go:LINE`) the list names.
pub fn listed(workspace: &Path) -> anyhow::Result<BTreeSet<String>> {
    let path = workspace.join(LIST);
    let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    Ok(parse(&text))
}

fn parse(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Selects exactly the listed specs; a listed location the suite does not have is an error
/// (the list names another version of the suite).
pub fn select(specs: &mut [Spec], listed: &BTreeSet<String>) -> anyhow::Result<()> {
    for spec in specs.iter_mut() {
        spec.selected = listed.contains(&spec.location);
    }
    let found: BTreeSet<&str> = specs.iter().filter(|s| s.selected).map(|s| s.location.as_str()).collect();
    let missing: Vec<&str> = listed.iter().map(String::as_str).filter(|l| !found.contains(l)).collect();
    if !missing.is_empty() {
        bail!("{LIST} names specs the suite does not have: {}; correct the list from CONFORMANCE.md", missing.join(", "));
    }
    Ok(())
}

/// The results with every failed spec run once more by `rerun`; also the locations that passed
/// only the second time.
pub fn retry_failed(results: Vec<SpecResult>, rerun: impl FnOnce(Vec<Spec>) -> Vec<SpecResult>) -> (Vec<SpecResult>, Vec<String>) {
    let (failed, mut kept): (Vec<SpecResult>, Vec<SpecResult>) = results.into_iter().partition(|r| matches!(r.outcome, Outcome::Failed { .. }));
    if failed.is_empty() {
        return (kept, Vec::new());
    }
    eprintln!("running the {} failed spec(s) once more", failed.len());
    for r in &failed {
        eprintln!("  {} failed the first time: {}", r.spec.location, r.outcome.reason());
    }
    let again = rerun(failed.into_iter().map(|r| r.spec).collect());
    let flaky = again.iter().filter(|r| r.outcome == Outcome::Passed).map(|r| r.spec.location.clone()).collect();
    kept.extend(again);
    (kept, flaky)
}

/// Prints the run in a few lines and fails unless every spec passed.
pub fn verdict(results: &[SpecResult], flaky: &[String], elapsed: std::time::Duration, reports: &Path) -> anyhow::Result<()> {
    let passed = results.iter().filter(|r| r.outcome == Outcome::Passed).count();
    let failed: Vec<&SpecResult> = results.iter().filter(|r| r.outcome != Outcome::Passed).collect();
    eprintln!("upstream e2e, CI subset ({LIST}): {passed} of {} passed in {:.0} s", results.len(), elapsed.as_secs_f64());
    if !flaky.is_empty() {
        eprintln!("passed only when run again: {}", flaky.join(", "));
    }
    if !failed.is_empty() {
        let lines: Vec<String> = failed.iter().map(|r| format!("  {} ({}): {} {}", r.spec.location, r.spec.text, r.outcome.word(), r.outcome.reason())).collect();
        bail!(
            "{} spec(s) of upstream's e2e suite failed twice against olm-rs:\n{}\nEach spec's log and JSON report: {}",
            failed.len(),
            lines.join("\n"),
            reports.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(location: &str) -> Spec {
        Spec { location: location.into(), text: format!("text of {location}"), class: "A".into(), runnable: true, selected: true }
    }

    fn result(location: &str, outcome: Outcome) -> SpecResult {
        SpecResult { spec: spec(location), outcome, seconds: 1.0 }
    }

    fn failed() -> Outcome {
        Outcome::Failed { reason: "timed out".into(), at: "util.go:1".into() }
    }

    #[test]
    fn the_list_selects_its_specs_and_a_spec_the_suite_lacks_is_an_error() {
        let listed = parse("# comment\na_test.go:1\tcovers a\n\nb_test.go:2\tcovers b\n");
        assert_eq!(listed.iter().map(String::as_str).collect::<Vec<_>>(), ["a_test.go:1", "b_test.go:2"]);
        let mut specs = vec![spec("a_test.go:1"), spec("b_test.go:2"), spec("c_test.go:3")];
        select(&mut specs, &listed).unwrap();
        assert_eq!(specs.iter().map(|s| s.selected).collect::<Vec<_>>(), [true, true, false]);
        let mut fewer = vec![spec("a_test.go:1")];
        let err = select(&mut fewer, &listed).unwrap_err().to_string();
        assert!(err.contains("b_test.go:2") && err.contains(LIST), "{err}");
    }

    #[test]
    fn a_failed_spec_runs_once_more_and_fails_the_run_only_when_it_fails_again() {
        let results = vec![result("a_test.go:1", Outcome::Passed), result("b_test.go:2", failed()), result("c_test.go:3", failed())];
        let mut rerun_got = Vec::new();
        let (results, flaky) = retry_failed(results, |specs| {
            rerun_got = specs.iter().map(|s| s.location.clone()).collect();
            vec![result("b_test.go:2", Outcome::Passed), result("c_test.go:3", failed())]
        });
        assert_eq!(rerun_got, ["b_test.go:2", "c_test.go:3"], "only the failed specs run again");
        assert_eq!(flaky, ["b_test.go:2"]);
        let err = verdict(&results, &flaky, std::time::Duration::from_secs(1), Path::new("/r")).unwrap_err().to_string();
        assert!(err.contains("1 spec(s)") && err.contains("c_test.go:3") && !err.contains("b_test.go:2"), "{err}");

        let all_pass = vec![result("a_test.go:1", Outcome::Passed)];
        let (results, flaky) = retry_failed(all_pass, |_| panic!("nothing to run again"));
        assert!(flaky.is_empty());
        verdict(&results, &flaky, std::time::Duration::from_secs(1), Path::new("/r")).unwrap();
    }
}
