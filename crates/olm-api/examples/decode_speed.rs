//! Prints how long decoding a CSV from JSON takes, typed vs `serde_json::Value`.
//! Run: `cargo run --release -p olm-api --example decode_speed` (from the workspace root).
fn main() {
    let path = "crates/olm-api/testdata/etcd/bundles/0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml";
    let value: serde_json::Value = olm_api::yaml::from_path(path).expect("fixture");
    let json = serde_json::to_vec(&value).expect("json");
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let v: serde_json::Value = serde_json::from_slice(&json).expect("value");
        std::hint::black_box(v);
    }
    let untyped = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..n {
        let csv: olm_api::v1alpha1::ClusterServiceVersion = serde_json::from_slice(&json).expect("csv");
        std::hint::black_box(csv);
    }
    let typed = t.elapsed();
    println!("{} bytes; serde_json::Value: {:?}/decode; ClusterServiceVersion: {:?}/decode", json.len(), untyped / n, typed / n);
}
