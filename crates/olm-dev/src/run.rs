//! Running external commands with their output in a log file and a visible heartbeat, and
//! reporting progress to the user.

use std::fmt::Display;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{DevError, Result};

/// Progress lines on stderr, each prefixed with the time since the operation began.
#[derive(Debug, Clone)]
pub struct Progress {
    start: Instant,
    quiet: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            start: Instant::now(),
            quiet: false,
        }
    }

    /// A reporter that prints nothing (errors still carry all details).
    pub fn quiet() -> Self {
        Progress {
            start: Instant::now(),
            quiet: true,
        }
    }

    pub fn say(&self, message: impl Display) {
        if !self.quiet {
            eprintln!("[{:>7}] {message}", format_duration(self.start.elapsed()));
        }
    }

    /// Time since this reporter was created.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// `12.3s`, `4m05s`: short enough for a progress prefix.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

/// Renders a command the way a user could paste it into a shell (with its directory and the
/// environment variables we set explicitly).
pub fn describe(cmd: &Command) -> String {
    let mut out = String::new();
    if let Some(dir) = cmd.get_current_dir() {
        out.push_str(&format!("cd {} && ", shell_quote(&dir.to_string_lossy())));
    }
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            out.push_str(&format!(
                "{}={} ",
                key.to_string_lossy(),
                shell_quote(&value.to_string_lossy())
            ));
        }
    }
    out.push_str(&shell_quote(&cmd.get_program().to_string_lossy()));
    for arg in cmd.get_args() {
        out.push(' ');
        out.push_str(&shell_quote(&arg.to_string_lossy()));
    }
    out
}

/// Single-quotes a word for POSIX shells when it contains anything but safe characters.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The last `max_lines` lines of a file (reads at most its last 64 KiB).
pub fn tail_file(path: &Path, max_lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let window = 64 * 1024;
    if len > window {
        let _ = file.seek(SeekFrom::Start(len - window));
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return format!("(cannot read {})", path.display());
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(max_lines);
    lines[from..].join("\n")
}

/// Fails unless we are root, naming `what` needs it.
pub(crate) fn require_root(what: &str) -> Result<()> {
    if rustix::process::geteuid().is_root() {
        Ok(())
    } else {
        Err(DevError::NeedsRoot { what: what.to_owned() })
    }
}

/// What the output readers share with the heartbeat loop.
#[derive(Default)]
struct OutputState {
    lines: u64,
    last: String,
}

/// Runs one build step: output goes to `log` (appended, with a header naming the command), a
/// heartbeat with the latest output line is printed every `heartbeat` so long steps are not
/// silent. Returns stdout when `capture_stdout` is set (stdout then does not go to the log).
pub(crate) fn run_step(
    step: &str,
    cmd: &mut Command,
    log: &Path,
    progress: &Progress,
    capture_stdout: bool,
) -> Result<String> {
    let heartbeat = Duration::from_secs(20);
    let command = describe(cmd);
    if let Some(parent) = log.parent() {
        crate::layout::create_dir_all(parent)?;
    }
    let mut log_file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| DevError::io("open log file", log, e))?;
    writeln!(log_file, "\n=== step `{step}`\n$ {command}")
        .map_err(|e| DevError::io("write log file", log, e))?;
    let log_file = Arc::new(Mutex::new(log_file));
    let state = Arc::new(Mutex::new(OutputState::default()));

    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| {
        let program = cmd.get_program().to_string_lossy();
        let is_go = program == "go" || program.ends_with("/go");
        if source.kind() == std::io::ErrorKind::NotFound && is_go {
            DevError::GoMissing {
                program: cmd.get_program().to_string_lossy().into_owned(),
                command: command.clone(),
            }
        } else {
            DevError::Spawn {
                command: command.clone(),
                source,
            }
        }
    })?;

    let mut readers = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        readers.push(spawn_line_copier(stderr, log_file.clone(), state.clone()));
    }
    let stdout_reader = child.stdout.take().map(|stdout| {
        if capture_stdout {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = BufReader::new(stdout).read_to_string(&mut text);
                text
            })
        } else {
            let copier = spawn_line_copier(stdout, log_file.clone(), state.clone());
            std::thread::spawn(move || {
                let _ = copier.join();
                String::new()
            })
        }
    });

    let mut next_heartbeat = heartbeat;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return Err(DevError::Spawn { command, source: e });
            }
        }
        if started.elapsed() >= next_heartbeat {
            let (lines, last) = state
                .lock()
                .map(|s| (s.lines, s.last.clone()))
                .unwrap_or_default();
            progress.say(format!(
                "  {step}: running for {} ({lines} output lines; latest: {})",
                format_duration(started.elapsed()),
                if last.is_empty() { "-" } else { last.as_str() }
            ));
            next_heartbeat += heartbeat;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for reader in readers {
        let _ = reader.join();
    }
    let stdout = stdout_reader
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    if let Ok(mut file) = log_file.lock() {
        let _ = writeln!(
            file,
            "=== step `{step}` finished with {status} after {}",
            format_duration(started.elapsed())
        );
    }
    if !status.success() {
        return Err(DevError::CommandFailed {
            step: step.to_string(),
            command,
            status: status.to_string(),
            log: log.to_path_buf(),
            tail: tail_file(log, 40),
        });
    }
    Ok(stdout)
}

