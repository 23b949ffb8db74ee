//! Requirement checks (the Pending gate), pure part: CRDs, ServiceAccounts and permissions,
//! reported as `status.requirementStatus` entries with upstream's strings.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
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

/// The RBAC labelled as generated for a CSV (what its InstallPlan wrote from the install
/// strategy): read once per permission check instead of asking the API server one
/// SubjectAccessReview per verb and resource.
#[derive(Clone, Debug, Default)]
pub struct GeneratedRbac {
    /// Roles in the CSV's namespace.
    pub roles: Vec<Role>,
    /// RoleBindings in the CSV's namespace.
    pub bindings: Vec<RoleBinding>,
    /// ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// ClusterRoleBindings.
    pub cluster_bindings: Vec<ClusterRoleBinding>,
}

/// Whether `generated` alone grants `rule` to ServiceAccount `sa` of `namespace` (in that
/// namespace, or cluster-wide when `cluster`): a role holding the very rule, bound to the
/// account. RBAC only adds permissions, so this is enough; when it does not hold (someone
/// else's roles, aggregation, an edited role) the caller asks the API server.
pub fn granted_by(generated: &GeneratedRbac, namespace: &str, sa: &str, cluster: bool, rule: &PolicyRule) -> bool {
    let binds_account = |subjects: Option<&Vec<Subject>>| {
        subjects.into_iter().flatten().any(|s| {
            s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(namespace)
        })
    };
    let refers = |role_ref: &RoleRef, kind: &str, name: Option<&String>| role_ref.kind == kind && Some(&role_ref.name) == name;
    let holds = |rules: Option<&Vec<PolicyRule>>| rules.into_iter().flatten().any(|r| r == rule);
    let cluster_wide = generated.cluster_roles.iter().filter(|r| r.aggregation_rule.is_none() && holds(r.rules.as_ref())).any(|role| {
        generated
            .cluster_bindings
            .iter()
            .any(|b| refers(&b.role_ref, "ClusterRole", role.metadata.name.as_ref()) && binds_account(b.subjects.as_ref()))
    });
    if cluster || cluster_wide {
        return cluster_wide;
    }
    generated
        .roles
        .iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace) && holds(r.rules.as_ref()))
        .any(|role| {
            generated.bindings.iter().any(|b| {
                b.metadata.namespace.as_deref() == Some(namespace)
                    && refers(&b.role_ref, "Role", role.metadata.name.as_ref())
                    && binds_account(b.subjects.as_ref())
            })
        })
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

/// The other operators that own a ServiceAccount (by its ownerReferences), for the CSV with
/// uid `own_uid`: none when no ClusterServiceVersion owns it or this CSV is among its owners;
/// owners in `chain` (this CSV's replacement chain: an upgrade's InstallPlan hands the account
/// to the new version) and owners that no longer exist among `peers` do not count.
pub fn foreign_owners(
    owner_references: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    own_uid: &str,
    chain: &BTreeSet<String>,
    peers: &[&ClusterServiceVersion],
) -> Vec<String> {
    let owners: Vec<_> = owner_references.iter().filter(|o| o.kind == "ClusterServiceVersion").collect();
    if owners.iter().any(|o| o.uid == own_uid) {
        return Vec::new();
    }
    owners
        .into_iter()
        .filter(|o| !chain.contains(&o.name))
        .filter(|o| {
            peers
                .iter()
                .any(|p| kube::ResourceExt::name_any(*p) == o.name && p.metadata.uid.as_deref() == Some(o.uid.as_str()))
        })
        .map(|o| o.name.clone())
        .collect()
}

/// The CSVs this CSV replaces that own a ServiceAccount, when they are its only CSV owners:
/// the account still belongs to the version being replaced. Its InstallPlan hands it over;
/// until then the account (and the old version's roles bound to it, which go when that
/// version is deleted) are not this CSV's, and counting them as met would let it replace the
/// old version and then lose the account with it.
pub fn predecessor_owners(
    owner_references: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    own_uid: &str,
    replaced: &BTreeSet<String>,
) -> Vec<String> {
    let owners: Vec<_> = owner_references.iter().filter(|o| o.kind == "ClusterServiceVersion").collect();
    if owners.is_empty() || owners.iter().any(|o| o.uid == own_uid) || !owners.iter().all(|o| replaced.contains(&o.name)) {
        return Vec::new();
    }
    owners.into_iter().map(|o| o.name.clone()).collect()
}

