//! The test binaries `cargo test --workspace` would run, built by it (`--no-run`) and read
//! from its JSON messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::schedule::{E2E_PACKAGE, Job, REAL_NODE_SUITES};

/// Builds every test binary of the workspace, as `cargo test --workspace` does; compiler
/// messages go to the terminal as usual.
pub fn build(workspace: &Path) -> Result<Vec<Job>, String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    // Cargo renders the compiler's diagnostics on stderr itself; stdout holds one JSON message
    // per line for the rest.
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "`cargo test --workspace --no-run` failed ({})",
            output.status
        ));
    }
    Ok(test_binaries(&stdout))
}

/// The test executables in cargo's messages, each once.
pub fn test_binaries(messages: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let (Some(executable), Some(target), Some(manifest)) = (
            message["executable"].as_str(),
            message["target"]["name"].as_str(),
            message["manifest_path"].as_str(),
        ) else {
            continue;
        };
        let dir = Path::new(manifest)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let package = package_name(&message).unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let end_to_end = package == E2E_PACKAGE;
        let job = Job {
            name: format!("{package}/{target}"),
            program: PathBuf::from(executable),
            args: Vec::new(),
            dir,
            real_node: end_to_end && REAL_NODE_SUITES.contains(&target),
            end_to_end,
        };
        if !jobs.iter().any(|j| j.program == job.program) {
            jobs.push(job);
        }
    }
    jobs
}

/// The package's name from its id: `path+file:///…/crates/olm#0.1.0` names the directory,
/// `path+file:///…/tests#olm-e2e@0.1.0` the package when it differs from the directory.
fn package_name(message: &serde_json::Value) -> Option<String> {
    let id = message["package_id"].as_str()?;
    let (path, fragment) = id.rsplit_once('#')?;
    Some(match fragment.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => path.rsplit('/').next()?.to_owned(),
    })
}

/// The doctests, which only cargo runs (`--doc`): one job of their own.
pub fn doctests(workspace: &Path) -> Job {
    Job {
        name: "doctests".into(),
        program: PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())),
        args: ["test", "--workspace", "--doc"].map(String::from).to_vec(),
        dir: workspace.to_path_buf(),
        real_node: false,
        end_to_end: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_executables_are_read_from_cargos_messages() {
        let messages = [
            // A library built for the tests' use: no executable.
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/olm-api#0.1.0","manifest_path":"/w/crates/olm-api/Cargo.toml","target":{"name":"olm_api","kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/olm-api#0.1.0","manifest_path":"/w/crates/olm-api/Cargo.toml","target":{"name":"olm_api","kind":["lib"]},"profile":{"test":true},"executable":"/w/target/debug/deps/olm_api-1"}"#,
            // The olm binary, built for the integration tests: not a test itself.
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/olm#0.1.0","manifest_path":"/w/crates/olm/Cargo.toml","target":{"name":"olm","kind":["bin"]},"profile":{"test":false},"executable":"/w/target/debug/olm"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#olm-e2e@0.1.0","manifest_path":"/w/tests/Cargo.toml","target":{"name":"in_cluster","kind":["test"]},"profile":{"test":true},"executable":"/w/target/debug/deps/in_cluster-2"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#olm-e2e@0.1.0","manifest_path":"/w/tests/Cargo.toml","target":{"name":"quickstart","kind":["test"]},"profile":{"test":true},"executable":"/w/target/debug/deps/quickstart-3"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
        ]
        .join("\n");
        let jobs = test_binaries(&messages);
        let summary: Vec<_> = jobs
            .iter()
            .map(|j| {
                (
                    j.name.as_str(),
                    j.dir.to_str().unwrap(),
                    j.real_node,
                    j.end_to_end,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("olm-api/olm_api", "/w/crates/olm-api", false, false),
                ("olm-e2e/in_cluster", "/w/tests", true, true),
                ("olm-e2e/quickstart", "/w/tests", false, true),
            ]
        );
        assert_eq!(
            jobs[1].program,
            PathBuf::from("/w/target/debug/deps/in_cluster-2")
        );
    }
}
