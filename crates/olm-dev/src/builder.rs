//! Building the control-plane binaries from the Go module proxy, once, into a versioned cache.
//!
//! Kubernetes and etcd cannot be built with `go install pkg@version` because their own go.mod
//! files carry replace directives; each gets a dedicated consumer module under `src/`. The
//! Kubernetes consumer replaces every staging module (derived from k/k's own go.mod, so the list
//! is right for whichever version we pin) with its published `v0.<minor>.<patch>` release.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Deserialize;

use crate::error::{DevError, Result};
use crate::layout::{
    ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION, Layout, create_dir_all, minor_of,
    staging_version,
};
use crate::run::{Progress, describe, format_duration, run_step_with_retry};

/// The Kubernetes commands we build, as Go package paths.
const K8S_COMMANDS: [&str; 4] = [
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "k8s.io/kubernetes/cmd/kubectl",
];

/// kwok stage files concatenated into the `--config` file. kwok v0.8.0 no longer falls back to
/// built-in stages, so without these it exits with "no stages found".
const KWOK_STAGE_FILES: [&str; 5] = [
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];

/// Name of the stamp file written into a component's bin directory after its binaries' versions
/// were checked.
const STAMP_FILE: &str = ".stamp";

/// Builds whatever is missing; a second call finds every stamp and builds nothing.
pub fn ensure_built(layout: &Layout, progress: &Progress) -> Result<()> {
    create_dir_all(&layout.cache_dir)?;
    let lock_path = layout.build_lock();
    let lock = File::create(&lock_path).map_err(|e| DevError::io("create", &lock_path, e))?;
    if lock.try_lock().is_err() {
        progress.say(format!(
            "another build holds {}; waiting for it",
            lock_path.display()
        ));
        lock.lock()
            .map_err(|e| DevError::io("lock", &lock_path, e))?;
    }
    let components: [&dyn Component; 3] = [&Kubernetes, &Etcd, &Kwok];
    for component in components {
        ensure_component(layout, progress, component)?;
    }
    Ok(())
}

/// Whether every component's stamp is present (i.e. `ensure_built` would build nothing).
pub fn is_built(layout: &Layout) -> bool {
    let components: [&dyn Component; 3] = [&Kubernetes, &Etcd, &Kwok];
    components.iter().all(|c| stamp_matches(layout, *c))
}

trait Component {
    /// Directory name under `src/` and `bin/`, e.g. `k8s-v1.36.3`.
    fn dir_name(&self) -> String;
    /// Human name with version.
    fn title(&self) -> String;
    /// Files that must exist in the bin directory.
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf>;
    /// Runs every binary's version command and checks the output; returns a summary.
    fn verify(&self, layout: &Layout) -> Result<String>;
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()>;
}

fn stamp_path(layout: &Layout, component: &dyn Component) -> PathBuf {
    layout.bin_dir(&component.dir_name()).join(STAMP_FILE)
}

fn stamp_matches(layout: &Layout, component: &dyn Component) -> bool {
    let Ok(text) = std::fs::read_to_string(stamp_path(layout, component)) else {
        return false;
    };
    text.lines().next() == Some(component.title().as_str())
        && component.outputs(layout).iter().all(|p| p.is_file())
}

fn ensure_component(layout: &Layout, progress: &Progress, component: &dyn Component) -> Result<()> {
    let title = component.title();
    if stamp_matches(layout, component) {
        progress.say(format!(
            "{title}: cached in {}",
            layout.bin_dir(&component.dir_name()).display()
        ));
        return Ok(());
    }
    // Binaries built earlier without a stamp (e.g. by hand) are accepted once their versions check out.
    if component.outputs(layout).iter().all(|p| p.is_file())
        && let Ok(summary) = component.verify(layout)
    {
        write_stamp(layout, component, &summary)?;
        progress.say(format!(
            "{title}: found existing binaries with the right version; stamped"
        ));
        return Ok(());
    }
    let started = Instant::now();
    progress.say(format!(
        "{title}: building (log: {})",
        layout.build_log(&component.dir_name()).display()
    ));
    component.build(layout, progress)?;
    let summary = component.verify(layout)?;
    write_stamp(layout, component, &summary)?;
    progress.say(format!(
        "{title}: built and verified in {}",
        format_duration(started.elapsed())
    ));
    Ok(())
}

fn write_stamp(layout: &Layout, component: &dyn Component, summary: &str) -> Result<()> {
    let path = stamp_path(layout, component);
    let text = format!("{}\n{summary}\n", component.title());
    std::fs::write(&path, text).map_err(|e| DevError::io("write", &path, e))
}

