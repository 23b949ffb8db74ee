//! `olm dev image build`: the repository's Dockerfile, the one users build, built here with
//! buildah (Debian's; no daemon) and pushed to the dev registry. Public registries cannot be
//! reached here, so its two base images are substituted through the Dockerfile's build
//! arguments with equivalents made locally (see [`bases`]): `BUILD_IMAGE` a Debian bookworm
//! rootfs (debootstrap) with this machine's Rust toolchain, `RUNTIME_IMAGE` a distroless-like
//! image (glibc, libgcc_s, CA certificates, user 65532) taken from the same rootfs.
//!
//! buildah keeps its storage (overlay) and the Dockerfile's cache mounts (cargo's registry and
//! target directory) under the cache directory, so a second build recompiles only what changed.

mod bases;
mod small;

pub use small::{SmallBase, SmallFile, build_small_image};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all};
use crate::run::{Progress, format_duration, run_step};

/// Where the image goes in the dev registry: `<registry>/olm/olm`.
pub const OLM_IMAGE_REPOSITORY: &str = "olm/olm";
/// The tag it gets there (it is referenced by digest everywhere).
pub const OLM_IMAGE_TAG: &str = "dev";
/// Its name in buildah's local storage.
const LOCAL_NAME: &str = "localhost/olm-dev/olm:dev";

/// Debian packages the builder needs, and a file each installs.
const PACKAGES: [(&str, &str); 2] = [("buildah", "/usr/bin/buildah"), ("debootstrap", "/usr/sbin/debootstrap")];

/// What [`build_olm_image`] made.
#[derive(Debug, Clone)]
pub struct BuiltOlmImage {
    /// `<registry>/olm/olm@sha256:…`, what a pod spec names.
    pub reference: String,
    /// Time spent making the base images (zero when they were cached).
    pub bases_elapsed: Duration,
    /// Time of `buildah bud` (the Dockerfile).
    pub build_elapsed: Duration,
    /// Time of the push to the registry.
    pub push_elapsed: Duration,
}

/// buildah with its storage under the cache directory.
pub(crate) struct Buildah {
    root: PathBuf,
    runroot: PathBuf,
    tmp: PathBuf,
    log: PathBuf,
}

