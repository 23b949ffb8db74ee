//! Installing with an OperatorGroup's ServiceAccount (`spec.serviceAccountName`).
//!
//! When the group of a namespace names a ServiceAccount, what OLM installs for an operator there
//! is written by a client that impersonates `system:serviceaccount:<ns>:<sa>`. The API server's
//! own authorization and RBAC escalation checks then decide what may be created or granted, so
//! OLM never grants more than the ServiceAccount holds.
//!
//! Only the `Impersonate-User` header is sent: for a ServiceAccount user the API server adds the
//! groups `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`
//! itself, so OLM needs `impersonate` on `serviceaccounts` and nothing on `groups`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::{Client, ResourceExt};
use olm_api::v1::operator_group::OperatorGroup;

/// At most this many impersonating clients are kept; past it the cache starts over (a client
/// is cheap to rebuild, this only bounds memory with many namespaces).
const MAX_CACHED: usize = 4096;

pub use olm_runtime::client::service_account_username;

/// A ServiceAccount OLM acts as, and the group that names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceAccountRef {
    /// Namespace (the group's).
    pub namespace: String,
    /// `spec.serviceAccountName`.
    pub name: String,
    /// The OperatorGroup naming it.
    pub group: String,
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServiceAccount {}/{}", self.namespace, self.name)
    }
}

/// Who installs an operator into a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallIdentity {
    /// OLM itself: the namespace's group names no ServiceAccount.
    Olm,
    /// The ServiceAccount named by the namespace's group.
    ServiceAccount(ServiceAccountRef),
    /// Nobody yet; the message says why and what to change.
    Unavailable(String),
}

/// Who installs into `namespace`, from the OperatorGroups in it. Exactly one group is needed (as
/// upstream's catalog operator requires for plan execution); a named ServiceAccount is used once
/// the OperatorGroup controller has found it (`status.serviceAccountRef`).
pub fn install_identity(namespace: &str, groups: &[&OperatorGroup]) -> InstallIdentity {
    let group = match groups {
        [] => {
            return InstallIdentity::Unavailable(format!(
                "no OperatorGroup in namespace {namespace}: create one (spec.targetNamespaces, spec.selector, or {{}} for all namespaces) so OLM knows whom the operator serves and with whose permissions to install it"
            ));
        }
        [group] => *group,
        several => {
            let mut names: Vec<String> = several.iter().map(|g| g.name_any()).collect();
            names.sort();
            return InstallIdentity::Unavailable(format!(
                "{} OperatorGroups in namespace {namespace} ({}): keep exactly one, OLM cannot tell whose spec.serviceAccountName to install with",
                names.len(),
                names.join(", ")
            ));
        }
    };
    let Some(name) = group.spec.service_account_name.as_deref().filter(|n| !n.is_empty()) else {
        return InstallIdentity::Olm;
    };
    let found = group
        .status
        .as_ref()
        .and_then(|s| s.service_account_ref.as_ref())
        .is_some_and(|r| r.name.as_deref() == Some(name));
    if !found {
        return InstallIdentity::Unavailable(format!(
            "OperatorGroup {namespace}/{} installs operators as ServiceAccount {name:?} (spec.serviceAccountName), which does not exist in namespace {namespace}: create it and grant it what the operator's install needs, or remove spec.serviceAccountName to install with OLM's permissions",
            group.name_any()
        ));
    }
    InstallIdentity::ServiceAccount(ServiceAccountRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        group: group.name_any(),
    })
}

/// Upstream's words for why nobody can install into the namespace of `groups` (its scoped
/// querier's errors, which clients compare verbatim in the InstallPlan's `Installed`
/// condition); [`install_identity`]'s message explains it and says what to change.
pub fn upstream_unavailable_words(groups: &[&OperatorGroup]) -> String {
    match groups {
        [] => "no operator group found that is managing this namespace".to_owned(),
        [group] => format!(
            "please make sure the service account exists. sa={} operatorgroup={}/{}",
            group.spec.service_account_name.as_deref().unwrap_or_default(),
            group.namespace().unwrap_or_default(),
            group.name_any()
        ),
        several => format!("more than one operator group(s) are managing this namespace count={}", several.len()),
    }
}

