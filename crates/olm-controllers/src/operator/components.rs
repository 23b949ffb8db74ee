//! Where an Operator's components are found: one [`ComponentSource`] per kind, each a watch
//! cache read by label, and the pure parts of the Operator's status (its references, sorted as
//! upstream sorts them, with the conditions copied from each component).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use olm_api::common::ConditionStatus;
use olm_api::keys;
use olm_api::v1::operator::{Components, OperatorComponentCondition, OperatorStatus, RichReference};
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_runtime::Cache;
use serde::Serialize;

/// The objects of one kind that can be components of Operators.
pub trait ComponentSource: Send + Sync {
    /// References to the objects carrying the component label `label`.
    fn refs(&self, label: &str) -> Vec<RichReference>;
    /// Whether any object carries `label`.
    fn has(&self, label: &str) -> bool;
    /// Every Operator some object of this kind is a component of.
    fn operators(&self) -> BTreeSet<String>;
    /// The Operators whose components of this kind changed: those an object is a component
    /// of now, and those it was a component of before the change (a removed label or a
    /// deleted object leaves its Operator with one component less).
    fn changes(&self) -> BoxStream<'static, String>;
    /// Resolves once the cache has listed every object.
    fn synced(&self) -> futures::future::BoxFuture<'static, ()>;
}

/// How a component's conditions are read (None: the kind has none).
pub type ConditionsOf<K> = fn(&K) -> Option<Vec<OperatorComponentCondition>>;

/// A [`ComponentSource`] over a watch cache.
pub struct Source<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    cache: Cache<K>,
    conditions: ConditionsOf<K>,
    /// Objects never listed even when labelled (copied CSVs).
    skip: fn(&K) -> bool,
}

impl<K> Source<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    /// Components of `cache`'s kind, without conditions. The cache gets indexed by component
    /// label (the index is shared by the cache's other readers).
    pub fn new(cache: Cache<K>) -> Self {
        cache.index_by(component_keys::<K>);
        Source {
            cache,
            conditions: |_| None,
            skip: |_| false,
        }
    }

    /// Components with the conditions `conditions` reads.
    pub fn with_conditions(cache: Cache<K>, conditions: ConditionsOf<K>) -> Self {
        Source {
            conditions,
            ..Source::new(cache)
        }
    }

    /// Leave out the objects `skip` says.
    pub fn skipping(mut self, skip: fn(&K) -> bool) -> Self {
        self.skip = skip;
        self
    }

    fn components<'a>(&'a self, label: &'a str) -> impl Iterator<Item = Arc<K>> + 'a {
        labelled(&self.cache, label).into_iter().filter(move |obj| !(self.skip)(obj))
    }
}

/// The index keys of an object: a digest of each of its component labels.
pub fn component_keys<K: Resource>(obj: &K) -> Vec<u64> {
    obj.labels()
        .keys()
        .filter(|key| keys::component_of([*key]).next().is_some())
        .map(|key| olm_runtime::cache::digest(key.as_str()))
        .collect()
}

/// The objects of `cache` labelled `label`: from its component-label index (a scan of every
/// object when the cache has none).
pub fn labelled<K>(cache: &Cache<K>, label: &str) -> Vec<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    cache.select(olm_runtime::cache::digest(label), |obj| obj.labels().contains_key(label))
}

/// The reference upstream's Operator keeps of a component: kind, apiVersion, namespace, name.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: obj.meta().namespace.clone(),
        name: obj.meta().name.clone(),
        ..Default::default()
    }
}

fn operators_of<K: Resource>(obj: &K) -> Vec<String> {
    keys::component_of(obj.labels().keys()).map(str::to_owned).collect()
}

impl<K> ComponentSource for Source<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    fn refs(&self, label: &str) -> Vec<RichReference> {
        self.components(label)
            .map(|obj| RichReference {
                object: reference(obj.as_ref()),
                conditions: (self.conditions)(&obj),
            })
            .collect()
    }

    fn has(&self, label: &str) -> bool {
        self.components(label).next().is_some()
    }

    fn operators(&self) -> BTreeSet<String> {
        self.cache
            .list()
            .iter()
            .filter(|obj| !(self.skip)(obj))
            .flat_map(|obj| operators_of(obj.as_ref()))
            .collect()
    }

    fn changes(&self) -> BoxStream<'static, String> {
        let store = self.cache.store().clone();
        let (skip, conditions) = (self.skip, self.conditions);
        let mut seen = Seen::default();
        self.cache
            .subscribe()
            .flat_map(move |obj| {
                let key = (obj.meta().namespace.as_deref(), obj.meta().name.as_deref());
                let present = store.get(&ObjectRef::from_obj(obj.as_ref())).is_some();
                let now = if present && !skip(&obj) { operators_of(obj.as_ref()) } else { Vec::new() };
                let digest = if now.is_empty() { 0 } else { conditions_digest(&conditions(&obj)) };
                futures::stream::iter(seen.changed(key, now, digest))
            })
            .boxed()
    }

    fn synced(&self) -> futures::future::BoxFuture<'static, ()> {
        let cache = self.cache.clone();
        async move { cache.synced().await }.boxed()
    }
}

