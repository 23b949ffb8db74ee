//! Bundles whose manifests are larger than an etcd request, and writes the API server refuses.
//!
//! A bundle of several MiB (big CRDs with big openAPI schemas) installs through a Subscription:
//! its InstallPlan stays small because the large manifests live in ConfigMaps owned by the plan.
//! And a write that is refused (here by a ValidatingAdmissionPolicy on InstallPlan status
//! writes) backs off instead of hot-looping, shows up as an Event and as a condition on the
//! Subscription, and the install completes once the refusal is lifted.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use olm_api::v1alpha1::install_plan::InstallPlan;
use olm_api::v1alpha1::subscription::{Subscription, SubscriptionConditionType};
use olm_controllers::plan_content::{PLAN_LABEL, referenced_config_maps, resolve};
use olm_e2e::controllers::{self, create_from_yaml};
use olm_e2e::widget::{widget_catalog, widget_crd, widget_csv};
use olm_testkit::TestNamespace;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(180);
const OBJECTS: &[&str] = &["subscriptions", "installplans", "csvs", "catalogsources", "configmaps"];

fn random_of(ns: &TestNamespace) -> String {
    ns.name().rsplit('-').next().unwrap_or("x").to_owned()
}

/// An openAPI schema of about `bytes` bytes, shaped like real operators' schemas: nested
/// objects of typed fields, each with a sentence of description (pseudo-random words, so it
/// compresses about as well as real descriptions do).
fn big_schema(seed: u64, bytes: usize) -> Value {
    const WORDS: &[&str] = &[
        "the", "replica", "count", "of", "storage", "class", "used", "for", "volume", "claims", "when", "set", "operator",
        "reconciles", "pods", "template", "selector", "must", "match", "labels", "defaults", "to", "empty", "string", "tls",
        "certificate", "secret", "name", "resources", "limits", "requests", "memory", "cpu", "affinity", "node", "tolerations",
    ];
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut groups = serde_json::Map::new();
    let mut size = 0;
    let mut g = 0;
    while size < bytes {
        let mut fields = serde_json::Map::new();
        for f in 0..40 {
            let description: Vec<&str> = (0..(12 + next() % 20)).map(|_| WORDS[next() % WORDS.len()]).collect();
            let description = description.join(" ");
            size += description.len() + 60;
            let kind = ["string", "integer", "boolean"][next() % 3];
            fields.insert(format!("field{f}"), json!({"type": kind, "description": description}));
        }
        groups.insert(format!("group{g}"), json!({"type": "object", "description": "A group of settings.", "properties": fields}));
        g += 1;
    }
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": groups}, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

fn big_crd(random: &str, i: usize, bytes: usize) -> Value {
    let kind = format!("Big{i}");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("big{i}s.{random}.olm.test")},
        "spec": {"group": format!("{random}.olm.test"), "scope": "Namespaced",
                 "names": {"plural": format!("big{i}s"), "singular": format!("big{i}"), "kind": kind, "listKind": format!("Big{i}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": big_schema(i as u64 + 1, bytes)}}]}
    })
}

/// A file-based catalog with the package `big`: one bundle `big.v1.0.0` whose objects are a CSV
/// without Deployments and `crds` (inline, as `olm.bundle.object`s).
fn big_catalog(crds: &[Value]) -> Value {
    use base64::Engine;
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    let owned: Vec<Value> = crds
        .iter()
        .map(|c| json!({"name": c["metadata"]["name"], "version": "v1", "kind": c["spec"]["names"]["kind"]}))
        .collect();
    let mut csv = widget_csv("1.0.0", None, "unused");
    csv["metadata"]["name"] = json!("big.v1.0.0");
    csv["spec"]["customresourcedefinitions"]["owned"] = json!(owned);
    let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": "big", "version": "1.0.0"}})];
    for c in crds {
        properties.push(json!({"type": "olm.gvk", "value": {"group": c["spec"]["group"], "kind": c["spec"]["names"]["kind"], "version": "v1"}}));
    }
    properties.push(json!({"type": "olm.bundle.object", "value": {"data": b64(&csv)}}));
    for c in crds {
        properties.push(json!({"type": "olm.bundle.object", "value": {"data": b64(c)}}));
    }
    json!([
        {"schema": "olm.package", "name": "big", "defaultChannel": "stable"},
        {"schema": "olm.channel", "package": "big", "name": "stable", "entries": [{"name": "big.v1.0.0"}]},
        {"schema": "olm.bundle", "name": "big.v1.0.0", "package": "big", "image": "example.invalid/big-bundle:v1.0.0", "properties": properties},
    ])
}

