//! `olm dev up --in-cluster` and `olm dev image build`: OLM as cluster admins run it — pods on
//! the real node, from the image the repository's Dockerfile builds, under the RBAC of
//! `manifests/` — instead of host processes. The manifests are applied as they are, with only
//! the image reference changed, or (`--helm`) installed with the Helm chart made of them; the
//! `olm` namespace is pointed at the real node by annotations (PodNodeSelector,
//! PodTolerationRestriction), so the Deployments need no edit for that either.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context as _, bail};
use olm_dev::{Layout, Progress, format_duration};

use super::dev_pods::{DEPLOYMENTS, OLM_NAMESPACE, mode_file};
use super::dev_up::{APISERVICE, CATALOG_NAME, HostProcess, kubectl, stop_process, wait_until};

/// The image the manifests name; replaced by the one built here.
pub const MANIFESTS_IMAGE: &str = "ghcr.io/olm-rs/olm:latest";
/// The Helm release `--helm` installs, stored in [`OLM_NAMESPACE`].
pub const HELM_RELEASE: &str = "olm";

/// How `up --in-cluster` installs OLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installer {
    /// manifests/ applied server-side with kubectl, the image replaced.
    Manifests,
    /// The Helm chart `olm release` writes, with `helm upgrade --install`.
    HelmChart,
}

/// The repository: `--source`, else the current directory, else the source tree this binary
/// was built from; it must hold the Dockerfile and manifests/.
fn source_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(dir) => vec![dir.to_path_buf()],
        None => vec![PathBuf::from("."), Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")],
    };
    for dir in &candidates {
        if dir.join("Dockerfile").is_file() && dir.join("manifests").is_dir() {
            return std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()));
        }
    }
    bail!(
        "no Dockerfile and manifests/ in {}: run from the repository root or pass --source DIR",
        candidates.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or ")
    )
}

/// `olm dev image build`: the Dockerfile built and pushed to the dev registry.
pub fn image_build(source: Option<&Path>) -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    let progress = Progress::new();
    let source = source_dir(source)?;
    let registry = olm_dev::registry::ensure_dev_registry(&layout, &progress).context("starting the local OCI registry")?;
    let built = olm_dev::build_olm_image(&layout, &progress, &source, &registry.addr).context("building the OLM image")?;
    println!("{}", built.reference);
    Ok(ExitCode::SUCCESS)
}

/// manifests/*.yaml in file order, with the image reference replaced; fails when a Deployment
/// does not name [`MANIFESTS_IMAGE`] (the manifests changed and this no longer fits them).
fn rendered_manifests(source: &Path, image: &str) -> anyhow::Result<Vec<(String, String)>> {
    let dir = source.join("manifests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    let mut replaced = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        replaced += text.matches(MANIFESTS_IMAGE).count();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        out.push((name, text.replace(MANIFESTS_IMAGE, image)));
    }
    if replaced < DEPLOYMENTS.len() {
        bail!("{} names the image {MANIFESTS_IMAGE} {replaced} times, expected once per Deployment ({}): update `olm dev up --in-cluster`", dir.display(), DEPLOYMENTS.join(", "));
    }
    Ok(out)
}