impl Buildah {
    fn new(layout: &Layout) -> Buildah {
        let dir = layout.cache_dir.join("buildah");
        Buildah {
            root: dir.join("storage"),
            runroot: dir.join("run"),
            // buildah keeps `RUN --mount=type=cache` directories under $TMPDIR/buildah-cache-<uid>.
            tmp: dir.join("tmp"),
            log: layout.cache_dir.join("logs").join("buildah.log"),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("buildah");
        cmd.env("TMPDIR", &self.tmp)
            .arg(format!("--root={}", self.root.display()))
            .arg(format!("--runroot={}", self.runroot.display()))
            .arg("--storage-driver=overlay")
            .args(args);
        cmd
    }

    /// Runs one buildah command; its output goes to the log, stdout is returned trimmed.
    fn run(&self, step: &str, args: &[&str], progress: &Progress) -> Result<String> {
        create_dir_all(&self.tmp)?;
        run_step(step, &mut self.command(args), &self.log, progress, true).map(|out| out.trim().to_owned())
    }

    fn has_image(&self, name: &str) -> bool {
        self.command(&["inspect", "--type", "image", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// The release profile's `opt-level` for the image: `OLM_DEV_IMAGE_OPT_LEVEL` (0-3), else 3
/// (cargo's default, what users build). CI builds with 0: the image is tested for what it does,
/// and a cold optimised build takes twice as long.
fn opt_level() -> Result<String> {
    match std::env::var("OLM_DEV_IMAGE_OPT_LEVEL") {
        Err(_) => Ok("3".to_owned()),
        Ok(value) if ["0", "1", "2", "3", "s", "z"].contains(&value.trim()) => Ok(value.trim().to_owned()),
        Ok(value) => Err(DevError::UnexpectedOutput {
            command: "OLM_DEV_IMAGE_OPT_LEVEL".into(),
            reason: format!("{value:?} is not a cargo opt-level: use 0, 1, 2, 3, s or z"),
        }),
    }
}

/// Builds `<source>/Dockerfile` (the repository's) with the local base images and pushes it to
/// `<registry>/olm/olm:dev`. Needs root (debootstrap, buildah's overlay storage).
pub fn build_olm_image(layout: &Layout, progress: &Progress, source: &Path, registry: &str) -> Result<BuiltOlmImage> {
    crate::run::require_root("olm dev image build (debootstrap and buildah)")?;
    let dockerfile = source.join("Dockerfile");
    if !dockerfile.is_file() {
        return Err(DevError::UnexpectedOutput {
            command: "olm dev image build".into(),
            reason: format!("{} does not exist: run from the repository root or pass --source DIR", dockerfile.display()),
        });
    }
    crate::debian::ensure_packages(layout, progress, "image-build", &PACKAGES)?;
    let buildah = Buildah::new(layout);

    let started = Instant::now();
    let bases = bases::ensure_bases(&buildah, layout, progress, source)?;
    let bases_elapsed = started.elapsed();

    let started = Instant::now();
    let opt_level = opt_level()?;
    let opt_arg = format!("CARGO_PROFILE_RELEASE_OPT_LEVEL={opt_level}");
    progress.say(format!(
        "buildah bud {} (BUILD_IMAGE={}, RUNTIME_IMAGE={}, opt-level {opt_level}; a cold build takes 6-12 min on 2 cores, log {})",
        dockerfile.display(),
        bases.build,
        bases.runtime,
        buildah.log.display()
    ));
    let build_arg = format!("BUILD_IMAGE={}", bases.build);
    let runtime_arg = format!("RUNTIME_IMAGE={}", bases.runtime);
    let file_arg = dockerfile.display().to_string();
    let context = source.display().to_string();
    buildah.run(
        "buildah bud",
        &[
            "bud",
            // chroot isolation: no network namespace, so no iptables chains are left behind.
            "--isolation=chroot",
            "--pull-never",
            "--build-arg",
            &build_arg,
            "--build-arg",
            &runtime_arg,
            "--build-arg",
            &opt_arg,
            "-t",
            LOCAL_NAME,
            "-f",
            &file_arg,
            &context,
        ],
        progress,
    )?;
    let build_elapsed = started.elapsed();

    let started = Instant::now();
    let reference = push(&buildah, progress, LOCAL_NAME, &format!("{registry}/{OLM_IMAGE_REPOSITORY}:{OLM_IMAGE_TAG}"))?;
    let push_elapsed = started.elapsed();
    progress.say(format!(
        "image {reference} (bases {}, build {}, push {})",
        format_duration(bases_elapsed),
        format_duration(build_elapsed),
        format_duration(push_elapsed)
    ));
    Ok(BuiltOlmImage { reference, bases_elapsed, build_elapsed, push_elapsed })
}

/// Pushes the local image `local` to `destination` (`host:port/repo:tag`, plain HTTP allowed);
/// returns `host:port/repo@sha256:…`.
fn push(buildah: &Buildah, progress: &Progress, local: &str, destination: &str) -> Result<String> {
    create_dir_all(&buildah.tmp)?;
    let digest_file = buildah.tmp.join(format!("push-{}.digest", std::process::id()));
    let digest_arg = format!("--digestfile={}", digest_file.display());
    let target = format!("docker://{destination}");
    buildah.run("buildah push", &["push", "--tls-verify=false", &digest_arg, local, &target], progress)?;
    let digest = std::fs::read_to_string(&digest_file).map_err(|e| DevError::io("read", &digest_file, e))?;
    let _ = std::fs::remove_file(&digest_file);
    let digest = digest.trim();
    if !digest.starts_with("sha256:") {
        return Err(DevError::UnexpectedOutput {
            command: "buildah push".into(),
            reason: format!("the digest file {} holds {digest:?}, not a sha256 digest", digest_file.display()),
        });
    }
    Ok(format!("{}@{digest}", repository_of(destination)))
}

/// `host:port/repo:tag` → `host:port/repo`; a bare `host:port/repo` has no tag to drop.
fn repository_of(image: &str) -> &str {
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_is_dropped_but_not_the_port() {
        assert_eq!(repository_of("127.0.0.1:28500/olm/olm:dev"), "127.0.0.1:28500/olm/olm");
        assert_eq!(repository_of("127.0.0.1:28500/olm/olm"), "127.0.0.1:28500/olm/olm");
        assert_eq!(repository_of("registry.example/x:v1"), "registry.example/x");
    }
}
