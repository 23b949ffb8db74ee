//! Images that stand in for public ones on the real node, where quay.io and the like cannot be
//! reached: a program of this build (with the shared libraries it loads) in a one-layer image,
//! pushed to the dev registry, which the node's containerd takes as every registry's mirror.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

/// A file of the host in an image, at `dest` (absolute), executable or not.
#[derive(Debug, Clone)]
pub struct ImageFile {
    pub source: PathBuf,
    pub dest: String,
    pub executable: bool,
}

/// `program` at each of `dests` in the image, and the shared libraries it loads (as `ldd` names
/// them, at the same paths): what it needs to run in an image of nothing else.
pub fn program_with_libraries(program: &Path, dests: &[&str]) -> anyhow::Result<Vec<ImageFile>> {
    let mut files: Vec<ImageFile> = dests.iter().map(|dest| ImageFile { source: program.to_path_buf(), dest: (*dest).to_owned(), executable: true }).collect();
    let ldd = std::process::Command::new("ldd").arg(program).output().context("run ldd")?;
    anyhow::ensure!(ldd.status.success(), "ldd {}: {}", program.display(), String::from_utf8_lossy(&ldd.stderr));
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`
        let path = match line.split_once("=>") {
            Some((_, found)) => found.split_whitespace().next(),
            None => line.split_whitespace().next().filter(|p| p.starts_with('/')),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            files.push(ImageFile { source: PathBuf::from(path), dest: path.to_owned(), executable: true });
        }
    }
    Ok(files)
}

/// Pushes a one-layer image of `files` to `reference` (`registry/repository:tag`, plain HTTP),
/// `config` being the image config's `config` (Entrypoint, User, …); returns
/// `registry/repository@digest`. The layer is uncompressed: its digest is its diff_id, which
/// containerd checks when it unpacks it.
pub async fn push_image(reference: &str, files: &[ImageFile], config: Value) -> anyhow::Result<String> {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let mut builder = tar::Builder::new(Vec::new());
    for file in files {
        let content = std::fs::read(&file.source).with_context(|| format!("read {}", file.source.display()))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(if file.executable { 0o755 } else { 0o644 });
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, file.dest.trim_start_matches('/'), content.as_slice())?;
    }
    let layer = builder.into_inner()?;
    // reqwest (under oci-client) is built without a crypto provider: use ring's, as kube does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let oci = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
    let parsed: oci_client::Reference = reference.parse()?;
    let layers = [ImageLayer::oci_v1(layer, None)];
    let diff_id = layers[0].sha256_digest();
    let image_config = json!({"architecture": "amd64", "os": "linux", "config": config, "rootfs": {"type": "layers", "diff_ids": [diff_id]}});
    let image_config = Config::oci_v1(serde_json::to_vec(&image_config)?, None);
    let manifest = oci_client::manifest::OciImageManifest::build(&layers, &image_config, None);
    let anonymous = oci_client::secrets::RegistryAuth::Anonymous;
    oci.push(&parsed, &layers, image_config, &anonymous, Some(manifest)).await.with_context(|| format!("push {reference}"))?;
    let digest = oci.fetch_manifest_digest(&parsed, &anonymous).await?;
    let repository = reference.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')).map_or(reference, |(repository, _)| repository);
    Ok(format!("{repository}@{digest}"))
}

/// The operator stand-in `program` (src/bin/operator_stand_in.rs: a suite passes
/// `env!("CARGO_BIN_EXE_operator_stand_in")`) pushed as each of `references`
/// (`registry/repository:tag`), runnable as `/manager` and as `authorino` on PATH, as user
/// 65532 (a bundle's `runAsNonRoot` holds); returns their digests' references.
pub async fn push_operator_stand_in(program: &Path, references: &[&str]) -> anyhow::Result<Vec<String>> {
    let files = program_with_libraries(program, &["/manager", "/usr/local/bin/authorino"])?;
    let config = json!({"User": "65532", "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "Entrypoint": ["/manager"]});
    let mut pushed = Vec::new();
    for reference in references {
        pushed.push(push_image(reference, &files, config.clone()).await?);
    }
    Ok(pushed)
}
