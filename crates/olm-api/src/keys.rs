//! Well-known label, annotation and finalizer keys (exact upstream strings).

/// Annotation on CSVs (and their pod templates): the OperatorGroup's name.
pub const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
/// Annotation on CSVs: the OperatorGroup's namespace.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// Annotation on CSVs: the target namespaces, sorted and comma-separated (`""` = all).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Annotation on OperatorGroups: the provided APIs, sorted `Kind.version.group` list.
pub const PROVIDED_APIS_ANNOTATION: &str = "olm.providedAPIs";
/// Annotation on CSVs/bundles: the semver range this version upgrades from directly.
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";
/// Annotation on CSVs created from a bundle: the bundle's properties as JSON.
pub const PROPERTIES_ANNOTATION: &str = "operatorframework.io/properties";
/// Annotation on CSVs: example custom resources (JSON list) shown by UIs.
pub const ALM_EXAMPLES_ANNOTATION: &str = "alm-examples";
/// Annotation on Subscriptions created by an InstallPlan: the plan's name.
pub const GENERATED_BY_ANNOTATION: &str = "olm.generated-by";
/// Annotation on OperatorGroups: ignore catalogs of the global namespace.
pub const EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";
/// Annotation on OperatorGroups: the bundle unpack Job timeout.
pub const BUNDLE_UNPACK_TIMEOUT_ANNOTATION: &str = "operatorframework.io/bundle-unpack-timeout";
/// Annotation on OperatorGroups: the minimum interval between unpack retries.
pub const BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION: &str = "operatorframework.io/bundle-unpack-min-retry-interval";
/// Annotation prefix on CRDs: which CSVs installed the CRD (`...-<hash>`).
pub const INSTALLED_ALONGSIDE_ANNOTATION_PREFIX: &str = "operatorframework.io/installed-alongside-";
/// Annotations on copied CSVs (upstream's names): hashes of what was copied (everything but
/// the status) and of the copied status, so an unchanged copy is known without its content.
pub const COPY_HASH_SPEC_ANNOTATION: &str = "olm.operatorframework.io/nonStatusCopyHash";
/// See [`COPY_HASH_SPEC_ANNOTATION`].
pub const COPY_HASH_STATUS_ANNOTATION: &str = "olm.operatorframework.io/statusCopyHash";

/// Label on copied CSVs and copied RBAC: the operator's namespace.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// Owner labels on everything OLM generates (and on cluster-scoped objects instead of an
/// ownerReference).
pub const OWNER_LABEL: &str = "olm.owner";
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
/// `olm.managed=true` on generated objects.
pub const MANAGED_LABEL: &str = "olm.managed";
/// Prefix of the per-namespace OperatorGroup label: `olm.operatorgroup.uid/<uid>`.
pub const OPERATOR_GROUP_UID_LABEL_PREFIX: &str = "olm.operatorgroup.uid/";
/// Prefix of the API index labels on CSVs: `olm.api.<hash>` = `provided` / `required`.
pub const API_LABEL_PREFIX: &str = "olm.api.";
/// Drift-detection labels.
pub const DEPLOYMENT_SPEC_HASH_LABEL: &str = "olm.deployment-spec-hash";
pub const POD_SPEC_HASH_LABEL: &str = "olm.pod-spec-hash";
pub const SERVICE_SPEC_HASH_LABEL: &str = "olm.service-spec-hash";
/// Label on registry pods: the CatalogSource name.
pub const CATALOG_SOURCE_LABEL: &str = "olm.catalogSource";
/// Label on registry update (poll) pods.
pub const CATALOG_SOURCE_UPDATE_LABEL: &str = "catalogsource.operators.coreos.com/update";
/// Label on generated (Cluster)Roles and bindings: a hash of their rules.
pub const PERMISSIONS_HASH_LABEL: &str = "olm.permissions.hash";
/// Prefix of the Operator aggregate membership label: `operators.coreos.com/<operator>`.
pub const OPERATOR_COMPONENT_LABEL_PREFIX: &str = "operators.coreos.com/";

/// The name of the Operator object of `package` subscribed to in `namespace`: `<package>.<namespace>`.
pub fn operator_name(package: &str, namespace: &str) -> String {
    format!("{package}.{namespace}")
}

