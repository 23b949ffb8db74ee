//! OLM as pods in the dev environment (`olm dev up --in-cluster`, `dev_in_cluster`), as `olm dev
//! down` and `olm dev status` (`dev_up`) need to know it: the record that it runs so and from
//! which image, its namespace and Deployments in manifests/, and their readiness.

use std::path::PathBuf;

use olm_dev::Layout;

/// OLM's namespace in manifests/.
pub const OLM_NAMESPACE: &str = "olm";
/// The Deployments of manifests/, all in [`OLM_NAMESPACE`].
pub const DEPLOYMENTS: [&str; 3] = ["olm-catalog", "olm-operator", "packageserver"];

/// Where `up --in-cluster` records that OLM runs as pods, and from which image.
pub fn mode_file(layout: &Layout) -> PathBuf {
    layout.state_dir.join("olm").join("in-cluster")
}

/// The image OLM runs from when it was deployed with `--in-cluster`.
pub fn in_cluster_image(layout: &Layout) -> Option<String> {
    std::fs::read_to_string(mode_file(layout)).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Forgets the in-cluster mode (`olm dev down`).
pub fn forget_in_cluster(layout: &Layout) {
    let _ = std::fs::remove_file(mode_file(layout));
}

/// The in-cluster Deployments' readiness for `olm dev status`: (line per Deployment, all ready).
pub fn deployments_status(layout: &Layout) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut healthy = true;
    for deployment in DEPLOYMENTS {
        let out = olm_dev::kubectl(
            layout,
            &["get", "deployment", deployment, "-n", OLM_NAMESPACE, "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}"],
            None,
        );
        match out {
            Ok(ratio) => {
                let ratio = ratio.trim();
                let ready = ratio.split_once('/').is_some_and(|(r, w)| !w.is_empty() && r == w);
                healthy &= ready;
                lines.push(format!("{:<24} {} ready  (pods in {OLM_NAMESPACE}, real node)", format!("deployment/{deployment}"), if ratio.starts_with('/') { format!("0{ratio}") } else { ratio.to_owned() }));
            }
            Err(e) => {
                healthy = false;
                lines.push(format!("{:<24} unknown: {e}", format!("deployment/{deployment}")));
            }
        }
    }
    (lines, healthy)
}
