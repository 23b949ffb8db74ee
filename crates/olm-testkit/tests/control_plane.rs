//! The local control plane does what our other tests rely on: a Ready node, the pinned server
//! version, Deployments that become Available, API aggregation to a process on the host, and
//! namespaces that clean up.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use olm_testkit::{CertificateAuthority, KUBERNETES_VERSION, NODE_NAME, TestkitError, cluster};

type TestResult = Result<(), TestkitError>;

#[tokio::test]
async fn kubectl_get_nodes_shows_a_ready_node() -> TestResult {
    let cluster = cluster().await?;
    let out = cluster.kubectl(&["get", "nodes", "--no-headers"]).await?;
    let line = out
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(NODE_NAME))
        .unwrap_or_else(|| panic!("no {NODE_NAME} in `kubectl get nodes`:\n{}", out.stdout));
    let status = line.split_whitespace().nth(1);
    assert_eq!(status, Some("Ready"), "{line}");
    Ok(())
}

#[tokio::test]
async fn server_reports_the_pinned_kubernetes_version() -> TestResult {
    let cluster = cluster().await?;
    let info = cluster
        .client()
        .apiserver_version()
        .await
        .map_err(|source| TestkitError::Api {
            action: "GET /version".into(),
            source,
        })?;
    assert_eq!(info.git_version, KUBERNETES_VERSION);
    assert_eq!(info.major, "1");
    assert_eq!(
        Some(info.minor.as_str()),
        KUBERNETES_VERSION.split('.').nth(1)
    );

    let out = cluster.kubectl(&["version", "-o", "json"]).await?;
    let json: serde_json::Value =
        serde_json::from_str(&out.stdout).expect("kubectl version -o json");
    assert_eq!(json["serverVersion"]["gitVersion"], KUBERNETES_VERSION);
    assert_eq!(json["clientVersion"]["gitVersion"], KUBERNETES_VERSION);
    Ok(())
}

#[tokio::test]
async fn two_replica_deployment_becomes_available() -> TestResult {
    let cluster = cluster().await?;
    let ns = cluster.namespace("deploy").await?;
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                // kwok never pulls images; this one does not exist anywhere.
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:0"}]}
            }
        }
    }))
    .expect("deployment literal");
    let api: Api<Deployment> = ns.api();
    api.create(&PostParams::default(), &deployment)
        .await
        .map_err(|source| TestkitError::Api {
            action: "creating deployment web".into(),
            source,
        })?;

    let available = ns
        .wait_for(
            "deployment web to be Available with 2 replicas",
            Duration::from_secs(90),
            &["deployment/web", "pods"],
            || {
                let api = api.clone();
                async move {
                    let d = api.get("web").await?;
                    let status = d.status.unwrap_or_default();
                    let available = status
                        .conditions
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Available" && c.status == "True");
                    Ok::<_, kube::Error>(
                        (available && status.available_replicas == Some(2))
                            .then_some(status.available_replicas),
                    )
                }
            },
        )
        .await?;
    assert_eq!(available, Some(2));

    let pods = ns
        .kubectl(&["get", "pods", "-l", "app=web", "-o", "json"])
        .await?;
    let pods: serde_json::Value = serde_json::from_str(&pods.stdout).expect("pods json");
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 2, "{pods:#}");
    for pod in &items {
        assert_eq!(
            pod["spec"]["nodeName"], NODE_NAME,
            "scheduled onto the fake node"
        );
        assert_eq!(pod["status"]["phase"], "Running");
    }
    ns.cleanup().await
}

