//! The InstallPlan a Subscription gets for its resolved bundles, built from their content,
//! pure: its deterministic name, its steps (every bundle's objects, and a Subscription for each
//! dependency nobody subscribed to), bundle lookups, approval and initial status; and the same
//! plan while its bundle images are pulled (lookups pending or failed, no steps).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use olm_api::common::ConditionStatus;
use olm_api::v1alpha1::install_plan::{
    Approval, BundleLookup, BundleLookupCondition, BundleLookupConditionType, InstallPlan, InstallPlanCondition,
    InstallPlanConditionReason, InstallPlanConditionType, InstallPlanPhase, InstallPlanSpec, InstallPlanStatus, Step,
    StepResource, StepStatus,
};
use olm_api::keys::{AUTO_APPROVE_STARTING_CSV_ANNOTATION, AUTO_ROLLBACK_ANNOTATION, ROLLBACK_OF_ANNOTATION, ROLLED_BACK_FROM_ANNOTATION};
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

/// Who a new plan is: its name and the namespace's next plan generation (`spec.generation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanId {
    /// `metadata.name`: see [`plan_name`].
    pub name: String,
    /// One more than the namespace's plans' highest.
    pub generation: i64,
}

/// The plan `id` for `bundles` (this Subscription's first) whose content is `fetched` (same
/// order), or why a bundle cannot be installed. `subs` are the namespace's Subscriptions;
/// `approved_already` when a user approved the plan while its bundles were pulled.
pub fn install_plan(
    sub: &Subscription,
    bundles: &[&Selected],
    fetched: &[BundleContent],
    subs: &[Arc<Subscription>],
    id: &PlanId,
    approved_already: bool,
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
            component_label: olm_api::keys::operator_component_label(&olm_api::keys::operator_name(&bundle.package, &namespace)),
        };
        let rollback_of = super::rollback::rollback_from(sub, &[bundle]);
        match bundle_steps(fetched, &source, &namespace, bundle.replaces.as_deref()) {
            Ok(mut more) => {
                if let Some(newer) = rollback_of {
                    mark_rollback(&mut more, newer);
                }
                steps.extend(more);
            }
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
        // Content read: nothing pending, nothing failed.
        lookups.push(lookup(bundle, &fetched.bundle_path, Some(fetched.properties_annotation.clone()), None));
    }
    let plan = plan_object(sub, bundles, id);
    let approved = plan.spec.approved || approved_already;
    let content = externalize(&plan.name_any(), &namespace, &mut steps)?;
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

/// The CSV step of a rollback's plan says which newer CSV it goes back from (see
/// `subscription::rollback`): the CSV controller then takes it for that CSV's replacement.
fn mark_rollback(steps: &mut [Step], newer: &str) {
    for step in steps.iter_mut().filter(|s| s.resource.kind == "ClusterServiceVersion") {
        let Some(mut csv) = step.resource.manifest.as_deref().and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok()) else {
            continue;
        };
        if let Some(metadata) = csv.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(map) = annotations.as_object_mut() {
                map.insert(ROLLBACK_OF_ANNOTATION.into(), json!(newer));
            }
        }
        step.resource.manifest = Some(csv.to_string());
    }
}

/// Where one bundle of a plan stands while the plan cannot have its steps yet.
#[derive(Clone, Debug, PartialEq)]
pub enum LookupState {
    /// Its content was read.
    Read,
    /// Its image is being pulled: what is happening.
    Pending(String),
    /// Its image could not be pulled or read: why, and what to do.
    Failed(String),
}

/// Reason of a `BundleLookupPending` condition while the image is pulled (upstream's unpack
/// Job says `JobIncomplete`; there is no Job here).
pub const LOOKUP_PULLING: &str = "BundleImagePulling";
/// Reason of a `BundleLookupFailed` condition.
pub const LOOKUP_PULL_FAILED: &str = "BundleImagePullFailed";

