//! What a ClusterCatalog pass decides: when to pull, and what the status says in each case a
//! user meets (first unpack, served, polled, a bad image before and after content, a blocked
//! digest, Unavailable).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use olm_api::olmv1::ClusterCatalog;
use olm_catalog_client::CatalogContent;
use olm_resolver::CatalogKey;

use super::*;
use crate::clustercatalog::{Failure, Held, Memory};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn catalog(image: &str, poll_minutes: Option<i64>, unavailable: bool) -> ClusterCatalog {
    let mut spec = serde_json::json!({"source": {"type": "Image", "image": {"ref": image}}});
    if let Some(minutes) = poll_minutes {
        spec["source"]["image"]["pollIntervalMinutes"] = minutes.into();
    }
    if unavailable {
        spec["availabilityMode"] = "Unavailable".into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": "operatorhub", "generation": 2}, "spec": spec
    }))
    .unwrap()
}

fn held(image: &str, polled: i64, problems: &[&str]) -> Held {
    let mut content = CatalogContent::from_documents(CatalogKey::new("operatorhub", ""), 0, Vec::new(), None, Default::default()).unwrap();
    content.problems = problems.iter().map(|p| (*p).to_owned()).collect();
    Held {
        image: image.to_owned(),
        resolved: format!("registry.test/catalog@{DIGEST}"),
        digest: DIGEST.to_owned(),
        unpacked_at: at(0),
        polled_at: at(polled),
        content: Arc::new(content),
    }
}

fn failure(image: &str, blocked: bool, attempts: u32) -> Failure {
    Failure { image: image.to_owned(), message: "source catalog content: registry.test answered 404 for catalog:v1".into(), blocked, at: at(0), attempts }
}

fn condition<'a>(status: &'a olm_api::olmv1::ClusterCatalogStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

const TAG: &str = "registry.test/catalog:v1";

#[test]
fn plans() {
    let by_digest = format!("registry.test/catalog@{DIGEST}");
    let cases: Vec<(&str, ClusterCatalog, Memory, i64, Plan)> = vec![
        ("first sight: pull", catalog(TAG, None, false), Memory::default(), 0, Plan::Pull { image: TAG.into(), known: None }),
        ("served, no polling: wait", catalog(TAG, None, false), Memory { held: Some(held(TAG, 0, &[])), failure: None }, 10_000, Plan::Wait),
        ("served, poll not due: wait", catalog(TAG, Some(10), false), Memory { held: Some(held(TAG, 0, &[])), failure: None }, 599, Plan::Wait),
        (
            "served, poll due: pull, knowing the digest",
            catalog(TAG, Some(10), false),
            Memory { held: Some(held(TAG, 0, &[])), failure: None },
            600,
            Plan::Pull { image: TAG.into(), known: Some(DIGEST.into()) },
        ),
        (
            "a new ref: pull, knowing nothing",
            catalog("registry.test/catalog:v2", None, false),
            Memory { held: Some(held(TAG, 0, &[])), failure: None },
            1,
            Plan::Pull { image: "registry.test/catalog:v2".into(), known: None },
        ),
        ("failed once: wait 10 s", catalog(TAG, None, false), Memory { held: None, failure: Some(failure(TAG, false, 1)) }, 9, Plan::Wait),
        ("failed once, 10 s later: pull", catalog(TAG, None, false), Memory { held: None, failure: Some(failure(TAG, false, 1)) }, 10, Plan::Pull { image: TAG.into(), known: None }),
        ("failed 3 times: wait 40 s", catalog(TAG, None, false), Memory { held: None, failure: Some(failure(TAG, false, 3)) }, 39, Plan::Wait),
        ("failed 20 times: at most 5 min", catalog(TAG, None, false), Memory { held: None, failure: Some(failure(TAG, false, 20)) }, 300, Plan::Pull { image: TAG.into(), known: None }),
        ("blocked tag: 5 min", catalog(TAG, None, false), Memory { held: None, failure: Some(failure(TAG, true, 1)) }, 299, Plan::Wait),
        ("blocked digest: never again", catalog(&by_digest, None, false), Memory { held: None, failure: Some(failure(&by_digest, true, 1)) }, 1_000_000, Plan::Wait),
        ("a failure of another ref does not hold a new one back", catalog("registry.test/catalog:v2", None, false), Memory { held: None, failure: Some(failure(TAG, true, 1)) }, 1, Plan::Pull { image: "registry.test/catalog:v2".into(), known: None }),
        ("Unavailable: withdraw", catalog(TAG, None, true), Memory { held: Some(held(TAG, 0, &[])), failure: None }, 0, Plan::Withdraw),
    ];
    for (what, catalog, memory, now, expected) in cases {
        assert_eq!(plan(&catalog, &memory, at(now)), expected, "{what}");
    }
}