/// The `go` binary: `OLM_DEV_GO` or `go` from PATH.
fn go_program() -> PathBuf {
    std::env::var_os("OLM_DEV_GO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("go"))
}

/// A `go` command with the environment every build step uses: the cache's module and build
/// caches, no toolchain switching (a too-new requirement must fail loudly), static binaries, and
/// `-mod=mod` so missing go.sum lines are filled in rather than failing the build.
fn go_command(layout: &Layout, dir: &Path) -> Command {
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
struct DownloadedModule {
    #[serde(rename = "Dir")]
    dir: Option<String>,
    #[serde(rename = "GoMod")]
    go_mod: Option<String>,
    #[serde(rename = "Info")]
    info: Option<String>,
    #[serde(rename = "Error")]
    error: Option<String>,
    #[serde(rename = "Origin")]
    origin: Option<ModuleOrigin>,
}

#[derive(Debug, Deserialize)]
struct ModuleOrigin {
    #[serde(rename = "Hash")]
    hash: Option<String>,
}

/// The `.info` file of a downloaded module.
#[derive(Debug, Deserialize)]
struct ModuleInfo {
    #[serde(rename = "Time")]
    time: Option<String>,
}

/// Downloads one module (outside any module, in the neutral `src/` directory) and returns what
/// the go command reports about it.
fn download_module(
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

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| DevError::io("read", path, e))
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| DevError::io("write", path, e))
}

/// Facts we take from a go.mod file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct GoModFacts {
    /// The `go` directive, e.g. `1.26.0`.
    pub go_version: Option<String>,
    /// `godebug` settings (`default=go1.26`), copied so the binaries keep upstream runtime defaults.
    pub godebug: Vec<String>,
    /// Modules replaced by a directory under `./staging/src/`.
    pub staging_modules: Vec<String>,
}

