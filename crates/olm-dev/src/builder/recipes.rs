//! How each component is built and checked: Kubernetes' commands, etcd, kwok and its stages,
//! and the distribution registry.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::go::{
    ModuleInfo, download_module, go_command, kubernetes_consumer_go_mod, kubernetes_ldflags,
    parse_go_mod,
};
use super::{Component, check_version, read_text, write_text};
use crate::error::{DevError, Result};
use crate::layout::{
    ETCD_VERSION, HELM_VERSION, KUBERNETES_VERSION, KWOK_VERSION, Layout, REGISTRY_VERSION, create_dir_all,
    staging_version,
};
use crate::run::{Progress, format_duration, run_step_with_retry};

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

/// The module of the CNCF distribution registry; its command is `<module>/cmd/registry`.
const REGISTRY_MODULE: &str = "github.com/distribution/distribution/v3";

pub(super) struct Kubernetes;

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
        build_kubernetes_commands(
            layout,
            progress,
            &self.dir_name(),
            &K8S_COMMANDS,
            &layout.k8s_bin_dir(),
            "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: 20-40 min on 2 cores)",
        )
    }
}

/// Builds Kubernetes `commands` (Go package paths) into `bin`: downloads k8s.io/kubernetes,
/// writes the consumer module `src/<dir_name>` replacing every staging module with its published
/// release, resolves and compiles. `what` names the commands and the expected time in progress.
pub(super) fn build_kubernetes_commands(
    layout: &Layout,
    progress: &Progress,
    dir_name: &str,
    commands: &[&str],
    bin: &Path,
    what: &str,
) -> Result<()> {
    let log = layout.build_log(dir_name);
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

    let src = layout.src_dir(dir_name);
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
            commands
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
    progress.say(format!("  [3/4] compile {what}"));
    create_dir_all(bin)?;
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
        cmd.args(commands);
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

pub(super) struct Etcd;

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

pub(super) struct Kwok;

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
        let package = format!("sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}");
        go_install(layout, progress, &log, &bin, "-s -w", &package)?;
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

pub(super) struct Registry;

impl Component for Registry {
    fn dir_name(&self) -> String {
        format!("registry-{REGISTRY_VERSION}")
    }
    fn title(&self) -> String {
        format!("distribution registry {REGISTRY_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.registry()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        // `registry --version` prints `<argv0> <module> <version>`.
        let expected = format!("{REGISTRY_MODULE} {REGISTRY_VERSION}");
        let summary = check_version(&layout.registry(), &["--version"], &expected)?;
        // Unstamped builds say `v3.0.0+unknown`, which also contains the expected text.
        if summary.split_whitespace().last() != Some(REGISTRY_VERSION) {
            return Err(DevError::WrongVersion {
                command: format!("{} --version", layout.registry().display()),
                expected,
                output: summary,
            });
        }
        Ok(summary)
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let log = layout.build_log(&self.dir_name());
        let bin = layout.registry_bin_dir();
        create_dir_all(&bin)?;

        let step = Instant::now();
        progress.say(format!(
            "  [1/1] go install {REGISTRY_MODULE}/cmd/registry@{REGISTRY_VERSION} (cold: 2-3 min on 2 cores)"
        ));
        // distribution's go.mod has no replace directives, so `go install pkg@version` works. The
        // version is stamped as upstream's Makefile does; without it `--version` says `+unknown`.
        let ldflags = format!(
            "-s -w -X {REGISTRY_MODULE}/version.version={REGISTRY_VERSION} -X {REGISTRY_MODULE}/version.mainpkg={REGISTRY_MODULE}"
        );
        let package = format!("{REGISTRY_MODULE}/cmd/registry@{REGISTRY_VERSION}");
        go_install(layout, progress, &log, &bin, &ldflags, &package)?;
        progress.say(format!(
            "  [1/1] done in {}",
            format_duration(step.elapsed())
        ));
        Ok(())
    }
}

/// Helm, for the tests that render and install OLM's chart (`olm release` writes it).
pub(super) struct Helm;

const HELM_MODULE: &str = "helm.sh/helm/v3";

impl Component for Helm {
    fn dir_name(&self) -> String {
        format!("helm-{HELM_VERSION}")
    }
    fn title(&self) -> String {
        format!("helm {HELM_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.helm()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        // `helm version --short` prints `v3.22.0+g<commit>` (or without the commit, unstamped).
        check_version(&layout.helm(), &["version", "--short"], HELM_VERSION)
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let log = layout.build_log(&self.dir_name());
        let bin = layout.helm_bin_dir();
        create_dir_all(&bin)?;
        let step = Instant::now();
        progress.say(format!("  [1/1] go install {HELM_MODULE}/cmd/helm@{HELM_VERSION} (cold: 2-4 min on 2 cores)"));
        // helm's go.mod has no replace directives; the version is stamped as its Makefile does.
        let ldflags = format!("-s -w -X {HELM_MODULE}/internal/version.version={HELM_VERSION}");
        go_install(layout, progress, &log, &bin, &ldflags, &format!("{HELM_MODULE}/cmd/helm@{HELM_VERSION}"))?;
        progress.say(format!("  [1/1] done in {}", format_duration(step.elapsed())));
        Ok(())
    }
}

/// `go install -ldflags <ldflags> <package@version>` into `bin`, from the cache's neutral `src/`
/// directory: for commands whose module has no replace directives.
pub(super) fn go_install(
    layout: &Layout,
    progress: &Progress,
    log: &Path,
    bin: &Path,
    ldflags: &str,
    package_at_version: &str,
) -> Result<()> {
    let neutral = layout.cache_dir.join("src");
    create_dir_all(&neutral)?;
    let make_install = || {
        let mut cmd = go_command(layout, &neutral);
        cmd.env("GOBIN", bin).args([
            "install",
            "-v",
            "-trimpath",
            "-ldflags",
            ldflags,
            package_at_version,
        ]);
        cmd
    };
    let name = package_at_version.rsplit('/').next().unwrap_or(package_at_version);
    let name = name.split('@').next().unwrap_or(name);
    run_step_with_retry(&format!("go install {name}"), &make_install, log, progress, false)?;
    Ok(())
}
