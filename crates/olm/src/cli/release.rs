//! `olm release --output-dir DIR`: the release pair as upstream ships OLM — `crds.yaml` (every
//! CRD) and `olm.yaml` (everything else of manifests/, in order, with the image asked for) —
//! installed with `kubectl apply --server-side -f crds.yaml` and then `-f olm.yaml`; and the
//! same as a Helm chart in `chart/` (`helm install olm DIR/chart`, see `chart`). The manifests
//! are compiled in (`manifests`), so both always match this binary.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::manifests::{MANIFEST_IMAGE, MANIFESTS};

/// `olm release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Where to write crds.yaml and olm.yaml.
    #[arg(long, value_name = "DIR")]
    output_dir: PathBuf,
    /// The OLM image the Deployments run.
    #[arg(long, default_value = MANIFEST_IMAGE)]
    image: String,
}

/// `olm.yaml`: every manifest, each introduced by a comment naming its file.
pub fn olm_yaml(image: &str) -> String {
    let mut out = String::new();
    for (name, text) in MANIFESTS {
        out.push_str(&format!("---\n# Source: manifests/{name}\n"));
        out.push_str(&text.replace(MANIFEST_IMAGE, image));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

pub fn run(args: ReleaseArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.output_dir).with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    let crds = olm_api::crds::render_yaml()?;
    let chart_dir = args.output_dir.join("chart");
    super::chart::write(&chart_dir, &crds, &args.image)?;
    for (name, text) in [("crds.yaml", crds), ("olm.yaml", olm_yaml(&args.image))] {
        let path = args.output_dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("wrote the Helm chart {}", chart_dir.display());
    eprintln!(
        "install: kubectl apply --server-side -f {0}/crds.yaml && kubectl apply --server-side -f {0}/olm.yaml\n\
         or:      helm install olm {0}/chart",
        args.output_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_manifest_is_in_the_release_and_the_image_is_replaced() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("manifests/")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        files.sort();
        let listed: Vec<&str> = MANIFESTS.iter().map(|(name, _)| *name).collect();
        assert_eq!(listed, files, "a file added to manifests/ must be added to MANIFESTS");
        let yaml = olm_yaml("registry.example.com/olm@sha256:0123");
        assert_eq!(yaml.matches("image: registry.example.com/olm@sha256:0123").count(), 3, "the three Deployments");
        assert!(!yaml.contains(MANIFEST_IMAGE));
    }
}
