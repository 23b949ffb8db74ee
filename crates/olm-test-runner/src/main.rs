//! `cargo run -p olm-test-runner`: every test `cargo test --workspace` runs, in lanes side by
//! side. `cargo test` runs its binaries one after another, and the end-to-end suites spend most
//! of their time waiting on the API server; two lanes, each against a control plane of its own
//! (lanes.rs says why not one), keep both cores busy. Every binary runs even when one fails; the
//! output of a failed one is printed, and every one's is kept in `target/test-runner/`.
//!
//! Why not cargo-nextest, which runs test binaries side by side too: it runs every test in a
//! process of its own, and a suite binary here starts OLM's controllers once for all its tests
//! (two managers on one cluster would fight over its objects); nor can it give a group of
//! binaries a control plane of its own.
//!
//! Usage: `olm-test-runner [--lanes N] [NAME…]`: N lanes (default 2, or `OLM_TEST_LANES`);
//! NAMEs run only the binaries whose `<package>/<target>` contains one of them.

mod artifacts;
mod lanes;
mod schedule;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use lanes::Outcome;

/// Lines of a failed binary's output printed (all of it is in its log).
const FAILURE_TAIL: usize = 120;
/// How many lines of a failure's message are shown from its start (a long message, say one
/// with a namespace dump, would otherwise leave only its end in the tail).
const FAILURE_HEAD: usize = 40;

struct Options {
    lanes: usize,
    names: Vec<String>,
}

fn parse_args(args: &[String], env_lanes: Option<String>) -> Result<Options, String> {
    let lanes_from = |value: &str, source: &str| -> Result<usize, String> {
        match value.trim().parse::<usize>() {
            Ok(n) if (1..=lanes::MAX_LANES).contains(&n) => Ok(n),
            _ => Err(format!(
                "{source} is {value:?}: give a number of lanes from 1 to {}",
                lanes::MAX_LANES
            )),
        }
    };
    let mut options = Options {
        lanes: 2,
        names: Vec::new(),
    };
    if let Some(value) = env_lanes.filter(|v| !v.is_empty()) {
        options.lanes = lanes_from(&value, "OLM_TEST_LANES")?;
    }
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--lanes" => {
                options.lanes = lanes_from(args.next().map_or("", String::as_str), "--lanes")?
            }
            "-h" | "--help" => return Err("usage: olm-test-runner [--lanes N] [NAME…]".into()),
            name if name.starts_with('-') => {
                return Err(format!(
                    "unknown option {name}: usage: olm-test-runner [--lanes N] [NAME…]"
                ));
            }
            name => options.names.push(name.to_owned()),
        }
    }
    Ok(options)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args, std::env::var("OLM_TEST_LANES").ok()) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    match run(&options) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(message) => {
            eprintln!("olm-test-runner: {message}");
            std::process::exit(1);
        }
    }
}

