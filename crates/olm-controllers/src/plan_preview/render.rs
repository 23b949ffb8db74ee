//! A plan's preview in words, for a terminal: what `olm plan show` and `olm approve` print.

use std::fmt::Write as _;

use super::{Change, PermissionChange, PlanPreview};

/// One permission line: `+ cluster-wide, ServiceAccount sa: get, list clusterserviceversions.operators.coreos.com`.
pub fn permission_line(p: &PermissionChange) -> String {
    let sign = match p.change {
        Change::Added => '+',
        Change::Removed => '-',
    };
    format!("{sign} {}", grant_line(p))
}

/// What a permission grants, without saying whether it comes or goes:
/// `cluster-wide, ServiceAccount sa: get, list clusterserviceversions.operators.coreos.com`.
pub fn grant_line(p: &PermissionChange) -> String {
    let scope = match p.scope.as_str() {
        "cluster" => "cluster-wide".to_owned(),
        "namespace" => "in the target namespaces".to_owned(),
        other => format!("by {other}"),
    };
    let account = p.service_account.as_deref().map(|sa| format!(", ServiceAccount {sa}")).unwrap_or_default();
    let names = if p.resource_names.is_empty() { String::new() } else { format!(" named {}", p.resource_names.join(", ")) };
    format!("{scope}{account}: {} {}{names}", p.verbs.join(", "), p.resource)
}

/// The whole preview, one section per kind of change; sections with nothing are left out.
pub fn text(preview: &PlanPreview) -> String {
    let mut out = String::new();
    for op in &preview.operators {
        let version = op.version.as_deref().map(|v| format!(" (version {v})")).unwrap_or_default();
        let _ = match &op.replaces {
            Some(old) => writeln!(out, "Upgrades {old} to {}{version}", op.csv),
            None => writeln!(out, "Installs {}{version}", op.csv),
        };
    }
    section(&mut out, "Permissions", preview.permissions.iter().map(permission_line), "no permission added or removed");
    section(
        &mut out,
        "CustomResourceDefinitions",
        preview.crds.iter().map(|crd| {
            if crd.new {
                return format!("+ {} (new; versions {})", crd.name, crd.added_versions.join(", "));
            }
            let mut parts = Vec::new();
            if !crd.added_versions.is_empty() {
                parts.push(format!("adds versions {}", crd.added_versions.join(", ")));
            }
            if !crd.removed_versions.is_empty() {
                parts.push(format!("removes versions {}", crd.removed_versions.join(", ")));
            }
            if !crd.removed_stored_versions.is_empty() {
                parts.push(format!(
                    "REFUSED: versions {} still store objects (status.storedVersions); the plan fails without changing anything",
                    crd.removed_stored_versions.join(", ")
                ));
            }
            if let Some((from, to)) = &crd.storage_version {
                parts.push(format!("storage version {from} -> {to}"));
            }
            if !crd.changed_schemas.is_empty() {
                parts.push(format!("schema of {} changes", crd.changed_schemas.join(", ")));
            }
            if !crd.invalid_objects.is_empty() {
                parts.push(format!("REFUSES existing objects: {}", crd.invalid_objects.join("; ")));
            }
            if parts.is_empty() {
                parts.push("unchanged".into());
            }
            format!("~ {}: {}", crd.name, parts.join("; "))
        }),
        "",
    );
    section(
        &mut out,
        "Deployments",
        preview.deployments.iter().flat_map(|d| {
            let sign = match d.change.as_str() {
                "added" => '+',
                "removed" => '-',
                _ => '~',
            };
            let mut lines = vec![format!("{sign} {}", d.name)];
            if let Some((from, to)) = d.replicas {
                let show = |r: Option<i64>| r.map_or_else(|| "default".to_owned(), |r| r.to_string());
                lines.push(format!("    replicas {} -> {}", show(from), show(to)));
            }
            for c in &d.containers {
                let line = match (&c.image_before, &c.image_after) {
                    (None, Some(after)) => format!("    + container {}: {after}", c.name),
                    (Some(before), None) => format!("    - container {}: {before}", c.name),
                    (before, after) if before != after => format!(
                        "    ~ container {}: {} -> {}",
                        c.name,
                        before.as_deref().unwrap_or("?"),
                        after.as_deref().unwrap_or("?")
                    ),
                    _ => format!("    ~ container {}", c.name),
                };
                lines.push(line);
                if let Some((from, to)) = &c.resources {
                    lines.push(format!("      resources {from} -> {to}"));
                }
            }
            lines
        }),
        "",
    );
    section(&mut out, "Webhooks added", preview.webhooks_added.iter().map(|w| format!("+ {w}")), "");
    section(&mut out, "APIServices added", preview.api_services_added.iter().map(|a| format!("+ {a}")), "");
    section(&mut out, "Also applies", preview.other_objects.iter().cloned(), "");
    out
}

/// `title` and its lines, or `title: empty` when there are none and `empty` is not blank.
fn section(out: &mut String, title: &str, lines: impl Iterator<Item = String>, empty: &str) {
    let lines: Vec<String> = lines.collect();
    if lines.is_empty() {
        if !empty.is_empty() {
            let _ = writeln!(out, "{title}: {empty}");
        }
        return;
    }
    let _ = writeln!(out, "{title}:");
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}
