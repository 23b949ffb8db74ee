//! Bundle-directory quirks of the real community data, reproduced in small
//! synthetic trees: nested bundle roots, non-bundle directories, semver mode,
//! metadata files under unexpected names, default-channel disagreements.

use std::fs;
use std::path::Path;

use olm_catalog::{ObjectMode, PropertyKind, RenderOptions, SourceFormat, load_catalog_lenient};

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn bundle(
    root: &Path,
    dir: &str,
    pkg: &str,
    version: &str,
    channels: &str,
    default: Option<&str>,
    replaces: Option<&str>,
) {
    let b = root.join(dir);
    let mut ann = format!(
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: {pkg}\n  operators.operatorframework.io.bundle.channels.v1: {channels}\n"
    );
    if let Some(d) = default {
        ann.push_str(&format!(
            "  operators.operatorframework.io.bundle.channel.default.v1: {d}\n"
        ));
    }
    write(&b.join("metadata/annotations.yaml"), &ann);
    let replaces = replaces
        .map(|r| format!("  replaces: {r}\n"))
        .unwrap_or_default();
    write(
        &b.join(format!("manifests/{pkg}.clusterserviceversion.yaml")),
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {pkg}.v{version}\n  annotations:\n    createdAt: 2025-06-24T14:07:09\nspec:\n  version: {version}\n  displayName: {pkg}\n{replaces}  customresourcedefinitions:\n    owned:\n    - name: widgets.example.com\n      version: v1\n      kind: Widget\n"
        ),
    );
    write(
        &b.join("manifests/widgets.crd.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names:\n    kind: Widget\n    plural: widgets\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n  - name: v1alpha1\n    served: false\n    storage: false\n",
    );
}

fn csv_meta() -> RenderOptions {
    RenderOptions {
        objects: ObjectMode::CsvMetadata,
        image: None,
    }
}

#[test]
fn semver_mode_synthesises_edges_and_ignores_non_bundle_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("operators");
    let pkg = root.join("widget");
    write(
        &pkg.join("ci.yaml"),
        "updateGraph: semver-mode# a comment glued to the value\n",
    );
    bundle(
        &pkg,
        "1.0.0",
        "widget",
        "1.0.0",
        "stable",
        Some("stable"),
        None,
    );
    bundle(
        &pkg,
        "1.2.0",
        "widget",
        "1.2.0",
        "stable,fast",
        Some("fast"),
        None,
    );
    bundle(
        &pkg,
        "1.1.0",
        "widget",
        "1.1.0",
        "stable",
        Some("stable"),
        None,
    );
    // nested one level deeper, next to a release-config.yaml
    bundle(
        &pkg,
        "1.3.0-rc.1/bundle",
        "widget",
        "1.3.0-rc.1",
        "fast",
        None,
        None,
    );
    write(
        &pkg.join("1.3.0-rc.1/release-config.yaml"),
        "catalog_templates: []\n",
    );
    write(
        &pkg.join("catalog-templates/v4.20.yaml"),
        "schema: olm.template.basic\nentries: []\n",
    );
    let (format, cat, problems) = load_catalog_lenient(&root, &csv_meta()).unwrap();
    assert_eq!(format, SourceFormat::BundleDirectories);
    let problems: Vec<_> = problems
        .into_iter()
        .filter(|p| p.code != "MissingImage")
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let p = cat.package("widget").unwrap();
    assert_eq!(p.bundles().len(), 4);
    // default channel: annotation of the newest bundle that has one (1.2.0 → fast)
    assert_eq!(p.default_channel, "fast");
    let stable: Vec<(&str, Option<&str>)> = p
        .channel("stable")
        .unwrap()
        .replaces_chain()
        .map(|e| (e.name.as_str(), e.replaces.as_deref()))
        .collect();
    assert_eq!(
        stable,
        [
            ("widget.v1.2.0", Some("widget.v1.1.0")),
            ("widget.v1.1.0", Some("widget.v1.0.0")),
            ("widget.v1.0.0", None)
        ]
    );
    // pre-release sorts below its release but above 1.2.0
    assert_eq!(
        p.channel("fast").unwrap().head().unwrap().name,
        "widget.v1.3.0-rc.1"
    );
    // timestamps stay strings inside the CSV metadata
    let md = p.bundle("widget.v1.0.0").unwrap().csv_metadata().unwrap();
    assert_eq!(md["annotations"]["createdAt"], "2025-06-24T14:07:09");
    // one olm.gvk per CRD version, served or not
    assert_eq!(
        p.bundle("widget.v1.0.0").unwrap().provided_gvks().count(),
        2
    );
}