/// Reads the `go` line, `godebug` settings and the staging replacements of a go.mod. Handles both
/// `replace a => ./staging/src/a` and the block form.
pub(crate) fn parse_go_mod(text: &str) -> GoModFacts {
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
pub(crate) fn kubernetes_consumer_go_mod(
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
pub(crate) fn kubernetes_ldflags(
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

/// Runs `<binary> <args>` and checks that its output contains `expected`.
fn check_version(binary: &Path, args: &[&str], expected: &str) -> Result<String> {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    let command = describe(&cmd);
    let output = cmd.output().map_err(|source| DevError::Spawn {
        command: command.clone(),
        source,
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = text.trim().to_string();
    if !output.status.success() || !text.contains(expected) {
        return Err(DevError::WrongVersion {
            command,
            expected: expected.to_string(),
            output: text,
        });
    }
    Ok(format!(
        "{}: {}",
        binary.display(),
        text.lines().next().unwrap_or("")
    ))
}

struct Kubernetes;

impl Component for Kubernetes {
    fn dir_name(&self) -> String {
        format!("k8s-{KUBERNETES_VERSION}")
    }
    fn title(&self) -> String {
        format!("kubernetes {KUBERNETES_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![
            layout.kube_apiserver(),
            layout.kube_controller_manager(),
            layout.kube_scheduler(),
            layout.kubectl(),
        ]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        let expected = format!("Kubernetes {KUBERNETES_VERSION}");
        let mut lines = Vec::new();
        for binary in [
            layout.kube_apiserver(),
            layout.kube_controller_manager(),
            layout.kube_scheduler(),
        ] {
            lines.push(check_version(&binary, &["--version"], &expected)?);
        }
        lines.push(check_version(
            &layout.kubectl(),
            &["version", "--client"],
            &format!("Client Version: {KUBERNETES_VERSION}"),
        )?);
        Ok(lines.join("\n"))
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let dir_name = self.dir_name();
        let log = layout.build_log(&dir_name);
        let staging =
            staging_version(KUBERNETES_VERSION).ok_or_else(|| DevError::UnexpectedOutput {
                command: "olm-dev version table".into(),
                reason: format!("{KUBERNETES_VERSION} is not of the form v1.<minor>.<patch>"),
            })?;

        let step = Instant::now();
        progress.say(format!(
            "  [1/4] download k8s.io/kubernetes@{KUBERNETES_VERSION}"
        ));
        let module = download_module(
            layout,
            progress,
            &log,
            &format!("k8s.io/kubernetes@{KUBERNETES_VERSION}"),
        )?;
        let go_mod_path = module.go_mod.as_deref().map(PathBuf::from).ok_or_else(|| {
            DevError::UnexpectedOutput {
                command: format!("go mod download -json k8s.io/kubernetes@{KUBERNETES_VERSION}"),
                reason: "no GoMod field".into(),
            }
        })?;
        let facts = parse_go_mod(&read_text(&go_mod_path)?);
        if facts.staging_modules.is_empty() {
            return Err(DevError::UnexpectedOutput {
                command: format!("read {}", go_mod_path.display()),
                reason: "k8s.io/kubernetes go.mod lists no ./staging/src replacements".into(),
            });
        }
        let build_date = module
            .info
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<ModuleInfo>(&t).ok())
            .and_then(|i| i.time);
        let commit = module.origin.and_then(|o| o.hash);
        progress.say(format!(
            "  [1/4] done in {}: {} staging modules replaced with {staging}",
            format_duration(step.elapsed()),
            facts.staging_modules.len()
        ));

        let src = layout.src_dir(&dir_name);
        create_dir_all(&src)?;
        write_text(
            &src.join("go.mod"),
            &kubernetes_consumer_go_mod(&facts, KUBERNETES_VERSION, &staging),
        )?;

        let step = Instant::now();
        progress.say("  [2/4] resolve dependencies (go get)");
        let make_get = || {
            let mut cmd = go_command(layout, &src);
            cmd.arg("get");
            cmd.args(
                K8S_COMMANDS
                    .iter()
                    .map(|c| format!("{c}@{KUBERNETES_VERSION}")),
            );
            cmd
        };
        run_step_with_retry(
            "go get kubernetes commands",
            &make_get,
            &log,
            progress,
            false,
        )?;
        progress.say(format!(
            "  [2/4] done in {}",
            format_duration(step.elapsed())
        ));

        let step = Instant::now();
        progress.say("  [3/4] compile kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: 20-40 min on 2 cores)");
        let bin = layout.k8s_bin_dir();
        create_dir_all(&bin)?;
        let ldflags =
            kubernetes_ldflags(KUBERNETES_VERSION, commit.as_deref(), build_date.as_deref());
        let out_dir = format!("{}/", bin.display());
        let make_build = || {
            let mut cmd = go_command(layout, &src);
            cmd.args([
                "build",
                "-v",
                "-trimpath",
                "-ldflags",
                &ldflags,
                "-o",
                &out_dir,
            ]);
            cmd.args(K8S_COMMANDS);
            cmd
        };
        run_step_with_retry(
            "go build kubernetes commands",
            &make_build,
            &log,
            progress,
            false,
        )?;
        progress.say(format!(
            "  [3/4] done in {}",
            format_duration(step.elapsed())
        ));
        progress.say("  [4/4] check versions");
        Ok(())
    }
}

struct Etcd;

impl Component for Etcd {
    fn dir_name(&self) -> String {
        format!("etcd-{ETCD_VERSION}")
    }
    fn title(&self) -> String {
        format!("etcd {ETCD_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.etcd()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        let bare = ETCD_VERSION.trim_start_matches('v');
        check_version(
            &layout.etcd(),
            &["--version"],
            &format!("etcd Version: {bare}"),
        )
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let dir_name = self.dir_name();
        let log = layout.build_log(&dir_name);
        let module_path = "go.etcd.io/etcd/server/v3";

        let step = Instant::now();
        progress.say(format!("  [1/3] download {module_path}@{ETCD_VERSION}"));
        let module = download_module(
            layout,
            progress,
            &log,
            &format!("{module_path}@{ETCD_VERSION}"),
        )?;
        let go_version = module
            .go_mod
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| parse_go_mod(&t).go_version);
        progress.say(format!(
            "  [1/3] done in {}",
            format_duration(step.elapsed())
        ));

        let src = layout.src_dir(&dir_name);
        create_dir_all(&src)?;
        let mut go_mod = String::from(
            "// Generated by olm-dev: builds etcd from its published module.\nmodule local.invalid/etcd-bin\n\n",
        );
        if let Some(go) = go_version {
            go_mod.push_str(&format!("go {go}\n\n"));
        }
        go_mod.push_str(&format!("require {module_path} {ETCD_VERSION}\n"));
        write_text(&src.join("go.mod"), &go_mod)?;

        let step = Instant::now();
        progress.say("  [2/3] resolve dependencies (go get)");
        let make_get = || {
            let mut cmd = go_command(layout, &src);
            cmd.args(["get", &format!("{module_path}@{ETCD_VERSION}")]);
            cmd
        };
        run_step_with_retry("go get etcd", &make_get, &log, progress, false)?;
        progress.say(format!(
            "  [2/3] done in {}",
            format_duration(step.elapsed())
        ));

        let step = Instant::now();
        progress.say("  [3/3] compile etcd");
        let out = layout.etcd();
        if let Some(parent) = out.parent() {
            create_dir_all(parent)?;
        }
        let out = out.display().to_string();
        let make_build = || {
            let mut cmd = go_command(layout, &src);
            cmd.args([
                "build",
                "-v",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                &out,
                module_path,
            ]);
            cmd
        };
        run_step_with_retry("go build etcd", &make_build, &log, progress, false)?;
        progress.say(format!(
            "  [3/3] done in {}",
            format_duration(step.elapsed())
        ));
        Ok(())
    }
}

struct Kwok;

impl Component for Kwok {
    fn dir_name(&self) -> String {
        format!("kwok-{KWOK_VERSION}")
    }
    fn title(&self) -> String {
        format!("kwok {KWOK_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.kwok(), layout.kwok_stages()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        let bare = KWOK_VERSION.trim_start_matches('v');
        let version = check_version(&layout.kwok(), &["--version"], bare)?;
        let stages = read_text(&layout.kwok_stages())?;
        let count = stages.matches("kind: Stage").count();
        if count < KWOK_STAGE_FILES.len() {
            return Err(DevError::UnexpectedOutput {
                command: format!("read {}", layout.kwok_stages().display()),
                reason: format!(
                    "expected {} Stage objects, found {count}",
                    KWOK_STAGE_FILES.len()
                ),
            });
        }
        Ok(format!(
            "{version}\n{}: {count} stages",
            layout.kwok_stages().display()
        ))
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let dir_name = self.dir_name();
        let log = layout.build_log(&dir_name);
        let module_at_version = format!("sigs.k8s.io/kwok@{KWOK_VERSION}");
        let bin = layout.kwok_bin_dir();
        create_dir_all(&bin)?;

        let step = Instant::now();
        progress.say(format!(
            "  [1/2] go install sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"
        ));
        // kwok's go.mod has no replace directives, so a plain `go install pkg@version` works.
        let neutral = layout.cache_dir.join("src");
        create_dir_all(&neutral)?;
        let make_install = || {
            let mut cmd = go_command(layout, &neutral);
            cmd.env("GOBIN", &bin).args([
                "install",
                "-v",
                "-trimpath",
                "-ldflags",
                "-s -w",
                &format!("sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"),
            ]);
            cmd
        };
        run_step_with_retry("go install kwok", &make_install, &log, progress, false)?;
        progress.say(format!(
            "  [1/2] done in {}",
            format_duration(step.elapsed())
        ));

        progress.say(
            "  [2/2] assemble the stage configuration from the module's kustomize/stage files",
        );
        let module = download_module(layout, progress, &log, &module_at_version)?;
        let dir = module
            .dir
            .map(PathBuf::from)
            .ok_or_else(|| DevError::UnexpectedOutput {
                command: format!("go mod download -json {module_at_version}"),
                reason: "no Dir field".into(),
            })?;
        let mut config = format!(
            "# Generated by olm-dev from {module_at_version}: the stages kwokctl uses by default.\n"
        );
        for file in KWOK_STAGE_FILES {
            let text = read_text(&dir.join(file))?;
            config.push_str(&format!("---\n# {file}\n"));
            config.push_str(text.trim_start_matches("---\n").trim_end());
            config.push('\n');
        }
        write_text(&layout.kwok_stages(), &config)?;
        Ok(())
    }
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

    #[test]
    fn stamp_requires_title_and_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            cache_dir: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            ports: Default::default(),
            host_ports: Default::default(),
        };
        assert!(!stamp_matches(&layout, &Etcd));
        std::fs::create_dir_all(layout.etcd().parent().unwrap()).unwrap();
        write_stamp(&layout, &Etcd, "summary").unwrap();
        // Stamp without the binary: not built.
        assert!(!stamp_matches(&layout, &Etcd));
        std::fs::write(layout.etcd(), "").unwrap();
        assert!(stamp_matches(&layout, &Etcd));
        std::fs::write(stamp_path(&layout, &Etcd), "etcd v0.0.1\n").unwrap();
        assert!(!stamp_matches(&layout, &Etcd));
    }
}