fn spawn_line_copier(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<File>>,
    state: Arc<Mutex<OutputState>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let reader = BufReader::new(stream);
        for line in reader.split(b'\n') {
            let Ok(line) = line else { break };
            let text = String::from_utf8_lossy(&line);
            if let Ok(mut file) = log.lock() {
                let _ = writeln!(file, "{text}");
            }
            if let Ok(mut s) = state.lock() {
                s.lines += 1;
                s.last = text.chars().take(160).collect();
            }
        }
    })
}

/// Runs a step, and once more if it fails: module downloads through a proxy fail transiently.
pub(crate) fn run_step_with_retry(
    step: &str,
    make: &dyn Fn() -> Command,
    log: &Path,
    progress: &Progress,
    capture_stdout: bool,
) -> Result<String> {
    match run_step(step, &mut make(), log, progress, capture_stdout) {
        Ok(out) => Ok(out),
        Err(first) => {
            progress.say(format!(
                "  {step} failed ({}); retrying once",
                first.category()
            ));
            run_step(step, &mut make(), log, progress, capture_stdout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_description() {
        assert_eq!(shell_quote("-ldflags=-s"), "-ldflags=-s");
        assert_eq!(shell_quote("-s -w"), "'-s -w'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let mut cmd = Command::new("go");
        cmd.current_dir("/tmp/x")
            .env("GOFLAGS", "-mod=mod")
            .args(["build", "a b"]);
        assert_eq!(
            describe(&cmd),
            "cd /tmp/x && GOFLAGS=-mod=mod go build 'a b'"
        );
    }

    #[test]
    fn failed_step_reports_command_and_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("step.log");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo first; echo 'broken module' >&2; exit 3"]);
        let err = run_step("demo", &mut cmd, &log, &Progress::quiet(), false).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("step `demo` failed"), "{text}");
        assert!(text.contains("sh -c"), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("broken module"), "{text}");
        assert_eq!(err.category(), "CommandFailed");
    }

    #[test]
    fn missing_go_says_what_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(dir.path().join("go"));
        cmd.args(["version"]);
        let err = run_step(
            "go",
            &mut cmd,
            &dir.path().join("log"),
            &Progress::quiet(),
            false,
        )
        .unwrap_err();
        assert_eq!(err.category(), "GoMissing");
        assert!(err.to_string().contains("OLM_DEV_GO"), "{err}");
    }

    #[test]
    fn captured_stdout_is_returned() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("step.log");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo '{\"a\":1}'; echo noise >&2"]);
        let out = run_step("json", &mut cmd, &log, &Progress::quiet(), true).unwrap();
        assert_eq!(out.trim(), "{\"a\":1}");
        assert!(tail_file(&log, 5).contains("noise"));
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(245)), "4m05s");
    }
}
