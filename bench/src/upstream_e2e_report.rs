//! CONFORMANCE.md from a run of upstream's e2e suite (upstream_e2e.rs): one row per spec with its
//! result and, for each one that did not pass, the first line of its failure and its cause.
//! Rows of specs this run did not select (`--focus`) are kept from the previous file, with the
//! date and commit of the run they come from.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

/// What each spec needs (bench/upstream-e2e/classes.tsv; its header says what the classes are).
const CLASSES: &str = include_str!("../upstream-e2e/classes.tsv");
/// Causes of failures found by reading the failing specs (bench/upstream-e2e/causes.tsv).
const CAUSES: &str = include_str!("../upstream-e2e/causes.tsv");

pub struct Spec {
    /// `file.go:LINE` of the It or Entry.
    pub location: String,
    /// Its containers' texts and its own, joined by " / ".
    pub text: String,
    pub class: String,
    /// Not pending or always skipped upstream.
    pub runnable: bool,
    /// Selected by `--focus`.
    pub selected: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// First line of the failure and where in upstream's code it failed.
    Failed { reason: String, at: String },
    /// The suite skipped it at run time.
    Skipped(String),
    Pending,
    /// Its class needs what a control plane without real pods and upstream's images lacks.
    NotApplicable,
    /// Not selected this time.
    NotRun,
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Self::Passed => "pass",
            Self::Failed { .. } => "fail",
            Self::Skipped(_) | Self::NotApplicable => "not applicable",
            Self::Pending => "pending",
            Self::NotRun => "not run",
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Self::Failed { reason, .. } | Self::Skipped(reason) => reason,
            _ => "",
        }
    }
}

pub struct SpecResult {
    pub spec: Spec,
    pub outcome: Outcome,
    pub seconds: f64,
}

pub struct RunInfo {
    pub upstream_version: String,
    pub commit: String,
    pub date: String,
    pub command: String,
    pub jobs: usize,
    /// Private control planes the specs were shared out to.
    pub clusters: usize,
    pub spec_timeout: Duration,
    pub elapsed: Duration,
}

impl RunInfo {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "upstreamVersion": self.upstream_version, "commit": self.commit, "date": self.date, "command": self.command,
            "jobs": self.jobs, "clusters": self.clusters, "specTimeoutSeconds": self.spec_timeout.as_secs(), "elapsedSeconds": self.elapsed.as_secs(),
        })
    }

    pub fn from_json(v: &serde_json::Value) -> Option<RunInfo> {
        let s = |k: &str| v[k].as_str().map(str::to_owned);
        Some(RunInfo {
            upstream_version: s("upstreamVersion")?,
            commit: s("commit")?,
            date: s("date")?,
            command: s("command")?,
            jobs: usize::try_from(v["jobs"].as_u64()?).ok()?,
            clusters: v["clusters"].as_u64().and_then(|c| usize::try_from(c).ok()).unwrap_or(1),
            spec_timeout: Duration::from_secs(v["specTimeoutSeconds"].as_u64()?),
            elapsed: Duration::from_secs(v["elapsedSeconds"].as_u64()?),
        })
    }
}

/// How many specs ran at once, and where.
fn at_a_time(run: &RunInfo) -> String {
    match (run.clusters, run.jobs) {
        (1, jobs) => format!("{jobs} at a time"),
        (clusters, 1) => format!("one at a time on each of {clusters} control planes"),
        (clusters, jobs) => format!("{jobs} at a time on each of {clusters} control planes"),
    }
}

/// Class of each spec location.
pub fn classes() -> HashMap<&'static str, String> {
    tsv(CLASSES).filter_map(|f| Some((*f.first()?, (*f.get(1)?).to_owned()))).collect()
}

fn tsv(text: &'static str) -> impl Iterator<Item = Vec<&'static str>> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).map(|l| l.split('\t').collect())
}

/// The classes run without `--all`: API objects only (A), and ConfigMap catalogs' registry pods
/// (Acm), which OLM makes here (`upstream_e2e::CONFIGMAP_SERVER_IMAGE`) and kwok runs.
pub fn runs_by_default(class: &str) -> bool {
    matches!(class, "A" | "Acm" | "?")
}

/// Why a spec of `class` at `location` did not pass: one of the four causes, and a note.
fn cause(location: &str, class: &str, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Passed | Outcome::NotRun => return String::new(),
        Outcome::Pending => return "pending upstream".into(),
        Outcome::Skipped(_) => return "skipped by the suite".into(),
        Outcome::NotApplicable | Outcome::Failed { .. } => {}
    }
    if !runs_by_default(class) {
        return format!("needs real pods or images ({class})");
    }
    let file = location.split(':').next().unwrap_or(location);
    let said = outcome.reason();
    let known = tsv(CAUSES)
        .find(|f| f.first().is_some_and(|k| *k == location))
        .or_else(|| tsv(CAUSES).find(|f| f.first().and_then(|k| k.strip_prefix('~')).is_some_and(|k| said.contains(k))))
        .or_else(|| tsv(CAUSES).find(|f| f.first().is_some_and(|k| *k == file)));
    if let Some(f) = known {
        let note = f.get(2).map_or(String::new(), |n| format!(": {n}"));
        return format!("{}{note}", f.get(1).copied().unwrap_or("?"));
    }
    "bug in olm-rs (not triaged)".into()
}

