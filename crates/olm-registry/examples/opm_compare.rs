//! Compare every gRPC answer of our server with a running `opm serve` on the same catalog:
//! every RPC for every package, channel, bundle and provided API, plus not-found errors.
//! Repeated fields are compared as sets and JSON strings as JSON values.
//!
//!     opm serve CATALOG_DIR -p 25051 &
//!     cargo run --release -p olm-registry --example opm_compare -- CATALOG_DIR 127.0.0.1:25051
//!
//! Prints the number of differing answers and one example per (RPC, field).
use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

fn js(t: &str) -> Value { serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string())) }
fn sorted(mut v: Vec<Value>) -> Value { v.sort_by_cached_key(|x| x.to_string()); Value::Array(v) }
fn nb(b: &pb::Bundle) -> Value {
    json!({
        "csvName": b.csv_name, "packageName": b.package_name, "channelName": b.channel_name,
        "csvJson": js(&b.csv_json), "object": sorted(b.object.iter().map(|o| js(o)).collect()),
        "bundlePath": b.bundle_path,
        "providedApis": sorted(b.provided_apis.iter().map(|g| json!([g.group, g.version, g.kind, g.plural])).collect()),
        "requiredApis": sorted(b.required_apis.iter().map(|g| json!([g.group, g.version, g.kind, g.plural])).collect()),
        "version": b.version, "skipRange": b.skip_range,
        "dependencies": sorted(b.dependencies.iter().map(|d| json!([d.r#type, js(&d.value)])).collect()),
        "properties": sorted(b.properties.iter().map(|d| json!([d.r#type, js(&d.value)])).collect()),
        "replaces": b.replaces, "skips": sorted(b.skips.iter().map(|s| json!(s)).collect()),
        "deprecation": b.deprecation.as_ref().map(|d| d.message.clone()),
    })
}
fn ne(e: &pb::ChannelEntry) -> Value { json!([e.package_name, e.channel_name, e.bundle_name, e.replaces]) }
fn st(s: &tonic::Status) -> Value { json!({"code": format!("{:?}", s.code()), "message": s.message()}) }

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys { diff(&format!("{path}.{k}"), x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), out); }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() { diff(&format!("{path}[{i}]"), p, q, out); }
        }
        _ => if a != b { out.push(format!("{path}: ours={} opm={}", trunc(a), trunc(b))); }
    }
}
fn trunc(v: &Value) -> String { let s = v.to_string(); if s.len() > 200 { format!("{}…", &s[..200]) } else { s } }

macro_rules! unary { ($c:expr, $m:ident, $req:expr, $f:expr) => {
    match $c.$m($req).await { Ok(r) => $f(&r.into_inner()), Err(s) => st(&s) }
}}
macro_rules! stream { ($c:expr, $m:ident, $req:expr, $f:expr) => {
    match $c.$m($req).await {
        Ok(r) => { let mut s = r.into_inner(); let mut v = Vec::new();
            loop { match s.message().await { Ok(Some(x)) => v.push($f(&x)), Ok(None) => break, Err(e) => { v.push(st(&e)); break } } }
            sorted(v) }
        Err(s) => st(&s)
    }
}}

async fn answers(mut c: RegistryClient<Channel>, snap: &olm_registry::CatalogSnapshot) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    out.push(("ListPackages".into(), stream!(c, list_packages, pb::ListPackageRequest {}, |p: &pb::PackageName| json!(p.name))));
    out.push(("ListBundles".into(), stream!(c, list_bundles, pb::ListBundlesRequest {}, nb)));
    let mut gvks = std::collections::BTreeSet::new();
    for pkg in snap.catalog.packages() {
        out.push((format!("GetPackage {}", pkg.name), unary!(c, get_package, pb::GetPackageRequest { name: pkg.name.clone() }, |p: &pb::Package| json!({
            "name": p.name, "default": p.default_channel_name, "dep": p.deprecation.as_ref().map(|d| d.message.clone()),
            "channels": sorted(p.channels.iter().map(|c| json!([c.name, c.csv_name, c.deprecation.as_ref().map(|d| d.message.clone())])).collect())}))));
        for ch in pkg.channels() {
            #[allow(deprecated)]
            let head = unary!(c, get_bundle_for_channel, pb::GetBundleInChannelRequest { pkg_name: pkg.name.clone(), channel_name: ch.name.clone() }, nb);
            out.push((format!("GetBundleForChannel {}/{}", pkg.name, ch.name), head));
            for e in ch.entries() {
                out.push((format!("GetBundle {}/{}/{}", pkg.name, ch.name, e.name), unary!(c, get_bundle, pb::GetBundleRequest { pkg_name: pkg.name.clone(), channel_name: ch.name.clone(), csv_name: e.name.clone() }, nb)));
                out.push((format!("GetBundleThatReplaces {} {}/{}", e.name, pkg.name, ch.name), unary!(c, get_bundle_that_replaces, pb::GetReplacementRequest { csv_name: e.name.clone(), pkg_name: pkg.name.clone(), channel_name: ch.name.clone() }, |b: &pb::Bundle| json!(b.csv_name))));
            }
        }
        for b in pkg.bundles() {
            out.push((format!("GetChannelEntriesThatReplace {}", b.name), stream!(c, get_channel_entries_that_replace, pb::GetAllReplacementsRequest { csv_name: b.name.clone() }, ne)));
            for g in b.provided_gvks() { gvks.insert(g.clone()); }
        }
    }
    gvks.insert(olm_catalog::Gvk { group: "no".into(), version: "v1".into(), kind: "Such".into() });
    for g in gvks {
        let key = format!("{}/{}/{}", g.group, g.version, g.kind);
        out.push((format!("GetChannelEntriesThatProvide {key}"), stream!(c, get_channel_entries_that_provide, pb::GetAllProvidersRequest { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone(), plural: String::new() }, ne)));
        out.push((format!("GetLatestChannelEntriesThatProvide {key}"), stream!(c, get_latest_channel_entries_that_provide, pb::GetLatestProvidersRequest { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone(), plural: String::new() }, ne)));
        out.push((format!("GetDefaultBundleThatProvides {key}"), unary!(c, get_default_bundle_that_provides, pb::GetDefaultProviderRequest { group: g.group.clone(), version: g.version.clone(), kind: g.kind.clone(), plural: String::new() }, nb)));
    }
    out.push(("GetPackage missing".into(), unary!(c, get_package, pb::GetPackageRequest { name: "missing".into() }, |_p: &pb::Package| json!("?"))));
    out.push(("GetBundle missing".into(), unary!(c, get_bundle, pb::GetBundleRequest { pkg_name: "missing".into(), channel_name: "x".into(), csv_name: "y".into() }, nb)));
    out
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[1]);
    let mut config = olm_registry::ServeConfig::new(vec![("c".into(), dir)]);
    config.grpc_addrs = vec![("c".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    let server = olm_registry::start(config).await.unwrap();
    let snap = server.catalogs.get("c").unwrap().snapshot().unwrap();
    let max = 64 * 1024 * 1024;
    let ours = RegistryClient::connect(format!("http://{}", server.grpc_addrs["c"])).await.unwrap().max_decoding_message_size(max);
    let opm = RegistryClient::connect(format!("http://{}", args[2])).await.unwrap().max_decoding_message_size(max);
    let a = answers(ours, &snap).await;
    let b = answers(opm, &snap).await;
    let mut differing = 0;
    let mut by_field: std::collections::BTreeMap<String, (usize, String)> = Default::default();
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        let mut d = Vec::new();
        diff(name, x, y, &mut d);
        if !d.is_empty() { differing += 1; }
        for line in d {
            let field = line.split(':').next().unwrap_or("").split(' ').next_back().unwrap_or("").to_string();
            let field: String = field.chars().filter(|c| !c.is_ascii_digit()).collect();
            let key = format!("{} {}", name.split(' ').next().unwrap_or(""), field);
            let e = by_field.entry(key).or_insert((0, line.clone()));
            e.0 += 1;
        }
    }
    println!("{} answers compared, {} differ", a.len(), differing);
    for (k, (n, example)) in by_field { println!("{n:5} {k}\n      e.g. {example}"); }
}
