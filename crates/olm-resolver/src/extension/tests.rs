//! The cases a ClusterExtension meets: a version range, channels, an upgrade along the graph
//! or past it, deprecations, several catalogs, and what it is told when nothing fits.

use olm_catalog::Document;
use serde_json::{Value, json};

use super::*;

/// A catalog of package `demo`: `(bundle version, replaces)` per channel entry, and the
/// versions that are deprecated.
fn catalog(channels: &[(&str, &[(&str, Option<&str>)])], deprecated: &[&str]) -> Catalog {
    let mut docs: Vec<Value> = vec![json!({"schema": "olm.package", "name": "demo", "defaultChannel": channels[0].0})];
    let mut versions = std::collections::BTreeSet::new();
    for (channel, entries) in channels {
        let entries: Vec<Value> = entries
            .iter()
            .map(|(v, replaces)| {
                versions.insert(*v);
                match replaces {
                    Some(r) => json!({"name": format!("demo.v{v}"), "replaces": format!("demo.v{r}")}),
                    None => json!({"name": format!("demo.v{v}")}),
                }
            })
            .collect();
        docs.push(json!({"schema": "olm.channel", "package": "demo", "name": channel, "entries": entries}));
    }
    for v in &versions {
        docs.push(json!({
            "schema": "olm.bundle", "package": "demo", "name": format!("demo.v{v}"), "image": format!("example.com/demo:v{v}"),
            "properties": [{"type": "olm.package", "value": {"packageName": "demo", "version": v}}]
        }));
    }
    if !deprecated.is_empty() {
        let entries: Vec<Value> = deprecated
            .iter()
            .map(|v| json!({"reference": {"schema": "olm.bundle", "name": format!("demo.v{v}")}, "message": format!("demo.v{v} is deprecated")}))
            .collect();
        docs.push(json!({"schema": "olm.deprecations", "package": "demo", "entries": entries}));
    }
    let (catalog, problems) = Catalog::build(docs.into_iter().map(|value| Document { value, source: None }).collect());
    assert!(problems.iter().all(|p| p.warning), "{problems:?}");
    catalog
}

const STABLE: (&str, &[(&str, Option<&str>)]) = ("stable", &[("1.0.0", None), ("1.1.0", Some("1.0.0")), ("1.2.0", Some("1.1.0")), ("2.0.0", Some("1.2.0"))]);
const FAST: (&str, &[(&str, Option<&str>)]) = ("fast", &[("1.2.0", None), ("2.0.0", Some("1.2.0")), ("2.1.0", Some("2.0.0"))]);

