use std::sync::Arc;

use serde_json::{Value, json};

use super::blob::JsonTextRepr;
use super::*;
use crate::canonical::to_canonical_string;
use crate::error::Problem;
use crate::graph::EdgeKind;
use crate::version::Version;

fn docs(values: Vec<Value>) -> Vec<Document> {
    values
        .into_iter()
        .map(|value| Document {
            value,
            source: None,
        })
        .collect()
}

fn bundle(name: &str, version: &str) -> Value {
    json!({"schema": "olm.bundle", "package": "p", "name": name, "image": format!("quay.io/x/p:{version}"),
           "properties": [{"type": "olm.package", "value": {"packageName": "p", "version": version}},
                          {"type": "olm.gvk", "value": {"group": "x.io", "version": "v1", "kind": "X"}}]})
}

#[test]
fn inlined_objects_are_held_as_text_and_decoded_on_demand() {
    use base64::Engine as _;
    let encode = |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    let crd = |n: usize| json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("x{n}.x.io")}, "spec": {"description": "A widget of the x.io group. ".repeat(60)}});
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "p.v1.0.0"}, "spec": {"installModes": [{"type": "OwnNamespace", "supported": true}]}});
    let objects = [crd(1), csv.clone(), crd(2)];
    let mut b = bundle("p.v1.0.0", "1.0.0");
    for object in &objects {
        b["properties"].as_array_mut().unwrap().push(json!({"type": "olm.bundle.object", "value": {"data": encode(object)}}));
    }
    let catalog_of = |b: Value| {
        Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
            b,
        ]))
    };
    let (cat, problems) = catalog_of(b);
    assert!(problems.is_empty(), "{problems:?}");
    let bundle = cat.bundle("p", "p.v1.0.0").unwrap();
    // The values share the compressed blob: read together, in order, with one decompression.
    let meta = cat.metas(MetaFilter { schema: Some(SCHEMA_BUNDLE), ..Default::default() }).next().unwrap();
    assert!(meta.blob.is_compressed());
    assert_eq!(bundle.objects(), objects);
    assert!(bundle.has_objects());
    assert_eq!(bundle.csv(), Some(csv));
    assert_eq!(bundle.supported_install_modes(), Some(&["OwnNamespace".to_owned()][..]));
    // An object that does not decode refuses the bundle at load, saying why.
    let mut broken = super::tests::bundle("p.v1.0.0", "1.0.0");
    broken["properties"].as_array_mut().unwrap().push(json!({"type": "olm.bundle.object", "value": {"data": "not base64!"}}));
    let (_, problems) = catalog_of(broken);
    assert!(problems.iter().any(|p| p.to_string().contains("olm.bundle.object data is not valid base64")), "{problems:?}");
}