/// Why no impersonating client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ScopedClientError {
    /// The name cannot be sent in an HTTP header.
    #[error("spec.serviceAccountName {name:?} of OperatorGroup {namespace}/{group} is not a valid ServiceAccount name")]
    InvalidName {
        /// Namespace.
        namespace: String,
        /// The name as written.
        name: String,
        /// The group.
        group: String,
    },
    /// The group names a ServiceAccount that does not exist (yet).
    #[error("{0}")]
    Unavailable(String),
}

impl ScopedClientError {
    /// PascalCase category.
    pub fn category(&self) -> &'static str {
        match self {
            ScopedClientError::InvalidName { .. } => "InvalidServiceAccountName",
            ScopedClientError::Unavailable(_) => "InstallIdentityUnavailable",
        }
    }

    /// Whether retrying without a change can help (both need somebody to fix the group).
    pub fn retryable(&self) -> bool {
        false
    }
}

/// OLM's client and the impersonating clients derived from it, one per ServiceAccount. They
/// share the base client's connection and credentials; only the header differs.
#[derive(Clone)]
pub struct ScopedClients {
    base: Client,
    cache: Arc<Mutex<HashMap<(String, String), Client>>>,
}

impl ScopedClients {
    /// Derive impersonating clients from `base` (OLM's own).
    pub fn new(base: Client) -> Self {
        Self {
            base,
            cache: Arc::default(),
        }
    }

    /// OLM's own client.
    pub fn base(&self) -> &Client {
        &self.base
    }