/// The label that makes an object a component of the Operator `operator`:
/// `operators.coreos.com/<operator>`, the name cut as upstream cuts it to fit a label name
/// (63 characters, without trailing `.`, `_` or `-`). None when nothing of the name is left.
pub fn operator_component_label(operator: &str) -> Option<String> {
    let mut name = operator;
    if name.len() > 63 {
        let mut cut = 63;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = name[..cut].trim_end_matches(['.', '_', '-']);
    }
    (!name.is_empty()).then(|| format!("{OPERATOR_COMPONENT_LABEL_PREFIX}{name}"))
}

/// The Operators an object is a component of: the names of its `operators.coreos.com/<name>` labels.
pub fn component_of<'a>(labels: impl IntoIterator<Item = &'a String>) -> impl Iterator<Item = &'a str> {
    labels.into_iter().filter_map(|key| key.strip_prefix(OPERATOR_COMPONENT_LABEL_PREFIX)).filter(|name| !name.is_empty())
}
/// Labels on webhook configurations generated from a CSV webhook description.
pub const WEBHOOK_DESCRIPTION_GENERATE_NAME_LABEL: &str = "olm.webhook-description-generate-name";
pub const WEBHOOK_DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";

/// Finalizer on CSVs: removes cluster-scoped RBAC and webhook configurations.
pub const CSV_CLEANUP_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

/// The environment variable OLM injects into operator containers: the OperatorCondition name.
pub const OPERATOR_CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";

// olm-rs's own opt-in annotations (#22). Upstream has no such keys and upstream clients ignore
// them; without them everything behaves as upstream.

/// Annotation on InstallPlans waiting for approval, written by OLM: what approving the plan
/// changes, as JSON (`olm plan show` says it in words).
pub const PREVIEW_ANNOTATION: &str = "olm-rs.io/preview";
/// Annotation on Subscriptions with `installPlanApproval: Manual` and a `startingCSV`: `"true"`
/// installs the starting CSV without approval; every later upgrade waits for approval.
pub const AUTO_APPROVE_STARTING_CSV_ANNOTATION: &str = "olm-rs.io/auto-approve-starting-csv";
/// Annotation on Subscriptions: `"true"` rolls a failed upgrade back automatically to the
/// version it replaced.
pub const AUTO_ROLLBACK_ANNOTATION: &str = "olm-rs.io/auto-rollback";
/// Annotation on Subscriptions: the CSV rolled back (written by `olm rollback`, or by OLM for
/// an automatic rollback). OLM goes back to the version it replaced and does not install it
/// again; removing the annotation lets it.
pub const ROLLED_BACK_FROM_ANNOTATION: &str = "olm-rs.io/rolled-back-from";
/// Annotation on a CSV installed again by a rollback: the newer CSV it replaces. That CSV's
/// `spec.replaces` names this one, yet this one is its replacement.
pub const ROLLBACK_OF_ANNOTATION: &str = "olm-rs.io/rollback-of";
/// Annotation on a ClusterExtension `olm migrate` created: `<namespace>/<csv>`, the
/// ClusterServiceVersion whose objects it adopts in place instead of refusing them as OLM v0's.
pub const ADOPT_FROM_ANNOTATION: &str = "olm-rs.io/adopt-from";
/// Annotation on a ClusterExtension or ClusterCatalog `olm migrate` created: the Subscription or
/// CatalogSource it came from, `<namespace>/<name>`.
pub const MIGRATED_FROM_ANNOTATION: &str = "olm-rs.io/migrated-from";
/// Annotation on a Subscription and its ClusterServiceVersion that `olm migrate` is moving to
/// OLM v1: the ClusterExtension taking over. OLM v0 leaves them alone from then on (no upgrade,
/// no repair, no cleanup when they are deleted: their objects are the extension's).
pub const MIGRATING_TO_ANNOTATION: &str = "olm-rs.io/migrating-to";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_component_labels_are_cut_as_upstream_cuts_them() {
        assert_eq!(operator_name("etcd", "team-a"), "etcd.team-a");
        assert_eq!(operator_component_label("etcd.team-a").as_deref(), Some("operators.coreos.com/etcd.team-a"));
        let long = format!("{}-.{}", "a".repeat(61), "ns");
        assert_eq!(operator_component_label(&long), Some(format!("operators.coreos.com/{}", "a".repeat(61))));
        assert_eq!(operator_component_label(""), None);
        let labels = ["operators.coreos.com/etcd.a".to_string(), "olm.managed".to_string(), "operators.coreos.com/".to_string()];
        assert_eq!(component_of(&labels).collect::<Vec<_>>(), vec!["etcd.a"]);
    }
}
