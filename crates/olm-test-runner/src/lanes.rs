//! A lane runs one job at a time against a control plane of its own. The suites' harness
//! (olm-testkit) starts that control plane from two variables: `OLM_TEST_STATE_DIR` and
//! `OLM_TEST_PORT_BASE`. Lane 0 leaves them as they are, so it uses the tests' usual cluster
//! (port base 29000, `~/.local/state/olm-dev-test`, or what the caller set); other lanes get
//! a state directory beside it and a port base of their own.
//!
//! Why separate clusters rather than one: every suite binary runs OLM's controllers for the
//! whole cluster (as `olm run` does, without leader election), so two binaries on one cluster
//! would reconcile each other's objects; and suites change cluster-scoped objects (CRDs,
//! ClusterRoles) that others install.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::schedule::Job;

/// Port bases of lanes 1 and 2: apart from the developer's `olm dev` cluster (28000), the tests'
/// (29000) and the throwaway environments suites start (30000 and up), and below the kernel's
/// ephemeral ports (32768).
const LANE_PORT_BASES: [u16; 2] = [29500, 28500];

/// The most lanes there are port bases for.
pub const MAX_LANES: usize = 1 + LANE_PORT_BASES.len();

/// Longer than any suite takes on a cold machine; a binary past it is stopped and reported,
/// so a hang costs this long, not CI's whole budget.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The variables lane `lane` sets for its jobs. `env` reads the caller's environment.
pub fn lane_env(
    lane: usize,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    if lane == 0 {
        return Ok(Vec::new());
    }
    let base = LANE_PORT_BASES.get(lane - 1).ok_or_else(|| {
        format!(
            "there are port bases for {MAX_LANES} lanes, not {}",
            lane + 1
        )
    })?;
    let absolute = |name: &str| env(name).filter(|v| Path::new(v).is_absolute());
    // The same default as olm-testkit's, with the lane's number after it.
    let state = match (
        absolute("OLM_TEST_STATE_DIR"),
        absolute("XDG_STATE_HOME"),
        absolute("HOME"),
    ) {
        (Some(dir), _, _) => PathBuf::from(dir),
        (None, Some(state), _) => Path::new(&state).join("olm-dev-test"),
        (None, None, Some(home)) => Path::new(&home).join(".local/state/olm-dev-test"),
        (None, None, None) => return Err(
            "cannot decide where the lanes' state directories go: set OLM_TEST_STATE_DIR or HOME"
                .into(),
        ),
    };
    Ok(vec![
        (
            "OLM_TEST_STATE_DIR".into(),
            format!("{}-lane{lane}", state.display()),
        ),
        ("OLM_TEST_PORT_BASE".into(), base.to_string()),
    ])
}

/// How one job ended.
#[derive(Debug)]
pub struct Outcome {
    pub job: Job,
    pub lane: usize,
    pub elapsed: Duration,
    /// `None` when it was stopped at [`JOB_TIMEOUT`] or could not start.
    pub success: Option<bool>,
    pub log: PathBuf,
    /// What it printed (stdout and stderr, interleaved as written).
    pub output: String,
    /// Why it could not start or was stopped.
    pub error: Option<String>,
}

/// Runs `job` with the lane's variables, its output in `log`.
pub fn run(job: Job, lane: usize, env: &[(String, String)], log: PathBuf) -> Outcome {
    let started = Instant::now();
    let result = run_logged(&job, env, &log);
    let mut output = String::new();
    if let Ok(mut file) = File::open(&log) {
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        output = String::from_utf8_lossy(&bytes).into_owned();
    }
    let (success, error) = match result {
        Ok(success) => (Some(success), None),
        Err(error) => (None, Some(error)),
    };
    Outcome {
        job,
        lane,
        elapsed: started.elapsed(),
        success,
        log,
        output,
        error,
    }
}