/// `olm dev up --in-cluster`.
pub fn up(source: Option<&Path>, installer: Installer) -> anyhow::Result<ExitCode> {
    let layout = Layout::from_env().context("locating the olm-dev directories")?;
    let progress = Progress::new();
    let source = source_dir(source)?;
    progress.say("starting the local control plane with a real node (the first run builds Kubernetes, kubelet and CoreDNS from source: several minutes)");
    let report = olm_dev::up_with(&layout, &progress, olm_dev::UpOptions { real_node: true }).context("starting the local control plane")?;
    if !report.already_running {
        progress.say(format!("control plane ready in {}", format_duration(report.start_elapsed)));
    }
    let registry = olm_dev::registry::ensure_dev_registry(&layout, &progress).context("starting the local OCI registry")?;

    // OLM runs either as host processes or as pods, never both (two leaders, two package servers).
    for process in HostProcess::ALL.into_iter().rev() {
        if let Some(pid) = stop_process(&layout, process)? {
            progress.say(format!("stopped host process {} (pid {pid}): OLM runs as pods now", process.name()));
        }
    }
    let service_type = olm_dev::kubectl(&layout, &["get", "service", "packageserver", "-n", OLM_NAMESPACE, "--ignore-not-found", "-o", "jsonpath={.spec.type}"], None)
        .map_err(|e| anyhow::anyhow!(e))?;
    if service_type.trim() == "ExternalName" {
        kubectl(&layout, &["delete", "service", "packageserver", "-n", OLM_NAMESPACE], None)?;
        progress.say("deleted the host package server's ExternalName Service olm/packageserver");
    }

    let built = olm_dev::build_olm_image(&layout, &progress, &source, &registry.addr).context("building the OLM image from the Dockerfile")?;

    progress.say("applying manifests/crds/ (server-side)");
    let crds = source.join("manifests").join("crds");
    kubectl(&layout, &["apply", "--server-side", "--force-conflicts", "-f", &crds.display().to_string()], None)?;
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    let names: Vec<String> = ["catalogsources", "clusterserviceversions", "installplans", "operatorgroups", "subscriptions", "olmconfigs"]
        .iter()
        .map(|plural| format!("crd/{plural}.operators.coreos.com"))
        .collect();
    wait.extend(names.iter().map(String::as_str));
    kubectl(&layout, &wait, None)?;

    match installer {
        Installer::Manifests => apply_manifests(&layout, &progress, &source, &built.reference)?,
        Installer::HelmChart => install_chart(&layout, &progress, &built.reference)?,
    }
    let mode = mode_file(&layout);
    std::fs::create_dir_all(mode.parent().unwrap_or(&layout.state_dir)).with_context(|| format!("cannot create {}", mode.display()))?;
    std::fs::write(&mode, format!("{}\n", built.reference)).with_context(|| format!("cannot write {}", mode.display()))?;

    for deployment in DEPLOYMENTS {
        let target = format!("deployment/{deployment}");
        if let Err(err) = kubectl(&layout, &["rollout", "status", "-n", OLM_NAMESPACE, &target, "--timeout=180s"], None) {
            // What the pods and the Warning Events say, so that the reason is in the error.
            let pods = kubectl(&layout, &["get", "pods", "-n", OLM_NAMESPACE, "-o", "wide"], None).unwrap_or_default();
            let events = kubectl(&layout, &["get", "events", "-n", OLM_NAMESPACE, "--field-selector", "type=Warning", "--sort-by", ".lastTimestamp"], None).unwrap_or_default();
            return Err(err.context(format!(
                "waiting for {OLM_NAMESPACE}/{deployment}; its pods:\n{pods}\nWarning Events in {OLM_NAMESPACE}:\n{events}\nsee `kubectl -n {OLM_NAMESPACE} describe {target}` and its pods' logs"
            )));
        }
        progress.say(format!("{OLM_NAMESPACE}/{deployment}: every replica Ready"));
    }
    wait_until("APIService v1.packages.operators.coreos.com Available", Duration::from_secs(90), &progress, || {
        let out = olm_dev::kubectl(&layout, &["get", "apiservice", APISERVICE, "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"], None)?;
        Ok(out.trim() == "True")
    })?;
    wait_until("packagemanifests served from the catalog", Duration::from_secs(120), &progress, || {
        let out = olm_dev::kubectl(&layout, &["get", "packagemanifests", "-n", OLM_NAMESPACE, "-l", &format!("catalog={CATALOG_NAME}"), "-o", "name"], None)?;
        Ok(!out.trim().is_empty())
    })?;
    println!("OLM is running as pods on the real node ({}).", format_duration(progress.elapsed()));
    println!("  image:     {} (built from {}/Dockerfile)", built.reference, source.display());
    if installer == Installer::HelmChart {
        println!("  installed: Helm release {OLM_NAMESPACE}/{HELM_RELEASE} (`helm status {HELM_RELEASE} -n {OLM_NAMESPACE}`)");
    }
    println!("  pods:      kubectl -n {OLM_NAMESPACE} get pods -o wide");
    println!("  catalog:   CatalogSource {OLM_NAMESPACE}/{CATALOG_NAME} -> olm-catalog.{OLM_NAMESPACE}.svc:50051");
    println!("use it with: eval \"$(olm dev env)\"   then e.g.: kubectl get packagemanifests -n {OLM_NAMESPACE}");
    Ok(ExitCode::SUCCESS)
}

/// Sends every pod of the OLM namespace to the real node; called before any Deployment exists,
/// so no OLM pod is ever scheduled to kwok.
fn annotate_for_real_node(layout: &Layout) -> anyhow::Result<()> {
    let annotations = olm_dev::real_node_namespace_annotations();
    let mut args = vec!["annotate", "--overwrite", "namespace", OLM_NAMESPACE];
    args.extend(annotations.iter().map(String::as_str));
    kubectl(layout, &args, None)?;
    Ok(())
}