    /// A client acting as `sa` (cached). Must be called within a tokio runtime.
    pub fn for_service_account(&self, sa: &ServiceAccountRef) -> Result<Client, ScopedClientError> {
        let key = (sa.namespace.clone(), sa.name.clone());
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = cache.get(&key) {
            return Ok(client.clone());
        }
        let user = service_account_username(&sa.namespace, &sa.name);
        let client = olm_runtime::client::impersonating(&self.base, &user, &sa.namespace).ok_or_else(|| ScopedClientError::InvalidName {
            namespace: sa.namespace.clone(),
            name: sa.name.clone(),
            group: sa.group.clone(),
        })?;
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, client.clone());
        Ok(client)
    }

    /// The client that writes what OLM installs into `namespace` for `identity`: OLM's own, or
    /// the ServiceAccount's. Never falls back to OLM's own when a ServiceAccount is named.
    pub fn for_identity(&self, identity: &InstallIdentity) -> Result<Client, ScopedClientError> {
        match identity {
            InstallIdentity::Olm => Ok(self.base.clone()),
            InstallIdentity::ServiceAccount(sa) => self.for_service_account(sa),
            InstallIdentity::Unavailable(message) => Err(ScopedClientError::Unavailable(message.clone())),
        }
    }

    /// The client for what the CSV controller installs for an operator of `namespace` (its
    /// Deployments, RBAC, webhooks, APIServices: csv/installer.rs), and the ServiceAccount it
    /// acts as: the group's ServiceAccount when exactly one group names one (an error while it
    /// is missing), else OLM's own (the CSV controller reports missing or extra groups on the
    /// CSV itself).
    pub fn for_workloads(&self, namespace: &str, groups: &[&OperatorGroup]) -> Result<(Client, Option<ServiceAccountRef>), ScopedClientError> {
        match install_identity(namespace, groups) {
            InstallIdentity::ServiceAccount(sa) => Ok((self.for_service_account(&sa)?, Some(sa))),
            InstallIdentity::Unavailable(message) if groups.len() == 1 => Err(ScopedClientError::Unavailable(message)),
            _ => Ok((self.base.clone(), None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use olm_api::v1::operator_group::{OperatorGroupSpec, OperatorGroupStatus};

    fn group(name: &str, sa: Option<&str>, found: Option<&str>) -> OperatorGroup {
        let mut g = OperatorGroup::new(
            name,
            OperatorGroupSpec {
                service_account_name: sa.map(str::to_owned),
                ..Default::default()
            },
        );
        g.metadata.namespace = Some("team".into());
        g.status = Some(OperatorGroupStatus {
            namespaces: Some(vec!["team".into()]),
            service_account_ref: found.map(|n| ObjectReference {
                name: Some(n.into()),
                namespace: Some("team".into()),
                kind: Some("ServiceAccount".into()),
                ..Default::default()
            }),
            last_updated: None,
            conditions: None,
        });
        g
    }

    #[test]
    fn the_one_group_decides_who_installs() {
        assert_eq!(install_identity("team", &[&group("og", None, None)]), InstallIdentity::Olm);
        assert_eq!(
            install_identity("team", &[&group("og", Some("installer"), Some("installer"))]),
            InstallIdentity::ServiceAccount(ServiceAccountRef {
                namespace: "team".into(),
                name: "installer".into(),
                group: "og".into()
            })
        );
        let InstallIdentity::Unavailable(missing) = install_identity("team", &[&group("og", Some("installer"), None)]) else {
            panic!("a missing ServiceAccount is not usable");
        };
        assert!(
            missing.contains("\"installer\"") && missing.contains("team/og") && missing.contains("does not exist"),
            "{missing}"
        );
        // A ref left over from a previous name does not count.
        assert!(matches!(
            install_identity("team", &[&group("og", Some("new"), Some("old"))]),
            InstallIdentity::Unavailable(_)
        ));
        let InstallIdentity::Unavailable(none) = install_identity("team", &[]) else {
            panic!("no group");
        };
        assert!(none.contains("no OperatorGroup in namespace team"), "{none}");
        let (a, b) = (group("b", None, None), group("a", Some("x"), Some("x")));
        let InstallIdentity::Unavailable(two) = install_identity("team", &[&a, &b]) else {
            panic!("two groups");
        };
        assert!(two.contains("2 OperatorGroups") && two.contains("(a, b)"), "{two}");
    }

    #[test]
    fn usernames_are_the_service_account_form() {
        assert_eq!(service_account_username("ns", "sa"), "system:serviceaccount:ns:sa");
    }

    /// A fake API server answering every request with the `impersonate-user` header it got
    /// (empty when none) as the body of a ConfigMap's data.
    fn echo_client() -> Client {
        use axum::http::{HeaderValue, Request};
        use kube::client::Body;
        const IMPERSONATE_USER: &str = "impersonate-user";
        let service = tower::service_fn(|request: Request<Body>| async move {
            let user = request
                .headers()
                .get(IMPERSONATE_USER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "echo", "namespace": "team"},
                "data": {"user": user},
            });
            let mut response = axum::http::Response::new(Body::from(body.to_string().into_bytes()));
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            Ok::<_, std::convert::Infallible>(response)
        });
        Client::new(service, "default")
    }

    async fn user_seen_by_server(client: Client) -> String {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "team");
        match api.get("echo").await {
            Ok(cm) => cm.data.unwrap_or_default().get("user").cloned().unwrap_or_default(),
            Err(err) => format!("request failed: {err}"),
        }
    }

    #[tokio::test]
    async fn requests_carry_the_service_account_as_impersonated_user() {
        let clients = ScopedClients::new(echo_client());
        let sa = ServiceAccountRef {
            namespace: "team".into(),
            name: "installer".into(),
            group: "og".into(),
        };
        let scoped = clients.for_service_account(&sa).expect("valid name");
        assert_eq!(user_seen_by_server(scoped).await, "system:serviceaccount:team:installer");
        assert_eq!(user_seen_by_server(clients.base().clone()).await, "", "OLM's own client impersonates nobody");

        // The workload client follows the group; a named but missing ServiceAccount is an error,
        // never a silent fallback to OLM's own permissions.
        let named = group("og", Some("installer"), Some("installer"));
        let (workload, _) = clients.for_workloads("team", &[&named]).expect("client");
        assert_eq!(user_seen_by_server(workload).await, "system:serviceaccount:team:installer");
        let missing = group("og", Some("installer"), None);
        assert!(clients.for_workloads("team", &[&missing]).is_err());
        let unnamed = group("og", None, None);
        assert_eq!(user_seen_by_server(clients.for_workloads("team", &[&unnamed]).expect("client").0).await, "");

        let bad = ServiceAccountRef {
            name: "bad\nname".into(),
            ..sa
        };
        assert!(matches!(clients.for_service_account(&bad), Err(ScopedClientError::InvalidName { .. })));
    }
}
