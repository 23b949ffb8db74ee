//! Small images of a few files, for benches and tests that need something runnable in a pod
//! (upstream's util and opm images, say): on `scratch`, or on the distroless-like runtime base
//! of [`super::bases`] for dynamically linked binaries. Built with the same buildah storage and
//! pushed to a registry; returned by digest.

use std::path::{Path, PathBuf};

use super::Buildah;
use crate::error::{DevError, Result};
use crate::layout::Layout;
use crate::run::Progress;

/// What an image starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallBase {
    /// Nothing: static binaries only.
    Scratch,
    /// glibc, libgcc_s and CA certificates, user 65532 (the Dockerfile's RUNTIME_IMAGE here).
    Runtime,
}

/// A file of the host copied into the image at `dest` (an absolute path in the image).
#[derive(Debug, Clone)]
pub struct SmallFile {
    pub source: PathBuf,
    pub dest: String,
}

/// Builds an image of `files` on `base`, pushes it to `image` (`host:port/repo:tag`, plain HTTP
/// allowed) and returns `host:port/repo@sha256:…`. Needs root.
pub fn build_small_image(layout: &Layout, progress: &Progress, base: SmallBase, files: &[SmallFile], image: &str) -> Result<String> {
    crate::run::require_root("building an image with buildah")?;
    crate::debian::ensure_packages(layout, progress, "image-build", &super::PACKAGES)?;
    let buildah = Buildah::new(layout);
    let from = match base {
        SmallBase::Scratch => "scratch".to_owned(),
        SmallBase::Runtime => super::bases::ensure_runtime_base(&buildah, layout, progress)?,
    };
    let container = "olm-dev-small-working";
    let _ = buildah.command(&["rm", container]).output();
    buildah.run("buildah from", &["from", "--pull-never", "--name", container, &from], progress)?;
    let result = (|| {
        for file in files {
            let source = file.source.display().to_string();
            if !Path::new(&source).is_file() {
                return Err(DevError::UnexpectedOutput {
                    command: format!("building {image}"),
                    reason: format!("{source} is not a file"),
                });
            }
            buildah.run("buildah copy", &["copy", "--chmod", "0755", container, &source, &file.dest], progress)?;
        }
        buildah.run("buildah commit", &["commit", container, image], progress)
    })();
    let _ = buildah.command(&["rm", container]).output();
    result?;
    super::push(&buildah, progress, image, image)
}
