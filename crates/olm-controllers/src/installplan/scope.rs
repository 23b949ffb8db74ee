//! What a user reads when a plan step is refused by the API server (pure): which identity was
//! refused, the verb, the resource and namespace, and what to grant so that the next retry
//! succeeds.

use crate::scoped_client::ServiceAccountRef;

/// The object a refused step writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedStep<'a> {
    /// Kind, e.g. `RoleBinding`.
    pub kind: &'a str,
    /// Name.
    pub name: &'a str,
    /// API group (`""` for core).
    pub group: &'a str,
    /// Plural resource name.
    pub plural: &'a str,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<&'a str>,
    /// The verb OLM's request used (`get` or `patch`).
    pub request_verb: &'a str,
}

/// The verbs OLM needs on every kind it installs: it reads the object, then applies it
/// (server-side apply is a patch, and a patch that creates needs `create`).
pub const INSTALL_VERBS: &str = "get,create,patch";

/// The verb the API server refused, read from its message (`... cannot create resource ...`);
/// `fallback` when the message has another shape.
pub fn refused_verb<'a>(api_message: &'a str, fallback: &'a str) -> &'a str {
    api_message
        .split_once(" cannot ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .filter(|verb| verb.chars().all(|c| c.is_ascii_lowercase()))
        .unwrap_or(fallback)
}

/// Whether the API server refused because RBAC objects would grant more than the requester holds.
pub fn is_escalation(api_message: &str) -> bool {
    api_message.contains("attempting to grant RBAC permissions not currently held")
}

fn resource_with_group(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

fn described(step: &RefusedStep<'_>) -> String {
    match step.namespace {
        Some(ns) => format!("{} {ns}/{}", step.kind, step.name),
        None => format!("{} {}", step.kind, step.name),
    }
}

/// The message for a step that `sa` may not perform.
pub fn forbidden_for_service_account(sa: &ServiceAccountRef, step: &RefusedStep<'_>, api_message: &str) -> String {
    let who = format!(
        "{sa} (spec.serviceAccountName of OperatorGroup {}/{})",
        sa.namespace, sa.group
    );
    let retry = "OLM installs this operator with that ServiceAccount's permissions only and retries the step until they suffice";
    if is_escalation(api_message) {
        let (role_kind, verb) = match step.kind {
            "RoleBinding" | "ClusterRoleBinding" => (if step.kind == "RoleBinding" { "roles" } else { "clusterroles" }, "bind"),
            _ => (if step.kind == "Role" { "roles" } else { "clusterroles" }, "escalate"),
        };
        let scope = match step.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "cluster-wide".to_owned(),
        };
        return format!(
            "{who} may not create {}: it would grant permissions the ServiceAccount does not hold itself. Grant the ServiceAccount those permissions {scope}, or the {verb} verb on {role_kind} (API group \"rbac.authorization.k8s.io\"). {retry}. API server: {api_message}",
            described(step)
        );
    }
    let verb = refused_verb(api_message, step.request_verb);
    let resource = resource_with_group(step.plural, step.group);
    let group = if step.group.is_empty() { "core" } else { step.group };
    let role = format!("olm-install-{}", step.plural);
    let (scope, example) = match step.namespace {
        Some(ns) => (
            format!("in namespace {ns}"),
            format!(
                "kubectl -n {ns} create role {role} --verb={INSTALL_VERBS} --resource={resource} && kubectl -n {ns} create rolebinding {role} --role={role} --serviceaccount={}:{}",
                sa.namespace, sa.name
            ),
        ),
        None => {
            let name = format!("{}-{}-{role}", sa.namespace, sa.name);
            (
                "at cluster scope".to_owned(),
                format!(
                    "kubectl create clusterrole {name} --verb={INSTALL_VERBS} --resource={resource} && kubectl create clusterrolebinding {name} --clusterrole={name} --serviceaccount={}:{}",
                    sa.namespace, sa.name
                ),
            )
        }
    };
    format!(
        "{who} may not {verb} {} (API group {group}) {scope}, needed for {}. Grant it {INSTALL_VERBS} on {resource}, e.g. {example}. {retry}. API server: {api_message}",
        step.plural,
        described(step)
    )
}

/// The message for a step OLM's own identity may not perform (no ServiceAccount named).
pub fn forbidden_for_olm(step: &RefusedStep<'_>, api_message: &str) -> String {
    format!(
        "the API server refused to let OLM {} {}: {api_message}; OLM retries until it is allowed (check OLM's ClusterRole, or the admission policy that refused it)",
        refused_verb(api_message, step.request_verb),
        described(step)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa() -> ServiceAccountRef {
        ServiceAccountRef {
            namespace: "team".into(),
            name: "installer".into(),
            group: "og".into(),
        }
    }

    #[test]
    fn a_missing_permission_names_account_verb_resource_namespace_and_the_grant() {
        let step = RefusedStep {
            kind: "RoleBinding",
            name: "etcdoperator.v0.9.4-etcd-operator-abc",
            group: "rbac.authorization.k8s.io",
            plural: "rolebindings",
            namespace: Some("team"),
            request_verb: "get",
        };
        let api = r#"rolebindings.rbac.authorization.k8s.io "etcdoperator.v0.9.4-etcd-operator-abc" is forbidden: User "system:serviceaccount:team:installer" cannot get resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "team""#;
        let message = forbidden_for_service_account(&sa(), &step, api);
        for part in [
            "ServiceAccount team/installer",
            "OperatorGroup team/og",
            "may not get rolebindings",
            "in namespace team",
            "RoleBinding team/etcdoperator.v0.9.4-etcd-operator-abc",
            "Grant it get,create,patch on rolebindings.rbac.authorization.k8s.io",
            "kubectl -n team create role olm-install-rolebindings --verb=get,create,patch --resource=rolebindings.rbac.authorization.k8s.io",
            "--serviceaccount=team:installer",
            "retries",
        ] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
    }

    #[test]
    fn the_refused_verb_comes_from_the_api_server() {
        assert_eq!(
            refused_verb(r#"x is forbidden: User "u" cannot create resource "roles""#, "patch"),
            "create"
        );
        assert_eq!(refused_verb("denied by policy", "patch"), "patch");
    }

    #[test]
    fn cluster_scoped_steps_suggest_a_cluster_role() {
        let step = RefusedStep {
            kind: "ClusterRole",
            name: "etcd-x",
            group: "rbac.authorization.k8s.io",
            plural: "clusterroles",
            namespace: None,
            request_verb: "patch",
        };
        let message = forbidden_for_service_account(&sa(), &step, r#"User "system:serviceaccount:team:installer" cannot patch resource "clusterroles""#);
        assert!(message.contains("may not patch clusterroles (API group rbac.authorization.k8s.io) at cluster scope"), "{message}");
        assert!(message.contains("kubectl create clusterrole team-installer-olm-install-clusterroles"), "{message}");
    }

    #[test]
    fn escalation_says_to_hold_the_permissions_or_escalate_or_bind() {
        let api = r#"roles.rbac.authorization.k8s.io "r" is forbidden: user "system:serviceaccount:team:installer" (groups=["system:serviceaccounts"]) is attempting to grant RBAC permissions not currently held: {APIGroups:[""], Resources:["pods"], Verbs:["*"]}"#;
        let role = RefusedStep {
            kind: "Role",
            name: "r",
            group: "rbac.authorization.k8s.io",
            plural: "roles",
            namespace: Some("team"),
            request_verb: "patch",
        };
        let message = forbidden_for_service_account(&sa(), &role, api);
        assert!(message.contains("does not hold itself") && message.contains("escalate verb on roles"), "{message}");
        assert!(message.contains(r#"Resources:["pods"]"#), "keeps the API server's list: {message}");
        let binding = RefusedStep {
            kind: "ClusterRoleBinding",
            namespace: None,
            plural: "clusterrolebindings",
            ..role
        };
        let message = forbidden_for_service_account(&sa(), &binding, api);
        assert!(message.contains("bind verb on clusterroles") && message.contains("cluster-wide"), "{message}");
    }
}
