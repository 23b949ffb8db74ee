//! The Dockerfile's base images, made here because public registries cannot be reached:
//!
//! - **build** (`BUILD_IMAGE`, upstream `rust:1-bookworm`): Debian bookworm from debootstrap
//!   (minbase plus gcc, libc6-dev, make, pkg-config, CA certificates) with the Rust toolchain
//!   this machine builds the workspace with, at `/usr/local/rust`, `CARGO_HOME=/usr/local/cargo`
//!   as in the official image.
//! - **runtime** (`RUNTIME_IMAGE`, upstream `gcr.io/distroless/cc-debian12:nonroot`): what
//!   distroless/cc takes from the same Debian packages: the files of `libc6` and `libgcc-s1`,
//!   the CA bundle (the host's, see [`HOST_CA_BUNDLE`]), `/etc/passwd` and `/etc/group` with `nonroot` (65532), a sticky `/tmp`.
//!
//! Both are kept in buildah's storage, named by their recipe version (and the toolchain's),
//! and made again only when those change.

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Buildah;
use crate::error::{DevError, Result};
use crate::layout::{Layout, create_dir_all};
use crate::run::{Progress, describe, run_step};

/// Bump when what goes into the images changes.
const RECIPE: &str = "r2";
/// Bump when the debootstrap rootfs changes (its packages).
const ROOTFS_RECIPE: &str = "r1";
const DEBIAN_SUITE: &str = "bookworm";
/// Debian mirror for debootstrap (`OLM_DEV_DEBIAN_MIRROR` overrides it).
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
/// What the build stage needs besides minbase: a C compiler and make (ring, jemalloc).
const BUILD_PACKAGES: &str = "gcc,libc6-dev,make,pkg-config,ca-certificates";
/// Debian packages whose files make the runtime image (as distroless/cc's do).
const RUNTIME_PACKAGES: [&str; 2] = ["libc6:amd64", "libgcc-s1:amd64"];
/// The host's CA bundle, which goes into both images: Debian's CAs plus any the host adds
/// (a TLS-intercepting proxy's, say), so that cargo in the build and OLM's pulls trust what the
/// host trusts.
const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Top-level directories of a rootfs not copied into an image (the runtime provides them).
const VIRTUAL_DIRS: [&str; 3] = ["dev", "proc", "sys"];

/// The two base images, by their names in buildah's storage.
pub(super) struct Bases {
    pub(super) build: String,
    pub(super) runtime: String,
}

fn runtime_name() -> String {
    format!("localhost/olm-dev/distroless-cc:nonroot-{DEBIAN_SUITE}-{RECIPE}")
}

/// The runtime base alone (for small images of dynamically linked binaries), made if missing.
pub(super) fn ensure_runtime_base(buildah: &Buildah, layout: &Layout, progress: &Progress) -> Result<String> {
    let name = runtime_name();
    if !buildah.has_image(&name) {
        let rootfs = ensure_rootfs(layout, progress)?;
        make_runtime(buildah, progress, &name, &rootfs)?;
    }
    Ok(name)
}

fn make_runtime(buildah: &Buildah, progress: &Progress, name: &str, rootfs: &Path) -> Result<()> {
    progress.say(format!("making base image {name} (libc6, libgcc-s1, CA certificates, user nonroot)"));
    let env = ["PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"];
    make_image(buildah, progress, name, &env, Some("65532:65532"), |mnt| runtime_files(rootfs, mnt))
}

/// Makes the base images that are missing.
pub(super) fn ensure_bases(buildah: &Buildah, layout: &Layout, progress: &Progress, source: &Path) -> Result<Bases> {
    let (sysroot, rust_version) = host_toolchain(source)?;
    let bases = Bases {
        build: format!("localhost/olm-dev/rust-build:{rust_version}-{DEBIAN_SUITE}-{RECIPE}"),
        runtime: runtime_name(),
    };
    let need_build = !buildah.has_image(&bases.build);
    let need_runtime = !buildah.has_image(&bases.runtime);
    if !(need_build || need_runtime) {
        return Ok(bases);
    }
    let rootfs = ensure_rootfs(layout, progress)?;
    if need_build {
        progress.say(format!("making base image {} (Debian rootfs + Rust toolchain {})", bases.build, sysroot.display()));
        let env = [
            "PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CARGO_HOME=/usr/local/cargo",
        ];
        make_image(buildah, progress, &bases.build, &env, None, |mnt| {
            copy_rootfs(&rootfs, mnt)?;
            copy_host_ca_bundle(mnt)?;
            let rust = mnt.join("usr/local/rust");
            create_dir_all(&rust)?;
            create_dir_all(&mnt.join("usr/local/cargo/bin"))?;
            // The toolchain without its documentation and sources.
            for part in ["bin", "lib", "libexec"] {
                if sysroot.join(part).exists() {
                    copy_tree(&sysroot.join(part), &rust)?;
                }
            }
            Ok(())
        })?;
    }
    if need_runtime {
        make_runtime(buildah, progress, &bases.runtime, &rootfs)?;
    }
    Ok(bases)
}