async fn subscribe(ns: &TestNamespace, package: &str, source: &str) -> anyhow::Result<()> {
    create_from_yaml(
        ns,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\nspec:\n  source: {source}\n  sourceNamespace: {}\n  name: {package}\n  channel: stable\n  installPlanApproval: Automatic\n",
            ns.name()
        ),
    )
    .await
}

async fn plan_of(ns: &TestNamespace, sub: &str) -> anyhow::Result<InstallPlan> {
    let subs: Api<Subscription> = ns.api();
    let name = subs
        .get(sub)
        .await?
        .status
        .and_then(|s| s.install_plan_ref)
        .and_then(|r| r.name)
        .context("the Subscription references no InstallPlan")?;
    Ok(ns.api::<InstallPlan>().get(&name).await?)
}

#[tokio::test]
async fn a_bundle_of_several_mib_installs_and_its_install_plan_stays_small() -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace("big-bundle").await?;
    let random = random_of(&ns);
    // Nine CRDs of ~500 KiB: 4.5 MiB of manifests, three times etcd's request limit.
    let crds: Vec<Value> = (0..9).map(|i| big_crd(&random, i, 500 * 1024)).collect();
    let manifests: usize = crds.iter().map(|c| c.to_string().len()).sum();
    assert!(manifests >= 4 * 1024 * 1024, "{manifests} bytes of CRDs");
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("big"))?;
    let catalog: Vec<String> = big_catalog(&crds).as_array().into_iter().flatten().map(Value::to_string).collect();
    std::fs::write(dir.path().join("big/catalog.json"), catalog.join("\n"))?;
    let mut config = olm_registry::ServeConfig::new(vec![("big".into(), dir.path().to_path_buf())]);
    config.grpc_addrs = vec![("big".into(), "127.0.0.1:0".parse()?)];
    config.reload_interval = None;
    let server = olm_registry::start(config).await?;
    let address = server.grpc_addrs.get("big").context("gRPC address")?.to_string();

    controllers::create_own_namespace_group(&ns, "big").await?;
    create_from_yaml(
        &ns,
        &format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: big\nspec:\n  sourceType: grpc\n  address: \"{address}\"\n"),
    )
    .await?;
    let started = Instant::now();
    subscribe(&ns, "big", "big").await?;
    controllers::wait_csv_succeeded(&ns, "big.v1.0.0", TIMEOUT, OBJECTS).await?;
    let took = started.elapsed();

    let plan = plan_of(&ns, "big").await?;
    let plan_bytes = serde_json::to_vec(&plan)?.len();
    let steps = plan.status.as_ref().and_then(|s| s.plan.clone()).unwrap_or_default();
    let names = referenced_config_maps(&steps);
    let cms: Api<ConfigMap> = ns.api();
    let plan_name = plan.metadata.name.clone().unwrap_or_default();
    let listed = cms.list(&ListParams::default().labels(&format!("{PLAN_LABEL}={plan_name}"))).await?.items;
    let mut read = std::collections::BTreeMap::new();
    for cm in &listed {
        let owners = cm.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "InstallPlan" && Some(&o.uid) == plan.metadata.uid.as_ref()),
            "ConfigMap {:?} is owned by {owners:?}",
            cm.metadata.name
        );
        let cm_bytes = serde_json::to_vec(cm)?.len();
        assert!(cm_bytes < 1024 * 1024, "ConfigMap {:?} is {cm_bytes} bytes", cm.metadata.name);
        read.insert(cm.metadata.name.clone().unwrap_or_default(), cm.binary_data.clone());
    }
    assert!(!names.is_empty(), "the big manifests are referenced, not inlined");
    assert_eq!(names, read.keys().cloned().collect(), "the referenced ConfigMaps are the plan's labelled ones");
    let inlined: usize = resolve(&plan_name, &steps, &read)?
        .iter()
        .map(|s| s.resource.manifest.as_ref().map_or(0, String::len))
        .sum();
    println!(
        "bundle of {} KiB of manifests: CSV Succeeded in {:.1} s; InstallPlan {} KiB (inlined it would carry {} KiB of manifests), {} ConfigMaps",
        manifests / 1024,
        took.as_secs_f64(),
        plan_bytes / 1024,
        inlined / 1024,
        listed.len()
    );
    assert!(plan_bytes < 256 * 1024, "the InstallPlan is {plan_bytes} bytes");
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        cluster.kubectl(&["get", "crd", name]).await.with_context(|| format!("CRD {name} installed"))?;
    }

    server.shutdown();
    ns.cleanup().await?;
    for crd in &crds {
        cluster
            .kubectl(&["delete", "crd", crd["metadata"]["name"].as_str().unwrap_or_default(), "--wait=false"])
            .await?;
    }
    Ok(())
}

