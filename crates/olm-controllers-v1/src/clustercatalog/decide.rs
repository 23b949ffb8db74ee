//! What a ClusterCatalog pass does and what its status says, from the object, what this process
//! holds for it and `now`: pure, tested without a cluster. Reasons and messages are catalogd's
//! (operator-controller v1.11) where it has one; ours add what the user can act on.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use olm_api::olmv1::cluster_catalog::{
    AvailabilityMode, CatalogUrls, ClusterCatalog, ClusterCatalogStatus, ResolvedCatalogSource, ResolvedImageSource, SourceType,
};
use olm_api::olmv1::conditions::*;

use super::{Failure, Memory};
use crate::conditions::{Set, Status, set};

/// The first retry after a failed pull; doubled per failure up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(10);
/// The slowest retry of a failed pull.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// What this pass does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Stop serving (`availabilityMode: Unavailable`).
    Withdraw,
    /// Pull `image`; `known` is the digest already served (a tag that still names it is no
    /// new content).
    Pull { image: String, known: Option<String> },
    /// Nothing to pull now.
    Wait,
}

/// Whether to pull now.
pub fn plan(catalog: &ClusterCatalog, memory: &Memory, now: Timestamp) -> Plan {
    if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
        return Plan::Withdraw;
    }
    let Some(image) = catalog.image() else { return Plan::Wait };
    let known = memory.held.as_ref().filter(|h| h.image == image.reference).map(|h| h.digest.clone());
    let pull = Plan::Pull { image: image.reference.clone(), known: known.clone() };
    if let Some(failure) = memory.failure.as_ref().filter(|f| f.image == image.reference) {
        return if now >= retry_at(failure, is_digest(&image.reference)) { pull } else { Plan::Wait };
    }
    match (&memory.held, poll_interval(catalog)) {
        (Some(held), _) if held.image != image.reference => pull,
        (None, _) => pull,
        (Some(held), Some(every)) if now >= held.polled_at + every => pull,
        _ => Plan::Wait,
    }
}

/// The status, and when to look again.
pub fn status(catalog: &ClusterCatalog, memory: &Memory, base_url: &str, now: Timestamp) -> (ClusterCatalogStatus, Option<Duration>) {
    let previous = catalog.conditions();
    let generation = catalog.metadata.generation;
    let mut status = ClusterCatalogStatus::default();
    let mut put = |s: Set<'_>| set(&mut status.conditions, previous, s, generation, now);

    if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
        let message = "Catalog availability mode is set to Unavailable".to_owned();
        put(Set { type_: PROGRESSING, status: Status::True, reason: SUCCEEDED, message: message.clone() });
        put(Set { type_: SERVING, status: Status::False, reason: USER_SPECIFIED_UNAVAILABLE, message });
        return (status, None);
    }
    let Some(image) = catalog.image() else {
        // The CRD's rules refuse this; an object from before them says what to change.
        let message = "spec.source.image is required when spec.source.type is Image: set spec.source.image.ref to a catalog image".to_owned();
        put(Set { type_: PROGRESSING, status: Status::False, reason: BLOCKED, message: message.clone() });
        put(Set { type_: SERVING, status: Status::False, reason: UNAVAILABLE, message });
        return (status, None);
    };
    let failure = memory.failure.as_ref().filter(|f| f.image == image.reference);
    let held = memory.held.as_ref();

    match held {
        Some(held) => {
            status.resolved_source = Some(ResolvedCatalogSource {
                type_: SourceType::Image,
                image: ResolvedImageSource { reference: held.resolved.clone() },
            });
            status.urls = Some(CatalogUrls { base: format!("{base_url}/catalogs/{}", catalog.metadata.name.as_deref().unwrap_or_default()) });
            status.last_unpacked = Some(Time(truncated(held.unpacked_at)));
            put(Set { type_: SERVING, status: Status::True, reason: AVAILABLE, message: "Serving desired content from resolved source".to_owned() });
        }
        None => {
            let message = match failure {
                Some(_) => "no content is served: the catalog image could not be unpacked (Progressing says why)".to_owned(),
                None => format!("no content is served yet: {} is being unpacked", image.reference),
            };
            put(Set { type_: SERVING, status: Status::False, reason: UNAVAILABLE, message });
        }
    }

    let mut requeue = None;
    match (failure, held) {
        (Some(failure), _) => {
            let kept = match held {
                Some(held) if held.image == image.reference => format!("; still serving {}", held.resolved),
                Some(held) => format!("; still serving {} (from {})", held.resolved, held.image),
                None => String::new(),
            };
            let (state, reason) = if failure.blocked { (false, BLOCKED) } else { (true, RETRYING) };
            put(Set { type_: PROGRESSING, status: state.into(), reason, message: format!("{}{kept}", failure.message) });
            let at = retry_at(failure, is_digest(&image.reference));
            if !(failure.blocked && is_digest(&image.reference)) {
                requeue = Some(until(at, now));
            }
        }
        (None, Some(held)) if held.image == image.reference => {
            let problems = &held.content.problems;
            let message = if problems.is_empty() {
                "Successfully unpacked and stored content from resolved source".to_owned()
            } else {
                let shown: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
                let more = if problems.len() > 3 { format!(" (and {} more)", problems.len() - 3) } else { String::new() };
                format!("Successfully unpacked and stored content from resolved source, with problems: {}{more}", shown.join("; "))
            };
            put(Set { type_: PROGRESSING, status: Status::True, reason: SUCCEEDED, message });
            if let Some(every) = poll_interval(catalog) {
                requeue = Some(until(held.polled_at + every, now));
            }
        }
        // A new ref, being pulled.
        _ => {
            put(Set { type_: PROGRESSING, status: Status::True, reason: RETRYING, message: format!("unpacking {}", image.reference) });
            requeue = Some(FIRST_RETRY);
        }
    }
    (status, requeue)
}

/// When the failed pull may be tried again: a growing backoff; a blocked one (content at a
/// digest, which never changes) never, and a blocked tag at the slowest pace.
fn retry_at(failure: &Failure, by_digest: bool) -> Timestamp {
    if failure.blocked {
        return if by_digest { Timestamp::MAX } else { failure.at + MAX_RETRY };
    }
    let doublings = failure.attempts.saturating_sub(1).min(10);
    let delay = FIRST_RETRY.saturating_mul(1 << doublings).min(MAX_RETRY);
    failure.at + delay
}

fn poll_interval(catalog: &ClusterCatalog) -> Option<Duration> {
    let minutes = catalog.image()?.poll_interval_minutes?;
    u64::try_from(minutes).ok().filter(|m| *m > 0).map(|m| Duration::from_secs(m * 60))
}

fn is_digest(image: &str) -> bool {
    image.contains('@')
}

fn until(at: Timestamp, now: Timestamp) -> Duration {
    let left = at.duration_since(now);
    Duration::try_from(left).unwrap_or_default().max(Duration::from_secs(1))
}

/// `lastUnpacked` is written to the second, as upstream does (so a re-read compares equal).
fn truncated(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

#[cfg(test)]
mod tests;
