//! Tests on in-repository fixtures (always run).

use std::fs;
use std::path::{Path, PathBuf};

use olm_catalog::source::{OutputFormat, load_documents, render_documents, render_to_string};
use olm_catalog::{
    Catalog, RenderOptions, SourceFormat, load_catalog, load_catalog_lenient, validate,
};

fn fixture(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(sub)
}

fn repo_catalogs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogs")
}

fn heads(cat: &Catalog, pkg: &str) -> Vec<(String, String)> {
    cat.package(pkg)
        .unwrap()
        .channels()
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.head().map(|h| h.name.clone()).unwrap_or_default(),
            )
        })
        .collect()
}

fn etcd_heads(v061: &str) -> Vec<(String, String)> {
    vec![
        ("alpha".into(), v061.into()),
        (
            "clusterwide-alpha".into(),
            "etcdoperator.v0.9.4-clusterwide".into(),
        ),
        ("singlenamespace-alpha".into(), "etcdoperator.v0.9.4".into()),
    ]
}

#[test]
fn etcd_bundle_directories_load_with_objects() {
    let cat = load_catalog(&fixture("bundles/etcd")).unwrap();
    let pkg = cat.package("etcd").unwrap();
    assert_eq!(pkg.default_channel, "singlenamespace-alpha");
    assert_eq!(heads(&cat, "etcd"), etcd_heads("etcdoperator.v0.6.1"));
    let names: Vec<&str> = pkg.bundles().iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcdoperator.v0.6.1",
            "etcdoperator.v0.9.0",
            "etcdoperator.v0.9.2",
            "etcdoperator.v0.9.2-clusterwide",
            "etcdoperator.v0.9.4",
            "etcdoperator.v0.9.4-clusterwide"
        ]
    );
    let b = cat.bundle("etcd", "etcdoperator.v0.9.4").unwrap();
    assert_eq!(
        b.csv().and_then(|c| c.pointer("/metadata/name").and_then(|n| n.as_str()).map(str::to_owned)).as_deref(),
        Some("etcdoperator.v0.9.4")
    );
    assert_eq!(
        b.objects()
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .count(),
        3
    );
    assert_eq!(b.channels, ["singlenamespace-alpha"]);
    let v090 = cat.bundle("etcd", "etcdoperator.v0.9.0").unwrap();
    assert_eq!(
        v090.channels,
        ["clusterwide-alpha", "singlenamespace-alpha"]
    );
    let gvk = olm_catalog::Gvk {
        group: "etcd.database.coreos.com".into(),
        version: "v1beta2".into(),
        kind: "EtcdCluster".into(),
    };
    assert_eq!(cat.bundles_providing(&gvk).count(), 6);
    // pre-release ordering: 0.9.2-clusterwide < 0.9.2
    let cw = cat
        .bundle("etcd", "etcdoperator.v0.9.2-clusterwide")
        .unwrap();
    assert!(cw.version < cat.bundle("etcd", "etcdoperator.v0.9.2").unwrap().version);
    assert_eq!(pkg.newest_bundle().unwrap().name, "etcdoperator.v0.9.4");
}

#[test]
fn etcd_package_manifests_derive_channels_from_replaces() {
    let (format, cat, problems) =
        load_catalog_lenient(&fixture("packagemanifests/etcd"), &RenderOptions::default()).unwrap();
    assert_eq!(format, SourceFormat::PackageManifests);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(
        cat.package("etcd").unwrap().default_channel,
        "singlenamespace-alpha"
    );
    assert_eq!(
        heads(&cat, "etcd"),
        etcd_heads("etcdoperator-community.v0.6.1")
    );
    let chain: Vec<&str> = cat
        .channel("etcd", "clusterwide-alpha")
        .unwrap()
        .replaces_chain()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        chain,
        [
            "etcdoperator.v0.9.4-clusterwide",
            "etcdoperator.v0.9.2-clusterwide",
            "etcdoperator.v0.9.0"
        ]
    );
    // the package icon comes from the default channel head's CSV
    assert!(cat.package("etcd").unwrap().icon.is_some());
}

