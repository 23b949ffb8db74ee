//! `olm catalog serve` stops gracefully on a SIGTERM sent right after its ready line: the
//! handler is installed before the line is printed (a fuzz saw 9 of 60 quick stops killed
//! before, when the handler came after the line).

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigterm_right_after_the_ready_line_is_a_graceful_exit() {
    let catalog = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogs/community");
    let rounds = 20;
    for round in 0..rounds {
        let mut child = Command::new(env!("CARGO_BIN_EXE_olm"))
            .args(["catalog", "serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "community=127.0.0.1:0"])
            .arg("--catalog")
            .arg(format!("community={}", catalog.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start olm catalog serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.expect("read stdout");
            let ready = line.starts_with("gRPC api.Registry for catalog community on");
            seen.push(line);
            if ready {
                break;
            }
        }
        assert!(seen.last().is_some_and(|l| l.starts_with("gRPC")), "round {round}: no ready line: {seen:?}");
        // At once (no `kill` process to start): the window a late handler leaves is short.
        let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "round {round}: still running 30 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "round {round}: {status} (a signal's default action kills; a graceful stop exits 0); stdout after: {rest:?}");
        assert!(rest.iter().any(|l| l == "shutting down"), "round {round}: {rest:?}");
    }
}
