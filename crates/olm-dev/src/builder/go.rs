//! The go command as every build step runs it, module downloads, and go.mod files: the facts
//! read from upstream's, the consumer module written for Kubernetes, and its version ldflags.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all, minor_of};
use crate::run::{Progress, describe, run_step_with_retry};

/// The `go` binary: `OLM_DEV_GO` or `go` from PATH.
pub(super) fn go_program() -> PathBuf {
    std::env::var_os("OLM_DEV_GO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("go"))
}

/// A `go` command with the environment every build step uses: the cache's module and build
/// caches, no toolchain switching (a too-new requirement must fail loudly), static binaries, and
/// `-mod=mod` so missing go.sum lines are filled in rather than failing the build.
pub(super) fn go_command(layout: &Layout, dir: &Path) -> Command {
    let mut cmd = Command::new(go_program());
    cmd.current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .env("GOMODCACHE", layout.go_mod_cache())
        .env("GOCACHE", layout.go_build_cache());
    cmd
}

/// What `go mod download -json` prints for one module.
#[derive(Debug, Deserialize)]
pub(super) struct DownloadedModule {
    #[serde(rename = "Dir")]
    pub(super) dir: Option<String>,
    #[serde(rename = "GoMod")]
    pub(super) go_mod: Option<String>,
    #[serde(rename = "Info")]
    pub(super) info: Option<String>,
    #[serde(rename = "Error")]
    pub(super) error: Option<String>,
    #[serde(rename = "Origin")]
    pub(super) origin: Option<ModuleOrigin>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ModuleOrigin {
    #[serde(rename = "Hash")]
    pub(super) hash: Option<String>,
}

/// The `.info` file of a downloaded module.
#[derive(Debug, Deserialize)]
pub(super) struct ModuleInfo {
    #[serde(rename = "Time")]
    pub(super) time: Option<String>,
}

/// Downloads one module (outside any module, in the neutral `src/` directory) and returns what
/// the go command reports about it.
pub(super) fn download_module(
    layout: &Layout,
    progress: &Progress,
    log: &Path,
    module_at_version: &str,
) -> Result<DownloadedModule> {
    let neutral = layout.cache_dir.join("src");
    create_dir_all(&neutral)?;
    let make = || {
        let mut cmd = go_command(layout, &neutral);
        cmd.args(["mod", "download", "-json", module_at_version]);
        cmd
    };
    let out = run_step_with_retry(
        &format!("go mod download {module_at_version}"),
        &make,
        log,
        progress,
        true,
    )?;
    let command = describe(&make());
    let module: DownloadedModule =
        serde_json::from_str(&out).map_err(|e| DevError::UnexpectedOutput {
            command: command.clone(),
            reason: e.to_string(),
        })?;
    if let Some(error) = &module.error {
        return Err(DevError::UnexpectedOutput {
            command,
            reason: error.clone(),
        });
    }
    Ok(module)
}

/// Facts we take from a go.mod file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct GoModFacts {
    /// The `go` directive, e.g. `1.26.0`.
    pub(super) go_version: Option<String>,
    /// `godebug` settings (`default=go1.26`), copied so the binaries keep upstream runtime defaults.
    pub(super) godebug: Vec<String>,
    /// Modules replaced by a directory under `./staging/src/`.
    pub(super) staging_modules: Vec<String>,
}

/// Reads the `go` line, `godebug` settings and the staging replacements of a go.mod. Handles both
/// `replace a => ./staging/src/a` and the block form.
pub(super) fn parse_go_mod(text: &str) -> GoModFacts {
    let mut facts = GoModFacts::default();
    let mut block: Option<&str> = None;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line == ")" {
            block = None;
            continue;
        }
        let (directive, rest) = match block {
            Some(directive) => (directive, line),
            None => {
                let mut split = line.splitn(2, char::is_whitespace);
                let directive = split.next().unwrap_or("");
                let rest = split.next().unwrap_or("").trim();
                if rest == "(" {
                    block = Some(match directive {
                        "replace" => "replace",
                        "godebug" => "godebug",
                        _ => "other",
                    });
                    continue;
                }
                (directive, rest)
            }
        };
        match directive {
            "go" => facts.go_version = Some(rest.to_string()),
            "godebug" => facts.godebug.push(rest.to_string()),
            "replace" => {
                let fields: Vec<&str> = rest.split_whitespace().collect();
                if fields.len() >= 3 && fields[1] == "=>" && fields[2].starts_with("./staging/src/")
                {
                    facts.staging_modules.push(fields[0].to_string());
                }
            }
            _ => {}
        }
    }
    facts
}

