//! What the watch cache keeps of a CSV.

use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;

/// What the watch cache keeps of a copied CSV: its metadata (with the copy hashes) and status;
/// the spec is the original's, read from there when a copy is written.
pub fn trim_copy(csv: &mut ClusterServiceVersion) {
    if csv.labels().contains_key(keys::COPIED_FROM_LABEL) {
        csv.spec = Default::default();
        csv.metadata.annotations.iter_mut().for_each(|annotations| {
            annotations.retain(|k, _| k.starts_with("olm."));
        });
    }
}

/// What the watch cache keeps of any CSV: a copy as [`trim_copy`] says; an original without
/// what is there for people and consoles and no reconcile reads (icon, description, keywords,
/// maintainers, provider, links, related images, fields this version does not know, the
/// descriptors of its CRDs, the alm-examples annotation), most of a typical CSV. A copy is
/// written with those fields from a fresh read of the original (`reconcile::act`). The install
/// strategy, the largest part left, and the requirement status are held once for all CSVs
/// that carry the same.
pub fn trim_cached_csv(csv: &mut ClusterServiceVersion) {
    if csv.labels().contains_key(keys::COPIED_FROM_LABEL) {
        return trim_copy(csv);
    }
    static INSTALL_STRATEGIES: std::sync::LazyLock<olm_runtime::cache::Interner<olm_api::v1alpha1::cluster_service_version::NamedInstallStrategy>> =
        std::sync::LazyLock::new(|| olm_runtime::cache::Interner::new(|value| olm_api::unknown::json_digest(value).ok()));
    INSTALL_STRATEGIES.intern(&mut csv.spec.install);
    static REQUIREMENTS: std::sync::LazyLock<olm_runtime::cache::Interner<Vec<olm_api::v1alpha1::RequirementStatus>>> =
        std::sync::LazyLock::new(|| olm_runtime::cache::Interner::new(|value| olm_api::unknown::json_digest(value).ok()));
    if let Some(requirements) = csv.status.as_mut().and_then(|status| status.requirement_status.as_mut()) {
        REQUIREMENTS.intern(requirements);
    }
    csv.spec.icon = None;
    csv.spec.description = None;
    csv.spec.keywords = None;
    csv.spec.maintainers = None;
    csv.spec.provider = None;
    csv.spec.links = None;
    csv.spec.related_images = None;
    csv.spec.extra = Default::default();
    if let Some(crds) = csv.spec.custom_resource_definitions.as_mut() {
        for crd in crds.owned.iter_mut().flatten().chain(crds.required.iter_mut().flatten()) {
            crd.spec_descriptors = None;
            crd.status_descriptors = None;
            crd.action_descriptors = None;
            crd.description = None;
        }
    }
    if let Some(annotations) = csv.metadata.annotations.as_mut() {
        annotations.remove(keys::ALM_EXAMPLES_ANNOTATION);
    }
}