/// manifests/ applied server-side, file by file, with `image`.
fn apply_manifests(layout: &Layout, progress: &Progress, source: &Path, image: &str) -> anyhow::Result<()> {
    let manifests = rendered_manifests(source, image)?;
    for (index, (name, text)) in manifests.iter().enumerate() {
        kubectl(layout, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(text)).with_context(|| format!("applying manifests/{name}"))?;
        if index == 0 {
            annotate_for_real_node(layout)?;
        }
    }
    progress.say(format!("applied {} files of manifests/ with image {image}", manifests.len()));
    Ok(())
}

/// The Helm chart (`olm release`'s chart/, written under the state directory) installed or
/// upgraded as release [`HELM_RELEASE`] with `image`. The OLM namespace is made (and sent to the
/// real node) first; `--take-ownership` lets helm adopt it and whatever an earlier
/// `--in-cluster` applied from manifests/. The CRDs were applied server-side before: helm
/// installs a chart's crds/ only when they are missing and never upgrades them.
fn install_chart(layout: &Layout, progress: &Progress, image: &str) -> anyhow::Result<()> {
    olm_dev::ensure_helm_built(layout, progress).context("building helm from the Go module proxy")?;
    let namespace = olm_dev::kubectl(layout, &["get", "namespace", OLM_NAMESPACE, "--ignore-not-found", "-o", "name"], None).map_err(|e| anyhow::anyhow!(e))?;
    if namespace.trim().is_empty() {
        kubectl(layout, &["create", "namespace", OLM_NAMESPACE], None)?;
    }
    annotate_for_real_node(layout)?;

    let helm_dir = layout.state_dir.join("olm").join("helm");
    let chart = helm_dir.join("chart");
    if chart.exists() {
        std::fs::remove_dir_all(&chart).with_context(|| format!("cannot remove {}", chart.display()))?;
    }
    let crds = olm_api::crds::render_yaml().context("rendering OLM's CRDs")?;
    super::chart::write(&chart, &crds, image)?;
    let mut helm = Command::new(layout.helm());
    helm.args(["upgrade", "--install", HELM_RELEASE])
        .arg(&chart)
        .args(["--namespace", OLM_NAMESPACE, "--take-ownership", "--kubeconfig"])
        .arg(layout.kubeconfig())
        // helm's own cache, configuration and data beside the environment, not in the user's.
        .env("HELM_CACHE_HOME", helm_dir.join("cache"))
        .env("HELM_CONFIG_HOME", helm_dir.join("config"))
        .env("HELM_DATA_HOME", helm_dir.join("data"));
    let out = helm.output().with_context(|| format!("cannot run {}", layout.helm().display()))?;
    if !out.status.success() {
        let said: Vec<String> = [&out.stderr, &out.stdout]
            .iter()
            .map(|text| String::from_utf8_lossy(text).trim().to_owned())
            .filter(|text| !text.is_empty())
            .collect();
        bail!("helm upgrade --install {HELM_RELEASE} {} failed ({}):\n{}", chart.display(), out.status, said.join("\n"));
    }
    progress.say(format!("installed the Helm chart {} as release {OLM_NAMESPACE}/{HELM_RELEASE} with image {image}", chart.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repositorys_manifests_get_only_their_image_replaced() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let image = "127.0.0.1:28500/olm/olm@sha256:0123";
        let rendered = rendered_manifests(&source, image).unwrap();
        assert_eq!(rendered.first().map(|(n, _)| n.as_str()), Some("00-namespaces.yaml"), "namespaces first");
        let all: String = rendered.iter().map(|(_, t)| t.as_str()).collect();
        assert!(!all.contains(MANIFESTS_IMAGE));
        assert_eq!(all.matches(image).count(), DEPLOYMENTS.len());
        for (name, text) in &rendered {
            let original = std::fs::read_to_string(source.join("manifests").join(name)).unwrap();
            assert_eq!(text, &original.replace(MANIFESTS_IMAGE, image), "{name}: nothing else changes");
        }
    }

    #[test]
    fn manifests_without_the_image_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("manifests")).unwrap();
        std::fs::write(dir.path().join("manifests/10-x.yaml"), "kind: Deployment\n").unwrap();
        let err = rendered_manifests(dir.path(), "x").unwrap_err().to_string();
        assert!(err.contains("names the image ghcr.io/olm-rs/olm:latest 0 times"), "{err}");
    }

    #[test]
    fn the_olm_namespace_is_sent_to_the_real_node() {
        let [selector, tolerations] = olm_dev::real_node_namespace_annotations();
        assert_eq!(selector, "scheduler.alpha.kubernetes.io/node-selector=olm.dev/node=real");
        let json = tolerations.strip_prefix("scheduler.alpha.kubernetes.io/defaultTolerations=").unwrap();
        let parsed: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(parsed[0]["key"], "olm.dev/real-node");
        assert_eq!(parsed[0]["effect"], "NoSchedule");
    }
}
