//! Creating an instance of an API an installed operator provides, from the examples its CSV
//! carries (the `alm-examples` annotation, as OpenShift's console reads it): the example as
//! editable YAML, a server-side dry run, and Create. Pure: the APIs, the example and the object
//! the user submitted; `cluster` reads and writes.

use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use serde_json::Value;

use crate::html::{escape, query_value};

/// The CSV annotation with example objects of its APIs: a JSON array.
pub const EXAMPLES_ANNOTATION: &str = "alm-examples";

/// An API the operator provides (an owned CRD), as the Installed page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvidedApi {
    pub kind: String,
    pub display_name: String,
    /// The CSV carries an example of it: the page links to the form.
    pub has_example: bool,
}

/// The owned CRDs of `csv`, with whether an example of each is there (a CSV whose examples do
/// not parse has none: the form says why).
pub fn provided_apis(csv: &ClusterServiceVersion) -> Vec<ProvidedApi> {
    let examples = examples(csv).unwrap_or_default();
    let owned = csv.spec.custom_resource_definitions.as_ref().and_then(|c| c.owned.as_ref());
    owned
        .into_iter()
        .flatten()
        .map(|crd| ProvidedApi {
            kind: crd.kind.clone(),
            display_name: crd.display_name.clone().filter(|d| !d.is_empty()).unwrap_or_else(|| crd.kind.clone()),
            has_example: examples.iter().any(|e| e["kind"] == crd.kind.as_str()),
        })
        .collect()
}

/// The examples of `csv`; none when it has no annotation.
pub fn examples(csv: &ClusterServiceVersion) -> Result<Vec<Value>, String> {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let Some(text) = csv.metadata.annotations.as_ref().and_then(|a| a.get(EXAMPLES_ANNOTATION)) else {
        return Ok(Vec::new());
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items.into_iter().filter(Value::is_object).collect()),
        Ok(_) => Err(format!("the {EXAMPLES_ANNOTATION} annotation of ClusterServiceVersion {name} is not a JSON array of objects")),
        Err(err) => Err(format!("the {EXAMPLES_ANNOTATION} annotation of ClusterServiceVersion {name} is not valid JSON: {err}")),
    }
}

/// The first example of `kind` in `csv`, without status, in `namespace` when the kind is
/// namespaced (`None`: cluster-scoped, any namespace the example names is dropped).
pub fn example_for(csv: &ClusterServiceVersion, kind: &str, namespace: Option<&str>) -> Result<Value, String> {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let mut example = examples(csv)?
        .into_iter()
        .find(|e| e["kind"] == kind)
        .ok_or_else(|| format!("ClusterServiceVersion {name} has no example of {kind} in its {EXAMPLES_ANNOTATION} annotation"))?;
    place(&mut example, namespace);
    Ok(example)
}

/// `object` in `namespace` (or in none), without what the API server writes.
fn place(object: &mut Value, namespace: Option<&str>) {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if !object["metadata"].is_object() {
        object["metadata"] = serde_json::json!({});
    }
    if let Some(metadata) = object["metadata"].as_object_mut() {
        match namespace {
            Some(ns) => {
                metadata.insert("namespace".into(), Value::String(ns.to_owned()));
            }
            None => {
                metadata.remove("namespace");
            }
        }
    }
}

/// The object the user submitted: one YAML (or JSON) document of `kind` with a name, placed in
/// `namespace` as [`example_for`] places examples. Anything else is refused in words.
pub fn object_from(yaml: &str, kind: &str, namespace: Option<&str>) -> Result<Value, String> {
    let mut object: Value = serde_saphyr::from_str(yaml).map_err(|err| format!("the YAML does not parse: {err}"))?;
    if !object.is_object() {
        return Err(format!("the YAML is not one object: write a single {kind} (apiVersion, kind, metadata, spec)"));
    }
    if object["kind"] != kind {
        return Err(format!("the object's kind is {}, not {kind}: this form creates a {kind}", object["kind"]));
    }
    if object["apiVersion"].as_str().is_none_or(str::is_empty) {
        return Err("the object has no apiVersion".into());
    }
    if object["metadata"]["name"].as_str().is_none_or(str::is_empty) && object["metadata"]["generateName"].as_str().is_none_or(str::is_empty) {
        return Err("the object has no metadata.name: give it one".into());
    }
    if let (Some(given), Some(ns)) = (object["metadata"]["namespace"].as_str(), namespace)
        && given != ns
    {
        return Err(format!("metadata.namespace is {given}: this operator's instances are created in {ns}; remove the line or write {ns}"));
    }
    place(&mut object, namespace);
    Ok(object)
}