#[test]
fn install_modes_come_from_the_inlined_csv_before_the_csv_metadata() {
    use base64::Engine as _;
    let modes = |types: &[(&str, bool)]| types.iter().map(|(t, s)| json!({"type": t, "supported": s})).collect::<Vec<_>>();
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "p.v1.0.0"}, "spec": {"installModes": modes(&[("OwnNamespace", true), ("AllNamespaces", false)])}});
    let object = json!({"type": "olm.bundle.object", "value": {"data": base64::engine::general_purpose::STANDARD.encode(csv.to_string())}});
    let metadata = json!({"type": "olm.csv.metadata", "value": {"installModes": modes(&[("AllNamespaces", true)])}});
    let supported = |extra: Vec<Value>| {
        let mut b = bundle("p.v1.0.0", "1.0.0");
        b["properties"].as_array_mut().unwrap().extend(extra);
        let (cat, problems) = Catalog::build(docs(vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
            b,
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        cat.bundle("p", "p.v1.0.0").unwrap().supported_install_modes().map(<[String]>::to_vec)
    };
    assert_eq!(supported(vec![metadata.clone()]), Some(vec!["AllNamespaces".to_owned()]));
    assert_eq!(supported(vec![metadata.clone(), object.clone()]), Some(vec!["OwnNamespace".to_owned()]));
    assert_eq!(supported(vec![object, metadata]), Some(vec!["OwnNamespace".to_owned()]));
    assert_eq!(supported(vec![]), None);
}

#[test]
fn large_blobs_are_held_compressed_and_read_back_whole() {
    let description = "An operator that manages etcd clusters. ".repeat(100);
    let mut big = bundle("p.v1.0.0", "1.0.0");
    big["properties"].as_array_mut().unwrap().push(json!({"type": "olm.csv.metadata",
        "value": {"description": description, "displayName": "P"}}));
    let (cat, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
        big.clone(),
    ]));
    assert!(problems.is_empty(), "{problems:?}");
    let meta = cat.metas(MetaFilter { schema: Some(SCHEMA_BUNDLE), ..Default::default() }).next().unwrap();
    assert!(meta.blob.is_compressed());
    assert!(meta.blob.stored_len() * 4 < meta.blob.len(), "{:?}", meta.blob);
    // The text read back is the canonical JSON of the document, byte for byte.
    let mut canonical = to_canonical_string(&big);
    canonical.push('\n');
    assert_eq!(meta.blob.text(), canonical);
    assert_eq!(meta.blob.len(), canonical.len());
    // The CSV metadata shares the compressed blob; small values are copies.
    let b = cat.bundle("p", "p.v1.0.0").unwrap();
    assert_eq!(b.csv_metadata().unwrap()["description"], description.as_str());
    let gvk = b.properties.iter().find(|p| p.type_name == "olm.gvk").unwrap();
    assert!(matches!(gvk.value_json.0, JsonTextRepr::Owned(_)));
    assert_eq!(gvk.value_json.text(), r#"{"group":"x.io","kind":"X","version":"v1"}"#);
    // Short documents stay as they are.
    let package = cat.metas(MetaFilter { schema: Some(SCHEMA_PACKAGE), ..Default::default() }).next().unwrap();
    assert!(!package.blob.is_compressed());
    // Text that does not compress is not held compressed either.
    let noise = noise(4000, 0x9E37_79B9_7F4A_7C15);
    assert!(!Blob::new(&noise).is_compressed());
    assert_eq!(Blob::new(&noise).text(), noise);
}

/// Text that LZ4 cannot compress on its own.
fn noise(len: usize, mut state: u64) -> String {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'!' + (state % 90) as u8)
        })
        .collect()
}

#[test]
fn later_bundles_of_a_package_are_compressed_against_its_first() {
    // Versions of one operator repeat a description no compressor finds repeats in alone.
    let description = noise(6000, 0x9E37_79B9_7F4A_7C15);
    let with_metadata = |package: &str, name: &str, version: &str| {
        let mut b = bundle(name, version);
        b["package"] = json!(package);
        b["properties"][0]["value"]["packageName"] = json!(package);
        b["properties"].as_array_mut().unwrap().push(json!({"type": "olm.csv.metadata",
            "value": {"description": format!("{description} ({name})"), "displayName": "P"}}));
        b
    };
    let documents = vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.package", "name": "q", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [
            {"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"}, {"name": "p.v1.2.0", "replaces": "p.v1.1.0"}]}),
        json!({"schema": "olm.channel", "package": "q", "name": "stable", "entries": [{"name": "q.v1.0.0"}]}),
        with_metadata("p", "p.v1.0.0", "1.0.0"),
        with_metadata("p", "p.v1.1.0", "1.1.0"),
        with_metadata("q", "q.v1.0.0", "1.0.0"),
        with_metadata("p", "p.v1.2.0", "1.2.0"),
    ];
    let check = |cat: &Catalog| {
        let bundles: Vec<&Meta> = cat.metas(MetaFilter { schema: Some(SCHEMA_BUNDLE), ..Default::default() }).collect();
        let names: Vec<&str> = bundles.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["p.v1.0.0", "p.v1.1.0", "q.v1.0.0", "p.v1.2.0"], "load order is kept");
        for meta in &bundles {
            let original = documents.iter().find(|d| d["name"] == meta.name.as_str()).unwrap();
            let mut canonical = to_canonical_string(original);
            canonical.push('\n');
            assert_eq!(meta.blob.text(), canonical, "{} reads back byte for byte", meta.name);
            let first_of_its_package = meta.name == "p.v1.0.0" || meta.name == "q.v1.0.0";
            assert_eq!(meta.blob.has_dictionary(), !first_of_its_package, "{}: {:?}", meta.name, meta.blob);
            if first_of_its_package {
                assert!(meta.blob.stored_len() * 10 > meta.blob.len() * 9, "noise stays as it is: {:?}", meta.blob);
            } else {
                assert!(meta.blob.stored_len() * 10 < meta.blob.len(), "{}: {:?}", meta.name, meta.blob);
            }
            let b = cat.bundle(&meta.package, &meta.name).unwrap();
            assert_eq!(b.csv_metadata().unwrap()["description"], format!("{description} ({})", meta.name));
        }
    };
    // Built from documents (gRPC, the parsed form) and loaded from a directory.
    let (cat, problems) = Catalog::build(docs(documents.clone()));
    assert!(problems.is_empty(), "{problems:?}");
    check(&cat);
    let dir = tempfile::tempdir().unwrap();
    let text: String = documents.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(dir.path().join("catalog.json"), text).unwrap();
    let (cat, problems) = crate::load::load_fbc(dir.path()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    check(&cat);
}

