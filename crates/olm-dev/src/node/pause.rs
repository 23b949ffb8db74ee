//! The pause image every pod sandbox runs, built here (no registry on the internet is
//! reachable): Kubernetes' own `build/pause/linux/pause.c` from the k8s.io/kubernetes module
//! the build already downloaded, compiled with `gcc -static`, wrapped by hand as a one-layer OCI
//! archive (cached next to the binaries) and imported into the node's containerd.

use std::path::Path;
use std::process::Command;

use sha2::{Digest as _, Sha256};

use super::host::CTR;
use super::paths::NodePaths;
use crate::error::{DevError, Result};
use crate::layout::{KUBERNETES_VERSION, Layout, create_dir_all};
use crate::run::{Progress, run_step};

/// The reference containerd knows the pause image by (`sandbox_image`). `.invalid` says it is
/// never pulled: it is imported.
pub(crate) fn pause_image() -> String {
    format!("olm-dev.invalid/pause:{KUBERNETES_VERSION}")
}

/// Builds the OCI archive into the cache unless it is there.
pub(crate) fn ensure_pause_archive(
    layout: &Layout,
    paths: &NodePaths,
    progress: &Progress,
) -> Result<()> {
    if paths.pause_archive.is_file() {
        return Ok(());
    }
    let source = layout
        .go_mod_cache()
        .join(format!("k8s.io/kubernetes@{KUBERNETES_VERSION}"))
        .join("build/pause/linux/pause.c");
    if !source.is_file() {
        return Err(DevError::UnexpectedOutput {
            command: format!("read {}", source.display()),
            reason: "the pause source is missing from the Go module cache: run `olm dev cluster build` (it downloads k8s.io/kubernetes)".into(),
        });
    }
    let work = paths.pause_archive.with_extension("build");
    create_dir_all(&work)?;
    let binary = work.join("pause");
    let log = layout.cache_dir.join("logs").join("build-pause.log");
    progress.say(format!(
        "building the pause image from {}",
        source.display()
    ));
    let mut gcc = Command::new("gcc");
    gcc.args(["-Os", "-static", "-Wall", "-Werror"])
        .arg(format!("-DVERSION={KUBERNETES_VERSION}-olm-dev"))
        .arg("-o")
        .arg(&binary)
        .arg(&source);
    run_step("gcc -static pause.c", &mut gcc, &log, progress, false)?;
    let pause = std::fs::read(&binary).map_err(|e| DevError::io("read", &binary, e))?;
    let archive = oci_archive(&pause_image(), "pause", &pause, &["/pause"])
        .map_err(|e| DevError::io("write the pause image archive", &paths.pause_archive, e))?;
    let partial = paths.pause_archive.with_extension("partial");
    std::fs::write(&partial, archive).map_err(|e| DevError::io("write", &partial, e))?;
    std::fs::rename(&partial, &paths.pause_archive)
        .map_err(|e| DevError::io("rename", &paths.pause_archive, e))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// `ctr images import` of the archive into the CRI's namespace of the node's containerd.
pub(crate) fn import_pause(paths: &NodePaths, log: &Path, progress: &Progress) -> Result<()> {
    let mut ctr = Command::new(CTR);
    ctr.arg("--address")
        .arg(paths.containerd_socket())
        .args(["--namespace", "k8s.io", "images", "import"])
        .arg(&paths.pause_archive);
    run_step("ctr images import (pause)", &mut ctr, log, progress, false)?;
    Ok(())
}

/// A one-layer linux/amd64 OCI image archive (the layout `ctr images import` reads) holding
/// one executable `file_name` at the root, named `reference`.
pub(crate) fn oci_archive(
    reference: &str,
    file_name: &str,
    content: &[u8],
    entrypoint: &[&str],
) -> std::io::Result<Vec<u8>> {
    let layer = tar_of(&[(file_name, content, 0o755)])?;
    let layer_digest = sha256(&layer);
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    });
    let config = serde_json::to_vec(&config)?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
    });
    let manifest = serde_json::to_vec(&manifest)?;
    let tag = reference.rsplit(':').next().unwrap_or("latest");
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": sha256(&manifest),
            "size": manifest.len(),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": reference, "org.opencontainers.image.ref.name": tag},
        }],
    });
    let index = serde_json::to_vec(&index)?;
    let blob = |bytes: &[u8]| format!("blobs/sha256/{}", &sha256(bytes)["sha256:".len()..]);
    let files: Vec<(String, &[u8])> = vec![
        ("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#),
        ("index.json".into(), &index),
        (blob(&manifest), &manifest),
        (blob(&config), &config),
        (blob(&layer), &layer),
    ];
    let entries: Vec<(&str, &[u8], u32)> = files
        .iter()
        .map(|(name, bytes)| (name.as_str(), *bytes, 0o644))
        .collect();
    tar_of(&entries)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A tar of regular files owned by root, with a fixed time so the bytes (and digests) repeat.
fn tar_of(files: &[(&str, &[u8], u32)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content, mode) in files {
        let mut header = tar::Header::new_ustar();
        header.set_size(content.len() as u64);
        header.set_mode(*mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, *content)?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_is_an_oci_layout_naming_the_image() {
        let bytes = oci_archive("example.invalid/x:v1", "x", b"\x7fELF", &["/x"]).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut names = Vec::new();
        let mut index = String::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            if name == "index.json" {
                std::io::Read::read_to_string(&mut entry, &mut index).unwrap();
            }
            names.push(name);
        }
        assert_eq!(names.len(), 5, "{names:?}");
        assert!(names.contains(&"oci-layout".to_string()));
        let index: serde_json::Value = serde_json::from_str(&index).unwrap();
        let annotations = &index["manifests"][0]["annotations"];
        assert_eq!(
            annotations["io.containerd.image.name"],
            "example.invalid/x:v1"
        );
        let digest = index["manifests"][0]["digest"].as_str().unwrap();
        assert!(names.contains(&format!("blobs/sha256/{}", &digest[7..])));
        // Same input, same bytes: the digest of a rebuilt image does not change.
        assert_eq!(
            bytes,
            oci_archive("example.invalid/x:v1", "x", b"\x7fELF", &["/x"]).unwrap()
        );
    }
}