fn pick(offers: &[Offer<'_>], version: Option<&str>, channels: &[&str], policy: UpgradePolicy, installed: Option<&str>) -> Result<String, String> {
    let constraint = version.map(|v| Constraint::parse(v).unwrap());
    let channels: Vec<String> = channels.iter().map(|c| (*c).to_owned()).collect();
    let installed_version = installed.map(|v| Version::parse(v).unwrap());
    let installed_name = installed.map(|v| format!("demo.v{v}"));
    let request = Request {
        package: "demo",
        version: constraint.as_ref(),
        channels: &channels,
        policy,
        installed: installed_name.as_deref().zip(installed_version.as_ref()),
    };
    choose(offers, &request).map(|c| format!("{}@{}", c.bundle.name, c.catalog)).map_err(|e| e.to_string())
}

#[test]
fn choices() {
    let both = catalog(&[STABLE, FAST], &[]);
    let offers = [Offer { catalog: "a", priority: 0, content: &both }];
    use UpgradePolicy::*;
    let cases: &[(&str, Option<&str>, &[&str], UpgradePolicy, Option<&str>, &str)] = &[
        ("the newest of all channels", None, &[], CatalogProvided, None, "demo.v2.1.0@a"),
        ("the newest of one channel", None, &["stable"], CatalogProvided, None, "demo.v2.0.0@a"),
        ("the newest in a range", Some(">=1.0.0, <2.0.0"), &[], CatalogProvided, None, "demo.v1.2.0@a"),
        ("a pinned version", Some("1.1.0"), &[], CatalogProvided, None, "demo.v1.1.0@a"),
        ("a caret range", Some("^1.1"), &[], CatalogProvided, None, "demo.v1.2.0@a"),
        ("upgrading: the next step only", None, &["stable"], CatalogProvided, Some("1.0.0"), "demo.v1.1.0@a"),
        ("upgrading: stays when already at the head", None, &["stable"], CatalogProvided, Some("2.0.0"), "demo.v2.0.0@a"),
        ("self-certified: straight to the newest", None, &["stable"], SelfCertified, Some("1.0.0"), "demo.v2.0.0@a"),
        ("upgrading in every channel: the fast channel's next step", None, &[], CatalogProvided, Some("2.0.0"), "demo.v2.1.0@a"),
    ];
    for (what, version, channels, policy, installed, expected) in cases {
        assert_eq!(pick(&offers, *version, channels, *policy, *installed).as_deref(), Ok(*expected), "{what}");
    }
}

#[test]
fn a_deprecated_bundle_is_taken_only_when_nothing_else_fits() {
    let content = catalog(&[STABLE], &["2.0.0"]);
    let offers = [Offer { catalog: "a", priority: 0, content: &content }];
    assert_eq!(pick(&offers, None, &[], UpgradePolicy::CatalogProvided, None).as_deref(), Ok("demo.v1.2.0@a"));
    assert_eq!(pick(&offers, Some(">=2.0.0"), &[], UpgradePolicy::CatalogProvided, None).as_deref(), Ok("demo.v2.0.0@a"));
}

#[test]
fn several_catalogs_priority_decides_and_a_tie_is_refused() {
    let one = catalog(&[STABLE], &[]);
    let other = catalog(&[STABLE], &[]);
    let older = catalog(&[("stable", &[("1.0.0", None)])], &[]);
    let offers = [Offer { catalog: "low", priority: 0, content: &one }, Offer { catalog: "high", priority: 10, content: &other }];
    assert_eq!(pick(&offers, None, &[], UpgradePolicy::CatalogProvided, None).as_deref(), Ok("demo.v2.0.0@high"));
    let offers = [Offer { catalog: "x", priority: 5, content: &one }, Offer { catalog: "y", priority: 5, content: &other }];
    let err = pick(&offers, None, &[], UpgradePolicy::CatalogProvided, None).unwrap_err();
    assert!(err.contains("multiple catalogs with the same priority 5: demo.v2.0.0 in x, y"), "{err}");
    // A higher version wins over a higher priority.
    let offers = [Offer { catalog: "old", priority: 100, content: &older }, Offer { catalog: "new", priority: 0, content: &one }];
    assert_eq!(pick(&offers, None, &[], UpgradePolicy::CatalogProvided, None).as_deref(), Ok("demo.v2.0.0@new"));
}

#[test]
fn nothing_fits_and_the_user_is_told_what_to_change() {
    let content = catalog(&[STABLE], &[]);
    let offers = [Offer { catalog: "a", priority: 0, content: &content }];
    let said = |version, channels: &[&str], policy, installed| pick(&offers, version, channels, policy, installed).unwrap_err();
    let err = said(Some(">=3.0.0"), &[], UpgradePolicy::CatalogProvided, None);
    assert_eq!(err, r#"no bundles found for package "demo" matching version ">=3.0.0" (the newest it offers there is 2.0.0)"#);
    let err = said(None, &["beta"], UpgradePolicy::CatalogProvided, None);
    assert_eq!(err, r#"no bundles found for package "demo" in channels [beta]"#);
    let err = said(Some("2.0.0"), &[], UpgradePolicy::CatalogProvided, Some("1.0.0"));
    assert!(
        err.starts_with(r#"error upgrading from currently installed version "1.0.0": no bundles found for package "demo" matching version "2.0.0" that the catalog lets it upgrade to"#)
            && err.contains("SelfCertified"),
        "{err}"
    );
    let request = Request { package: "nope", version: None, channels: &[], policy: UpgradePolicy::CatalogProvided, installed: None };
    let err = choose(&offers, &request).unwrap_err().to_string();
    assert!(err.contains(r#"package "nope""#) && err.contains("the catalogs a do not have it"), "{err}");
    let err = choose(&[], &request).unwrap_err().to_string();
    assert!(err.contains("no ClusterCatalog is serving content"), "{err}");
}