#[test]
fn builds_indexes_and_head() {
    let (cat, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [
            {"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"}, {"name": "p.v2.0.0", "replaces": "p.v1.1.0", "skipRange": ">=1.0.0 <2.0.0"}]}),
        bundle("p.v1.0.0", "1.0.0"),
        bundle("p.v1.1.0", "1.1.0"),
        bundle("p.v2.0.0", "2.0.0"),
        json!({"schema": "my.custom", "package": "p", "name": "c", "z": 1, "a": 2}),
    ]));
    assert!(problems.is_empty(), "{problems:?}");
    let ch = cat.channel("p", "stable").unwrap();
    assert_eq!(ch.head().unwrap().name, "p.v2.0.0");
    let chain: Vec<&str> = ch.replaces_chain().map(|e| e.name.as_str()).collect();
    assert_eq!(chain, ["p.v2.0.0", "p.v1.1.0", "p.v1.0.0"]);
    let succ: Vec<&str> = ch
        .successors("p.v1.0.0", Some(&Version::new(1, 0, 0)))
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(succ, ["p.v1.1.0", "p.v2.0.0"]);
    let gvk = Gvk {
        group: "x.io".into(),
        version: "v1".into(),
        kind: "X".into(),
    };
    assert_eq!(cat.bundles_providing(&gvk).count(), 3);
    assert_eq!(cat.counts(), (1, 1, 3));
    let schemas: Vec<&str> = cat.all_metas().iter().map(|m| m.schema.as_str()).collect();
    assert_eq!(
        schemas,
        [
            "olm.package",
            "olm.channel",
            "olm.bundle",
            "olm.bundle",
            "olm.bundle",
            "my.custom"
        ]
    );
    let custom = cat
        .metas(MetaFilter {
            schema: Some("my.custom"),
            ..Default::default()
        })
        .next()
        .unwrap();
    assert_eq!(
        &*custom.blob.text(),
        "{\"a\":2,\"name\":\"c\",\"package\":\"p\",\"schema\":\"my.custom\",\"z\":1}\n"
    );
    assert_eq!(cat.bundle("p", "p.v1.1.0").unwrap().channels, ["stable"]);
}