/// One row of the table, from this run or the previous file.
#[derive(Clone)]
struct Row {
    location: String,
    text: String,
    class: String,
    result: String,
    cause: String,
    failure: String,
    at: String,
    seconds: String,
    run: String,
}

impl Row {
    fn cells(&self) -> [&str; 9] {
        [&self.location, &self.text, &self.class, &self.result, &self.cause, &self.failure, &self.at, &self.seconds, &self.run]
    }

    fn parse(line: &str) -> Option<Row> {
        let line = line.trim().strip_prefix('|')?.strip_suffix('|')?;
        let cells: Vec<String> = line.replace("\\|", "\u{0}").split('|').map(|c| c.trim().replace('\u{0}', "|").trim_matches('`').to_owned()).collect();
        let [location, text, class, result, cause, failure, at, seconds, run] = <[String; 9]>::try_from(cells).ok()?;
        location.contains(".go:").then_some(Row { location, text, class, result, cause, failure, at, seconds, run })
    }
}

/// `s` on one line, at most 300 characters: what a cell holds (unescaped).
fn norm(s: &str) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one_line.chars().take(300).collect();
    if cut.len() < one_line.len() { format!("{cut}…") } else { cut }
}

/// The specs (location, text as a cell holds it) whose row in the report `previous` says pass.
pub fn passing(previous: &str) -> std::collections::HashSet<(String, String)> {
    previous.lines().filter_map(Row::parse).filter(|r| r.result == "pass").map(|r| (r.location, r.text)).collect()
}

/// Whether `spec` passed in the report a [`passing`] set was read from.
pub fn passed(passing: &std::collections::HashSet<(String, String)>, spec: &Spec) -> bool {
    passing.contains(&(spec.location.clone(), norm(&spec.text)))
}

