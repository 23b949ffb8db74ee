//! `olm uninstall SUBSCRIPTION`: the Subscription, its CSV and everything OLM created for it;
//! the operands (objects of the CRDs it owns) and the CRDs only when asked, after listing
//! them, and never a CRD another operator still owns or requires. Operands go first, while
//! the operator still runs to finish them (finalizers). The Operator object of the package
//! goes last, once it lists nothing.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use olm_api::keys::{OWNER_LABEL, OWNER_NAMESPACE_LABEL, TARGET_NAMESPACES_ANNOTATION};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_api::v1alpha1::install_plan::InstallPlan;

use super::{KubeArgs, POLL, WAIT, api_error, block_on, confirm, connect, progress};

/// `olm uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// The Subscription of the operator to remove.
    name: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// Also delete the operands: every object of the CRDs the operator owns, in its target namespaces.
    #[arg(long)]
    delete_operands: bool,
    /// Also delete the CRDs the operator owns that no other operator owns or requires (their
    /// objects go with them, so this implies --delete-operands).
    #[arg(long)]
    delete_crds: bool,
    /// Go ahead without asking (for scripts); what is deleted is still listed.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// A CRD the operator owns, and what becomes of it.
struct OwnedCrd {
    name: String,
    /// The operand objects, `Kind namespace/name`.
    operands: Vec<(DynamicObject, ApiResource)>,
    /// Who else owns or requires it (then it is never deleted).
    used_by: Vec<String>,
}

