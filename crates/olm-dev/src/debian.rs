//! Debian packages the opt-in parts need (the real node's containerd, the image builder's
//! buildah and debootstrap), installed with apt-get when a file they provide is missing.

use std::path::Path;
use std::process::Command;

use crate::error::{DevError, Result};
use crate::layout::Layout;
use crate::run::{Progress, describe, run_step};

/// Installs the packages of `packages` (package, a file it installs) whose file is missing;
/// apt-get's output goes to `apt-get-<log_name>.log` in the cache's logs.
pub fn ensure_packages(layout: &Layout, progress: &Progress, log_name: &str, packages: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(_, file)| !Path::new(file).exists())
        .map(|(package, _)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let log = layout.cache_dir.join("logs").join(format!("apt-get-{log_name}.log"));
    progress.say(format!("installing {} with apt-get (log: {})", missing.join(", "), log.display()));
    let install = || {
        let mut cmd = Command::new("apt-get");
        cmd.env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing);
        cmd
    };
    if run_step("apt-get install", &mut install(), &log, progress, false).is_err() {
        // A fresh machine may have no package lists yet.
        let mut update = Command::new("apt-get");
        update.arg("update");
        run_step("apt-get update", &mut update, &log, progress, false)?;
        run_step("apt-get install", &mut install(), &log, progress, false)?;
    }
    for (package, file) in packages {
        if !Path::new(file).exists() {
            return Err(DevError::UnexpectedOutput {
                command: describe(&install()),
                reason: format!("package {package} did not install {file}"),
            });
        }
    }
    Ok(())
}
