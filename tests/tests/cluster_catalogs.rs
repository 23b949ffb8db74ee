//! OLM v1's ClusterCatalog on the real control plane, against the `olm run` binary: what a
//! cluster admin sees of a catalog image (served at `status.urls.base` with catalogd's API,
//! pinned to its digest, polled for a new one), of a bad image or catalog (said in its own
//! status, its neighbours unharmed), of `availabilityMode: Unavailable` and of a delete; and
//! that the API server refuses what upstream's CRD refuses, with upstream's words.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use olm_api::olmv1::ClusterCatalog;
use olm_e2e::controllers;
use olm_e2e::olm;
use olm_e2e::olmv1::{OlmRun, cluster_catalog};
use olm_testkit::{RegistryOptions, TestCluster, wait_for};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);

/// One test at a time: each runs an `olm run` of its own, and two would both reconcile every
/// (cluster-scoped) ClusterCatalog, each writing its own URL.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A File-Based Catalog of one package, `demo`, whose bundles are `versions`.
fn write_fbc(dir: &Path, versions: &[&str]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut docs = vec![json!({"schema": "olm.package", "name": "demo", "defaultChannel": "stable"})];
    let entries: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| match i {
            0 => json!({"name": format!("demo.v{v}")}),
            _ => json!({"name": format!("demo.v{v}"), "replaces": format!("demo.v{}", versions[i - 1])}),
        })
        .collect();
    docs.push(json!({"schema": "olm.channel", "package": "demo", "name": "stable", "entries": entries}));
    for v in versions {
        docs.push(json!({
            "schema": "olm.bundle", "package": "demo", "name": format!("demo.v{v}"), "image": format!("example.com/demo-bundle:v{v}"),
            "properties": [{"type": "olm.package", "value": {"packageName": "demo", "version": v}}]
        }));
    }
    std::fs::write(dir.join("catalog.json"), docs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"))?;
    Ok(())
}

fn push_catalog(work: &Path, name: &str, image: &str, versions: &[&str]) -> anyhow::Result<()> {
    let dir = work.join(name);
    write_fbc(&dir, versions)?;
    olm(&["catalog", "push", dir.to_str().context("path")?, image])?;
    Ok(())
}

/// What each ClusterCatalog test runs against: the cluster, a registry, a scratch directory and
/// an `olm run` of its own.
struct Setup {
    cluster: TestCluster,
    registry: olm_testkit::TestRegistry,
    work: tempfile::TempDir,
    api: Api<ClusterCatalog>,
    _olm: OlmRun,
}

impl Setup {
    /// `prefixes`: the names of the test's catalogs, whose leftovers are deleted first.
    async fn new(prefixes: &[&str]) -> anyhow::Result<Setup> {
        let cluster = controllers::cluster_with_crds().await?;
        let registry = olm_testkit::registry(RegistryOptions::new()).await?;
        let work = tempfile::tempdir()?;
        let olm = OlmRun::start(&cluster, &work.path().join("cache")).await?;
        let api: Api<ClusterCatalog> = Api::all(cluster.client());
        delete_leftovers(&api, prefixes).await?;
        Ok(Setup { cluster, registry, work, api, _olm: olm })
    }
}