/// The CSVs `csv` replaces, directly or through the CSVs in `peers` (not those replacing it).
pub fn replaced_by(csv: &ClusterServiceVersion, peers: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let mut replaced = BTreeSet::new();
    let mut cursor = csv.spec.replaces.clone();
    while let Some(name) = cursor.filter(|n| !n.is_empty()) {
        if !replaced.insert(name.clone()) {
            break;
        }
        cursor = peers.iter().find(|p| kube::ResourceExt::name_any(**p) == name).and_then(|p| p.spec.replaces.clone());
    }
    replaced
}

/// The ServiceAccounts the CSV's permissions name (an entry without rules too: its account is
/// still required, as upstream checks it).
pub fn declared_service_accounts(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    let Some(strategy) = csv.spec.install.spec.as_ref() else {
        return BTreeSet::new();
    };
    strategy
        .permissions
        .iter()
        .flatten()
        .chain(strategy.cluster_permissions.iter().flatten())
        .map(|p| p.service_account_name.clone())
        .collect()
}

/// What the cluster offers that the requirement checks read.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// CRDs the CSV owns or requires, by name (absent = not found).
    pub crds: &'a BTreeMap<String, CrdState>,
    /// Declared ServiceAccounts that exist.
    pub service_accounts: &'a BTreeSet<String>,
    /// Existing ServiceAccounts other CSVs own (ownerReferences), with those owners: an
    /// operator never runs as another operator's account.
    pub foreign_service_accounts: &'a BTreeMap<String, Vec<String>>,
    /// Existing ServiceAccounts owned only by versions this CSV replaces, with those owners
    /// (see [`predecessor_owners`]).
    pub inherited_service_accounts: &'a BTreeMap<String, Vec<String>>,
    /// The API server's `gitVersion` (e.g. `v1.36.0`); `None` when it could not be read.
    /// Read only for CSVs that set `minKubeVersion`.
    pub kube_version: Option<&'a str>,
    /// Kinds served per group/version (`v1`, `apps/v1`) for the group/versions named by the
    /// CSV's `nativeAPIs` and required APIServices; absent when not served.
    pub served_kinds: &'a BTreeMap<String, BTreeSet<String>>,
    /// Required APIServices that exist, by name, with whether they are Available.
    pub required_api_services: &'a BTreeMap<String, bool>,
}

/// `major.minor.patch` of a version string: a leading `v` and anything after `-` or `+` are
/// ignored; a missing patch (or minor) counts as 0 (upstream refuses `1.20`; we accept it).
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next().unwrap_or_default();
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
}

/// The group/versions whose served kinds [`check`] needs.
pub fn group_versions_to_discover(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    let native = csv.spec.native_apis.iter().flatten().map(|g| group_version(&g.group, &g.version));
    let required = csv.spec.required_api_services().iter().map(|a| group_version(&a.group, &a.version));
    native.chain(required).collect()
}