pub fn render(run: &RunInfo, results: &[SpecResult], previous: &str) -> String {
    let old: HashMap<(String, String), Row> = previous.lines().filter_map(Row::parse).map(|r| ((r.location.clone(), r.text.clone()), r)).collect();
    let this_run = format!("{} {}", run.date.split(' ').next().unwrap_or(""), run.commit.split(' ').next().unwrap_or(""));
    let mut rows: Vec<Row> = Vec::new();
    for r in results {
        let s = &r.spec;
        if matches!(r.outcome, Outcome::NotRun)
            && let Some(row) = old.get(&(s.location.clone(), norm(&s.text)))
        {
            rows.push(Row { class: s.class.clone(), ..row.clone() });
            continue;
        }
        let ran = matches!(r.outcome, Outcome::Passed | Outcome::Failed { .. } | Outcome::Skipped(_));
        rows.push(Row {
            location: s.location.clone(),
            text: norm(&s.text),
            class: s.class.clone(),
            result: r.outcome.word().into(),
            cause: cause(&s.location, &s.class, &r.outcome),
            failure: norm(r.outcome.reason()),
            at: match &r.outcome {
                Outcome::Failed { at, .. } => at.clone(),
                _ => String::new(),
            },
            seconds: if ran { format!("{:.0}", r.seconds) } else { String::new() },
            run: if ran { this_run.clone() } else { String::new() },
        });
    }
    rows.sort_by(|a, b| file_line(&a.location).cmp(&file_line(&b.location)));

    let count = |word: &str| rows.iter().filter(|r| r.result == word).count();
    let here: Vec<&SpecResult> = results.iter().filter(|r| matches!(r.outcome, Outcome::Passed | Outcome::Failed { .. } | Outcome::Skipped(_))).collect();
    let here_passed = here.iter().filter(|r| matches!(r.outcome, Outcome::Passed)).count();
    let mut t = String::new();
    let _ = writeln!(t, "# Conformance with upstream OLM's own e2e suite\n");
    let _ = writeln!(t, "<!-- Generated by `olm-bench --upstream-e2e` (bench/src/upstream_e2e.rs): do not edit; regenerate. -->\n");
    let _ = writeln!(t, "Upstream's Ginkgo suite (test/e2e of github.com/operator-framework/operator-lifecycle-manager **{}**, the version bench/go/resolver-driver pins), compiled unchanged, run against olm-rs on a private local control plane (kube-apiserver, etcd, kwok; `olm dev up`, OLM with `--configmap-server-image`, so that ConfigMap catalogs get registry pods as upstream's install makes them): one spec per `e2e.test` process, `-namespace=operators -olmNamespace=olm -catalogNamespace=olm`, with a CatalogSource `olm/operatorhubio-catalog` (the bundled community catalog's image) for its BeforeSuite.\n", run.upstream_version);
    let _ = writeln!(t, "Last run: {} on olm-rs {}: **{} specs ran, {} passed, {} failed** ({}, {} s per spec at most; {:.0} min).\n", run.date, run.commit, here.len(), here_passed, here.len() - here_passed, at_a_time(run), run.spec_timeout.as_secs(), run.elapsed.as_secs_f64() / 60.0);
    let _ = writeln!(t, "Regenerate (a `--focus` or `--budget` keeps the rows of the specs it leaves out):\n\n```sh\n{}\n```\n", run.command);
    let _ = writeln!(t, "OLM v1's API (ClusterCatalog, ClusterExtension) is held against operator-controller v1.11.0's own e2e suite (its Godog features) and kubectl-operator's `olmv1` commands in docs/olmv1.md.\n");
    let _ = writeln!(t, "CI runs a subset of the passing specs on every change; a spec that fails there runs once more, and CI fails if it fails again (`olm-bench --upstream-e2e --ci`; the list and why each is in it: bench/upstream-e2e/ci.tsv).\n");
    let _ = writeln!(t, "All {} specs: **{} pass, {} fail, {} not applicable, {} pending, {} not run**.\n", rows.len(), count("pass"), count("fail"), count("not applicable"), count("pending"), count("not run"));
    let _ = writeln!(t, "Classes (what a spec needs): A = only API objects; Apod = asserts the registry Pod, Service or NetworkPolicy upstream makes for image catalogs; Acm = asserts the registry pods of ConfigMap catalogs (OLM makes them here: `--configmap-server-image`); Aapi = owns an APIService whose backend must become Available; B = a serving pod, an image or an unpack Job; C = upstream's own Deployments or their metrics; S = always skipped; P:X = pending upstream. Only A and Acm run by default (`--all` runs the others). Causes of a non-pass: bug in olm-rs, deliberate difference, needs real pods or images, pending.\n");

    let failed: Vec<&Row> = rows.iter().filter(|r| r.result == "fail").collect();
    if !failed.is_empty() {
        let _ = writeln!(t, "## Top failure causes\n");
        let mut by_cause: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &failed {
            *by_cause.entry(r.cause.as_str()).or_default() += 1;
        }
        let mut by_cause: Vec<_> = by_cause.into_iter().collect();
        by_cause.sort_by_key(|c| std::cmp::Reverse(c.1));
        for (cause, n) in by_cause {
            let _ = writeln!(t, "- {n} × {cause}");
        }
        let _ = writeln!(t, "\nWhere in upstream's code the failing specs fail (most first):\n");
        let mut by_place: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
        for r in &failed {
            by_place.entry(if r.at.is_empty() { "(no location)" } else { &r.at }).or_default().push(r);
        }
        let mut by_place: Vec<_> = by_place.into_iter().collect();
        by_place.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        for (place, rs) in by_place.iter().take(12) {
            let specs: Vec<&str> = rs.iter().map(|r| r.location.as_str()).collect();
            let _ = writeln!(t, "- {} × `{place}`: {} — {}", rs.len(), rs[0].failure.replace('|', "\\|"), specs.join(", "));
        }
        let _ = writeln!(t);
    }

    let _ = writeln!(t, "## Specs\n");
    let _ = writeln!(t, "| spec | text | class | result | cause | first line of the failure | where | s | run |");
    let _ = writeln!(t, "|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let c = r.cells().map(|c| c.replace('|', "\\|"));
        let _ = writeln!(t, "| `{}` | {} |", c[0], c[1..].join(" | "));
    }
    t
}

fn file_line(location: &str) -> (&str, u64) {
    let (file, line) = location.rsplit_once(':').unwrap_or((location, "0"));
    (file, line.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(location: &str, class: &str) -> Spec {
        Spec { location: location.into(), text: "a | b".into(), class: class.into(), runnable: true, selected: true }
    }

    #[test]
    fn rows_round_trip_and_unselected_specs_keep_their_previous_row() {
        let run = RunInfo {
            upstream_version: "v0.46.0".into(),
            commit: "abc".into(),
            date: "2026-11-27 15:00 UTC".into(),
            command: "bench/run.sh --upstream-e2e".into(),
            jobs: 1,
            clusters: 1,
            spec_timeout: Duration::from_secs(300),
            elapsed: Duration::from_secs(60),
        };
        let first = render(
            &run,
            &[
                SpecResult { spec: spec("x_test.go:10", "A"), outcome: Outcome::Failed { reason: "boom".into(), at: "util.go:5".into() }, seconds: 3.0 },
                SpecResult { spec: spec("x_test.go:20", "B"), outcome: Outcome::NotApplicable, seconds: 0.0 },
            ],
            "",
        );
        assert!(first.contains("| `x_test.go:10` | a \\| b | A | fail | bug in olm-rs (not triaged) | boom | util.go:5 | 3 | 2026-11-27 abc |"), "{first}");
        assert!(first.contains("| `x_test.go:20` | a \\| b | B | not applicable | needs real pods or images (B) |"), "{first}");
        let again = render(&run, &[SpecResult { spec: spec("x_test.go:10", "A"), outcome: Outcome::NotRun, seconds: 0.0 }], &first);
        assert!(again.contains("| `x_test.go:10` | a \\| b | A | fail | bug in olm-rs (not triaged) | boom | util.go:5 | 3 | 2026-11-27 abc |"), "{again}");
    }
}
