//! The InstallPlan a Subscription gets for its resolved bundles, built from their content,
//! pure: its deterministic name, its steps (every bundle's objects, and a Subscription for each
//! dependency nobody subscribed to), bundle lookups, approval and initial status.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use olm_api::v1alpha1::install_plan::{
    Approval, BundleLookup, InstallPlan, InstallPlanPhase, InstallPlanSpec, InstallPlanStatus, Step, StepResource, StepStatus,
};
use olm_api::v1alpha1::subscription::Subscription;
use olm_catalog_client::BundleContent;
use olm_resolver::{Reason, Selected};
use serde_json::json;

use crate::plan_content::{ContentConfigMap, externalize};
use crate::plan_steps::{StepSource, bundle_steps};

/// A plan to create: the object, its first status, and the ConfigMaps holding the step
/// content too large to inline (none for most plans; see [`crate::plan_content`]).
pub struct NewPlan {
    /// The InstallPlan, without status.
    pub plan: InstallPlan,
    /// Its status, with the steps.
    pub status: InstallPlanStatus,
    /// Content ConfigMaps to create, owned by the plan, before its status is written.
    pub content: Vec<ContentConfigMap>,
}

/// The plan for `bundles` (this Subscription's first) whose content is `fetched` (same order),
/// or why a bundle cannot be installed. `subs` are the namespace's Subscriptions; `generation`
/// is the namespace's next plan generation.
pub fn install_plan(
    sub: &Subscription,
    bundles: &[&Selected],
    fetched: &[BundleContent],
    subs: &[Arc<Subscription>],
    generation: i64,
    now: Timestamp,
) -> Result<NewPlan, String> {
    let namespace = sub.namespace().unwrap_or_default();
    let mut steps = Vec::new();
    let mut lookups = Vec::new();
    let mut catalogs_used = BTreeSet::new();
    for (bundle, fetched) in bundles.iter().zip(fetched) {
        let source = StepSource {
            catalog: bundle.catalog.name.clone(),
            catalog_namespace: bundle.catalog.namespace.clone(),
        };
        match bundle_steps(fetched, &source, &namespace, bundle.replaces.as_deref()) {
            Ok(more) => steps.extend(more),
            Err(message) => {
                return Err(format!(
                    "bundle {} from catalog {} cannot be installed: {message}",
                    bundle.name, bundle.catalog
                ));
            }
        }
        if bundle.reason == Reason::Dependency && !subs.iter().any(|s| s.spec.name == bundle.package) {
            steps.push(dependency_subscription_step(bundle, &namespace));
        }
        catalogs_used.insert(bundle.catalog.name.clone());
        lookups.push(BundleLookup {
            path: fetched.bundle_path.clone(),
            identifier: bundle.name.clone(),
            replaces: bundle.replaces.clone().unwrap_or_default(),
            catalog_source_ref: Some(ObjectReference {
                api_version: Some("operators.coreos.com/v1alpha1".into()),
                kind: Some("CatalogSource".into()),
                name: Some(bundle.catalog.name.clone()),
                namespace: Some(bundle.catalog.namespace.clone()),
                ..Default::default()
            }),
            // Content came straight from the catalog server: nothing pending, nothing failed.
            conditions: None,
            properties: Some(fetched.properties_annotation.clone()),
        });
    }
    let approval = sub.spec.approval();
    let approved = approval == Approval::Automatic;
    let name = plan_name(sub, bundles);
    let content = externalize(&name, &namespace, &mut steps)?;
    let plan = InstallPlan {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".into(),
                kind: "Subscription".into(),
                name: sub.name_any(),
                uid: sub.uid().unwrap_or_default(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..Default::default()
        },
        spec: InstallPlanSpec {
            source: None,
            source_namespace: None,
            cluster_service_version_names: bundles.iter().map(|b| b.name.clone()).collect(),
            approval,
            approved,
            generation: Some(generation),
        },
        status: None,
    };
    let status = InstallPlanStatus {
        phase: if approved {
            InstallPlanPhase::Installing
        } else {
            InstallPlanPhase::RequiresApproval
        },
        catalog_sources: catalogs_used.into_iter().collect(),
        plan: Some(steps),
        bundle_lookups: Some(lookups),
        start_time: approved.then_some(Time(now)),
        ..Default::default()
    };
    Ok(NewPlan { plan, status, content })
}

/// The name of the plan that installs `bundles` for `sub`: `install-` and a hash of the
/// Subscription's uid and the bundles, so that two OLM replicas, or a retry, agree on one plan
/// instead of creating two.
pub fn plan_name(sub: &Subscription, bundles: &[&Selected]) -> String {
    use sha2::{Digest, Sha256};
    let mut names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
    names.sort_unstable();
    let text = format!("{}/{}", sub.uid().unwrap_or_else(|| sub.name_any()), names.join(","));
    let digest = Sha256::digest(text.as_bytes());
    // Lowercase alphanumerics, like the suffix of a generated name.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = digest
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("install-{suffix}")
}

fn dependency_subscription_step(bundle: &Selected, namespace: &str) -> Step {
    let name = format!(
        "{}-{}-{}-{}",
        bundle.package, bundle.channel, bundle.catalog.name, bundle.catalog.namespace
    );
    let manifest = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": bundle.catalog.name, "sourceNamespace": bundle.catalog.namespace,
            "name": bundle.package, "channel": bundle.channel, "startingCSV": bundle.name,
            "installPlanApproval": "Automatic",
        },
    });
    Step {
        resolving: bundle.name.clone(),
        resource: StepResource {
            source_name: bundle.catalog.name.clone(),
            source_namespace: bundle.catalog.namespace.clone(),
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: "Subscription".into(),
            name,
            manifest: Some(manifest.to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}