#[test]
fn served_content_is_said_with_its_digest_url_and_time() {
    let (status, requeue) = status(&catalog(TAG, None, false), &Memory { held: Some(held(TAG, 0, &[])), failure: None }, "https://olm.olm.svc:8443", at(5));
    assert_eq!(condition(&status, "Serving"), ("True", "Available", "Serving desired content from resolved source"));
    assert_eq!(condition(&status, "Progressing"), ("True", "Succeeded", "Successfully unpacked and stored content from resolved source"));
    assert_eq!(status.resolved_source.unwrap().image.reference, format!("registry.test/catalog@{DIGEST}"));
    assert_eq!(status.urls.unwrap().base, "https://olm.olm.svc:8443/catalogs/operatorhub");
    assert_eq!(status.last_unpacked.unwrap().0, at(0));
    assert_eq!(requeue, None, "no polling: nothing to come back for");
    assert!(status.conditions.iter().all(|c| c.observed_generation == Some(2)));
}

#[test]
fn a_polled_catalog_comes_back_when_the_next_poll_is_due() {
    let (_, requeue) = status(&catalog(TAG, Some(10), false), &Memory { held: Some(held(TAG, 100, &[])), failure: None }, "http://x", at(400));
    assert_eq!(requeue, Some(Duration::from_secs(300)));
}

#[test]
fn packages_left_out_are_said_beside_success() {
    let (status, _) = status(&catalog(TAG, None, false), &Memory { held: Some(held(TAG, 0, &["package a: no channel", "package b: x", "c", "d"])), failure: None }, "http://x", at(5));
    let (_, reason, message) = condition(&status, "Progressing");
    assert_eq!(reason, "Succeeded");
    assert!(message.ends_with("with problems: package a: no channel; package b: x; c (and 1 more)"), "{message}");
}

#[test]
fn a_bad_image_before_any_content_is_retrying_and_not_serving() {
    let (status, requeue) = status(&catalog(TAG, None, false), &Memory { held: None, failure: Some(failure(TAG, false, 2)) }, "http://x", at(5));
    let (state, reason, message) = condition(&status, "Progressing");
    assert_eq!((state, reason), ("True", "Retrying"));
    assert!(message.contains("404"), "{message}");
    assert_eq!(condition(&status, "Serving").0, "False");
    assert_eq!(condition(&status, "Serving").1, "Unavailable");
    assert!(status.urls.is_none() && status.resolved_source.is_none() && status.last_unpacked.is_none());
    assert_eq!(requeue, Some(Duration::from_secs(15)), "20 s after the failure at 0");
}

#[test]
fn a_bad_new_image_keeps_the_old_content_served_and_says_so() {
    let memory = Memory { held: Some(held(TAG, 0, &[])), failure: Some(failure("registry.test/catalog:v2", true, 1)) };
    let (status, _) = status(&catalog("registry.test/catalog:v2", None, false), &memory, "http://x", at(5));
    let (state, reason, message) = condition(&status, "Progressing");
    assert_eq!((state, reason), ("False", "Blocked"));
    assert!(message.ends_with(&format!("still serving registry.test/catalog@{DIGEST} (from {TAG})")), "{message}");
    assert_eq!(condition(&status, "Serving").0, "True");
}

#[test]
fn a_blocked_digest_is_not_retried() {
    let by_digest = format!("registry.test/catalog@{DIGEST}");
    let (status, requeue) = status(&catalog(&by_digest, None, false), &Memory { held: None, failure: Some(failure(&by_digest, true, 1)) }, "http://x", at(5));
    assert_eq!(condition(&status, "Progressing").1, "Blocked");
    assert_eq!(requeue, None);
}

#[test]
fn unavailable_says_so_in_both_conditions_and_advertises_no_url() {
    let (status, requeue) = status(&catalog(TAG, None, true), &Memory { held: Some(held(TAG, 0, &[])), failure: None }, "http://x", at(5));
    assert_eq!(condition(&status, "Progressing"), ("True", "Succeeded", "Catalog availability mode is set to Unavailable"));
    assert_eq!(condition(&status, "Serving"), ("False", "UserSpecifiedUnavailable", "Catalog availability mode is set to Unavailable"));
    assert!(status.urls.is_none());
    assert_eq!(requeue, None);
}