/// What each labelled object was last seen as: the Operators it is a component of and a digest
/// of its conditions (labelled objects only, by a digest of their namespace and name, so this
/// stays as small as the Operators' components).
#[derive(Default)]
pub struct Seen(HashMap<u64, (Vec<String>, u64)>);

impl Seen {
    /// The Operators whose status a change of the object `key` concerns, now a component of
    /// `now` (empty: of none, or gone) with conditions `digest`: when its conditions changed,
    /// those it is a component of now and those it was before; otherwise only those it joined
    /// or left. A change of anything else (a shared CRD's annotations, which every install of
    /// its operator writes; a Deployment's replica counts) changes no Operator's status, nor
    /// does another Operator's label on a shared CRD change this one's: reconciling every
    /// Operator a shared CRD names on each install made the installs quadratic.
    pub fn changed(&mut self, key: impl std::hash::Hash, now: Vec<String>, digest: u64) -> BTreeSet<String> {
        let key = olm_runtime::cache::digest(key);
        let before = if now.is_empty() { self.0.remove(&key) } else { self.0.insert(key, (now.clone(), digest)) };
        let Some((before, before_digest)) = before else {
            return now.into_iter().collect();
        };
        let (now, before): (BTreeSet<String>, BTreeSet<String>) = (now.into_iter().collect(), before.into_iter().collect());
        if before_digest == digest {
            now.symmetric_difference(&before).cloned().collect()
        } else {
            now.union(&before).cloned().collect()
        }
    }
}

/// A digest of a component's conditions (what its Operator's status shows of it besides its
/// reference).
fn conditions_digest(conditions: &Option<Vec<OperatorComponentCondition>>) -> u64 {
    olm_runtime::cache::digest(serde_json::to_vec(conditions).unwrap_or_default())
}

/// The CRDs the Operator's CSVs own (CSVs labelled `label`, copies left out), with their
/// conditions. A CRD is shared by every install of its operator, so it is listed by ownership
/// rather than labelled for each (see `plan_steps`).
pub fn owned_crd_refs(csvs: &[Arc<ClusterServiceVersion>], crds: &Cache<CustomResourceDefinition>, label: &str) -> Vec<RichReference> {
    let names: BTreeSet<&str> = csvs
        .iter()
        .filter(|csv| !csv.is_copied() && csv.labels().contains_key(label))
        .flat_map(|csv| csv.spec.owned_crds().iter().map(|crd| crd.name.as_str()))
        .collect();
    names
        .into_iter()
        .filter_map(|name| crds.get(None, name))
        .map(|crd| RichReference {
            object: reference(crd.as_ref()),
            conditions: conditions_from(crd.status.as_ref().and_then(|s| s.conditions.as_ref())),
        })
        .collect()
}

/// A CSV's conditions as upstream shows them on its Operator: one, its phase as the type,
/// status `True`, with the phase's reason, message and times.
pub fn csv_conditions(csv: &ClusterServiceVersion) -> Option<Vec<OperatorComponentCondition>> {
    let status = csv.status.as_ref()?;
    let phase = status.phase.as_ref()?;
    Some(vec![OperatorComponentCondition {
        type_: json_string(phase)?,
        status: ConditionStatus::True,
        reason: status.reason.as_ref().and_then(json_string),
        message: status.message.clone().filter(|m| !m.is_empty()),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
    }])
}

/// The string an enum serializes to.
fn json_string<T: Serialize>(value: &T) -> Option<String> {
    serde_json::to_value(value).ok()?.as_str().map(str::to_owned).filter(|s| !s.is_empty())
}

/// `status.conditions` of any kind as component conditions: type, status, reason, message and
/// times are read by name (every Kubernetes condition type has them); a condition without a
/// type is left out.
pub fn conditions_from<T: Serialize>(conditions: Option<&T>) -> Option<Vec<OperatorComponentCondition>> {
    let list = serde_json::to_value(conditions?).ok()?;
    let converted: Vec<OperatorComponentCondition> = list
        .as_array()?
        .iter()
        .filter_map(|condition| serde_json::from_value(condition.clone()).ok())
        .collect();
    (!converted.is_empty()).then_some(converted)
}

/// The Operator's components label selector: `<label>` Exists.
pub fn selector(label: &str) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: label.to_owned(),
            operator: "Exists".into(),
            values: None,
        }]),
        match_labels: None,
    }
}

/// The status of the Operator whose components label is `label` and whose components are
/// `refs`: the selector and the references sorted by kind, apiVersion, namespace and name.
pub fn desired_status(label: &str, mut refs: Vec<RichReference>) -> OperatorStatus {
    refs.sort_by(|a, b| {
        let key = |r: &RichReference| {
            (
                r.object.kind.clone().unwrap_or_default(),
                r.object.api_version.clone().unwrap_or_default(),
                r.object.namespace.clone().unwrap_or_default(),
                r.object.name.clone().unwrap_or_default(),
            )
        };
        key(a).cmp(&key(b))
    });
    OperatorStatus {
        components: Some(Components {
            label_selector: Some(selector(label)),
            refs: (!refs.is_empty()).then_some(refs),
        }),
    }
}