#[test]
fn reports_all_problems() {
    let (_, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "missing"}),
        json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
            {"name": "p.v1.0.0"}, {"name": "p.v9.0.0"}, {"name": "p.v1.1.0", "skipRange": "not a range"}]}),
        bundle("p.v1.0.0", "1.0.0"),
        bundle("p.v1.1.0", "1.1.0"),
        bundle("p.v1.2.0", "1.1.0"),
        json!({"package": "p", "name": "no-schema"}),
    ]));
    let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    let all = text.join("\n");
    assert!(
        all.contains("default channel \"missing\" does not exist"),
        "{all}"
    );
    assert!(
        all.contains("channel entry \"p.v9.0.0\" has no olm.bundle"),
        "{all}"
    );
    assert!(all.contains("skipRange \"not a range\" does not parse"), "{all}");
    assert!(all.contains("heads"), "{all}");
    assert!(
        all.contains("bundle \"p.v1.2.0\": bundle is not in any channel"),
        "{all}"
    );
    assert!(all.contains("share version 1.1.0"), "{all}");
    assert!(all.contains("no \"schema\""), "{all}");
}

#[test]
fn an_unparsable_skip_range_is_a_warning_and_the_package_is_served() {
    // A real package ships `olm.skipRange: '<v1.12.0'` (a `v` blang's range syntax refuses).
    let (catalog, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [
            {"name": "p.v1.11.0"},
            {"name": "p.v1.12.0", "replaces": "p.v1.11.0", "skipRange": "<v1.12.0"}]}),
        bundle("p.v1.11.0", "1.11.0"),
        bundle("p.v1.12.0", "1.12.0"),
    ]));
    let [problem] = problems.as_slice() else { panic!("{problems:?}") };
    assert!(problem.warning, "{problem}");
    assert_eq!(problem.code, "InvalidSkipRange");
    let text = problem.to_string();
    assert!(text.contains("bundle \"p.v1.12.0\"") && text.contains("\"<v1.12.0\" does not parse"), "{text}");
    assert!(text.contains("it is ignored") && text.contains("no leading v"), "{text}");
    // Served whole: the package stays, the entry keeps its replaces, the range is absent.
    let isolated = catalog.isolate(problems);
    assert!(isolated.left_out.is_empty());
    let channel = isolated.catalog.package("p").and_then(|p| p.channel("stable")).expect("channel served");
    assert_eq!(channel.head().map(|e| e.name.as_str()), Some("p.v1.12.0"));
    let entry = channel.entry("p.v1.12.0").unwrap();
    assert_eq!((entry.skip_range.as_deref(), entry.skip_range_parsed.as_ref()), (Some("<v1.12.0"), None));
    let successors = channel.successors("p.v1.11.0", Some(&Version::new(1, 11, 0)));
    assert_eq!(successors.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["p.v1.12.0"]);
}

#[test]
fn cycles_and_stranded() {
    let (_, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
        json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
            {"name": "p.v3.0.0", "replaces": "p.v2.0.0"},
            {"name": "p.v2.0.0", "replaces": "p.v1.0.0"},
            {"name": "p.v1.0.0", "replaces": "p.v2.0.0"},
            {"name": "p.v0.5.0"}]}),
        bundle("p.v3.0.0", "3.0.0"),
        bundle("p.v2.0.0", "2.0.0"),
        bundle("p.v1.0.0", "1.0.0"),
        bundle("p.v0.5.0", "0.5.0"),
    ]));
    let all = problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        all.contains("cycle: p.v2.0.0 -> p.v1.0.0 -> p.v2.0.0"),
        "{all}"
    );
    assert!(all.contains("2 heads"), "{all}");
}

#[test]
fn skipped_entries_are_not_stranded() {
    let (cat, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
        json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
            {"name": "p.v2.0.0", "replaces": "p.v1.0.0", "skips": ["p.v1.1.0"]},
            {"name": "p.v1.1.0"}, {"name": "p.v1.0.0", "replaces": "p.v0.1.0"}]}),
        bundle("p.v2.0.0", "2.0.0"),
        bundle("p.v1.1.0", "1.1.0"),
        bundle("p.v1.0.0", "1.0.0"),
    ]));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        cat.channel("p", "a").unwrap().head().unwrap().name,
        "p.v2.0.0"
    );
}

