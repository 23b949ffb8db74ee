//! Permission checks of the observe step: whether the operator's ServiceAccounts hold the rules
//! the strategy declares, from the RBAC generated for the CSV where it grants them, else by
//! SubjectAccessReviews.

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_runtime::{Error, Result};

use crate::metadata::owner_selector;
use super::requirements::{GeneratedRbac, PermissionCheck, declared_rules, granted_by};

/// Check every declared rule of the ServiceAccounts in `existing_service_accounts`, in the
/// order of declaration.
pub(super) async fn check_permissions(
    client: &kube::Client,
    csv: &ClusterServiceVersion,
    existing_service_accounts: &BTreeSet<String>,
) -> Result<Vec<PermissionCheck>> {
    let own = csv.namespace().unwrap_or_default();
    let own = own.as_str();
    let rules: Vec<(String, bool, PolicyRule)> =
        declared_rules(csv).into_iter().filter(|(sa, _, _)| existing_service_accounts.contains(sa)).collect();
    let generated = if rules.is_empty() {
        GeneratedRbac::default()
    } else {
        generated_rbac(client, csv, rules.iter().any(|(_, cluster, _)| *cluster)).await
    };
    let generated = &generated;
    futures::stream::iter(rules)
        .map(|(sa, cluster, rule)| async move {
            // As upstream: namespaced rules in the operator's namespace (for all-namespaces
            // groups the Roles are then lifted to ClusterRoles), cluster rules cluster-wide.
            let satisfied = granted_by(generated, own, &sa, cluster, &rule)
                || rule_allowed(client, own, &sa, (!cluster).then_some(own), &rule).await?;
            Ok::<PermissionCheck, Error>(PermissionCheck {
                service_account: sa,
                cluster,
                rule,
                satisfied,
            })
        })
        // `buffered` keeps the rules' order, which the requirement status lists.
        .buffered(REVIEWS_IN_FLIGHT)
        .try_collect()
        .await
}

/// One SubjectAccessReview per (group, resource, verb, name) of the rule; the rule is satisfied
/// when every one is allowed.
async fn rule_allowed(client: &kube::Client, user_ns: &str, sa: &str, namespace: Option<&str>, rule: &PolicyRule) -> Result<bool> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let user = format!("system:serviceaccount:{user_ns}:{sa}");
    let groups = vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{user_ns}"),
        "system:authenticated".to_owned(),
    ];
    let mut attributes = Vec::new();
    let verbs = rule.verbs.clone();
    for url in rule.non_resource_urls.iter().flatten() {
        for verb in &verbs {
            attributes.push((None, Some(NonResourceAttributes {
                path: Some(url.clone()),
                verb: Some(verb.clone()),
            })));
        }
    }
    let api_groups = rule.api_groups.clone().unwrap_or_default();
    let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
        Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
        _ => vec![None],
    };
    for group in &api_groups {
        for resource in rule.resources.iter().flatten() {
            let (resource, subresource) = match resource.split_once('/') {
                Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                None => (resource.clone(), None),
            };
            for verb in &verbs {
                for name in &names {
                    attributes.push((
                        Some(ResourceAttributes {
                            namespace: namespace.map(str::to_owned),
                            group: Some(group.clone()),
                            resource: Some(resource.clone()),
                            subresource: subresource.clone(),
                            verb: Some(verb.clone()),
                            name: name.clone(),
                            ..Default::default()
                        }),
                        None,
                    ));
                }
            }
        }
    }
    // The reviews are independent: asked a few at a time, since a CSV's rules expand to dozens
    // and asking one after the other was most of the time of a CSV's first reconcile.
    let answers: Vec<bool> = futures::stream::iter(attributes)
        .map(|(resource_attributes, non_resource_attributes)| {
            let review = SubjectAccessReview {
                metadata: Default::default(),
                spec: SubjectAccessReviewSpec {
                    user: Some(user.clone()),
                    groups: Some(groups.clone()),
                    resource_attributes,
                    non_resource_attributes,
                    ..Default::default()
                },
                status: None,
            };
            let api = api.clone();
            async move {
                let answer = api
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|err| Error::api(format!("check permissions of ServiceAccount {user_ns}/{sa}"), err))?;
                Ok::<bool, Error>(answer.status.is_some_and(|s| s.allowed))
            }
        })
        .buffer_unordered(REVIEWS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(answers.into_iter().all(|allowed| allowed))
}

/// SubjectAccessReviews in flight per rule, and rules checked at once.
const REVIEWS_IN_FLIGHT: usize = 8;

/// The RBAC labelled as generated for `csv`, listed at once (the cluster-scoped kinds only
/// when it has cluster rules). A list that fails leaves its part empty: the rules it would
/// have granted are then asked of the API server.
async fn generated_rbac(client: &kube::Client, csv: &ClusterServiceVersion, cluster: bool) -> GeneratedRbac {
    let namespace = csv.namespace().unwrap_or_default();
    // From the API server's watch cache: a list that misses a role created a moment ago only
    // sends its rules to SubjectAccessReviews.
    let params = kube::api::ListParams::default().labels(&owner_selector(csv)).match_any();
    async fn listed<K>(api: Api<K>, params: &kube::api::ListParams, wanted: bool) -> Vec<K>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        if !wanted {
            return Vec::new();
        }
        match api.list(params).await {
            Ok(list) => list.items,
            Err(err) => {
                tracing::debug!(%err, "cannot list generated RBAC; asking SubjectAccessReviews instead");
                Vec::new()
            }
        }
    }
    let (roles, bindings, cluster_roles, cluster_bindings) = futures::join!(
        listed(Api::<Role>::namespaced(client.clone(), &namespace), &params, true),
        listed(Api::<RoleBinding>::namespaced(client.clone(), &namespace), &params, true),
        listed(Api::<ClusterRole>::all(client.clone()), &params, cluster),
        listed(Api::<ClusterRoleBinding>::all(client.clone()), &params, cluster),
    );
    GeneratedRbac { roles, bindings, cluster_roles, cluster_bindings }
}