/// The plan as upstream shows it while bundles unpack: the object [`install_plan`] will
/// complete (same name), no steps yet, and each bundle's lookup (its image as `path`) with a
/// `BundleLookupPending` or `BundleLookupFailed` condition; `Failed`, with the reasons, when a
/// pull failed. `images` are the bundles' images as their catalogs name them (same order).
pub fn lookup_plan(
    sub: &Subscription,
    bundles: &[&Selected],
    images: &[String],
    states: &[LookupState],
    id: &PlanId,
    now: Timestamp,
) -> (InstallPlan, InstallPlanStatus) {
    let plan = plan_object(sub, bundles, id);
    let condition = |type_: BundleLookupConditionType, reason: &str, message: &str| BundleLookupCondition {
        type_,
        status: ConditionStatus::True,
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_update_time: None,
        last_transition_time: Some(Time(now)),
    };
    let mut failures = Vec::new();
    let lookups = bundles
        .iter()
        .zip(images)
        .zip(states)
        .map(|((bundle, image), state)| {
            let conditions = match state {
                LookupState::Read => None,
                LookupState::Pending(message) => Some(vec![condition(BundleLookupConditionType::BundleLookupPending, LOOKUP_PULLING, message)]),
                LookupState::Failed(message) => {
                    failures.push(message.clone());
                    Some(vec![condition(BundleLookupConditionType::BundleLookupFailed, LOOKUP_PULL_FAILED, message)])
                }
            };
            lookup(bundle, image, None, conditions)
        })
        .collect();
    let catalogs: BTreeSet<String> = bundles.iter().map(|b| b.catalog.name.clone()).collect();
    let mut status = InstallPlanStatus {
        phase: if plan.spec.approved {
            InstallPlanPhase::Installing
        } else {
            InstallPlanPhase::RequiresApproval
        },
        catalog_sources: catalogs.into_iter().collect(),
        bundle_lookups: Some(lookups),
        ..Default::default()
    };
    if !failures.is_empty() {
        let message = format!("bundle unpacking failed: {}", failures.join("; "));
        status.phase = InstallPlanPhase::Failed;
        status.conditions = Some(vec![InstallPlanCondition {
            type_: Some(InstallPlanConditionType::Installed),
            status: Some(ConditionStatus::False),
            last_update_time: None,
            last_transition_time: Some(Time(now)),
            reason: Some(InstallPlanConditionReason::InstallComponentFailed),
            message: Some(message.clone()),
        }]);
        status.message = Some(message);
    }
    (plan, status)
}

/// Whether `status` is a plan still waiting for (or failed on) its bundles' content: no
/// steps, and a lookup pending or failed.
pub fn awaits_content(status: &InstallPlanStatus) -> bool {
    status.plan.is_none()
        && status.bundle_lookups.iter().flatten().flat_map(|l| l.conditions.iter().flatten()).any(|c| {
            c.status == ConditionStatus::True
                && matches!(c.type_, BundleLookupConditionType::BundleLookupPending | BundleLookupConditionType::BundleLookupFailed)
        })
}

fn lookup(bundle: &Selected, path: &str, properties: Option<String>, conditions: Option<Vec<BundleLookupCondition>>) -> BundleLookup {
    BundleLookup {
        path: path.to_owned(),
        identifier: bundle.name.clone(),
        replaces: bundle.replaces.clone().unwrap_or_default(),
        catalog_source_ref: Some(ObjectReference {
            api_version: Some("operators.coreos.com/v1alpha1".into()),
            kind: Some("CatalogSource".into()),
            name: Some(bundle.catalog.name.clone()),
            namespace: Some(bundle.catalog.namespace.clone()),
            ..Default::default()
        }),
        conditions,
        properties,
    }
}

/// The InstallPlan object `id` (without status) for `bundles` of `sub`.
fn plan_object(sub: &Subscription, bundles: &[&Selected], id: &PlanId) -> InstallPlan {
    let namespace = sub.namespace().unwrap_or_default();
    let approval = sub.spec.approval();
    let approved = approval == Approval::Automatic || starting_csv_auto_approved(sub, bundles) || automatic_rollback(sub, bundles);
    // The plan is a component of the Operator of every package it installs.
    let labels = bundles
        .iter()
        .filter_map(|b| olm_api::keys::operator_component_label(&olm_api::keys::operator_name(&b.package, &namespace)))
        .map(|label| (label, String::new()))
        .collect::<std::collections::BTreeMap<_, _>>();
    InstallPlan {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            namespace: Some(namespace.clone()),
            labels: (!labels.is_empty()).then_some(labels),
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
            generation: Some(id.generation),
        },
        status: None,
    }
}

