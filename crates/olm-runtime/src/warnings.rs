//! The API server's warnings (`Warning` response headers: a deprecated API version, a field it
//! ignored, a Pod Security level a workload would violate), which kube's client drops: logged
//! and counted per field manager (`olm_api_warnings_total`), so a controller can publish its
//! own count (the InstallPlan controller's is upstream's `installplan_warnings_total`). A
//! layer of the client (`client::build`), so no request escapes it.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WarningLabels {
    /// The request's `fieldManager` (`olm/installplan`), empty for requests without one.
    pub field_manager: String,
}

/// The process's warning counters.
pub fn api_warnings() -> &'static Family<WarningLabels, Counter> {
    static WARNINGS: OnceLock<Family<WarningLabels, Counter>> = OnceLock::new();
    WARNINGS.get_or_init(Family::default)
}

/// The counter of warnings given to requests of `field_manager` (it shares its value with the
/// family: register it under another name to publish it).
pub fn warnings_of(field_manager: &str) -> Counter {
    api_warnings()
        .get_or_create(&WarningLabels {
            field_manager: field_manager.to_owned(),
        })
        .clone()
}

/// The `fieldManager` of a request's query, decoded.
fn field_manager(query: Option<&str>) -> String {
    let value = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("fieldManager="))
        .unwrap_or_default();
    value.replace("%2F", "/").replace("%2f", "/")
}

/// The text of a `Warning` header value (`299 - "text"`), or the value as it is.
fn warning_text(value: &str) -> &str {
    let text = value.strip_prefix("299 - ").unwrap_or(value);
    text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text)
}

/// A service that logs and counts the warnings of `inner`'s responses.
#[derive(Clone)]
pub struct CountWarnings<S> {
    inner: S,
}

impl<S> CountWarnings<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for CountWarnings<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let manager = field_manager(request.uri().query());
        let path = request.uri().path().to_owned();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            for value in response.headers().get_all(http::header::WARNING) {
                let value = String::from_utf8_lossy(value.as_bytes());
                tracing::warn!(field_manager = %manager, %path, warning = warning_text(&value), "the API server warned");
                api_warnings().get_or_create(&WarningLabels { field_manager: manager.clone() }).inc();
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Service, ServiceExt};

    #[tokio::test]
    async fn warnings_are_counted_per_field_manager() {
        let before = warnings_of("olm/installplan").get();
        let mut service = CountWarnings::new(tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .header("Warning", "299 - \"policy/v1beta1 PodDisruptionBudget is deprecated\"")
                    .header("Warning", "299 - \"unknown field \\\"spec.foo\\\"\"")
                    .body(())
                    .unwrap(),
            )
        }));
        let request = http::Request::patch("/apis/policy/v1/namespaces/a/poddisruptionbudgets/p?fieldManager=olm%2Finstallplan&force=true")
            .body(())
            .unwrap();
        service.ready().await.unwrap().call(request).await.unwrap();
        assert_eq!(warnings_of("olm/installplan").get(), before + 2);
        assert_eq!(warning_text("299 - \"deprecated\""), "deprecated");
        assert_eq!(field_manager(Some("force=true&fieldManager=olm%2Fcsv")), "olm/csv");
    }
}
