//! Server-side apply that also says whether the apply created the object: the API server
//! answers 201 Created then and 200 OK otherwise. kube's `Api::patch` drops the status code,
//! and reading the object first to tell the two apart costs a request and a round trip per
//! object (an InstallPlan step is reported Created or Present, as upstream).

use std::fmt::Debug;

use http_body_util::BodyExt;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::Status;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What an apply left.
#[derive(Clone, Debug)]
pub struct Applied<K> {
    /// The object as the API server answered.
    pub object: K,
    /// The apply created it (201).
    pub created: bool,
}

/// Apply `object` as `name` through `api`, as `Api::patch` with `Patch::Apply` does, telling
/// whether it was created. Errors are kube's: an API error is `kube::Error::Api` with the
/// server's Status.
pub async fn apply<K, P>(api: &Api<K>, name: &str, params: &PatchParams, object: &P) -> Result<Applied<K>, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned,
    P: Serialize + Debug,
{
    let mut request = kube::core::Request::new(api.resource_url())
        .patch(name, params, &Patch::Apply(object))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch");
    let response = api.clone().into_client().send(request.map(kube::client::Body::from)).await?;
    let code = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_slice::<Status>(&body).unwrap_or_else(|_| {
            Status::failure(String::from_utf8_lossy(&body).trim(), "Failed to parse error data").with_code(code.as_u16())
        });
        return Err(kube::Error::Api(status.boxed()));
    }
    let object = serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?;
    Ok(Applied {
        object,
        created: code == http::StatusCode::CREATED,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;

    /// A fake API server answering every request with `code` and `body`, and the request's
    /// method and path (with query) as the ConfigMap's data when `body` is empty.
    fn server(code: u16, body: &'static str) -> kube::Client {
        let service = tower::service_fn(move |request: http::Request<Body>| async move {
            let seen = format!("{} {}", request.method(), request.uri().path_and_query().map(|p| p.as_str()).unwrap_or_default());
            let text = if body.is_empty() {
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"seen": seen}}).to_string()
            } else {
                body.to_owned()
            };
            let mut response = http::Response::new(Body::from(text.into_bytes()));
            *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
            Ok::<_, std::convert::Infallible>(response)
        });
        kube::Client::new(service, "default")
    }

    async fn apply_to(client: kube::Client) -> Result<Applied<ConfigMap>, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        apply(&api, "a", &PatchParams::apply("olm/test").force(), &object).await
    }

    #[tokio::test]
    async fn created_is_201_and_an_update_is_200() {
        let created = apply_to(server(201, "")).await.map(|a| a.created);
        assert!(matches!(created, Ok(true)), "{created:?}");
        let applied = apply_to(server(200, "")).await;
        let Ok(applied) = applied else { panic!("{applied:?}") };
        assert!(!applied.created);
        let seen = applied.object.data.unwrap_or_default().remove("seen").unwrap_or_default();
        assert_eq!(seen, "PATCH /api/v1/namespaces/ns/configmaps/a?&force=true&fieldManager=olm%2Ftest");
    }

    #[tokio::test]
    async fn a_refusal_is_the_servers_status_and_a_bare_404_keeps_its_code() {
        let refused = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"a\" is forbidden","reason":"Forbidden","code":403}"#;
        match apply_to(server(403, refused)).await {
            Err(kube::Error::Api(status)) => assert_eq!((status.code, status.message.as_str()), (403, "configmaps \"a\" is forbidden")),
            other => panic!("{other:?}"),
        }
        match apply_to(server(404, "404 page not found")).await {
            Err(kube::Error::Api(status)) => assert_eq!((status.code, status.message.as_str()), (404, "404 page not found")),
            other => panic!("{other:?}"),
        }
    }
}
