//! What the watch caches spend per object, by kind: decodes the lists the benchmark saves at
//! the end of its scale run (`target/olm-bench/e2e-ours-scale-inventory/`, one
//! `kubectl get -A -o json` list per kind), prepares each object the way its cache does
//! (`runtime::cache::prepare` with the cache's trim, as in manager.rs) and prints the heap
//! bytes per object next to the JSON bytes (jemalloc's allocated bytes, so size classes count).
//!
//! `cargo run --release -p olm-controllers --example cache_cost -- DIR`; `SHOW=FILE` also
//! prints the first cached object of that file as JSON (`SHOW_N` objects).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::Resource;
use olm_api::v1::OperatorGroup;
use olm_api::v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription};
use olm_runtime::cache::prepare;
use serde::Serialize;
use serde::de::DeserializeOwned;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    // Statistics are refreshed when the epoch advances.
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0)
}

fn cost<K: Resource + DeserializeOwned + Serialize>(
    dir: &Path,
    file: &str,
    trim: fn(&mut K),
) -> anyhow::Result<()> {
    let path = dir.join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("{file:<28} (missing)");
        return Ok(());
    };
    let list: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let items: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item.to_string())
        .collect();
    let json_bytes: usize = items.iter().map(String::len).sum();
    let before = allocated();
    let mut kept = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let mut obj: K = serde_json::from_str(item)
            .map_err(|e| anyhow::anyhow!("{} item {index}: {e}", path.display()))?;
        prepare(&mut obj, trim);
        kept.push(Arc::new(obj));
    }
    let heap = allocated().saturating_sub(before);
    let n = items.len().max(1);
    println!(
        "{file:<28} {:>5} objects  heap {:>6} B/object  JSON {:>6} B/object",
        items.len(),
        heap / n,
        json_bytes / n
    );
    if std::env::var("SHOW").ok().as_deref() == Some(file) {
        let count = std::env::var("SHOW_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        for obj in kept.iter().take(count) {
            println!("{}", serde_json::to_string(obj.as_ref())?);
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: cache_cost DIR (a directory of kind lists)"))?;
    let dir = Path::new(&dir);
    println!(
        "inline sizes: Deployment {} B, ClusterServiceVersion {} B, PodSpec {} B, ObjectMeta {} B",
        size_of::<Deployment>(),
        size_of::<ClusterServiceVersion>(),
        size_of::<k8s_openapi::api::core::v1::PodSpec>(),
        size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>()
    );
    cost::<ClusterServiceVersion>(
        dir,
        "clusterserviceversions.json",
        olm_controllers::csv::decide::trim_cached_csv,
    )?;
    cost::<InstallPlan>(
        dir,
        "installplans.json",
        olm_controllers::catalog_operator::trim_finished_plan,
    )?;
    cost::<Subscription>(dir, "subscriptions.json", |_| {})?;
    cost::<OperatorGroup>(dir, "operatorgroups.json", |_| {})?;
    cost::<olm_api::v2::OperatorCondition>(dir, "operatorconditions.json", |_| {})?;
    cost::<Namespace>(dir, "namespaces.json", |_| {})?;
    cost::<ServiceAccount>(dir, "serviceaccounts.json", |_| {})?;
    cost::<Deployment>(
        dir,
        "deployments.json",
        olm_controllers::csv::deployment::trim_cached_deployment,
    )?;
    cost::<ClusterRole>(
        dir,
        "clusterroles.json",
        olm_controllers::rbac::trim_cached_cluster_role,
    )?;
    cost::<Role>(dir, "roles.json", |_| {})?;
    cost::<RoleBinding>(dir, "rolebindings.json", |_| {})?;
    Ok(())
}