#[test]
fn constraints_parse_recursively() {
    let p = Property::new(
        "olm.constraint",
        json!({"failureMessage": "need db", "any": {"constraints": [
        {"package": {"packageName": "a", "versionRange": ">=1.0.0"}},
        {"not": {"constraints": [{"gvk": {"group": "g", "version": "v1", "kind": "K"}}]}},
        {"cel": {"rule": "properties.exists(p, p.type == 'x')"}}]}}),
    )
    .unwrap();
    let PropertyKind::Constraint(c) = &p.kind else {
        panic!("not a constraint")
    };
    assert_eq!(c.failure_message.as_deref(), Some("need db"));
    let ConstraintKind::Any(list) = &c.kind else {
        panic!("not any")
    };
    assert_eq!(list.len(), 3);
    assert!(
        matches!(&list[1].kind, ConstraintKind::Not(inner) if matches!(inner[0].kind, ConstraintKind::Gvk(_)))
    );
    assert!(
        Property::new(
            "olm.constraint",
            json!({"gvk": {"group": "g", "version": "v", "kind": "k"}, "cel": {"rule": "x"}})
        )
        .is_err()
    );
    assert!(Property::new("olm.constraint", json!({"bogus": 1})).is_err());
    // unknown property types are kept
    let other = Property::new("olm.maxOpenShiftVersion", json!("4.8")).unwrap();
    assert_eq!(other.kind, PropertyKind::Other);
    assert_eq!(&*other.value_json.text(), "\"4.8\"");
}

#[test]
fn metas_keep_load_order_and_filter_like_catalogd() {
    let (cat, problems) = Catalog::build(docs(vec![
        bundle("p.v1.0.0", "1.0.0"),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [{"name": "p.v1.0.0"}]}),
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.deprecations", "package": "p", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "p is end of life"},
            {"reference": {"schema": "olm.channel", "name": "stable"}, "message": "use fast"},
            {"reference": {"schema": "olm.bundle", "name": "p.v1.0.0"}, "message": "CVE-1"}]}),
    ]));
    assert!(problems.is_empty(), "{problems:?}");
    let load: Vec<&str> = cat.all_metas().iter().map(|m| m.schema.as_str()).collect();
    assert_eq!(
        load,
        [
            "olm.bundle",
            "olm.channel",
            "olm.package",
            "olm.deprecations"
        ]
    );
    let canonical: Vec<&str> = cat
        .canonical_metas()
        .iter()
        .map(|m| m.schema.as_str())
        .collect();
    assert_eq!(
        canonical,
        [
            "olm.package",
            "olm.channel",
            "olm.bundle",
            "olm.deprecations"
        ]
    );
    // `package` matches the blob's package field only: not the olm.package blob
    let by_pkg: Vec<&str> = cat
        .metas(MetaFilter {
            package: Some("p"),
            ..Default::default()
        })
        .map(|m| m.schema.as_str())
        .collect();
    assert_eq!(by_pkg, ["olm.bundle", "olm.channel", "olm.deprecations"]);
    let pkg_blob: Vec<&Meta> = cat
        .metas(MetaFilter {
            schema: Some("olm.package"),
            name: Some("p"),
            package: Some(""),
        })
        .collect();
    assert_eq!(pkg_blob.len(), 1);
    assert_eq!(
        cat.metas(MetaFilter {
            package: Some("nope"),
            ..Default::default()
        })
        .count(),
        0
    );
    // deprecations land on the objects
    let p = cat.package("p").unwrap();
    assert_eq!(p.deprecation.as_deref(), Some("p is end of life"));
    assert_eq!(
        p.channel("stable").unwrap().deprecation.as_deref(),
        Some("use fast")
    );
    assert_eq!(
        p.bundle("p.v1.0.0").unwrap().deprecation.as_deref(),
        Some("CVE-1")
    );
    assert_eq!(p.deprecations.len(), 3);
}