fn run(options: &Options) -> Result<bool, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace
        .canonicalize()
        .map_err(|e| format!("{}: {e}", workspace.display()))?;
    let started = Instant::now();
    println!("== building the tests: cargo test --workspace --no-run");
    let mut jobs = artifacts::build(&workspace)?;
    jobs.push(artifacts::doctests(&workspace));
    if !options.names.is_empty() {
        jobs.retain(|job| {
            options
                .names
                .iter()
                .any(|name| job.name.contains(name.as_str()))
        });
        if jobs.is_empty() {
            return Err(format!(
                "no test binary's name contains {}",
                options.names.join(" or ")
            ));
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    let logs = target.join("test-runner");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let durations_file = logs.join("durations.tsv");
    let mut durations =
        schedule::parse_durations(&std::fs::read_to_string(&durations_file).unwrap_or_default());

    let lane_count = options.lanes.min(jobs.len());
    let mut lane_envs = Vec::new();
    for lane in 0..lane_count {
        lane_envs.push(lanes::lane_env(lane, &|name| std::env::var(name).ok())?);
    }
    println!(
        "== {} jobs in {lane_count} lanes (built in {}); logs in {}",
        jobs.len(),
        minutes(started.elapsed()),
        logs.display()
    );
    for (lane, env) in lane_envs.iter().enumerate().skip(1) {
        let described: Vec<_> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "   lane {lane}: its own control plane, {}",
            described.join(" ")
        );
    }

    let total = jobs.len();
    let queue = Arc::new(Mutex::new(schedule::order(jobs, &durations)));
    let (sender, results) = mpsc::channel::<Outcome>();
    for (lane, env) in lane_envs.into_iter().enumerate() {
        let queue = Arc::clone(&queue);
        let sender = sender.clone();
        let logs = logs.clone();
        std::thread::spawn(move || {
            loop {
                let next = queue
                    .lock()
                    .map(|mut q| schedule::take(&mut q, lane))
                    .unwrap_or(None);
                let Some(job) = next else { break };
                let log = logs.join(format!("{}.log", job.name.replace('/', "-")));
                if sender.send(lanes::run(job, lane, &env, log)).is_err() {
                    break;
                }
            }
        });
    }
    drop(sender);

    let mut failed = Vec::new();
    let mut failed_outcomes = Vec::new();
    let mut finished = 0;
    for outcome in results {
        finished += 1;
        report(&outcome, finished, total);
        durations.insert(outcome.job.name.clone(), outcome.elapsed);
        if outcome.success != Some(true) {
            failed.push(outcome.job.name.clone());
            failed_outcomes.push(outcome);
        }
    }
    // Failures last, where a reader of the run's tail (CI shows its tail) finds them.
    for outcome in &failed_outcomes {
        print_failure(outcome);
    }
    if let Err(e) = std::fs::write(&durations_file, schedule::format_durations(&durations)) {
        eprintln!(
            "cannot write {}: {e} (it only orders the next run)",
            durations_file.display()
        );
    }
    if finished < total {
        failed.push(format!(
            "{} jobs never ran: a lane ended early",
            total - finished
        ));
    }
    let elapsed = minutes(started.elapsed());
    if failed.is_empty() {
        println!("== all {total} jobs passed in {elapsed}");
        Ok(true)
    } else {
        println!(
            "== {} of {total} jobs failed in {elapsed}: {}",
            failed.len(),
            failed.join(", ")
        );
        Ok(false)
    }
}

fn report(outcome: &Outcome, finished: usize, total: usize) {
    let (passed, failed, ignored) = lanes::counts(&outcome.output);
    let verdict = match outcome.success {
        Some(true) => "ok",
        Some(false) => "FAILED",
        None => "STOPPED",
    };
    let mut line = format!(
        "[{finished:>3}/{total}] lane {} {verdict:<7} {:<40} {:>7.1} s  {passed} passed",
        outcome.lane,
        outcome.job.name,
        outcome.elapsed.as_secs_f64()
    );
    if failed > 0 {
        line.push_str(&format!(", {failed} failed"));
    }
    if ignored > 0 {
        line.push_str(&format!(", {ignored} ignored"));
    }
    println!("{line}");
    // A suite that could not run here says so (SKIPPED …): that belongs in the summary.
    for skipped in outcome.output.lines().filter(|l| l.starts_with("SKIPPED")) {
        println!("      {skipped}");
    }
}

fn print_failure(outcome: &Outcome) {
    println!("== {} failed", outcome.job.name);
    if let Some(error) = &outcome.error {
        println!("      {error}");
    }
    let lines = without_backtraces(&outcome.output);
    for start in failure_starts(&lines) {
        if start + FAILURE_TAIL >= lines.len() {
            continue; // the tail below shows it whole
        }
        println!("      --- the first {FAILURE_HEAD} lines of a failure's message ---");
        for line in lines[start..].iter().take(FAILURE_HEAD) {
            println!("      {line}");
        }
    }
    println!(
        "      --- last {} of {} lines of {} (backtraces left out) ---",
        FAILURE_TAIL.min(lines.len()),
        lines.len(),
        outcome.log.display()
    );
    for line in &lines[lines.len().saturating_sub(FAILURE_TAIL)..] {
        println!("      {line}");
    }
}

/// Where each failure's message starts: a test's returned `Error: ` or a panic.
fn failure_starts(lines: &[String]) -> Vec<usize> {
    let starts = lines.iter().enumerate();
    starts
        .filter(|(_, l)| {
            l.starts_with("Error: ") || (l.starts_with("thread '") && l.contains("' panicked at "))
        })
        .map(|(i, _)| i)
        .collect()
}

