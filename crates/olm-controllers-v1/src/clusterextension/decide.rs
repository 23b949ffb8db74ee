//! What a ClusterExtension's status says, from what a pass found and did and `now`: pure, tested
//! without a cluster. Condition types, reasons and messages are operator-controller v1.11's
//! (`Installed bundle <image> successfully`, `Desired state reached`, `No bundle installed`, the
//! four deprecation conditions); ours add what the user can act on.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use olm_api::olmv1::ClusterExtension;
use olm_api::olmv1::cluster_extension::{BundleMetadata, ClusterExtensionInstallStatus, ClusterExtensionStatus};
use olm_api::olmv1::conditions::*;

use crate::conditions::{Set, Status, set};

/// The first retry after a failed pass; doubled per failure up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(10);
/// The slowest retry of a failed pass.
pub const MAX_RETRY: Duration = Duration::from_secs(300);
/// The condition olm-rs adds to a ClusterExtension `olm migrate` made: where it came from.
/// Upstream's clients ignore a condition type they do not know.
pub const MIGRATED_FROM_OLM_V0: &str = "MigratedFromOLMv0";

/// How often an installed extension is applied again to undo drift (a deleted Deployment, an
/// edited Role) when nothing else changed.
pub const RESYNC: Duration = Duration::from_secs(600);

/// The bundle a revision installed, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InstalledBundle {
    pub package: String,
    pub name: String,
    pub version: String,
    /// The bundle image, by digest when the catalog names it so (empty when it has none).
    pub image: String,
}

/// How far the pass got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// What the spec asks for is installed.
    Done,
    /// Not yet, and tried again (`Progressing` True, `Retrying`).
    Retrying(String),
    /// Only a change of the ClusterExtension helps (`Progressing` False): reason `Blocked` or
    /// `InvalidConfiguration`.
    Stopped { reason: &'static str, message: String },
}

/// Deprecation messages from the catalog, for the package, the channels asked for and the
/// installed bundle (`None` when there is no catalog data: resolution failed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deprecations {
    pub package: Vec<String>,
    pub channels: Vec<String>,
    pub bundle: Vec<String>,
}

/// What the status is made of.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    pub extension: &'a ClusterExtension,
    /// What is installed now (after this pass).
    pub installed: Option<&'a InstalledBundle>,
    pub progress: &'a Progress,
    pub deprecations: Option<&'a Deprecations>,
    /// Failed passes in a row, this one included.
    pub failures: u32,
}

/// The status, and when to look again.
pub fn status(observed: &Observed<'_>, now: Timestamp) -> (ClusterExtensionStatus, Option<Duration>) {
    let extension = observed.extension;
    let previous = extension.conditions();
    let generation = extension.metadata.generation;
    let mut status = ClusterExtensionStatus::default();
    let mut put = |s: Set<'_>| set(&mut status.conditions, previous, s, generation, now);

    match observed.installed {
        Some(installed) => {
            let shown = if installed.image.is_empty() { installed.name.as_str() } else { installed.image.as_str() };
            put(Set { type_: INSTALLED, status: Status::True, reason: SUCCEEDED, message: format!("Installed bundle {shown} successfully") });
        }
        None => put(Set { type_: INSTALLED, status: Status::False, reason: FAILED, message: "No bundle installed".to_owned() }),
    }
    let requeue = match observed.progress {
        Progress::Done => {
            put(Set { type_: PROGRESSING, status: Status::True, reason: SUCCEEDED, message: "Desired state reached".to_owned() });
            Some(RESYNC)
        }
        Progress::Retrying(message) => {
            put(Set { type_: PROGRESSING, status: Status::True, reason: RETRYING, message: message.clone() });
            Some(retry_after(observed.failures))
        }
        Progress::Stopped { reason, message } => {
            put(Set { type_: PROGRESSING, status: Status::False, reason, message: message.clone() });
            None
        }
    };
    for set in deprecation_conditions(observed.deprecations, observed.installed.is_some()) {
        put(set);
    }
    let annotations = extension.metadata.annotations.clone().unwrap_or_default();
    if let (Some(subscription), Some(csv)) = (annotations.get(olm_api::keys::MIGRATED_FROM_ANNOTATION), annotations.get(olm_api::keys::ADOPT_FROM_ANNOTATION)) {
        put(Set {
            type_: MIGRATED_FROM_OLM_V0,
            status: Status::True,
            reason: "Adopted",
            message: format!("moved from OLM v0 in place: Subscription {subscription}, ClusterServiceVersion {csv}"),
        });
    }
    status.install = observed.installed.map(|i| ClusterExtensionInstallStatus {
        bundle: BundleMetadata { name: i.name.clone(), version: i.version.clone(), release: None },
    });
    (status, requeue)
}

/// The four deprecation conditions, as upstream sets them.
fn deprecation_conditions(deprecations: Option<&Deprecations>, installed: bool) -> Vec<Set<'static>> {
    let no_bundle = Set { type_: BUNDLE_DEPRECATED, status: Status::Unknown, reason: ABSENT, message: "no bundle installed yet".to_owned() };
    let Some(d) = deprecations else {
        let unknown = |type_| Set { type_, status: Status::Unknown, reason: DEPRECATION_STATUS_UNKNOWN, message: "deprecation status unknown: catalog data unavailable".to_owned() };
        let bundle = if installed { unknown(BUNDLE_DEPRECATED) } else { no_bundle };
        return vec![unknown(DEPRECATED), unknown(PACKAGE_DEPRECATED), unknown(CHANNEL_DEPRECATED), bundle];
    };
    let one = |type_, messages: &[String], absent: &str| {
        if messages.is_empty() {
            Set { type_, status: Status::False, reason: NOT_DEPRECATED, message: absent.to_owned() }
        } else {
            Set { type_, status: Status::True, reason: DEPRECATED_REASON, message: messages.join("\n") }
        }
    };
    let all: Vec<String> = d.package.iter().chain(&d.channels).chain(&d.bundle).cloned().collect();
    let bundle = if installed { one(BUNDLE_DEPRECATED, &d.bundle, "bundle not deprecated") } else { no_bundle };
    vec![
        one(DEPRECATED, &all, "not deprecated"),
        one(PACKAGE_DEPRECATED, &d.package, "package not deprecated"),
        one(CHANNEL_DEPRECATED, &d.channels, "channel not deprecated"),
        bundle,
    ]
}

/// The wait before the next try after `failures` failed passes in a row.
pub fn retry_after(failures: u32) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1u32 << failures.saturating_sub(1).min(8));
    doubled.min(MAX_RETRY)
}

#[cfg(test)]
mod tests;