#[test]
fn stranded_entries_are_reported() {
    let (_, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "a"}),
        json!({"schema": "olm.channel", "package": "p", "name": "a", "entries": [
            {"name": "p.v3.0.0", "replaces": "p.v2.0.0", "skips": ["p.v1.0.0"]},
            {"name": "p.v2.0.0"},
            {"name": "p.v1.0.0", "replaces": "p.v0.5.0"},
            {"name": "p.v0.5.0"}]}),
        bundle("p.v3.0.0", "3.0.0"),
        bundle("p.v2.0.0", "2.0.0"),
        bundle("p.v1.0.0", "1.0.0"),
        bundle("p.v0.5.0", "0.5.0"),
    ]));
    let stranded: Vec<&Problem> = problems
        .iter()
        .filter(|p| p.code == "StrandedEntries")
        .collect();
    assert_eq!(stranded.len(), 1, "{problems:?}");
    assert!(
        stranded[0].message.contains("\"p.v0.5.0\""),
        "{}",
        stranded[0]
    );
    assert!(
        !stranded[0].message.contains("p.v1.0.0\","),
        "skipped entries are not stranded: {}",
        stranded[0]
    );
}

#[test]
fn catalog_is_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Catalog>();
    assert_send_sync::<Arc<Catalog>>();
}

#[test]
fn channel_path_to_head_follows_the_graph() {
    let (cat, problems) = Catalog::build(docs(vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "p", "name": "stable", "entries": [
            {"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"},
            {"name": "p.v2.0.0", "replaces": "p.v1.1.0", "skipRange": ">=1.0.0 <1.1.0"}]}),
        bundle("p.v1.0.0", "1.0.0"),
        bundle("p.v1.1.0", "1.1.0"),
        bundle("p.v2.0.0", "2.0.0"),
    ]));
    assert!(problems.is_empty(), "{problems:?}");
    let ch = cat.channel("p", "stable").unwrap();
    assert_eq!(ch.graph().len(), 3);
    let path: Vec<(&str, EdgeKind)> = ch
        .path_to_head("p.v1.0.0", Some(&Version::new(1, 0, 0)))
        .unwrap()
        .into_iter()
        .map(|(e, k)| (e.name.as_str(), k))
        .collect();
    assert_eq!(path, [("p.v2.0.0", EdgeKind::SkipRange)]);
    assert_eq!(ch.path_to_head("p.v2.0.0", Some(&Version::new(2, 0, 0))), Some(vec![]));
    assert_eq!(ch.entry("p.v1.1.0").unwrap().replaces.as_deref(), Some("p.v1.0.0"));
    assert!(ch.entry("p.v0.1.0").is_none());
}

#[test]
fn an_icon_with_whitespace_is_repaired_and_a_broken_one_takes_out_only_its_package() {
    let package = |name: &str, icon: &str| {
        vec![
            json!({"schema": "olm.package", "name": name, "defaultChannel": "stable",
                   "icon": {"base64data": icon, "mediatype": "image/png"}}),
            json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": [{"name": format!("{name}.v1")}]}),
            json!({"schema": "olm.bundle", "name": format!("{name}.v1"), "package": name, "image": "r/x:1",
                   "properties": [{"type": "olm.package", "value": {"packageName": name, "version": "1.0.0"}}]}),
        ]
    };
    // A real icon's base64 ending with a space, and one wrapped over lines.
    let mut values = package("spaced", "iVBORw0KGgo= ");
    values.extend(package("wrapped", "iVBO\nRw0K\nGgo="));
    values.extend(package("broken", "not*base64"));
    let (catalog, problems) = Catalog::build(docs(values));
    let icon = |name: &str| catalog.package(name).and_then(|p| p.icon.as_ref()).map(|i| i.base64data.clone());
    assert_eq!(icon("spaced").as_deref(), Some("iVBORw0KGgo="));
    assert_eq!(icon("wrapped").as_deref(), Some("iVBORw0KGgo="));
    assert!(problems.iter().all(|p| p.package.as_deref() == Some("broken")), "{problems:?}");
    let isolated = catalog.isolate(problems);
    let names: Vec<&str> = isolated.catalog.packages().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["spaced", "wrapped"]);
    assert_eq!(isolated.left_out[0].package, "broken");
}