#[test]
fn rendered_yaml_and_json_read_back_to_the_same_blobs() {
    let (_, docs, problems) =
        load_documents(&fixture("bundles/etcd"), &RenderOptions::default()).unwrap();
    assert!(problems.is_empty());
    let original = Catalog::from_documents(docs.clone()).unwrap();
    for format in [OutputFormat::Yaml, OutputFormat::Json] {
        let (text, warnings) = render_to_string(docs.clone(), format).unwrap();
        assert!(warnings.is_empty(), "{warnings:#?}");
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("catalog.out"), &text).unwrap();
        let reread = load_catalog(dir.path()).unwrap();
        let a: Vec<String> = original.all_metas().iter().map(|m| m.blob.to_string()).collect();
        let b: Vec<String> = reread.all_metas().iter().map(|m| m.blob.to_string()).collect();
        assert_eq!(a, b, "{format:?} output does not read back identically");
    }
}

#[test]
fn single_bundle_renders_to_its_bundle_blob_only() {
    let (format, docs, _) =
        render_documents(&fixture("bundles/etcd/0.9.4"), &RenderOptions::default()).unwrap();
    assert_eq!(format, SourceFormat::Bundle);
    assert_eq!(docs.len(), 1);
    let v = &docs[0].value;
    assert_eq!(v["schema"], "olm.bundle");
    assert_eq!(v["name"], "etcdoperator.v0.9.4");
    let types: Vec<&str> = v["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    // sorted by type, bundle objects last
    assert_eq!(types[..4], ["olm.gvk", "olm.gvk", "olm.gvk", "olm.package"]);
    assert_eq!(
        types.iter().filter(|t| **t == "olm.bundle.object").count(),
        4
    );
    // csv-metadata mode
    let opts = RenderOptions {
        objects: olm_catalog::ObjectMode::CsvMetadata,
        image: Some("quay.io/example/etcd:v0.9.4".into()),
    };
    let (_, docs, _) = render_documents(&fixture("bundles/etcd/0.9.4"), &opts).unwrap();
    let v = &docs[0].value;
    assert_eq!(v["image"], "quay.io/example/etcd:v0.9.4");
    let meta = v["properties"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "olm.csv.metadata")
        .unwrap();
    assert_eq!(meta["value"]["displayName"], "etcd");
    assert!(
        v["relatedImages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["image"] == "quay.io/example/etcd:v0.9.4")
    );
}

/// Every catalog shipped in catalogs/ passes validation.
#[test]
fn shipped_catalogs_are_valid() {
    let root = repo_catalogs();
    let mut seen = 0;
    for entry in fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let report = validate(&dir).unwrap();
        assert_eq!(report.format, SourceFormat::Fbc, "{}", dir.display());
        assert!(report.passed(), "{}: {:#?}", dir.display(), report.problems);
        seen += 1;
    }
    assert!(seen >= 1, "no catalogs found in {}", root.display());
}

/// The shipped etcd catalog is exactly what rendering the real bundles gives.
#[test]
fn shipped_etcd_catalog_matches_a_fresh_render() {
    let shipped = fs::read_to_string(repo_catalogs().join("community/etcd/catalog.yaml")).unwrap();
    let (_, docs, _) =
        render_documents(&fixture("bundles/etcd"), &RenderOptions::default()).unwrap();
    let (fresh, _) = render_to_string(docs, OutputFormat::Yaml).unwrap();
    assert!(
        shipped == fresh,
        "catalogs/community/etcd/catalog.yaml is stale: re-render it with `olm catalog render`"
    );
    let cat = load_catalog(&repo_catalogs().join("community")).unwrap();
    assert_eq!(
        cat.package("etcd").unwrap().default_channel,
        "singlenamespace-alpha"
    );
    assert_eq!(heads(&cat, "etcd"), etcd_heads("etcdoperator.v0.6.1"));
    assert!(
        cat.bundles().all(|b| b.csv().is_some()),
        "every bundle carries its CSV"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest)
        } else {
            fs::copy(&p, &dest).map(|_| ()).unwrap()
        }
    }
}