/// The other operators that own or require `crd`: `namespace/csv`, copies and `csv` itself
/// left out.
pub fn crd_users(crd: &str, csv: &ClusterServiceVersion, all: &[ClusterServiceVersion]) -> Vec<String> {
    let me = (csv.namespace(), csv.name_any());
    all.iter()
        .filter(|c| !c.is_copied() && (c.namespace(), c.name_any()) != me)
        .filter(|c| c.spec.owned_crds().iter().chain(c.spec.required_crds()).any(|d| d.name == crd))
        .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn describe(object: &DynamicObject, kind: &str) -> String {
    match object.namespace() {
        Some(ns) => format!("{kind} {ns}/{}", object.name_any()),
        None => format!("{kind} {}", object.name_any()),
    }
}

/// Exit 0 when everything listed is gone; 1 when not confirmed, or something did not go in time.
pub fn run(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    block_on(async move {
        let (client, namespace) = connect(&args.kube).await?;
        let delete_operands = args.delete_operands || args.delete_crds;
        let name = args.name.as_str();
        let (subs, sub) = super::subscription(&client, &namespace, name).await?;
        let status = sub.status.clone().unwrap_or_default();
        let csv_name = status.installed_csv.clone().or(status.current_csv.clone()).filter(|c| !c.is_empty());
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        let csv = match &csv_name {
            Some(csv) => csvs.get_opt(csv).await.map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {namespace}/{csv}: {}", api_error(&err)))?,
            None => None,
        };
        let plans: Vec<InstallPlan> = Api::<InstallPlan>::namespaced(client.clone(), &namespace)
            .list(&ListParams::default())
            .await
            .map_err(|err| anyhow::anyhow!("cannot list InstallPlans in {namespace}: {}", api_error(&err)))?
            .items
            .into_iter()
            .filter(|p| p.owner_references().iter().any(|o| Some(&o.uid) == sub.uid().as_ref()))
            .collect();

        // What OLM made for the CSV.
        let mut made: Vec<String> = Vec::new();
        let mut crds: Vec<OwnedCrd> = Vec::new();
        if let Some(csv) = &csv {
            let uid = csv.uid().unwrap_or_default();
            let owned_by_csv = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| refs.iter().any(|o| o.uid == uid);
            for d in Api::<Deployment>::namespaced(client.clone(), &namespace).list(&ListParams::default()).await.map_err(|err| anyhow::anyhow!("cannot list Deployments: {}", api_error(&err)))?.items {
                if owned_by_csv(d.owner_references()) {
                    made.push(format!("Deployment {}", d.name_any()));
                }
            }
            let labels = format!("{OWNER_LABEL}={},{OWNER_NAMESPACE_LABEL}={namespace}", csv.name_any());
            for r in Api::<ClusterRole>::all(client.clone()).list(&ListParams::default().labels(&labels)).await.map_err(|err| anyhow::anyhow!("cannot list ClusterRoles: {}", api_error(&err)))?.items {
                made.push(format!("ClusterRole {}", r.name_any()));
            }
            for b in Api::<ClusterRoleBinding>::all(client.clone()).list(&ListParams::default().labels(&labels)).await.map_err(|err| anyhow::anyhow!("cannot list ClusterRoleBindings: {}", api_error(&err)))?.items {
                made.push(format!("ClusterRoleBinding {}", b.name_any()));
            }
            let targets: Vec<String> = csv
                .annotation(TARGET_NAMESPACES_ANNOTATION)
                .unwrap_or_default()
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            let all_csvs = Api::<ClusterServiceVersion>::all(client.clone())
                .list(&ListParams::default())
                .await
                .map_err(|err| anyhow::anyhow!("cannot list ClusterServiceVersions: {}", api_error(&err)))?
                .items;
            let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
            for owned in csv.spec.owned_crds() {
                if crds.iter().any(|c| c.name == owned.name) {
                    continue;
                }
                let mut operands = Vec::new();
                if let Some(crd) = crd_api.get_opt(&owned.name).await.map_err(|err| anyhow::anyhow!("cannot read CRD {}: {}", owned.name, api_error(&err)))? {
                    let version = crd.spec.versions.iter().find(|v| v.storage).or(crd.spec.versions.first()).map(|v| v.name.clone()).unwrap_or_default();
                    let resource = ApiResource {
                        group: crd.spec.group.clone(),
                        version: version.clone(),
                        api_version: format!("{}/{version}", crd.spec.group),
                        kind: crd.spec.names.kind.clone(),
                        plural: crd.spec.names.plural.clone(),
                    };
                    let namespaced = crd.spec.scope == "Namespaced";
                    let scopes: Vec<Option<&str>> = if namespaced && !targets.is_empty() { targets.iter().map(|t| Some(t.as_str())).collect() } else { vec![None] };
                    for scope in scopes {
                        let api: Api<DynamicObject> = match scope {
                            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                            None => Api::all_with(client.clone(), &resource),
                        };
                        let list = api.list(&ListParams::default()).await.map_err(|err| anyhow::anyhow!("cannot list {} objects: {}", resource.kind, api_error(&err)))?;
                        operands.extend(list.items.into_iter().map(|o| (o, resource.clone())));
                    }
                }
                crds.push(OwnedCrd { name: owned.name.clone(), operands, used_by: crd_users(&owned.name, csv, &all_csvs) });
            }
        }

        // Say what goes and what stays.
        println!("Uninstalls Subscription {namespace}/{name}{}:", csv_name.as_deref().map(|c| format!(" ({c})")).unwrap_or_default());
        println!("  Subscription {name}");
        if let Some(csv) = &csv_name {
            println!("  ClusterServiceVersion {csv}, and with it what OLM created for it (its copies in the target namespaces, ServiceAccounts, Roles, Services, Secrets, webhook configurations){}", if made.is_empty() { "" } else { ":" });
            for object in &made {
                println!("    {object}");
            }
        }
        for plan in &plans {
            println!("  InstallPlan {}", plan.name_any());
        }
        let operand_count: usize = crds.iter().map(|c| c.operands.len()).sum();
        if delete_operands {
            for crd in &crds {
                for (object, resource) in &crd.operands {
                    println!("  {} (operand)", describe(object, &resource.kind));
                }
            }
        }
        for crd in &crds {
            match (args.delete_crds, crd.used_by.is_empty()) {
                (true, true) => println!("  CustomResourceDefinition {}", crd.name),
                (true, false) => println!("Kept: CustomResourceDefinition {} (still used by {})", crd.name, crd.used_by.join(", ")),
                (false, _) => println!("Kept: CustomResourceDefinition {} (--delete-crds deletes it)", crd.name),
            }
        }
        if !delete_operands && operand_count > 0 {
            println!("Kept: {operand_count} operand(s), the objects of its CRDs (--delete-operands deletes them):");
            for crd in &crds {
                for (object, resource) in &crd.operands {
                    println!("    {}", describe(object, &resource.kind));
                }
            }
        }
        println!("Kept: the OperatorGroup of {namespace} (yours: delete it when nothing else uses it).");
        if !args.yes && !confirm("Uninstall?")? {
            println!("Nothing was deleted.");
            return Ok(ExitCode::from(1));
        }

        // Operands first, while the operator runs to finish them.
        if delete_operands && operand_count > 0 {
            for crd in &crds {
                for (object, resource) in &crd.operands {
                    let api: Api<DynamicObject> = match object.namespace() {
                        Some(ns) => Api::namespaced_with(client.clone(), &ns, resource),
                        None => Api::all_with(client.clone(), resource),
                    };
                    match api.delete(&object.name_any(), &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(err) if olm_runtime::error::is_not_found(&err) => {}
                        Err(err) => anyhow::bail!("cannot delete {}: {}; nothing else was deleted", describe(object, &resource.kind), api_error(&err)),
                    }
                }
            }
            wait_gone(&client, &crds).await?;
        }
        let gone_ok = |result: Result<_, kube::Error>, what: &str| match result {
            Ok(_) => Ok(()),
            Err(err) if olm_runtime::error::is_not_found(&err) => Ok(()),
            Err(err) => Err(anyhow::anyhow!("cannot delete {what}: {}", api_error(&err))),
        };
        gone_ok(subs.delete(name, &DeleteParams::default()).await.map(|_| ()), &format!("Subscription {namespace}/{name}"))?;
        if let Some(csv) = &csv_name {
            gone_ok(csvs.delete(csv, &DeleteParams::default()).await.map(|_| ()), &format!("ClusterServiceVersion {namespace}/{csv}"))?;
        }
        let plan_api: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
        for plan in &plans {
            gone_ok(plan_api.delete(&plan.name_any(), &DeleteParams::default()).await.map(|_| ()), &format!("InstallPlan {}", plan.name_any()))?;
        }
        if let Some(csv) = &csv_name {
            wait_csv_gone(&client, &namespace, csv).await?;
        }
        if args.delete_crds {
            let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
            for crd in crds.iter().filter(|c| c.used_by.is_empty()) {
                gone_ok(crd_api.delete(&crd.name, &DeleteParams::default()).await.map(|_| ()), &format!("CustomResourceDefinition {}", crd.name))?;
            }
        }
        let operator = olm_api::keys::operator_name(&sub.spec.name, &namespace);
        // A CRD kept is no longer a component of the operator uninstalled here (other installs'
        // labels stay).
        if let Some(label) = olm_api::keys::operator_component_label(&operator) {
            let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
            let patch = serde_json::json!({"metadata": {"labels": {label: null}}});
            for crd in &crds {
                gone_ok(
                    crd_api.patch(&crd.name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.map(|_| ()),
                    &format!("the Operator label of CustomResourceDefinition {}", crd.name),
                )?;
            }
        }
        remove_operator(&client, &operator).await?;
        println!("Uninstalled {}.", csv_name.unwrap_or_else(|| name.to_owned()));
        Ok(ExitCode::SUCCESS)
    })
}

/// Wait until every operand deleted is gone, saying which hold on (finalizers).
async fn wait_gone(client: &kube::Client, crds: &[OwnedCrd]) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let mut left = Vec::new();
        for crd in crds {
            for (object, resource) in &crd.operands {
                let api: Api<DynamicObject> = match object.namespace() {
                    Some(ns) => Api::namespaced_with(client.clone(), &ns, resource),
                    None => Api::all_with(client.clone(), resource),
                };
                if let Some(found) = api.get_opt(&object.name_any()).await.map_err(|err| anyhow::anyhow!("cannot read {}: {}", describe(object, &resource.kind), api_error(&err)))? {
                    let finalizers = found.finalizers().join(", ");
                    left.push(format!("{}{}", describe(object, &resource.kind), if finalizers.is_empty() { String::new() } else { format!(" (finalizers: {finalizers})") }));
                }
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if started.elapsed() > WAIT {
            anyhow::bail!("operands still there after {} s: {}; the operator, its Subscription and CSV were left installed so it can finish them", WAIT.as_secs(), left.join("; "));
        }
        progress(&format!("waiting for {} operand(s) to go: {}", left.len(), left.join("; ")));
        tokio::time::sleep(POLL).await;
    }
}

/// Delete the Operator object of the package in this namespace once it lists no component
/// (what the CSV owned is garbage collected a moment after the CSV). Deleted while components
/// remain, OLM would make it again: then it is left, and what it still lists is said.
pub(super) async fn remove_operator(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let operators: Api<olm_api::v1::operator::Operator> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        let Some(operator) = operators.get_opt(name).await.map_err(|err| anyhow::anyhow!("cannot read Operator {name}: {}", api_error(&err)))? else {
            return Ok(());
        };
        let left = operator.component_refs();
        if left.is_empty() {
            return match operators.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(err) if olm_runtime::error::is_not_found(&err) => Ok(()),
                Err(err) => Err(anyhow::anyhow!("cannot delete Operator {name}: {}", api_error(&err))),
            };
        }
        if started.elapsed() > WAIT {
            let named: Vec<String> = left
                .iter()
                .map(|r| format!("{} {}", r.object.kind.as_deref().unwrap_or_default(), r.object.name.as_deref().unwrap_or_default()))
                .collect();
            eprintln!("note: Operator {name} still lists {} (labelled operators.coreos.com/{name}); it is left in place", named.join(", "));
            return Ok(());
        }
        progress(&format!("waiting for the components of Operator {name} to go"));
        tokio::time::sleep(POLL).await;
    }
}

