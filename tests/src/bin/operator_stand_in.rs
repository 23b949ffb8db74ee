//! A stand-in for a real operator's container image on the real node, where public images
//! cannot be pulled (real_node_migrate.rs pushes it under the image paths a real bundle names,
//! and the node's containerd takes the dev registry as their mirror). It runs as the bundle's
//! Deployments start it and answers what Kubernetes asks of them:
//!
//! - always: `/healthz` and `/readyz` on :8081 (controller-runtime's probes), metrics on :8080;
//! - given the argument `webhooks`: a CRD conversion webhook on :9443 (`POST /convert`, HTTPS
//!   with the certificate mounted at /tmp/k8s-webhook-server/serving-certs, as
//!   controller-runtime reads it) that converts by setting each object's apiVersion, and says
//!   on stdout how many objects it converted.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::routing::{get, post};
use serde_json::{Value, json};

const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
static CONVERTED: AtomicU64 = AtomicU64::new(0);

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    println!("operator stand-in started as {args:?}");
    let health = axum::Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(|| async { "ok" }));
    let metrics = axum::Router::new().route("/metrics", get(|| async { format!("stand_in_converted_objects {}\n", CONVERTED.load(Ordering::Relaxed)) }));
    let health = serve_http(8081, health);
    let metrics = serve_http(8080, metrics);
    if args.iter().any(|a| a == "webhooks") {
        let serving = olm_packageserver::serve::ServingCert {
            cert_pem: std::fs::read_to_string(format!("{CERT_DIR}/tls.crt"))?,
            key_pem: std::fs::read_to_string(format!("{CERT_DIR}/tls.key"))?,
        };
        let server = olm_packageserver::serve::HttpsServer::bind(SocketAddr::from(([0, 0, 0, 0], 9443)), &serving, None).await?;
        let webhook = axum::Router::new().route("/convert", post(convert));
        tokio::try_join!(health, metrics, async {
            server.serve(webhook, std::future::pending()).await;
            anyhow::Ok(())
        })?;
    } else {
        tokio::try_join!(health, metrics)?;
    }
    Ok(())
}

async fn serve_http(port: u16, router: axum::Router) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).await?;
    axum::serve(listener, router).await?;
    Ok(())
}

/// A ConversionReview answered: every object at the desired apiVersion.
async fn convert(Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].clone();
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut object| {
            object["apiVersion"] = desired.clone();
            object
        })
        .collect();
    let total = CONVERTED.fetch_add(objects.len() as u64, Ordering::Relaxed) + objects.len() as u64;
    println!("converted {} objects to {desired} ({total} in all)", objects.len());
    Json(json!({
        "apiVersion": review["apiVersion"],
        "kind": "ConversionReview",
        "response": {"uid": request["uid"], "convertedObjects": objects, "result": {"status": "Success"}},
    }))
}
