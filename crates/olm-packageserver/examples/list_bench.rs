//! Server-side cost of the PackageManifest API for a catalog directory: building the objects
//! from the catalog, and answering a namespace list (JSON and Table) and a single get through
//! the HTTP router (no network, no kube-apiserver).
//!
//!   cargo run --release -p olm-packageserver --example list_bench -- DIR [COPIES]
//!
//! COPIES > 1 multiplies the catalog's packages under new names to imitate a big catalog.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use olm_packageserver::http::{AllowAll, Authentication, FrontProxy, router};
use olm_packageserver::manifest::{CatalogInfo, build};
use olm_packageserver::store::Store;
use serde_json::Value;
use tower::ServiceExt as _;

fn rename(doc: &mut Value, suffix: &str) {
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or_default().to_owned();
    let field = if schema == "olm.package" { "name" } else { "package" };
    if let Some(Value::String(name)) = doc.get_mut(field) {
        name.push_str(suffix);
    }
    if let Some(Value::Array(props)) = doc.get_mut("properties") {
        for p in props {
            if p.get("type").and_then(Value::as_str) == Some("olm.package")
                && let Some(Value::String(name)) = p.pointer_mut("/value/packageName")
            {
                name.push_str(suffix);
            }
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: list_bench DIR [COPIES]")?;
    let copies: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(1).max(1);

    let (documents, problems) = olm_catalog::load::load_fbc_documents(std::path::Path::new(&dir))?;
    if !problems.is_empty() {
        eprintln!("{} problems while loading (ignored)", problems.len());
    }
    let mut all = Vec::with_capacity(documents.len() * copies);
    for copy in 0..copies {
        for doc in &documents {
            let mut doc = doc.clone();
            if copy > 0 {
                rename(&mut doc.value, &format!("-copy{copy}"));
            }
            all.push(doc);
        }
    }
    let (catalog, _) = olm_catalog::Catalog::build(all);
    let (packages, bundles) = (catalog.packages().len(), catalog.bundles().count());

    let info = CatalogInfo { name: "bench".into(), namespace: "olm".into(), display_name: "Bench".into(), ..Default::default() };
    let started = Instant::now();
    let (served, problems) = build(&info, &catalog, &HashMap::new());
    let build_time = started.elapsed();
    let first = served.first().and_then(|s| s.manifest.metadata.name.clone()).unwrap_or_default();
    let store = Arc::new(Store::new("olm"));
    store.set_packages(info, served);
    store.mark_synced();
    let app = router(store, Arc::new(AllowAll), Authentication::RequestHeader);

    let call = |uri: String, accept: &'static str| {
        let app = app.clone();
        async move {
            let mut request = Request::builder()
                .uri(uri)
                .header("accept", accept)
                .header("x-remote-user", "bench")
                .body(Body::empty())
                .expect("request");
            request.extensions_mut().insert(FrontProxy(true));
            let started = Instant::now();
            let response = app.oneshot(request).await.expect("infallible");
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
            (started.elapsed(), body.len())
        }
    };
    let base = "/apis/packages.operators.coreos.com/v1/namespaces/team-a/packagemanifests";
    let mut report = Vec::new();
    for (what, uri, accept) in [
        ("list (JSON)", base.to_owned(), "application/json"),
        ("list (Table, kubectl get)", base.to_owned(), "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
        ("get one (JSON)", format!("{base}/{first}"), "application/json"),
    ] {
        let mut samples = Vec::new();
        let mut size = 0;
        for _ in 0..20 {
            let (elapsed, len) = call(uri.clone(), accept).await;
            samples.push(elapsed);
            size = len;
        }
        report.push((what, median(samples), size));
    }
    println!("catalog {dir} x{copies}: {packages} packages, {bundles} bundles; {} left out", problems.len());
    println!("  build PackageManifests: {:>9.2} ms", build_time.as_secs_f64() * 1000.0);
    for (what, time, size) in report {
        println!("  {what:<26} {:>9.2} ms (median of 20), {:>9} bytes", time.as_secs_f64() * 1000.0, size);
    }
    Ok(())
}
