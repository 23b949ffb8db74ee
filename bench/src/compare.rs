//! Fetch every answer of ListPackages, GetPackage, GetBundleForChannel and ListBundles from a
//! server, normalise the order of repeated fields and JSON keys, and diff two servers field
//! by field.

use std::collections::{BTreeMap, BTreeSet};

use olm_registry_api::pb;
use serde_json::{Map, Value, json};

use crate::serve::{Targets, client};

/// Normalised answers of one server, keyed by RPC then by request/object key.
pub type Answers = BTreeMap<&'static str, BTreeMap<String, Value>>;

fn json_or_string(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn sorted(mut v: Vec<Value>) -> Value {
    v.sort_by_cached_key(|x| x.to_string());
    Value::Array(v)
}

fn deprecation(d: &Option<pb::Deprecation>) -> Value {
    d.as_ref().map_or(Value::Null, |d| Value::String(d.message.clone()))
}

fn gvks(list: &[pb::GroupVersionKind]) -> Value {
    sorted(list.iter().map(|g| json!(format!("{}/{}/{}/{}", g.group, g.version, g.kind, g.plural))).collect())
}

pub fn normalise_package(p: &pb::Package) -> Value {
    json!({
        "name": p.name,
        "defaultChannelName": p.default_channel_name,
        "deprecation": deprecation(&p.deprecation),
        "channels": sorted(p.channels.iter().map(|c| json!({
            "name": c.name, "csvName": c.csv_name, "deprecation": deprecation(&c.deprecation)
        })).collect()),
    })
}

pub fn normalise_bundle(b: &pb::Bundle) -> Value {
    let mut m = Map::new();
    m.insert("csvName".into(), json!(b.csv_name));
    m.insert("packageName".into(), json!(b.package_name));
    m.insert("channelName".into(), json!(b.channel_name));
    m.insert("csvJson".into(), json_or_string(&b.csv_json));
    m.insert("object".into(), sorted(b.object.iter().map(|o| json_or_string(o)).collect()));
    m.insert("bundlePath".into(), json!(b.bundle_path));
    m.insert("providedApis".into(), gvks(&b.provided_apis));
    m.insert("requiredApis".into(), gvks(&b.required_apis));
    m.insert("version".into(), json!(b.version));
    m.insert("skipRange".into(), json!(b.skip_range));
    m.insert(
        "dependencies".into(),
        sorted(b.dependencies.iter().map(|d| json!({"type": d.r#type, "value": json_or_string(&d.value)})).collect()),
    );
    m.insert(
        "properties".into(),
        sorted(b.properties.iter().map(|p| json!({"type": p.r#type, "value": json_or_string(&p.value)})).collect()),
    );
    m.insert("replaces".into(), json!(b.replaces));
    m.insert("skips".into(), sorted(b.skips.iter().map(|s| json!(s)).collect()));
    m.insert("deprecation".into(), deprecation(&b.deprecation));
    Value::Object(m)
}

fn status_value(s: &tonic::Status) -> Value {
    json!({"error": format!("{:?}", s.code())})
}

pub async fn fetch(addr: &str, targets: &Targets) -> anyhow::Result<Answers> {
    let mut c = client(addr).await?;
    let mut answers = Answers::new();

    let mut names = BTreeMap::new();
    let mut s = c.list_packages(pb::ListPackageRequest {}).await?.into_inner();
    while let Some(p) = s.message().await? {
        names.insert(p.name, Value::Bool(true));
    }
    answers.insert("ListPackages", names);

    let mut packages = BTreeMap::new();
    for name in &targets.packages {
        let v = match c.get_package(pb::GetPackageRequest { name: name.clone() }).await {
            Ok(r) => normalise_package(&r.into_inner()),
            Err(e) => status_value(&e),
        };
        packages.insert(name.clone(), v);
    }
    answers.insert("GetPackage", packages);

    let mut heads = BTreeMap::new();
    for (pkg, ch) in &targets.channels {
        #[allow(deprecated)]
        let r = c.get_bundle_for_channel(pb::GetBundleInChannelRequest { pkg_name: pkg.clone(), channel_name: ch.clone() }).await;
        let v = match r {
            Ok(r) => normalise_bundle(&r.into_inner()),
            Err(e) => status_value(&e),
        };
        heads.insert(format!("{pkg}/{ch}"), v);
    }
    answers.insert("GetBundleForChannel", heads);

    let mut bundles = BTreeMap::new();
    let mut s = c.list_bundles(pb::ListBundlesRequest {}).await?.into_inner();
    while let Some(b) = s.message().await? {
        let key = format!("{}/{}/{}", b.package_name, b.channel_name, b.csv_name);
        bundles.insert(key, normalise_bundle(&b));
    }
    answers.insert("ListBundles", bundles);
    Ok(answers)
}

/// Differences between two servers' answers for one (RPC, field): how many objects differ
/// and a few examples.
#[derive(Debug, Clone)]
pub struct FieldDiff {
    pub rpc: &'static str,
    pub field: String,
    pub count: usize,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Comparison {
    /// (rpc, objects compared, objects identical)
    pub totals: Vec<(&'static str, usize, usize)>,
    pub diffs: Vec<FieldDiff>,
}

fn short(v: Option<&Value>) -> String {
    let s = match v {
        None => "(absent)".to_string(),
        Some(v) => v.to_string(),
    };
    if s.chars().count() > 140 {
        format!("{}… ({} chars)", s.chars().take(140).collect::<String>(), s.len())
    } else {
        s
    }
}

/// Field-level diff of `ours` against `theirs`.
pub fn compare(ours: &Answers, theirs: &Answers) -> Comparison {
    let mut totals = Vec::new();
    let mut diffs: BTreeMap<(&'static str, String), FieldDiff> = BTreeMap::new();
    let mut note = |rpc: &'static str, field: String, example: String| {
        let d = diffs.entry((rpc, field.clone())).or_insert(FieldDiff { rpc, field, count: 0, examples: Vec::new() });
        d.count += 1;
        if d.examples.len() < 3 {
            d.examples.push(example);
        }
    };
    let empty = BTreeMap::new();
    for rpc in ["ListPackages", "GetPackage", "GetBundleForChannel", "ListBundles"] {
        let a = ours.get(rpc).unwrap_or(&empty);
        let b = theirs.get(rpc).unwrap_or(&empty);
        let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let mut same = 0;
        for key in &keys {
            match (a.get(*key), b.get(*key)) {
                (Some(x), Some(y)) if x == y => same += 1,
                (Some(_), None) => note(rpc, "(whole object)".into(), format!("`{key}` only in ours")),
                (None, Some(_)) => note(rpc, "(whole object)".into(), format!("`{key}` only in opm")),
                (Some(x), Some(y)) => match (x.as_object(), y.as_object()) {
                    (Some(xo), Some(yo)) => {
                        let fields: BTreeSet<&String> = xo.keys().chain(yo.keys()).collect();
                        for f in fields {
                            if xo.get(f) != yo.get(f) {
                                note(
                                    rpc,
                                    f.clone(),
                                    format!("`{key}`: ours {} / opm {}", short(xo.get(f)), short(yo.get(f))),
                                );
                            }
                        }
                    }
                    _ => note(rpc, "(value)".into(), format!("`{key}`: ours {} / opm {}", short(Some(x)), short(Some(y)))),
                },
                (None, None) => {}
            }
        }
        totals.push((rpc, keys.len(), same));
    }
    Comparison { totals, diffs: diffs.into_values().collect() }
}