/// A Manual Subscription annotated [`AUTO_APPROVE_STARTING_CSV_ANNOTATION`] installs its
/// `startingCSV` (with what it depends on) without approval; once something is installed, every
/// plan waits for approval again.
fn starting_csv_auto_approved(sub: &Subscription, bundles: &[&Selected]) -> bool {
    let opted_in = sub.annotations().get(AUTO_APPROVE_STARTING_CSV_ANNOTATION).is_some_and(|v| v == "true");
    let nothing_installed = sub.status.as_ref().and_then(|s| s.installed_csv.as_deref()).is_none_or(str::is_empty);
    opted_in
        && nothing_installed
        && sub.spec.starting_csv.as_deref().is_some_and(|starting| {
            bundles.iter().any(|b| b.name == starting && b.subscription.as_deref() == Some(sub.name_any().as_str()))
        })
}

/// The plan of an automatic rollback (`olm-rs.io/auto-rollback`) goes without approval: the
/// annotation asked for it, and it restores what was approved before.
fn automatic_rollback(sub: &Subscription, bundles: &[&Selected]) -> bool {
    sub.annotations().get(AUTO_ROLLBACK_ANNOTATION).is_some_and(|v| v == "true") && super::rollback::rollback_from(sub, bundles).is_some()
}

/// The name of the plan that installs `bundles` for `sub`: `install-` and a hash of the
/// Subscription's uid and the bundles, so that two OLM replicas, or a retry, agree on one plan
/// instead of creating two. `deleted` names the plan the Subscription references when a user
/// deleted it: the plan made again takes another name, as upstream's would (scripts that
/// delete a plan wait for one with a new name).
pub fn plan_name(sub: &Subscription, bundles: &[&Selected], deleted: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
    names.sort_unstable();
    let mut text = format!("{}/{}", sub.uid().unwrap_or_else(|| sub.name_any()), names.join(","));
    // After a rollback the same bundles may be planned again (the version rolled back to):
    // another name than the plan that installed them before.
    if let Some(from) = sub.annotations().get(ROLLED_BACK_FROM_ANNOTATION) {
        text.push_str(&format!("/rolled-back-from/{from}"));
    }
    if let Some(deleted) = deleted {
        text.push_str(&format!("/after-deleted/{deleted}"));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use olm_resolver::CatalogKey;

    fn selected(name: &str) -> Selected {
        Selected {
            name: name.into(),
            package: "etcd".into(),
            channel: "alpha".into(),
            version: None,
            catalog: CatalogKey::new("images", "ns"),
            replaces: None,
            reason: Reason::Install,
            subscription: Some("etcd".into()),
        }
    }

    fn sub(approval: &str) -> Subscription {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ns", "uid": "u-1"},
            "spec": {"source": "images", "sourceNamespace": "ns", "name": "etcd", "installPlanApproval": approval}
        }))
        .unwrap()
    }

    #[test]
    fn the_lookup_plan_names_each_image_and_says_pending_or_failed() {
        let (a, b) = (selected("etcd.v1"), selected("dep.v2"));
        let bundles = [&a, &b];
        let images = ["r/etcd@sha256:1".to_owned(), "r/dep@sha256:2".to_owned()];
        let now = Timestamp::UNIX_EPOCH;

        let pending = [LookupState::Read, LookupState::Pending("pulling bundle image r/dep@sha256:2".into())];
        let id = PlanId { name: plan_name(&sub("Automatic"), &bundles, None), generation: 3 };
        let (plan, status) = lookup_plan(&sub("Automatic"), &bundles, &images, &pending, &id, now);
        assert_eq!((plan.name_any(), plan.spec.generation), (id.name.clone(), Some(3)), "the plan its steps will complete");
        assert_eq!((status.phase.clone(), status.plan.is_none()), (InstallPlanPhase::Installing, true));
        let lookups = status.bundle_lookups.clone().unwrap();
        assert_eq!((lookups[0].path.as_str(), lookups[0].conditions.is_none()), ("r/etcd@sha256:1", true));
        let condition = &lookups[1].conditions.as_ref().unwrap()[0];
        assert_eq!(
            (condition.type_.clone(), condition.status.clone(), condition.reason.as_deref()),
            (BundleLookupConditionType::BundleLookupPending, ConditionStatus::True, Some(LOOKUP_PULLING))
        );
        assert!(awaits_content(&status));
        let (_, manual) = lookup_plan(&sub("Manual"), &bundles, &images, &pending, &id, now);
        assert_eq!(manual.phase, InstallPlanPhase::RequiresApproval);

        let failed = [LookupState::Failed("image r/etcd@sha256:1 was not found".into()), LookupState::Read];
        let (_, status) = lookup_plan(&sub("Automatic"), &bundles, &images, &failed, &id, now);
        assert_eq!(status.phase, InstallPlanPhase::Failed);
        assert_eq!(status.message.as_deref(), Some("bundle unpacking failed: image r/etcd@sha256:1 was not found"));
        let lookups = status.bundle_lookups.clone().unwrap();
        assert_eq!(lookups[0].conditions.as_ref().unwrap()[0].type_, BundleLookupConditionType::BundleLookupFailed);
        assert!(awaits_content(&status));
        let with_steps = InstallPlanStatus { plan: Some(Vec::new()), ..status };
        assert!(!awaits_content(&with_steps), "a plan with steps is not waiting");
    }

    #[test]
    fn a_manual_subscription_may_install_its_starting_csv_without_approval_then_waits() {
        let pinned = |annotation: Option<&str>, installed: Option<&str>| -> Subscription {
            let mut sub = sub("Manual");
            sub.spec.starting_csv = Some("etcd.v1".into());
            if let Some(value) = annotation {
                sub.annotations_mut().insert(AUTO_APPROVE_STARTING_CSV_ANNOTATION.into(), value.into());
            }
            sub.status = installed.map(|csv| serde_json::from_value(json!({"installedCSV": csv})).unwrap());
            sub
        };
        let (first, next) = (selected("etcd.v1"), selected("etcd.v2"));
        let id = |generation| PlanId { name: "install-x".into(), generation };
        assert!(plan_object(&pinned(Some("true"), None), &[&first], &id(1)).spec.approved, "the starting CSV goes in at once");
        assert_eq!(plan_object(&pinned(Some("true"), None), &[&first], &id(1)).spec.approval, Approval::Manual);
        assert!(!plan_object(&pinned(Some("true"), Some("etcd.v1")), &[&next], &id(2)).spec.approved, "every upgrade waits");
        assert!(!plan_object(&pinned(Some("true"), None), &[&next], &id(1)).spec.approved, "only the starting CSV");
        assert!(!plan_object(&pinned(None, None), &[&first], &id(1)).spec.approved, "opt-in");
        assert!(!plan_object(&pinned(Some("false"), None), &[&first], &id(1)).spec.approved);
    }

    #[test]
    fn a_plan_made_again_after_a_user_deleted_it_takes_another_name() {
        let (a, b) = (selected("etcd.v1"), selected("dep.v2"));
        let first = plan_name(&sub("Manual"), &[&a, &b], None);
        assert_eq!(first, plan_name(&sub("Manual"), &[&b, &a], None), "the same for every replica and retry");
        assert!(first.starts_with("install-") && first.len() == "install-".len() + 5, "{first}");
        let again = plan_name(&sub("Manual"), &[&a, &b], Some(&first));
        assert_ne!(again, first);
        assert_eq!(again, plan_name(&sub("Manual"), &[&a, &b], Some(&first)), "made again: one name too");
        assert_ne!(plan_name(&sub("Manual"), &[&a, &b], Some(&again)), again, "and again after that one is deleted");
    }
}