#[test]
fn replaces_mode_and_dependencies_under_any_metadata_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bundle(
        root,
        "app/0.1.0",
        "app",
        "0.1.0",
        "alpha",
        Some("alpha"),
        None,
    );
    bundle(
        root,
        "app/0.2.0",
        "app",
        "0.2.0",
        "alpha",
        Some("alpha"),
        Some("app.v0.1.0"),
    );
    // like pelorus-operator: properties.yaml actually holds `dependencies:`
    write(
        &root.join("app/0.2.0/metadata/properties.yaml"),
        "dependencies:\n- type: olm.package\n  value:\n    packageName: db\n    version: \">=1.0.0 <2.0.0\"\n- type: olm.gvk\n  value:\n    group: 'db.example.com '\n    kind: Database\n    version: v1\n",
    );
    let (_, cat, problems) = load_catalog_lenient(root, &csv_meta()).unwrap();
    let problems: Vec<_> = problems
        .into_iter()
        .filter(|p| p.code != "MissingImage")
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let b = cat.bundle("app", "app.v0.2.0").unwrap();
    let req: Vec<_> = b.required_packages().collect();
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].package_name, "db");
    assert!(
        req[0]
            .range
            .as_ref()
            .unwrap()
            .contains(&"1.5.0".parse().unwrap())
    );
    // the trailing space in the group is kept, as opm keeps it
    assert!(
        b.required_gvks()
            .any(|g| g.group == "db.example.com " && g.kind == "Database")
    );
    assert!(
        b.properties
            .iter()
            .any(|p| matches!(p.kind, PropertyKind::CsvMetadata))
    );
    assert_eq!(
        cat.channel("app", "alpha").unwrap().head().unwrap().name,
        "app.v0.2.0"
    );
}

#[test]
fn a_bundle_without_csv_or_annotations_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bundle(root, "app/0.1.0", "app", "0.1.0", "alpha", None, None);
    write(
        &root.join("app/0.2.0/manifests/readme.yaml"),
        "kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n",
    );
    write(
        &root.join("app/0.2.0/metadata/annotations.yaml"),
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: app\n  operators.operatorframework.io.bundle.channels.v1: alpha\n",
    );
    write(
        &root.join("app/0.3.0/manifests/x.yaml"),
        "kind: ClusterServiceVersion\n",
    );
    write(&root.join("app/0.3.0/metadata/other.yaml"), "foo: bar\n");
    let (_, _, problems) = load_catalog_lenient(root, &csv_meta()).unwrap();
    let texts: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("app/0.2.0") && t.contains("no ClusterServiceVersion")),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("app/0.3.0/metadata") && t.contains("annotations")),
        "{texts:#?}"
    );
}

/// eventing-kogito 1.1.0 and 1.2.0 in community-operators-prod ship a dependencies.yaml that no
/// YAML parser reads (an indented `value:` under a list item): the tree is rendered without
/// those bundles, each named in a warning, and the other packages are whole.
#[test]
fn a_bundle_that_cannot_be_read_is_left_out_of_a_tree_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bundle(root, "app/0.1.0", "app", "0.1.0", "alpha", None, None);
    bundle(root, "app/0.2.0", "app", "0.2.0", "alpha", None, Some("app.v0.1.0"));
    bundle(root, "other/1.0.0", "other", "1.0.0", "stable", None, None);
    write(
        &root.join("app/0.2.0/metadata/dependencies.yaml"),
        "dependencies:\n  - type: olm.gvk\n      value:\n        group: eventing.knative.dev\n        kind: Trigger\n        version: v1\n",
    );
    let (_, cat, mut problems) = load_catalog_lenient(root, &csv_meta()).unwrap();
    problems.retain(|p| p.code != "MissingImage"); // local bundles have no image
    let [problem] = problems.as_slice() else { panic!("{problems:#?}") };
    assert!(problem.warning, "{problem}");
    let text = problem.to_string();
    assert!(text.contains("app/0.2.0/metadata/dependencies.yaml") && text.contains("is left out"), "{text}");
    assert_eq!(cat.channel("app", "alpha").unwrap().head().unwrap().name, "app.v0.1.0");
    assert!(cat.package("other").is_some());

    // A lone bundle that cannot be read is still an error.
    match load_catalog_lenient(&root.join("app/0.2.0"), &csv_meta()) {
        Err(err) => assert!(err.to_string().contains("dependencies.yaml"), "{err}"),
        Ok((_, _, problems)) => assert!(problems.iter().any(|p| !p.warning && p.to_string().contains("dependencies.yaml")), "{problems:#?}"),
    }
}

#[test]
fn a_bundle_without_channels_installs_alone_but_is_named_in_a_catalog() {
    // Upstream's own OLM v1 e2e bundles name no channel: a bundle is installed without one
    // (and `opm render` of one bundle yields only its olm.bundle). A catalog built from a tree
    // of bundles lists each by its channels, so there it is a problem.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    bundle(root, "app/0.1.0", "app", "0.1.0", "alpha", None, None);
    bundle(root, "app/0.2.0", "app", "0.2.0", "", None, Some("app.v0.1.0"));
    let alone = olm_catalog::render::render_bundle_dir(&root.join("app/0.2.0"), &csv_meta()).expect("renders alone");
    assert_eq!(alone.name, "app.v0.2.0");
    assert!(alone.channels.is_empty());
    let (_, _, problems) = load_catalog_lenient(root, &csv_meta()).unwrap();
    assert!(
        problems.iter().any(|p| p.to_string().contains("operators.operatorframework.io.bundle.channels.v1 is missing or empty")
            && p.to_string().contains("app/0.2.0")),
        "{problems:#?}"
    );
}
