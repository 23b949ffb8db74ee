//! What a cluster admin does to an installed operator, as the user (their credentials, their
//! refusals): [`uninstall`] and [`rollback`]. Each is planned from the cluster first (what
//! goes, what stays, what comes back), shown by its front end — `kubectl olm` in a terminal,
//! `olm console` in a page — and carried out only once confirmed there.

pub mod rollback;
pub mod uninstall;

use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::subscription::Subscription;

/// How long to wait for each thing an action waits for (operands gone, a CSV gone, a rollback
/// done), how often to look, and where to say what is waited for.
pub struct Waiting<'a> {
    pub limit: std::time::Duration,
    pub poll: std::time::Duration,
    pub progress: &'a (dyn Fn(&str) + Send + Sync),
}

/// Why an admin action did not happen, or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A request to the API server failed (the user's refusal included): what we were doing
    /// and what it said.
    #[error(transparent)]
    Api(#[from] olm_runtime::error::Error),
    /// Not possible as asked; the message says why and what to do instead.
    #[error("{0}")]
    Refused(String),
    /// OLM or the operator did not finish in time; the message names what holds it.
    #[error("{0}")]
    NotFinished(String),
}

impl AdminError {
    fn api(action: impl Into<String>, source: kube::Error) -> Self {
        AdminError::Api(olm_runtime::error::Error::api(action, source))
    }

    /// Whether asking again later can succeed without anybody changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            AdminError::Api(err) => err.retryable(),
            AdminError::Refused(_) => false,
            AdminError::NotFinished(_) => true,
        }
    }

    /// PascalCase category, as every OLM error has one.
    pub fn category(&self) -> &'static str {
        match self {
            AdminError::Api(err) => err.category(),
            AdminError::Refused(_) => "Refused",
            AdminError::NotFinished(_) => "NotFinished",
        }
    }
}

/// The Subscription `name` of `namespace`; refused, saying how to list them, when it does not
/// exist.
pub async fn subscription(client: &kube::Client, namespace: &str, name: &str) -> Result<(Api<Subscription>, Subscription), AdminError> {
    let api: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let sub = api
        .get_opt(name)
        .await
        .map_err(|err| AdminError::api(format!("cannot read Subscription {namespace}/{name}"), err))?
        .ok_or_else(|| AdminError::Refused(format!("Subscription {namespace}/{name} not found (kubectl get subscriptions -n {namespace})")))?;
    Ok((api, sub))
}

/// The PackageManifest of `sub`'s package in its catalog, from the PackageManifest API
/// (None when the catalog does not list it), or why it cannot be read.
pub async fn package_manifest(client: &kube::Client, sub: &Subscription) -> Result<Option<DynamicObject>, String> {
    let resource = ApiResource {
        group: "packages.operators.coreos.com".into(),
        version: "v1".into(),
        api_version: "packages.operators.coreos.com/v1".into(),
        kind: "PackageManifest".into(),
        plural: "packagemanifests".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &sub.namespace().unwrap_or_default(), &resource);
    let catalog_ns = if sub.spec.source_namespace.is_empty() { sub.namespace().unwrap_or_default() } else { sub.spec.source_namespace.clone() };
    let selector = format!("catalog={},catalog-namespace={catalog_ns}", sub.spec.source);
    let list = api.list(&ListParams::default().labels(&selector)).await.map_err(|err| match olm_runtime::error::api_status_code(&err) {
        Some(404) => "this cluster does not serve the PackageManifest API (OLM's packageserver is not running)".to_owned(),
        _ => format!("the PackageManifest API did not answer: {}", olm_runtime::error::api_message(&err)),
    })?;
    Ok(list.items.into_iter().find(|p| p.name_any() == sub.spec.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_not_retried_and_unfinished_work_is() {
        assert!(!AdminError::Refused("x".into()).retryable());
        assert!(AdminError::NotFinished("x".into()).retryable());
        assert_eq!(AdminError::Refused("x".into()).category(), "Refused");
        let forbidden = kube::Error::Api(Box::new(kube::core::Status::failure("no", "Forbidden").with_code(403)));
        let err = AdminError::api("cannot delete Subscription a/b", forbidden);
        assert_eq!((err.category(), err.retryable()), ("ApiForbidden", false));
        assert_eq!(err.to_string(), "cannot delete Subscription a/b: no (Forbidden, HTTP 403)");
    }
}
