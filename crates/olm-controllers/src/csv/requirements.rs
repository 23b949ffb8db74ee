//! Requirement checks (the Pending gate), pure part: CRDs, ServiceAccounts and permissions,
//! reported as `status.requirementStatus` entries with upstream's strings.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion;
use olm_api::v1alpha1::cluster_service_version::{
    ClusterServiceVersion, DependentStatus, RequirementStatus, StatusReason,
};

/// What the CRD cache says about one CRD.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CrdState {
    /// Versions with `served: true`.
    pub served_versions: Vec<String>,
    /// `Established` condition is True.
    pub established: bool,
    /// `NamesAccepted` condition is True.
    pub names_accepted: bool,
    /// `spec.preserveUnknownFields` (a conversion webhook needs it false).
    pub preserve_unknown_fields: bool,
    /// `spec.conversion`.
    pub conversion: Option<CustomResourceConversion>,
}

/// The result of checking one permission rule of one ServiceAccount.
#[derive(Clone, Debug, PartialEq)]
pub struct PermissionCheck {
    /// The ServiceAccount the rule is for.
    pub service_account: String,
    /// Whether the rule came from `clusterPermissions`.
    pub cluster: bool,
    /// The rule.
    pub rule: PolicyRule,
    /// Whether the ServiceAccount may do everything the rule says.
    pub satisfied: bool,
}

/// Every rule of the CSV with its ServiceAccount and scope, in declaration order.
pub fn declared_rules(csv: &ClusterServiceVersion) -> Vec<(String, bool, PolicyRule)> {
    let Some(strategy) = csv.spec.install.spec.as_ref() else {
        return Vec::new();
    };
    let namespaced = strategy.permissions.iter().flatten().map(|p| (p, false));
    let cluster = strategy.cluster_permissions.iter().flatten().map(|p| (p, true));
    namespaced
        .chain(cluster)
        .flat_map(|(perm, is_cluster)| {
            perm.rules
                .iter()
                .map(move |rule| (perm.service_account_name.clone(), is_cluster, (**rule).clone()))
        })
        .collect()
}

/// The ServiceAccounts the CSV's permissions name.
pub fn declared_service_accounts(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    declared_rules(csv).into_iter().map(|(sa, _, _)| sa).collect()
}

/// Check the CSV's requirements. Returns the entries for `status.requirementStatus` and
/// whether every requirement is met. `foreign_service_accounts` are the existing ones other
/// CSVs own (by name, with those owners): an operator never runs as another operator's
/// account. `permissions` is `None` when they were not checked (they then count as met, with
/// no dependents listed).
pub fn check(
    csv: &ClusterServiceVersion,
    crds: &BTreeMap<String, CrdState>,
    service_accounts: &BTreeSet<String>,
    foreign_service_accounts: &BTreeMap<String, Vec<String>>,
    permissions: Option<&[PermissionCheck]>,
) -> (Vec<RequirementStatus>, bool) {
    let mut entries = Vec::new();
    let mut met = true;

    let wanted_crds = csv.spec.owned_crds().iter().chain(csv.spec.required_crds());
    let mut seen = BTreeSet::new();
    for crd in wanted_crds {
        if !seen.insert(crd.name.clone()) {
            continue;
        }
        let (status, message) = match crds.get(&crd.name) {
            None => (StatusReason::NotPresent, "CRD is not present".to_owned()),
            Some(state) if !state.served_versions.contains(&crd.version) => (
                StatusReason::NotPresent,
                format!("CRD version {} is not served", crd.version),
            ),
            Some(state) if !state.established || !state.names_accepted => (
                StatusReason::PresentNotAvailable,
                "CRD is present but the Established and NamesAccepted conditions are not both True (not available)".to_owned(),
            ),
            Some(_) => (
                StatusReason::Present,
                "CRD is present and Established condition is true".to_owned(),
            ),
        };
        met &= status == StatusReason::Present;
        entries.push(RequirementStatus {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: crd.name.clone(),
            status,
            message,
            uuid: None,
            dependents: None,
        });
    }

    for sa in declared_service_accounts(csv) {
        if !service_accounts.contains(&sa) {
            met = false;
            entries.push(RequirementStatus {
                group: String::new(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: sa,
                status: StatusReason::NotPresent,
                message: "Service account does not exist".into(),
                uuid: None,
                dependents: None,
            });
            continue;
        }
        if let Some(owners) = foreign_service_accounts.get(&sa) {
            met = false;
            // Upstream's message, then who owns it and who asked.
            let message = format!(
                "Service account is owned by another ClusterServiceVersion: {} owned by {}, required by {}",
                sa,
                owners.join(", "),
                kube::ResourceExt::name_any(csv)
            );
            entries.push(RequirementStatus {
                group: String::new(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: sa,
                status: StatusReason::PresentNotSatisfied,
                message,
                uuid: None,
                dependents: None,
            });
            continue;
        }
        let checks: Vec<&PermissionCheck> = permissions
            .unwrap_or_default()
            .iter()
            .filter(|p| p.service_account == sa)
            .collect();
        let dependents: Vec<DependentStatus> = checks
            .iter()
            .map(|check| {
                let scope = if check.cluster { "cluster" } else { "namespaced" };
                let rule = serde_json::to_string(&check.rule).unwrap_or_default();
                DependentStatus {
                    group: "rbac.authorization.k8s.io".into(),
                    version: "v1".into(),
                    kind: "PolicyRule".into(),
                    status: if check.satisfied { StatusReason::Satisfied } else { StatusReason::NotSatisfied },
                    uuid: None,
                    message: Some(format!("{scope} rule:{rule}")),
                }
            })
            .collect();
        let all_satisfied = checks.iter().all(|c| c.satisfied);
        met &= all_satisfied;
        entries.push(RequirementStatus {
            group: String::new(),
            version: "v1".into(),
            kind: "ServiceAccount".into(),
            name: sa,
            status: if all_satisfied { StatusReason::Present } else { StatusReason::PresentNotSatisfied },
            message: if all_satisfied {
                String::new()
            } else {
                "Policy rule not satisfied for service account".into()
            },
            uuid: None,
            dependents: (!dependents.is_empty()).then_some(dependents),
        });
    }
    (entries, met)
}
