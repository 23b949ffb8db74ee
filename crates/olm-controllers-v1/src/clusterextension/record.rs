//! The revision record: which bundle a ClusterExtension installed and every object it applied.
//! The next revision removes what the record lists and the new bundle no longer has; a failed
//! upgrade leaves the record, and so the `Installed` bundle, as it was. It is stored as upstream
//! stores its installs, a Helm release in OLM's namespace ([`super::release`]), owned by the
//! ClusterExtension so it goes with it. olm-rs before that kept it in a ConfigMap of the install
//! namespace: [`read`] still reads one, and the next revision's release replaces it.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decide::InstalledBundle;
use super::OWNER_KIND;

/// The ConfigMap key that holds the record.
const KEY: &str = "revision.json";

/// One applied object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    /// The reference of an object as applied (its `namespace` already set when namespaced).
    pub fn of(object: &Value) -> ObjectRef {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
        ObjectRef { api_version: text("/apiVersion"), kind: text("/kind"), namespace: text("/metadata/namespace"), name: text("/metadata/name") }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace.as_str() {
            "" => write!(f, "{} {}", self.kind, self.name),
            ns => write!(f, "{} {ns}/{}", self.kind, self.name),
        }
    }
}

/// What one revision installed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Counts the revisions that changed the bundle or its objects.
    pub revision: u64,
    pub bundle: InstalledBundle,
    pub objects: Vec<ObjectRef>,
    /// Deployments adopted from OLM v0 (`olm migrate`) that keep the spec they ran with until
    /// the bundle changes: applying v1's pod template would restart their pods for nothing.
    #[serde(default, rename = "liveSpec", skip_serializing_if = "Vec::is_empty")]
    pub live_spec: Vec<ObjectRef>,
}

/// The record's ConfigMap name for the ClusterExtension `name`.
pub fn name_for(extension: &str) -> String {
    format!("{extension}.olm-revision")
}

/// The record a ConfigMap holds, or why it cannot be read (someone edited it).
pub fn read(config_map: &ConfigMap) -> Result<Record, String> {
    let text = config_map.data.as_ref().and_then(|d| d.get(KEY)).ok_or_else(|| format!("it has no {KEY}"))?;
    serde_json::from_str(text).map_err(|err| format!("{KEY} is not a revision record: {err}"))
}

/// The ownerReference every installed object carries: deleting the ClusterExtension deletes
/// them (the garbage collector does, as upstream's), CRDs included.
pub fn owner_reference(extension: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/v1", olm_api::olmv1::GROUP),
        kind: OWNER_KIND.to_owned(),
        name: extension.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What `previous` applied that `next` does not: to delete once `next` is applied.
pub fn dropped<'a>(previous: &'a [ObjectRef], next: &[ObjectRef]) -> Vec<&'a ObjectRef> {
    previous.iter().filter(|p| !next.contains(p)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::clusterextension::{OWNER_KIND_LABEL, OWNER_NAME_LABEL};

    /// The record as a ConfigMap in `namespace`, as olm-rs wrote it before releases.
    fn config_map(record: &Record, extension: &str, uid: &str, namespace: &str) -> ConfigMap {
        let labels = BTreeMap::from([(OWNER_KIND_LABEL.to_owned(), OWNER_KIND.to_owned()), (OWNER_NAME_LABEL.to_owned(), extension.to_owned())]);
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name_for(extension)),
                namespace: Some(namespace.to_owned()),
                labels: Some(labels),
                owner_references: Some(vec![owner_reference(extension, uid)]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(KEY.to_owned(), serde_json::to_string_pretty(record).unwrap_or_default())])),
            ..Default::default()
        }
    }

    fn object(kind: &str, ns: &str, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: ns.into(), name: name.into() }
    }

    #[test]
    fn a_record_survives_its_config_map_and_an_edited_one_is_named() {
        let record = Record {
            revision: 2,
            bundle: InstalledBundle { package: "etcd".into(), name: "etcdoperator.v0.9.4".into(), version: "0.9.4".into(), image: "r/etcd@sha256:ab".into() },
            objects: vec![object("ServiceAccount", "etcd", "etcd-operator"), object("ClusterRole", "", "etcd-x")],
            live_spec: vec![object("Deployment", "etcd", "etcd-operator")],
        };
        let map = config_map(&record, "etcd", "uid-1", "etcd");
        assert_eq!(map.metadata.name.as_deref(), Some("etcd.olm-revision"));
        assert_eq!(map.metadata.owner_references.as_ref().unwrap()[0].kind, "ClusterExtension");
        assert_eq!(read(&map).unwrap(), record);
        let mut edited = map.clone();
        edited.data = Some(BTreeMap::from([(KEY.to_owned(), "{".to_owned())]));
        assert!(read(&edited).unwrap_err().starts_with("revision.json is not a revision record"));
    }

    #[test]
    fn what_the_next_revision_drops_is_what_it_no_longer_has() {
        let previous = [object("Service", "ns", "metrics"), object("Deployment", "ns", "op"), object("ClusterRole", "", "r1")];
        let next = [object("Deployment", "ns", "op"), object("ClusterRole", "", "r2")];
        let dropped: Vec<String> = dropped(&previous, &next).iter().map(ToString::to_string).collect();
        assert_eq!(dropped, ["Service ns/metrics", "ClusterRole r1"]);
    }
}