#[test]
fn a_channel_entry_naming_a_missing_bundle_fails_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo_catalogs().join("community"), dir.path());
    let file = dir.path().join("etcd/catalog.yaml");
    let text = fs::read_to_string(&file).unwrap();
    let broken = text.replacen(
        "- name: etcdoperator.v0.9.4\n",
        "- name: etcdoperator.v0.9.9\n",
        1,
    );
    assert_ne!(text, broken, "fixture text changed: adjust the edit");
    fs::write(&file, broken).unwrap();
    let report = validate(dir.path()).unwrap();
    assert!(!report.passed());
    let texts: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    let hit = report
        .problems
        .iter()
        .find(|p| p.code == "MissingBundle")
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert_eq!(hit.bundle.as_deref(), Some("etcdoperator.v0.9.9"));
    assert_eq!(hit.package.as_deref(), Some("etcd"));
    assert_eq!(hit.file.as_deref(), Some(file.as_path()));
    // the bundle that lost its entry is reported too
    assert!(
        texts
            .iter()
            .any(|t| t.contains("etcdoperator.v0.9.4") && t.contains("not in any channel")),
        "{texts:#?}"
    );
}

#[test]
fn bad_files_are_reported_with_their_names_and_nothing_panics() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("a")).unwrap();
    fs::write(
        root.join("a/broken.yaml"),
        "schema: olm.package\nname: [unclosed\n",
    )
    .unwrap();
    fs::write(root.join("a/broken.json"), "{\"schema\": \"olm.package\", ").unwrap();
    fs::write(root.join("a/binary.bin"), [0xff, 0xfe, 0x00, 0x01]).unwrap();
    fs::write(
        root.join("a/custom.yaml"),
        "schema: example.com.notes\npackage: a\nname: note\ntext: hello\n",
    )
    .unwrap();
    fs::write(
        root.join("a/deep.json"),
        "[".repeat(5000) + &"]".repeat(5000),
    )
    .unwrap();
    fs::write(root.join("README.md"), "# not a catalog\n").unwrap();
    fs::write(root.join(".indexignore"), "README.md\n").unwrap();
    fs::write(
        root.join("a/pkg.yaml"),
        "schema: olm.package\nname: a\ndefaultChannel: stable\n---\nschema: olm.package\nname: a\n---\nschema: olm.channel\npackage: a\nname: stable\nentries:\n- name: a.v1.0.0\n  skipRange: '>=banana'\n---\nschema: olm.bundle\npackage: a\nname: a.v1.0.0\nimage: quay.io/x/a:v1\nproperties:\n- type: olm.package\n  value: {packageName: a, version: 1.0.0}\n",
    )
    .unwrap();
    let report = validate(root).unwrap();
    let texts: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    let has =
        |needle: &str, file: &str| texts.iter().any(|t| t.contains(needle) && t.contains(file));
    assert!(has("invalid YAML", "broken.yaml"), "{texts:#?}");
    assert!(has("invalid JSON", "broken.json"), "{texts:#?}");
    assert!(has("not UTF-8", "binary.bin"), "{texts:#?}");
    assert!(texts.iter().any(|t| t.contains("deep.json")), "{texts:#?}");
    assert!(has("duplicate olm.package", "pkg.yaml"), "{texts:#?}");
    assert!(has("skipRange \">=banana\" does not parse", "pkg.yaml"), "{texts:#?}");
    assert!(
        !texts.iter().any(|t| t.contains("README.md")),
        "ignored file was parsed: {texts:#?}"
    );
    // the custom schema is kept as a blob, not an error
    let (cat, _) = olm_catalog::load::load_fbc(root).unwrap();
    let custom: Vec<_> = cat
        .metas(olm_catalog::MetaFilter {
            schema: Some("example.com.notes"),
            ..Default::default()
        })
        .collect();
    assert_eq!(custom.len(), 1);
}

#[test]
fn unreadable_root_is_an_error() {
    let err = validate(Path::new("/nonexistent/catalog")).unwrap_err();
    assert_eq!(err.category(), "CatalogUnreadable");
    assert!(err.to_string().contains("/nonexistent/catalog"));
}