/// `output` without the frames of its backtraces (anyhow's `Stack backtrace:`, a panic's
/// `stack backtrace:`): with `RUST_BACKTRACE` set they are most of a failure's tail and push
/// out its message. Each is replaced by one line saying it is in the log.
fn without_backtraces(output: &str) -> Vec<String> {
    let is_frame = |line: &str| {
        let line = line.trim_start();
        line.starts_with("at ")
            || line
                .split_once(": ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut kept = Vec::new();
    let mut frames: Option<usize> = None;
    for line in output.lines() {
        if let Some(n) = frames {
            if is_frame(line) {
                frames = Some(n + usize::from(!line.trim_start().starts_with("at ")));
                continue;
            }
            kept.push(format!("[a backtrace of {n} frames: in the log]"));
            frames = None;
        }
        if line.trim().eq_ignore_ascii_case("stack backtrace:") {
            frames = Some(0);
            continue;
        }
        kept.push(line.to_owned());
    }
    if let Some(n) = frames {
        kept.push(format!("[a backtrace of {n} frames: in the log]"));
    }
    kept
}

fn minutes(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{} min {:02} s", seconds / 60, seconds % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backtraces_are_left_out_and_the_message_kept() {
        let output = "test t ... FAILED\nError: 1 failures over 5 packages:\netcd: timed out\n\nStack backtrace:\n   0: anyhow::error::<impl anyhow::Error>::msg\n             at /src/error.rs:83:36\n  22: t::run\n             at ./tests/t.rs:366:7\ntest result: FAILED. 0 passed; 1 failed\n";
        assert_eq!(
            without_backtraces(output),
            [
                "test t ... FAILED",
                "Error: 1 failures over 5 packages:",
                "etcd: timed out",
                "",
                "[a backtrace of 2 frames: in the log]",
                "test result: FAILED. 0 passed; 1 failed",
            ]
        );
        let panicked =
            "thread 'x' panicked at a.rs:1:2:\nboom\nstack backtrace:\n   0: rust_begin_unwind\n";
        assert_eq!(
            without_backtraces(panicked),
            [
                "thread 'x' panicked at a.rs:1:2:",
                "boom",
                "[a backtrace of 1 frames: in the log]"
            ]
        );
        // A line that only looks like a frame outside a backtrace stays.
        assert_eq!(without_backtraces("  1: one\n"), ["  1: one"]);
    }

    #[test]
    fn a_failure_message_is_found_where_it_starts() {
        let output = "running 1 test\nsetup done\nError: 2 failures over 12 packages:\nyaks: timed out\n--- dump\nthread 'y' panicked at b.rs:3:4:\nboom\n";
        let lines = without_backtraces(output);
        let starts: Vec<&str> = failure_starts(&lines)
            .into_iter()
            .map(|i| lines[i].as_str())
            .collect();
        assert_eq!(
            starts,
            [
                "Error: 2 failures over 12 packages:",
                "thread 'y' panicked at b.rs:3:4:"
            ]
        );
        assert!(failure_starts(&without_backtraces("test t ... ok\n")).is_empty());
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn lanes_come_from_the_flag_over_the_environment() {
        assert_eq!(parse_args(&[], None).unwrap().lanes, 2);
        assert_eq!(parse_args(&[], Some("1".into())).unwrap().lanes, 1);
        let options = parse_args(&args(&["--lanes", "3", "quickstart"]), Some("1".into())).unwrap();
        assert_eq!(
            (options.lanes, options.names),
            (3, vec!["quickstart".to_owned()])
        );
    }

    #[test]
    fn bad_lane_counts_and_options_are_refused_with_what_to_give() {
        for (list, env, expected) in [
            (&["--lanes", "0"][..], None, "from 1 to 3"),
            (&["--lanes"][..], None, "--lanes"),
            (&[][..], Some("many"), "OLM_TEST_LANES"),
            (&["--fast"][..], None, "unknown option --fast"),
        ] {
            let err = parse_args(&args(list), env.map(String::from))
                .err()
                .unwrap();
            assert!(err.contains(expected), "{err}");
        }
    }
}