/// The sysroot and version of the `rustc` that builds `source` (its toolchain file respected).
fn host_toolchain(source: &Path) -> Result<(PathBuf, String)> {
    let output = |args: &[&str]| -> Result<String> {
        let mut cmd = Command::new("rustc");
        cmd.args(args).current_dir(source);
        let command = describe(&cmd);
        let out = cmd.output().map_err(|source| DevError::Spawn { command: command.clone(), source })?;
        if !out.status.success() {
            return Err(DevError::UnexpectedOutput { command, reason: String::from_utf8_lossy(&out.stderr).trim().to_owned() });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let sysroot = PathBuf::from(output(&["--print", "sysroot"])?);
    let version_line = output(&["--version"])?;
    // `rustc 1.95.0 (59807616e 2026-04-14)`
    let version = version_line.split_whitespace().nth(1).unwrap_or("unknown").to_owned();
    Ok((sysroot, version))
}

/// A Debian rootfs from debootstrap, made once under the cache (`images/debian-<suite>-build`).
fn ensure_rootfs(layout: &Layout, progress: &Progress) -> Result<PathBuf> {
    let dir = layout.cache_dir.join("images").join(format!("debian-{DEBIAN_SUITE}-build-{ROOTFS_RECIPE}"));
    let done = dir.with_extension("complete");
    if done.is_file() && dir.is_dir() {
        return Ok(dir);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| DevError::io("remove", &dir, e))?;
    }
    create_dir_all(dir.parent().unwrap_or(&layout.cache_dir))?;
    let mirror = std::env::var("OLM_DEV_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.to_owned());
    progress.say(format!("debootstrap {DEBIAN_SUITE} from {mirror} (about 1.5 min)"));
    let mut cmd = Command::new("debootstrap");
    cmd.args(["--variant=minbase", &format!("--include={BUILD_PACKAGES}"), DEBIAN_SUITE])
        .arg(&dir)
        .arg(&mirror);
    run_step("debootstrap", &mut cmd, &layout.cache_dir.join("logs").join("debootstrap.log"), progress, false)?;
    std::fs::write(&done, "").map_err(|e| DevError::io("write", &done, e))?;
    Ok(dir)
}

/// `buildah from scratch`, fill its mounted root with `fill`, configure, commit as `name`.
fn make_image(
    buildah: &Buildah,
    progress: &Progress,
    name: &str,
    env: &[&str],
    user: Option<&str>,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let container = "olm-dev-base-working";
    // A container left by an interrupted run would make `from --name` fail.
    let _ = buildah.command(&["rm", container]).output();
    buildah.run("buildah from", &["from", "--name", container, "scratch"], progress)?;
    let result = (|| {
        let mnt = PathBuf::from(buildah.run("buildah mount", &["mount", container], progress)?);
        let filled = fill(&mnt);
        buildah.run("buildah umount", &["umount", container], progress)?;
        filled?;
        let mut config: Vec<String> = vec!["config".into()];
        for value in env {
            config.push(format!("--env={value}"));
        }
        if let Some(user) = user {
            config.push(format!("--user={user}"));
        }
        config.push(container.into());
        let args: Vec<&str> = config.iter().map(String::as_str).collect();
        buildah.run("buildah config", &args, progress)?;
        buildah.run("buildah commit", &["commit", "--rm", container, name], progress)
    })();
    if result.is_err() {
        let _ = buildah.command(&["rm", container]).output();
    }
    result.map(|_| ())
}

/// Copies the rootfs into `dest`, leaving out /dev, /proc and /sys (empty there).
fn copy_rootfs(rootfs: &Path, dest: &Path) -> Result<()> {
    let entries = std::fs::read_dir(rootfs).map_err(|e| DevError::io("read", rootfs, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| DevError::io("read", rootfs, e))?;
        let name = entry.file_name();
        if VIRTUAL_DIRS.iter().any(|v| name == *v) {
            create_dir_all(&dest.join(&name))?;
        } else {
            copy_tree(&entry.path(), dest)?;
        }
    }
    Ok(())
}

/// `cp -a SRC DEST_DIR/`: symlinks, modes and owners kept.
fn copy_tree(src: &Path, dest_dir: &Path) -> Result<()> {
    let mut cmd = Command::new("cp");
    cmd.arg("-a").arg(src).arg(format!("{}/", dest_dir.display()));
    let command = describe(&cmd);
    let out = cmd.output().map_err(|source| DevError::Spawn { command: command.clone(), source })?;
    if !out.status.success() {
        return Err(DevError::UnexpectedOutput { command, reason: String::from_utf8_lossy(&out.stderr).trim().to_owned() });
    }
    Ok(())
}

/// The runtime image's files, from the rootfs: the packages' files (dpkg's lists), the CA
/// bundle, nsswitch.conf, users and groups, /tmp and the nonroot home.
fn runtime_files(rootfs: &Path, mnt: &Path) -> Result<()> {
    // Debian bookworm merges /usr: keep its top-level links so listed paths land where they do.
    for dir in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc/ssl/certs", "home/nonroot", "tmp"] {
        create_dir_all(&mnt.join(dir))?;
    }
    for link in ["bin", "sbin", "lib", "lib64"] {
        let path = mnt.join(link);
        if std::fs::symlink_metadata(&path).is_err() {
            symlink(format!("usr/{link}"), &path).map_err(|e| DevError::io("create symlink", &path, e))?;
        }
    }
    for package in RUNTIME_PACKAGES {
        let list = rootfs.join("var/lib/dpkg/info").join(format!("{package}.list"));
        let text = std::fs::read_to_string(&list).map_err(|e| DevError::io("read", &list, e))?;
        for path in text.lines().filter_map(|l| l.strip_prefix('/')) {
            if path.starts_with("usr/share/doc") || path.starts_with("usr/share/lintian") {
                continue;
            }
            copy_entry(&rootfs.join(path), &mnt.join(path))?;
        }
    }
    copy_entry(&rootfs.join("etc/nsswitch.conf"), &mnt.join("etc/nsswitch.conf"))?;
    copy_host_ca_bundle(mnt)?;
    let files = [
        ("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
        ("etc/group", "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"),
    ];
    for (path, text) in files {
        let path = mnt.join(path);
        std::fs::write(&path, text).map_err(|e| DevError::io("write", &path, e))?;
    }
    let tmp = mnt.join("tmp");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).map_err(|e| DevError::io("chmod", &tmp, e))?;
    let home = mnt.join("home/nonroot");
    std::os::unix::fs::chown(&home, Some(65532), Some(65532)).map_err(|e| DevError::io("chown", &home, e))?;
    Ok(())
}

fn copy_host_ca_bundle(mnt: &Path) -> Result<()> {
    let dest = mnt.join(HOST_CA_BUNDLE.trim_start_matches('/'));
    if let Some(parent) = dest.parent() {
        create_dir_all(parent)?;
    }
    // Replaces the rootfs's own (or its symlink) rather than writing through it.
    let _ = std::fs::remove_file(&dest);
    std::fs::copy(HOST_CA_BUNDLE, &dest).map(|_| ()).map_err(|e| DevError::io("copy to", &dest, e))
}

/// One listed path: a directory is created, a symlink recreated, a file copied with its mode.
fn copy_entry(src: &Path, dest: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| DevError::io("read", src, e))?;
    if meta.is_dir() {
        return create_dir_all(dest);
    }
    if let Some(parent) = dest.parent() {
        create_dir_all(parent)?;
    }
    if std::fs::symlink_metadata(dest).is_ok() {
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(src).map_err(|e| DevError::io("read link", src, e))?;
        symlink(&target, dest).map_err(|e| DevError::io("create symlink", dest, e))
    } else {
        std::fs::copy(src, dest).map(|_| ()).map_err(|e| DevError::io("copy to", dest, e))
    }
}