/// Check the CSV's requirements, in upstream's order (minKubeVersion, CRDs, required and owned
/// APIServices, native APIs, ServiceAccounts with their permissions). Returns the entries for
/// `status.requirementStatus` and whether every requirement is met. `permissions` is `None`
/// when they were not checked (they then count as met, with no dependents listed).
pub fn check(csv: &ClusterServiceVersion, facts: &Facts<'_>, permissions: Option<&[PermissionCheck]>) -> (Vec<RequirementStatus>, bool) {
    let Facts {
        crds,
        service_accounts,
        foreign_service_accounts,
        inherited_service_accounts,
        ..
    } = *facts;
    let mut entries = Vec::new();
    let mut met = true;

    if let Some(minimum) = csv.spec.min_kube_version.as_deref().filter(|v| !v.trim().is_empty()) {
        let (status, message) = match (facts.kube_version, facts.kube_version.and_then(parse_version), parse_version(minimum)) {
            (None, _, _) => (StatusReason::PresentNotSatisfied, "Server version discovery error".to_owned()),
            (Some(_), None, _) => (StatusReason::PresentNotSatisfied, "Server version parsing error".to_owned()),
            (Some(_), Some(_), None) => (
                StatusReason::PresentNotSatisfied,
                format!("CSV version parsing error: spec.minKubeVersion {minimum:?} is not a version like 1.25.0"),
            ),
            (Some(_), Some(server), Some(wanted)) if wanted > server => (
                StatusReason::PresentNotSatisfied,
                format!(
                    "CSV version requirement not met: minKubeVersion ({minimum}) > server version ({}.{}.{})",
                    server.0, server.1, server.2
                ),
            ),
            (Some(raw), Some(_), Some(_)) => (
                StatusReason::Present,
                format!("CSV minKubeVersion ({minimum}) less than server version ({raw})"),
            ),
        };
        met &= status == StatusReason::Present;
        entries.push(RequirementStatus {
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: kube::ResourceExt::name_any(csv),
            status,
            message,
            uuid: None,
            dependents: None,
        });
    }

    // One description per CRD name, as upstream's GetAllCRDDescriptions keeps: an owned one over
    // a required one, the last listed over earlier ones (a real CSV owns one CRD twice, at a
    // version it no longer serves and then at the one it does), in name order.
    let mut wanted_crds = BTreeMap::new();
    for crd in csv.spec.required_crds().iter().chain(csv.spec.owned_crds()) {
        wanted_crds.insert(crd.name.clone(), crd);
    }
    for crd in wanted_crds.into_values() {
        let (status, message) = match crds.get(&crd.name) {
            None => (StatusReason::NotPresent, "CRD is not present".to_owned()),
            // Upstream's words (clients compare them); which version is in the CSV's own
            // description of the CRD.
            Some(state) if !state.served_versions.contains(&crd.version) => (StatusReason::NotPresent, "CRD version not served".to_owned()),
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

    let served = |group: &str, version: &str, kind: &str| {
        facts
            .served_kinds
            .get(&group_version(group, version))
            .is_some_and(|kinds| kinds.contains(kind))
    };
    for api in csv.spec.required_api_services() {
        let name = api.api_service_name();
        let (status, message) = if !served(&api.group, &api.version, &api.kind) {
            (StatusReason::NotPresent, format!("{} is not served by the API server", api.kind))
        } else {
            match facts.required_api_services.get(&name) {
                None => (StatusReason::NotPresent, "APIService does not exist".to_owned()),
                Some(false) => (StatusReason::NotPresent, "APIService is not Available".to_owned()),
                Some(true) => (StatusReason::Present, String::new()),
            }
        };
        met &= status == StatusReason::Present;
        entries.push(RequirementStatus {
            group: "apiregistration.k8s.io".into(),
            version: "v1".into(),
            kind: "APIService".into(),
            name,
            status,
            message,
            uuid: None,
            dependents: None,
        });
    }
    let deployments: BTreeSet<&str> = csv.spec.strategy_deployment_names().collect();
    for api in csv.spec.owned_api_services() {
        let found = api.deployment_name.as_deref().is_some_and(|d| deployments.contains(d));
        met &= found;
        entries.push(RequirementStatus {
            group: "apiregistration.k8s.io".into(),
            version: "v1".into(),
            kind: "APIService".into(),
            name: api.api_service_name(),
            status: if found { StatusReason::DeploymentFound } else { StatusReason::DeploymentNotFound },
            message: if found {
                String::new()
            } else {
                format!(
                    "deploymentName {:?} is not one of spec.install.spec.deployments",
                    api.deployment_name.as_deref().unwrap_or_default()
                )
            },
            uuid: None,
            dependents: None,
        });
    }
    for native in csv.spec.native_apis.iter().flatten() {
        let present = served(&native.group, &native.version, &native.kind);
        met &= present;
        entries.push(RequirementStatus {
            group: native.group.clone(),
            version: native.version.clone(),
            kind: native.kind.clone(),
            name: format!("{}.{}", native.version, native.group),
            status: if present { StatusReason::Present } else { StatusReason::NotPresent },
            message: if present { "Native API exists" } else { "Native API does not exist" }.to_owned(),
            uuid: None,
            dependents: None,
        });
    }

    let csv_name = kube::ResourceExt::name_any(csv);
    for sa in declared_service_accounts(csv) {
        // Why the account cannot be used (yet), when it cannot.
        let unusable = if !service_accounts.contains(&sa) {
            Some((StatusReason::NotPresent, "Service account does not exist".to_owned()))
        } else if let Some(owners) = foreign_service_accounts.get(&sa) {
            // Upstream's message, then who owns it and who asked.
            let message = format!(
                "Service account is owned by another ClusterServiceVersion: {sa} owned by {}, required by {csv_name}",
                owners.join(", ")
            );
            Some((StatusReason::PresentNotSatisfied, message))
        } else {
            inherited_service_accounts.get(&sa).map(|owners| {
                let message = format!(
                    "Service account {sa} is still owned by {}, which {csv_name} replaces; waiting for the InstallPlan of {csv_name} to take it over",
                    owners.join(", ")
                );
                (StatusReason::PresentNotSatisfied, message)
            })
        };
        if let Some((status, message)) = unusable {
            met = false;
            entries.push(RequirementStatus {
                group: String::new(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: sa,
                status,
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