/// ClusterCatalogs (cluster-scoped) a failed earlier run of this test left, by name prefix:
/// deleted, so that their retries do not crowd this run.
async fn delete_leftovers(api: &Api<ClusterCatalog>, prefixes: &[&str]) -> anyhow::Result<()> {
    for catalog in api.list(&Default::default()).await?.items {
        let name = kube::ResourceExt::name_any(&catalog);
        if prefixes.iter().any(|p| name.starts_with(&format!("{p}-"))) {
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
    }
    Ok(())
}

/// The condition `type_` of the catalog: (status, reason, message).
fn condition(catalog: &ClusterCatalog, type_: &str) -> Option<(String, String, String)> {
    let c = catalog.conditions().iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until the catalog's status passes `check`, and returns the catalog.
async fn wait_catalog(api: &Api<ClusterCatalog>, name: &str, what: &str, check: impl Fn(&ClusterCatalog) -> bool) -> anyhow::Result<ClusterCatalog> {
    Ok(wait_for(&format!("ClusterCatalog {name}: {what}"), TIMEOUT, || async {
        let catalog = api.get(name).await?;
        anyhow::Ok(check(&catalog).then_some(catalog.clone()).or_else(|| {
            eprintln!("  {name}: {:?}", catalog.status.as_ref().map(|s| &s.conditions).map(|c| c.iter().map(|c| (&c.type_, &c.status, &c.reason, &c.message)).collect::<Vec<_>>()));
            None
        }))
    })
    .await?)
}

fn serving(catalog: &ClusterCatalog) -> bool {
    condition(catalog, "Serving").is_some_and(|(status, reason, _)| status == "True" && reason == "Available")
}

/// GET `url` (plain HTTP/1.0, so the body is not chunked): (status code, body).
async fn get(url: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").with_context(|| format!("{url}: not an http:// URL"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.with_context(|| format!("connect to {host}"))?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nhost: {host}\r\n\r\n").as_bytes()).await?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await?;
    let (head, body) = out.split_once("\r\n\r\n").with_context(|| format!("{url}: no HTTP response: {out}"))?;
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).with_context(|| format!("{url}: {head}"))?;
    Ok((code, body.to_owned()))
}

/// The bundle names `url/api/v1/all` serves.
async fn bundles_served(base: &str) -> anyhow::Result<Vec<String>> {
    let (code, body) = get(&format!("{base}/api/v1/all")).await?;
    if code != 200 {
        bail!("{base}/api/v1/all answered {code}: {body}");
    }
    let mut names = Vec::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let doc: Value = serde_json::from_str(line).with_context(|| format!("a line of /api/v1/all: {line}"))?;
        if doc["schema"] == "olm.bundle" {
            names.push(doc["name"].as_str().unwrap_or_default().to_owned());
        }
    }
    Ok(names)
}

#[tokio::test]
async fn a_catalog_image_is_served_pinned_to_its_digest_and_polled_for_a_new_one() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Setup { cluster, registry, work, api, _olm } = Setup::new(&["demo"]).await?;
    let name = olm_testkit::random_name("demo");
    let image = format!("{}/demo-catalog:latest", registry.addr());
    push_catalog(work.path(), "v1", &image, &["1.0.0"])?;

    cluster.kubectl_with_input(&["create", "-f", "-"], &cluster_catalog(&name, &image, Some(1))).await?;
    let served = wait_catalog(&api, &name, "Serving", serving).await?;
    let status = served.status.clone().context("status")?;
    let resolved = status.resolved_source.context("resolvedSource")?.image.reference;
    assert!(resolved.starts_with(&format!("{}/demo-catalog@sha256:", registry.addr())), "pinned to the digest: {resolved}");
    assert!(status.last_unpacked.is_some(), "lastUnpacked");
    assert_eq!(condition(&served, "Progressing").map(|c| c.1), Some("Succeeded".to_owned()));
    let base = status.urls.context("urls")?.base;
    assert!(base.ends_with(&format!("/catalogs/{name}")), "{base}");
    assert_eq!(bundles_served(&base).await?, ["demo.v1.0.0"]);
    // catalogd's query parameters on /api/v1/metas.
    let (code, body) = get(&format!("{base}/api/v1/metas?schema=olm.package")).await?;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"name\":\"demo\"") && !body.contains("olm.bundle"), "{body}");
    // The columns kubectl shows are upstream's.
    let table = cluster.kubectl(&["get", "clustercatalog", &name]).await?.stdout;
    assert!(table.starts_with("NAME") && table.contains("LASTUNPACKED") && table.contains("SERVING"), "{table}");
    assert!(table.lines().nth(1).is_some_and(|row| row.contains("True")), "{table}");

    // A new digest under the same tag: the next poll (a minute) serves it.
    push_catalog(work.path(), "v2", &image, &["1.0.0", "1.1.0"])?;
    let polled = wait_for(&format!("ClusterCatalog {name} serving the new digest"), Duration::from_secs(150), || async {
        let catalog = api.get(&name).await?;
        let now = catalog.status.as_ref().and_then(|s| s.resolved_source.as_ref()).map(|r| r.image.reference.clone());
        anyhow::Ok(now.filter(|r| *r != resolved))
    })
    .await?;
    assert!(polled.starts_with(&format!("{}/demo-catalog@sha256:", registry.addr())), "{polled}");
    assert_eq!(bundles_served(&base).await?, ["demo.v1.0.0", "demo.v1.1.0"]);

    // Unavailable: not served, and said so; available again: served again.
    api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"availabilityMode": "Unavailable"}}))).await?;
    let off = wait_catalog(&api, &name, "UserSpecifiedUnavailable", |c| {
        condition(c, "Serving").is_some_and(|(s, r, _)| s == "False" && r == "UserSpecifiedUnavailable")
    })
    .await?;
    assert!(off.status.as_ref().is_some_and(|s| s.urls.is_none()), "no URL advertised while unavailable");
    assert_eq!(get(&format!("{base}/api/v1/all")).await?.0, 404);
    api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"availabilityMode": "Available"}}))).await?;
    wait_catalog(&api, &name, "Serving again", serving).await?;
    assert_eq!(bundles_served(&base).await?.len(), 2);

    // Deleted: its URL answers 404.
    api.delete(&name, &DeleteParams::default()).await?;
    wait_for("the deleted catalog's URL to answer 404", TIMEOUT, || async { anyhow::Ok((get(&format!("{base}/api/v1/all")).await?.0 == 404).then_some(())) }).await?;
    Ok(())
}