/// A ValidatingAdmissionPolicy and binding that refuse writes of an InstallPlan's status in
/// `namespace` for which `allowed` (CEL over `object`) is false.
fn deny_plan_status(name: &str, namespace: &str, allowed: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {name}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [operators.coreos.com]\n      apiVersions: ['*']\n      operations: [UPDATE]\n      resources: [installplans/status]\n  validations:\n  - expression: \"{allowed}\"\n    message: InstallPlan status writes are frozen in this namespace\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: {name}\nspec:\n  policyName: {name}\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchLabels:\n        kubernetes.io/metadata.name: {namespace}\n"
    )
}

/// Wait until the API server enforces the policy: a dry-run write of `status` on a probe
/// plan is refused.
async fn wait_enforced(ns: &TestNamespace, status: Value) -> anyhow::Result<()> {
    let plans: Api<InstallPlan> = ns.api();
    let probe: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "metadata": {"name": "probe"},
        "spec": {"approval": "Manual", "approved": false, "clusterServiceVersionNames": []}
    }))?;
    plans.create(&PostParams::default(), &probe).await?;
    let patch = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "status": status});
    let params = PatchParams::apply("e2e-probe").dry_run();
    let deadline = Instant::now() + Duration::from_secs(30);
    while plans.patch_status("probe", &params, &Patch::Apply(&patch)).await.is_ok() {
        anyhow::ensure!(Instant::now() < deadline, "the ValidatingAdmissionPolicy is not enforced after 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    plans.delete("probe", &Default::default()).await?;
    Ok(())
}

/// Warning Events about refused writes of InstallPlans: (reason, attempts counted on them).
async fn refused_plan_writes(ns: &TestNamespace) -> anyhow::Result<(Vec<String>, i32)> {
    let events: Api<Event> = ns.api();
    let mut reasons = Vec::new();
    let mut attempts = 0;
    for e in events.list(&ListParams::default()).await?.items {
        let about_plan = e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("InstallPlan");
        if about_plan && e.type_.as_deref() == Some("Warning") && e.action.as_deref() == Some("Write") {
            reasons.extend(e.reason.clone());
            attempts += e.series.as_ref().map_or(1, |s| s.count);
        }
    }
    Ok((reasons, attempts))
}

async fn write_failed_condition(subs: &Api<Subscription>) -> Result<Option<olm_api::v1alpha1::subscription::SubscriptionCondition>, String> {
    let sub = subs.get("widget").await.map_err(|e| e.to_string())?;
    let conditions = sub.status.and_then(|s| s.conditions).unwrap_or_default();
    Ok(conditions.into_iter().find(|c| c.type_ == SubscriptionConditionType::InstallPlanWriteFailed))
}

/// Subscribe to the widget operator while a policy refuses InstallPlan status writes for which
/// `allowed` is false (`refused` is such a status, to tell when the policy is in force): the
/// Subscription says what was refused and why, the write is retried with backoff (a few
/// attempts in 20 s, counted on the Events), and once the policy goes the install completes.
async fn refused_then_lifted(prefix: &str, allowed: &str, refused: Value) -> anyhow::Result<()> {
    let (cluster, _) = controllers::setup().await?;
    let ns = cluster.namespace(prefix).await?;
    let random = random_of(&ns);
    let policy = format!("olm-e2e-deny-plan-status-{random}");
    cluster.kubectl_with_input(&["create", "-f", "-"], &deny_plan_status(&policy, ns.name(), allowed)).await?;
    wait_enforced(&ns, refused).await?;

    controllers::create_own_namespace_group(&ns, "widgets").await?;
    let catalog = widget_catalog("widgets", "widget.v1.0.0", vec![widget_csv("1.0.0", None, &random)], vec![widget_crd(false, &random)]);
    ns.api::<ConfigMap>().create(&PostParams::default(), &serde_json::from_value(catalog)?).await?;
    create_from_yaml(
        &ns,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: widgets\nspec:\n  sourceType: configmap\n  configMap: widgets\n",
    )
    .await?;
    subscribe(&ns, "widget", "widgets").await?;

    // The Subscription says which write was refused, what the API server said, and what to do.
    let subs: Api<Subscription> = ns.api();
    let condition = ns
        .wait_for("Subscription widget InstallPlanWriteFailed", Duration::from_secs(60), OBJECTS, || {
            let subs = subs.clone();
            async move { write_failed_condition(&subs).await }
        })
        .await?;
    let failing_since = Instant::now();
    let message = condition.message.clone().unwrap_or_default();
    println!("condition: {:?}: {message}", condition.reason);
    assert!(message.starts_with("Cannot write the status of InstallPlan"), "{message}");
    assert!(message.contains("InstallPlan status writes are frozen in this namespace"), "{message}");
    assert!(message.contains("admission policy"), "{message}");
    assert!(!message.contains("Status {") && !message.contains("ErrorResponse"), "no debug dump: {message}");

    // Over 20 s the write is tried a few times, not hundreds: the retries back off.
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(failing_since.elapsed())).await;
    let (reasons, attempts) = refused_plan_writes(&ns).await?;
    println!("refused InstallPlan status writes in ~20 s: {attempts} (Event reasons {reasons:?})");
    assert!(reasons.iter().all(|r| Some(r) == condition.reason.as_ref()), "Event reason = condition reason: {reasons:?} {:?}", condition.reason);
    assert!((1..=6).contains(&attempts), "{attempts} attempts in 20 s");

    // Lifted: the next retry installs, and the condition goes.
    cluster.kubectl(&["delete", "validatingadmissionpolicybinding", &policy]).await?;
    cluster.kubectl(&["delete", "validatingadmissionpolicy", &policy]).await?;
    let lifted = Instant::now();
    controllers::wait_csv_succeeded(&ns, "widget.v1.0.0", Duration::from_secs(120), OBJECTS).await?;
    ns.wait_for("the InstallPlan Complete and the condition gone", Duration::from_secs(120), OBJECTS, || {
        let (subs, ns) = (subs.clone(), &ns);
        async move {
            let complete = match plan_of(ns, "widget").await {
                Ok(plan) => plan.status.is_some_and(|s| s.phase == olm_api::v1alpha1::install_plan::InstallPlanPhase::Complete),
                Err(_) => false,
            };
            Ok::<_, String>((complete && write_failed_condition(&subs).await?.is_none()).then_some(()))
        }
    })
    .await?;
    println!("installed {:.1} s after the policy was removed", lifted.elapsed().as_secs_f64());

    ns.cleanup().await?;
    cluster.kubectl(&["delete", "crd", &format!("widgets.{random}.olm.test"), "--wait=false"]).await?;
    Ok(())
}

/// Every status write of an InstallPlan is refused: the Subscription controller cannot write
/// the new plan's steps.
#[tokio::test]
async fn a_refused_plan_creation_backs_off_is_reported_and_installs_once_lifted() -> anyhow::Result<()> {
    refused_then_lifted("refused-plan", "false", json!({"phase": "Planning", "catalogSources": []})).await
}

/// Only the InstallPlan controller's write that completes the plan is refused: it is reported
/// on the Subscription that owns the plan.
#[tokio::test]
async fn a_refused_plan_completion_backs_off_is_reported_and_completes_once_lifted() -> anyhow::Result<()> {
    refused_then_lifted(
        "refused-complete",
        "!has(object.status) || object.status.phase != 'Complete'",
        json!({"phase": "Complete", "catalogSources": []}),
    )
    .await
}