/// Wait until the CSV is gone, and the cluster RBAC made for it: OLM deletes that by its owner
/// labels once the CSV has left its cache, a moment after the CSV itself.
async fn wait_csv_gone(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let owned = ListParams::default().labels(&format!("{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace}"));
    let started = Instant::now();
    loop {
        let csv_left = csvs.get_opt(name).await.map_err(|err| anyhow::anyhow!("cannot read ClusterServiceVersion {name}: {}", api_error(&err)))?.is_some();
        let roles_left = Api::<ClusterRole>::all(client.clone()).list(&owned).await.map_err(|err| anyhow::anyhow!("cannot list ClusterRoles: {}", api_error(&err)))?.items.len()
            + Api::<ClusterRoleBinding>::all(client.clone()).list(&owned).await.map_err(|err| anyhow::anyhow!("cannot list ClusterRoleBindings: {}", api_error(&err)))?.items.len();
        if !csv_left && roles_left == 0 {
            return Ok(());
        }
        if started.elapsed() > WAIT {
            anyhow::bail!(
                "ClusterServiceVersion {name} or {roles_left} ClusterRole(s)/binding(s) made for it still there after {} s (kubectl describe csv {name} -n {namespace} tells what holds it)",
                WAIT.as_secs()
            );
        }
        progress(&format!("waiting for ClusterServiceVersion {name} and what OLM made for it to go"));
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csv(namespace: &str, name: &str, owned: &[&str], required: &[&str], copied: bool) -> ClusterServiceVersion {
        let describe = |names: &[&str]| names.iter().map(|n| json!({"name": n, "version": "v1", "kind": "K"})).collect::<Vec<_>>();
        let labels = if copied { json!({"olm.copiedFrom": "elsewhere"}) } else { json!({}) };
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"displayName": name, "install": {"strategy": "deployment"},
                     "customresourcedefinitions": {"owned": describe(owned), "required": describe(required)}}
        }))
        .expect("a CSV")
    }

    #[test]
    fn a_crd_another_operator_owns_or_requires_is_in_use_copies_and_itself_aside() {
        let me = csv("a", "koku.v1", &["k.example.com"], &[], false);
        let all = vec![
            me.clone(),
            csv("b", "koku.v1", &["k.example.com"], &[], true),
            csv("c", "consumer.v2", &[], &["k.example.com"], false),
            csv("d", "koku.v1", &["k.example.com"], &[], false),
            csv("e", "other.v1", &["o.example.com"], &[], false),
        ];
        assert_eq!(crd_users("k.example.com", &me, &all), vec!["c/consumer.v2", "d/koku.v1"]);
        assert!(crd_users("k.example.com", &me, &[me.clone(), all[1].clone()]).is_empty(), "only a copy of itself");
    }
}