#[tokio::test]
async fn a_bad_image_or_catalog_is_said_in_its_own_status_and_hurts_no_neighbour() -> anyhow::Result<()> {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Setup { cluster, registry, work, api, _olm } = Setup::new(&["good", "missing", "broken"]).await?;
    let good_image = format!("{}/good-catalog:v1", registry.addr());
    push_catalog(work.path(), "good", &good_image, &["1.0.0"])?;
    // An image that is there but holds no catalog: a bundle image.
    let bundle = olm_e2e::images::etcd_bundle_dir("0.9.0");
    let not_a_catalog = olm(&["bundle", "push", bundle.to_str().context("path")?, &format!("{}/etcd-bundle:v1", registry.addr())])?.trim().to_owned();

    let (good, missing, broken) = (olm_testkit::random_name("good"), olm_testkit::random_name("missing"), olm_testkit::random_name("broken"));
    let missing_image = format!("{}/no-such-catalog:v1", registry.addr());
    for (name, image) in [(&good, good_image.as_str()), (&missing, missing_image.as_str()), (&broken, not_a_catalog.as_str())] {
        cluster.kubectl_with_input(&["create", "-f", "-"], &cluster_catalog(name, image, None)).await?;
    }

    let said = wait_catalog(&api, &missing, "Retrying, naming the image", |c| {
        condition(c, "Progressing").is_some_and(|(s, r, m)| s == "True" && r == "Retrying" && m.contains("no-such-catalog"))
    })
    .await?;
    let (_, _, message) = condition(&said, "Progressing").context("Progressing")?;
    assert!(!message.contains("Error {") && !message.contains("Some("), "no Rust debug dump: {message}");
    assert_eq!(condition(&said, "Serving").map(|c| (c.0, c.1)), Some(("False".to_owned(), "Unavailable".to_owned())));
    assert!(said.status.as_ref().is_some_and(|s| s.urls.is_none() && s.resolved_source.is_none()));

    let said = wait_catalog(&api, &broken, "Progressing says it is no catalog", |c| {
        condition(c, "Progressing").is_some_and(|(_, _, m)| m.contains("etcd-bundle"))
    })
    .await?;
    eprintln!("a bundle image as a catalog: {:?}", condition(&said, "Progressing"));
    assert_eq!(condition(&said, "Serving").map(|c| c.0), Some("False".to_owned()));

    let served = wait_catalog(&api, &good, "Serving beside them", serving).await?;
    let base = served.status.and_then(|s| s.urls).context("urls")?.base;
    assert_eq!(bundles_served(&base).await?, ["demo.v1.0.0"]);

    // Fixed: the missing image pushed, the next retry serves it. Its package has no
    // defaultChannel, as upstream's own e2e catalogs have none: OLM v1 needs none (catalogd
    // serves such a package; opm's v0 model would refuse it).
    let late = work.path().join("late");
    write_fbc(&late, &["2.0.0"])?;
    let text = std::fs::read_to_string(late.join("catalog.json"))?
        .replace(r#","defaultChannel":"stable""#, "")
        .replace(r#""defaultChannel":"stable","#, "");
    assert!(!text.contains("defaultChannel"), "{text}");
    std::fs::write(late.join("catalog.json"), text)?;
    olm(&["catalog", "push", late.to_str().context("path")?, &missing_image])?;
    let fixed = wait_catalog(&api, &missing, "Serving once the image exists", serving).await?;
    assert_eq!(condition(&fixed, "Progressing").map(|c| c.1), Some("Succeeded".to_owned()));

    for name in [&good, &missing, &broken] {
        api.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[tokio::test]
async fn the_api_server_refuses_what_upstreams_crd_refuses_in_its_words() -> anyhow::Result<()> {
    let cluster = controllers::cluster_with_crds().await?;
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let cases = [
        (cluster_catalog("by-digest-polled", &format!("quay.io/org/catalog@{digest}"), Some(10)), "cannot specify pollIntervalMinutes while using digest-based image"),
        (cluster_catalog("no-tag", "quay.io/org/catalog", None), "must end with a digest or a tag"),
        (
            "apiVersion: olm.operatorframework.io/v1\nkind: ClusterCatalog\nmetadata:\n  name: zero-poll\nspec:\n  source:\n    type: Image\n    image:\n      ref: quay.io/org/catalog:v1\n      pollIntervalMinutes: 0\n".to_owned(),
            "should be greater than or equal to 1",
        ),
        (
            "apiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata:\n  name: bad-range\nspec:\n  namespace: demo\n  source:\n    sourceType: Catalog\n    catalog:\n      packageName: demo\n      version: \">>1.0\"\n".to_owned(),
            "invalid version expression",
        ),
        (
            "apiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata:\n  name: no-catalog\nspec:\n  namespace: demo\n  source:\n    sourceType: Catalog\n".to_owned(),
            "catalog is required when sourceType is Catalog, and forbidden otherwise",
        ),
    ];
    for (yaml, expected) in cases {
        let refused = cluster.kubectl_with_input(&["create", "--dry-run=server", "-f", "-"], &yaml).await;
        let err = format!("{:#}", refused.err().with_context(|| format!("accepted:\n{yaml}"))?);
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
    }
    // Upstream's quick-start objects apply unchanged (a server-side dry run).
    let quickstart = "apiVersion: olm.operatorframework.io/v1\nkind: ClusterCatalog\nmetadata:\n  name: operatorhubio\nspec:\n  source:\n    type: Image\n    image:\n      ref: quay.io/operatorhubio/catalog:latest\n      pollIntervalMinutes: 10\n---\napiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata:\n  name: argocd\nspec:\n  namespace: argocd\n  serviceAccount:\n    name: argocd-installer\n  source:\n    sourceType: Catalog\n    catalog:\n      packageName: argocd-operator\n      version: 0.6.0\n";
    let applied = cluster.kubectl_with_input(&["apply", "--dry-run=server", "-o", "json", "-f", "-"], quickstart).await?;
    let applied: Value = serde_json::from_str(&applied.stdout)?;
    let items = applied["items"].as_array().context("a list")?;
    assert_eq!(items[0]["spec"]["priority"], 0, "priority defaults to 0: {}", items[0]);
    assert_eq!(items[0]["spec"]["availabilityMode"], "Available");
    assert_eq!(items[1]["spec"]["source"]["catalog"]["upgradeConstraintPolicy"], "CatalogProvided");
    Ok(())
}