/// The consumer go.mod for building Kubernetes commands.
pub(super) fn kubernetes_consumer_go_mod(
    facts: &GoModFacts,
    k8s_version: &str,
    staging: &str,
) -> String {
    let mut text = String::from(
        "// Generated by olm-dev: builds Kubernetes commands from published modules.\nmodule local.invalid/k8s-bins\n\n",
    );
    if let Some(go) = &facts.go_version {
        text.push_str(&format!("go {go}\n\n"));
    }
    for setting in &facts.godebug {
        text.push_str(&format!("godebug {setting}\n"));
    }
    if !facts.godebug.is_empty() {
        text.push('\n');
    }
    text.push_str(&format!(
        "require k8s.io/kubernetes {k8s_version}\n\nreplace (\n"
    ));
    for module in &facts.staging_modules {
        text.push_str(&format!("\t{module} => {module} {staging}\n"));
    }
    text.push_str(")\n");
    text
}

/// `-X` flags that stamp the version into both places Kubernetes reads it from, as upstream's
/// `hack/lib/version.sh` does; without them `/version` reports `v0.0.0-master`.
pub(super) fn kubernetes_ldflags(
    version: &str,
    commit: Option<&str>,
    build_date: Option<&str>,
) -> String {
    let minor = minor_of(version).unwrap_or("0");
    let mut flags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        flags.push_str(&format!(
            " -X {package}.gitVersion={version} -X {package}.gitMajor=1 -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
        if let Some(commit) = commit {
            flags.push_str(&format!(" -X {package}.gitCommit={commit}"));
        }
        if let Some(date) = build_date {
            flags.push_str(&format!(" -X {package}.buildDate={date}"));
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    const KK_GO_MOD: &str = r#"// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/google/go-cmp v0.7.0
	k8s.io/api v0.0.0
	k8s.io/utils v0.0.0-20260108192941-914a6e750570
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
	k8s.io/streaming => ./staging/src/k8s.io/streaming
	example.com/fork => example.com/fork v1.2.3
)

replace k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
"#;

    #[test]
    fn staging_modules_come_from_the_go_mod() {
        let facts = parse_go_mod(KK_GO_MOD);
        assert_eq!(facts.go_version.as_deref(), Some("1.26.0"));
        assert_eq!(facts.godebug, vec!["default=go1.26".to_string()]);
        assert_eq!(
            facts.staging_modules,
            vec![
                "k8s.io/api",
                "k8s.io/apimachinery",
                "k8s.io/streaming",
                "k8s.io/sample-controller"
            ]
        );
    }

    #[test]
    fn consumer_go_mod_replaces_each_staging_module() {
        let facts = parse_go_mod(KK_GO_MOD);
        let text = kubernetes_consumer_go_mod(&facts, "v1.36.3", "v0.36.3");
        assert!(text.contains("go 1.26.0\n"), "{text}");
        assert!(text.contains("godebug default=go1.26\n"), "{text}");
        assert!(
            text.contains("require k8s.io/kubernetes v1.36.3\n"),
            "{text}"
        );
        assert!(
            text.contains("\tk8s.io/api => k8s.io/api v0.36.3\n"),
            "{text}"
        );
        assert!(
            text.contains("\tk8s.io/streaming => k8s.io/streaming v0.36.3\n"),
            "{text}"
        );
        assert!(!text.contains("utils"), "{text}");
        assert!(!text.contains("fork"), "{text}");
    }

    #[test]
    fn ldflags_stamp_both_version_packages() {
        let flags = kubernetes_ldflags("v1.36.3", Some("abc"), Some("2026-07-23T00:00:00Z"));
        for package in [
            "k8s.io/component-base/version",
            "k8s.io/client-go/pkg/version",
        ] {
            assert!(
                flags.contains(&format!("-X {package}.gitVersion=v1.36.3")),
                "{flags}"
            );
            assert!(
                flags.contains(&format!("-X {package}.gitMinor=36")),
                "{flags}"
            );
            assert!(
                flags.contains(&format!("-X {package}.gitCommit=abc")),
                "{flags}"
            );
            assert!(
                flags.contains(&format!("-X {package}.buildDate=2026-07-23T00:00:00Z")),
                "{flags}"
            );
        }
        assert!(flags.starts_with("-s -w"));
    }
}