#[tokio::test]
async fn wait_for_timeout_shows_the_object_and_events() -> TestResult {
    let cluster = cluster().await?;
    let ns = cluster.namespace("dump").await?;
    let api: Api<ConfigMap> = ns.api();
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            ..Default::default()
        },
        data: Some([("mode".to_string(), "slow".to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm)
        .await
        .map_err(|source| TestkitError::Api {
            action: "creating configmap".into(),
            source,
        })?;
    let err = ns
        .wait_for(
            "configmap settings to say fast",
            Duration::from_millis(500),
            &["configmap/settings"],
            || {
                let api = api.clone();
                async move {
                    let cm = api.get("settings").await?;
                    let mode = cm
                        .data
                        .unwrap_or_default()
                        .get("mode")
                        .cloned()
                        .unwrap_or_default();
                    Ok::<_, kube::Error>((mode == "fast").then_some(()))
                }
            },
        )
        .await
        .expect_err("the configmap never says fast");
    let text = err.to_string();
    assert!(text.contains("configmap settings to say fast"), "{text}");
    assert!(text.contains("kind: ConfigMap"), "{text}");
    assert!(text.contains("mode: slow"), "{text}");
    assert!(
        text.contains(&format!("recent events in namespace {}", ns.name())),
        "{text}"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn dropped_namespace_is_deleted() -> TestResult {
    let cluster = cluster().await?;
    let ns = cluster.namespace("drop").await?;
    let name = ns.name().to_string();
    drop(ns);
    let api: Api<Namespace> = Api::all(cluster.client());
    olm_testkit::wait_for(
        "dropped namespace to be terminating or gone",
        Duration::from_secs(30),
        || {
            let api = api.clone();
            let name = name.clone();
            async move {
                Ok::<_, kube::Error>(match api.get_opt(&name).await? {
                    None => Some(()),
                    Some(ns) if ns.metadata.deletion_timestamp.is_some() => Some(()),
                    Some(_) => None,
                })
            }
        },
    )
    .await
}

/// A tiny aggregated API server on the host: answers discovery for one group/version and records
/// the user the kube-apiserver forwarded in X-Remote-User.
mod host_api {
    use super::*;
    use http_body_util::Full;
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::net::TcpListener;
    use tokio_rustls::TlsAcceptor;

    pub struct HostApi {
        pub port: u16,
        pub seen_users: Arc<Mutex<Vec<String>>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for HostApi {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    pub async fn start(cert_pem: &str, key_pem: &str, group_version: String) -> HostApi {
        let certs = vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("cert")];
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key");
        let mut config = rustls::ServerConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server cert");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen_users = Arc::new(Mutex::new(Vec::new()));
        let seen = seen_users.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                let group_version = group_version.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let seen = seen.clone();
                        let group_version = group_version.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(answer(req, &group_version, &seen))
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        HostApi {
            port,
            seen_users,
            task,
        }
    }

    fn answer(
        req: Request<Incoming>,
        group_version: &str,
        seen: &Mutex<Vec<String>>,
    ) -> Response<Full<Bytes>> {
        if let Some(user) = req
            .headers()
            .get("x-remote-user")
            .and_then(|v| v.to_str().ok())
            && let Ok(mut s) = seen.lock()
        {
            s.push(user.to_string());
        }
        let (status, body) = if req.uri().path() == format!("/apis/{group_version}") {
            (
                StatusCode::OK,
                serde_json::json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": [{
                        "name": "widgets",
                        "singularName": "widget",
                        "namespaced": true,
                        "kind": "Widget",
                        "verbs": ["get", "list"]
                    }]
                }),
            )
        } else {
            (
                StatusCode::NOT_FOUND,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}),
            )
        };
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
        *response.status_mut() = status;
        response.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// Deletes the APIService even when the test fails: an unavailable APIService blocks namespace
/// deletion for every test.
struct ApiServiceGuard {
    cluster: olm_testkit::TestCluster,
    name: String,
}

impl Drop for ApiServiceGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.cluster.kubectl_path())
            .arg(format!(
                "--kubeconfig={}",
                self.cluster.kubeconfig().display()
            ))
            .args([
                "delete",
                "apiservice",
                &self.name,
                "--ignore-not-found",
                "--wait=false",
            ])
            .output();
    }
}

#[tokio::test]
async fn apiservice_backed_by_a_host_https_server_answers() -> TestResult {
    use base64::Engine as _;

    let cluster = cluster().await?;
    let ns = cluster.namespace("aggregation").await?;
    let group = format!("{}.testkit.olm.example", ns.name());
    let version = "v1alpha1";
    let group_version = format!("{group}/{version}");
    let service = "host-api";

    // The aggregator dials the ExternalName at the APIService's port and verifies the serving
    // certificate for `<service>.<namespace>.svc` against the caBundle.
    let ca = CertificateAuthority::new("host-api-ca").expect("ca");
    let server_name = format!("{service}.{}.svc", ns.name());
    let cert = ca
        .issue_server("host-api", &[&server_name])
        .expect("serving cert");
    let host = host_api::start(&cert.cert_pem, &cert.key_pem, group_version.clone()).await;

    let manifests = format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: {service}
  namespace: {ns}
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {version}.{group}
spec:
  group: {group}
  version: {version}
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {ca_bundle}
  service:
    namespace: {ns}
    name: {service}
    port: {port}
"#,
        ns = ns.name(),
        ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.cert_pem()),
        port = host.port,
    );
    let apiservice = format!("{version}.{group}");
    let guard = ApiServiceGuard {
        cluster: cluster.clone(),
        name: apiservice.clone(),
    };
    cluster
        .kubectl_with_input(&["apply", "-f", "-"], &manifests)
        .await?;

    let apiservice_ref = format!("apiservice/{apiservice}");
    ns.wait_for(
        "the APIService to be Available",
        Duration::from_secs(60),
        &[&apiservice_ref, &format!("service/{service}")],
        || {
            let cluster = cluster.clone();
            let apiservice = apiservice.clone();
            async move {
                let out = cluster
                    .kubectl(&[
                        "get",
                        "apiservice",
                        &apiservice,
                        "-o",
                        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
                    ])
                    .await?;
                Ok::<_, TestkitError>((out.stdout.trim() == "True").then_some(()))
            }
        },
    )
    .await?;

    let raw = cluster
        .kubectl(&["get", "--raw", &format!("/apis/{group_version}")])
        .await?;
    let body: serde_json::Value = serde_json::from_str(&raw.stdout).expect("discovery JSON");
    assert_eq!(body["groupVersion"], group_version, "{raw:?}");
    assert_eq!(body["resources"][0]["name"], "widgets");
    let users = host
        .seen_users
        .lock()
        .map(|u| u.clone())
        .unwrap_or_default();
    assert!(
        users.iter().any(|u| u == "olm-dev-admin"),
        "the API server should forward the caller as X-Remote-User; saw {users:?}"
    );

    cluster
        .kubectl(&["delete", "apiservice", &apiservice])
        .await?;
    drop(guard);
    drop(host);
    ns.cleanup().await
}