fn run_logged(job: &Job, env: &[(String, String)], log: &Path) -> Result<bool, String> {
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err_file = file
        .try_clone()
        .map_err(|e| format!("cannot reopen {}: {e}", log.display()))?;
    let mut command = Command::new(&job.program);
    command
        .args(&job.args)
        .current_dir(&job.dir)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file);
    // cargo test sets this for the binaries it runs; a test may read it at run time.
    command.env("CARGO_MANIFEST_DIR", &job.dir);
    for (name, value) in env {
        command.env(name, value);
    }
    // Its own process group, so a binary stopped at the timeout takes its children with it.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", job.program.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.success()),
            Ok(None) if started.elapsed() >= JOB_TIMEOUT => {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                return Err(format!(
                    "stopped after {} min: it did not end",
                    JOB_TIMEOUT.as_secs() / 60
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(format!("cannot wait for {}: {e}", job.program.display())),
        }
    }
}

/// Counts of libtest's `test result:` lines in `output`: (passed, failed, ignored).
pub fn counts(output: &str) -> (u64, u64, u64) {
    let mut totals = (0, 0, 0);
    for line in output.lines().filter(|l| l.starts_with("test result:")) {
        let number = |word: &str| -> u64 {
            line.split(';')
                .filter_map(|part| part.trim().strip_suffix(word))
                .filter_map(|n| n.trim().rsplit(' ').next()?.parse::<u64>().ok())
                .sum()
        };
        totals.0 += number("passed");
        totals.1 += number("failed");
        totals.2 += number("ignored");
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn lane_zero_keeps_the_callers_cluster() {
        assert_eq!(lane_env(0, &vars(&[("HOME", "/h")])), Ok(Vec::new()));
    }

    #[test]
    fn other_lanes_get_a_state_directory_beside_the_usual_one_and_ports_of_their_own() {
        let env = lane_env(1, &vars(&[("HOME", "/h")])).unwrap();
        assert_eq!(
            env,
            [
                (
                    "OLM_TEST_STATE_DIR".to_owned(),
                    "/h/.local/state/olm-dev-test-lane1".to_owned()
                ),
                ("OLM_TEST_PORT_BASE".to_owned(), "29500".to_owned())
            ]
        );
        let env = lane_env(
            2,
            &vars(&[
                ("OLM_TEST_STATE_DIR", "/t/state"),
                ("XDG_STATE_HOME", "/x"),
                ("HOME", "/h"),
            ]),
        )
        .unwrap();
        assert_eq!(env[0].1, "/t/state-lane2");
        assert_eq!(env[1].1, "28500");
        let env = lane_env(1, &vars(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")])).unwrap();
        assert_eq!(env[0].1, "/x/olm-dev-test-lane1");
    }

    #[test]
    fn lanes_past_the_port_bases_and_relative_paths_are_refused() {
        let err = lane_env(MAX_LANES, &vars(&[("HOME", "/h")])).unwrap_err();
        assert!(err.contains("3 lanes"), "{err}");
        let err = lane_env(1, &vars(&[("HOME", "relative")])).unwrap_err();
        assert!(err.contains("OLM_TEST_STATE_DIR"), "{err}");
    }

    #[test]
    fn the_lanes_ports_do_not_meet_the_other_clusters() {
        // olm-dev's ports are base+247 to base+581 (`olm dev --help`); the tests' cluster is at
        // 29000, the developer's at 28000, suites' throwaway environments from 30000.
        let (lowest, highest) = (247u16, 581u16);
        let taken = [28000u16, 29000, 30000];
        for base in LANE_PORT_BASES {
            for other in taken
                .iter()
                .chain(LANE_PORT_BASES.iter().filter(|b| **b != base))
            {
                assert!(
                    base.abs_diff(*other) > highest - lowest,
                    "{base} and {other}"
                );
            }
            assert!(base + highest < 32768);
        }
    }

    #[test]
    fn results_are_summed_over_libtests_lines() {
        let output = "running 3 tests\n\
            test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.00s\n\
            test result: FAILED. 4 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 209.23s\n";
        assert_eq!(counts(output), (7, 1, 1));
        assert_eq!(counts("no summary at all"), (0, 0, 0));
    }
}