/// What the form says after a dry run or a Create, beside the YAML.
pub enum Outcome<'a> {
    /// The form as first shown.
    Fresh,
    /// The server-side dry run accepted it.
    Accepted,
    /// Created: a link back to the Installed page follows.
    Created(&'a str),
    /// Refused (by this form or the API server), in words.
    Refused(&'a str),
}

/// The form: the YAML to edit, Check (a server-side dry run) and Create.
pub fn page(namespace: &str, csv: &str, kind: &str, yaml: &str, outcome: Outcome<'_>) -> String {
    let mut html = String::new();
    match outcome {
        Outcome::Fresh => html.push_str(&format!(
            "<p>The example {} ships with {}. Edit it, check it against the cluster, then create it in namespace {}.</p>",
            escape(kind),
            escape(csv),
            escape(namespace)
        )),
        Outcome::Accepted => html.push_str("<p class=\"note\" role=\"status\"><strong>Accepted</strong> by the server-side dry run: nothing was created yet.</p>"),
        Outcome::Created(what) => {
            html.push_str(&format!("<p class=\"note\" role=\"status\"><strong>Created</strong> {}. <a href=\"/installed\">Back to Installed</a></p>", escape(what)));
        }
        Outcome::Refused(message) => html.push_str(&format!("<p class=\"error\" role=\"alert\"><strong>Refused:</strong> {}</p>", escape(message))),
    }
    html.push_str(&format!(
        "<form method=\"post\" action=\"/instance/{}/{}/{}\" class=\"instance\"><p><label for=\"yaml\">{} (YAML)</label><br><textarea id=\"yaml\" name=\"yaml\" rows=\"20\" cols=\"80\" spellcheck=\"false\">{}</textarea></p>",
        query_value(namespace),
        query_value(csv),
        query_value(kind),
        escape(kind),
        escape(yaml)
    ));
    html.push_str("<p><button type=\"submit\" name=\"action\" value=\"check\">Check (dry run)</button> <button type=\"submit\" name=\"action\" value=\"create\">Create</button></p></form>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csv(examples: Option<&str>) -> ClusterServiceVersion {
        let mut csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "team-a"},
            "spec": {"displayName": "etcd", "install": {"strategy": "deployment"},
                "customresourcedefinitions": {"owned": [
                    {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster", "displayName": "etcd Cluster"},
                    {"name": "etcdbackups.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdBackup"}]}}});
        if let Some(text) = examples {
            csv["metadata"]["annotations"] = json!({EXAMPLES_ANNOTATION: text});
        }
        serde_json::from_value(csv).unwrap()
    }

    const EXAMPLES: &str = r#"[{"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster",
        "metadata": {"name": "example", "namespace": "default"}, "spec": {"size": 3}, "status": {"phase": "Running"}}]"#;

    #[test]
    fn the_provided_apis_say_which_have_an_example() {
        let apis = provided_apis(&csv(Some(EXAMPLES)));
        assert_eq!(
            apis,
            [
                ProvidedApi { kind: "EtcdCluster".into(), display_name: "etcd Cluster".into(), has_example: true },
                ProvidedApi { kind: "EtcdBackup".into(), display_name: "EtcdBackup".into(), has_example: false },
            ]
        );
        assert!(provided_apis(&csv(None)).iter().all(|a| !a.has_example));
        assert!(provided_apis(&csv(Some("{not json"))).iter().all(|a| !a.has_example), "broken examples are none");
    }

    #[test]
    fn the_example_is_placed_in_the_operators_namespace_without_status() {
        let example = example_for(&csv(Some(EXAMPLES)), "EtcdCluster", Some("team-a")).unwrap();
        assert_eq!(example, json!({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster", "metadata": {"name": "example", "namespace": "team-a"}, "spec": {"size": 3}}));
        let cluster_scoped = example_for(&csv(Some(EXAMPLES)), "EtcdCluster", None).unwrap();
        assert_eq!(cluster_scoped["metadata"], json!({"name": "example"}));
        let missing = example_for(&csv(Some(EXAMPLES)), "EtcdBackup", Some("team-a")).unwrap_err();
        assert_eq!(missing, "ClusterServiceVersion etcd.v1 has no example of EtcdBackup in its alm-examples annotation");
        let broken = example_for(&csv(Some("{not json")), "EtcdCluster", Some("team-a")).unwrap_err();
        assert!(broken.starts_with("the alm-examples annotation of ClusterServiceVersion etcd.v1 is not valid JSON: "), "{broken}");
    }

    #[test]
    fn what_the_user_submits_is_checked_in_words() {
        let ok = object_from("apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n  name: mine\nspec:\n  size: 1\n", "EtcdCluster", Some("team-a")).unwrap();
        assert_eq!(ok["metadata"], json!({"name": "mine", "namespace": "team-a"}));
        for (yaml, expected) in [
            ("a: [", "the YAML does not parse"),
            ("- 1\n- 2\n", "is not one object"),
            ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", "the object's kind is \"Secret\", not EtcdCluster"),
            ("kind: EtcdCluster\nmetadata: {name: s}\n", "no apiVersion"),
            ("apiVersion: x/v1\nkind: EtcdCluster\nspec: {}\n", "no metadata.name"),
            ("apiVersion: x/v1\nkind: EtcdCluster\nmetadata: {name: s, namespace: team-b}\n", "metadata.namespace is team-b: this operator's instances are created in team-a"),
        ] {
            let err = object_from(yaml, "EtcdCluster", Some("team-a")).unwrap_err();
            assert!(err.contains(expected), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn the_form_escapes_what_it_echoes() {
        let html = page("team-a", "etcd.v1", "EtcdCluster", "metadata:\n  name: \"</textarea><script>x()</script>\"", Outcome::Refused("<b>no</b>"));
        assert!(!html.contains("<script>") && !html.contains("<b>no</b>") && html.matches("</textarea>").count() == 1, "{html}");
        assert!(html.contains("action=\"/instance/team-a/etcd.v1/EtcdCluster\""), "{html}");
    }
}
