use super::*;
use olm_api::v1alpha1::install_plan::{StepResource, StepStatus};
use serde_json::json;

/// A step whose manifest is `size` bytes of JSON; `noisy` content compresses poorly (like
/// descriptions and regexes in real schemas), the rest very well.
fn step(kind: &str, name: &str, size: usize, noisy: bool) -> Step {
    let mut state: u64 = name.bytes().fold(7, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let filler: String = (0..size)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if noisy { char::from(b'a' + ((state >> 33) % 26) as u8) } else { 'x' }
        })
        .collect();
    let manifest = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": {"description": filler}});
    Step {
        resolving: "big.v1".into(),
        resource: StepResource {
            source_name: "widgets".into(),
            source_namespace: "olm".into(),
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            manifest: Some(manifest.to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

fn total(steps: &[Step]) -> usize {
    steps.iter().map(manifest_len).sum()
}

/// What the InstallPlan controller reads back: every map as the API server stores it.
fn stored(maps: &[ContentConfigMap]) -> BTreeMap<String, Option<BTreeMap<String, ByteString>>> {
    maps.iter()
        .map(|m| {
            let cm = config_map(m, "ns", "install-abcde", "uid-1");
            (m.name.clone(), cm.binary_data)
        })
        .collect()
}

#[test]
fn a_small_plan_keeps_its_manifests_inline() {
    let mut steps = vec![step("CustomResourceDefinition", "a", 100 * 1024, true), step("Role", "r", 2000, true)];
    let before = steps.clone();
    assert!(externalize("install-abcde", "ns", &mut steps).expect("externalize").is_empty());
    assert_eq!(steps, before);
    assert!(referenced_config_maps(&steps).is_empty());
    assert_eq!(resolve("install-abcde", &steps, &BTreeMap::new()).expect("nothing to resolve"), before);
}

#[test]
fn the_threshold_is_the_inlined_total() {
    let mut steps = vec![step("CustomResourceDefinition", "a", 1000, false)];
    let overhead = total(&steps) - 1000;
    let mut at = vec![step("CustomResourceDefinition", "a", INLINE_LIMIT - overhead, false)];
    assert_eq!(total(&at), INLINE_LIMIT);
    assert!(externalize("p", "ns", &mut at).expect("externalize").is_empty(), "at the limit: inline");
    steps = vec![step("CustomResourceDefinition", "a", INLINE_LIMIT - overhead + 1, false)];
    assert_eq!(externalize("p", "ns", &mut steps).expect("externalize").len(), 1, "one byte over: moved out");
}

#[test]
fn a_big_plan_moves_its_largest_manifests_into_owned_labelled_config_maps_and_resolves_back() {
    // Over 4 MiB: twelve big CRDs, a CSV, and RBAC.
    let mut steps: Vec<Step> = (0..12).map(|i| step("CustomResourceDefinition", &format!("crd{i}"), 350 * 1024, true)).collect();
    steps.push(step("ClusterServiceVersion", "big.v1", 40 * 1024, true));
    steps.extend((0..10).map(|i| step("Role", &format!("role{i}"), 1500, true)));
    let original = steps.clone();
    assert!(total(&original) > 4 * 1024 * 1024);

    let maps = externalize("install-abcde", "ns", &mut steps).expect("externalize");
    assert!(maps.len() > 1, "4 MiB of poorly compressible text needs several ConfigMaps");
    for map in &maps {
        let bytes: usize = map.data.values().map(Vec::len).sum();
        assert!(bytes <= CONFIG_MAP_BYTES, "{} holds {bytes} bytes", map.name);
        assert!(map.name.starts_with("install-abcde-content-"));
    }
    assert!(total(&steps) <= INLINE_TARGET + 13 * 1024, "inline now: {}", total(&steps));
    assert!(steps.iter().filter(|s| s.resource.kind == "Role").all(|s| reference_of(s.resource.manifest.as_deref().unwrap_or_default()).is_none()), "small steps stay readable");
    let reference = reference_of(steps[0].resource.manifest.as_deref().unwrap_or_default()).expect("a reference");
    assert_eq!((reference.kind.as_str(), reference.namespace.as_str()), ("ConfigMap", "ns"));
    assert_eq!((reference.catalog_source_name.as_str(), reference.catalog_source_namespace.as_str()), ("widgets", "olm"));
    assert_eq!(referenced_config_maps(&steps), maps.iter().map(|m| m.name.clone()).collect());

    let cm = config_map(&maps[0], "ns", "install-abcde", "uid-1");
    let owner = &cm.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("InstallPlan", "install-abcde", "uid-1"));
    assert_eq!(cm.metadata.labels.as_ref().and_then(|l| l.get(PLAN_LABEL)).map(String::as_str), Some("install-abcde"));

    let resolved = resolve("install-abcde", &steps, &stored(&maps)).expect("resolves");
    assert_eq!(resolved, original, "round trip");

    let mut executed = resolved;
    executed.iter_mut().for_each(|s| s.status = StepStatus::Created);
    let kept = keep_references(&steps, executed);
    assert_eq!(total(&kept), total(&steps), "the status written keeps the references");
    assert!(kept.iter().all(|s| s.status == StepStatus::Created));
}

#[test]
fn a_manifest_larger_than_a_config_map_is_split_across_several() {
    let mut steps = vec![step("CustomResourceDefinition", "huge", 2 * CONFIG_MAP_BYTES, true)];
    let original = steps.clone();
    let maps = externalize("p", "ns", &mut steps).expect("externalize");
    let reference = reference_of(steps[0].resource.manifest.as_deref().unwrap_or_default()).expect("a reference");
    assert!(reference.parts.len() >= 2, "{reference:?}");
    assert!(maps.len() >= 2);
    assert_eq!(resolve("p", &steps, &stored(&maps)).expect("resolves"), original);
}

#[test]
fn a_missing_config_map_is_retryable_and_a_corrupt_one_is_not() {
    let mut steps = vec![step("CustomResourceDefinition", "a", INLINE_LIMIT, true)];
    let maps = externalize("install-abcde", "ns", &mut steps).expect("externalize");
    let mut read = stored(&maps);
    read.insert(maps[0].name.clone(), None);
    let missing = resolve("install-abcde", &steps, &read).expect_err("missing");
    assert!(missing.retryable);
    assert!(missing.message.contains("ConfigMap ns/install-abcde-content-0, which does not exist"), "{}", missing.message);
    assert!(missing.message.contains("delete InstallPlan install-abcde"), "{}", missing.message);

    let mut read = stored(&maps);
    if let Some(Some(data)) = read.get_mut(&maps[0].name) {
        data.values_mut().for_each(|v| v.0.truncate(10));
    }
    let corrupt = resolve("install-abcde", &steps, &read).expect_err("corrupt");
    assert!(!corrupt.retryable);
    assert!(corrupt.message.contains("cannot be read from ConfigMap ns/install-abcde-content-0"), "{}", corrupt.message);

    let mut read = stored(&maps);
    if let Some(Some(data)) = read.get_mut(&maps[0].name) {
        data.clear();
    }
    assert!(!resolve("install-abcde", &steps, &read).expect_err("no entry").retryable);
}

#[test]
fn a_bundle_config_map_is_not_taken_for_a_reference() {
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"sha256": "x", "parts": "y"}});
    assert_eq!(reference_of(&manifest.to_string()), None);
}
