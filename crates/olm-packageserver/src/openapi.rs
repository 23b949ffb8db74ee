//! The OpenAPI documents of the PackageManifest API (`/openapi/v2`, and `/openapi/v3/apis/
//! packages.operators.coreos.com/v1`), which kube-apiserver aggregates into the cluster's.
//!
//! They declare every answer the server gives (the `Status` errors too, and the icon
//! subresource in v3), with the selector grammars as patterns, so a client generated from
//! them, and the schema fuzzing of fuzz/http/run.sh, meet no undeclared status or content.
//! v2 gives the errors a description only: kube-apiserver merges the v2 documents of every
//! API server into one, and a `Status` definition of ours would clash with its own.

use olm_api::packages::v1::{GROUP, PLURAL, VERSION};
use serde_json::{Map, Value, json};

use crate::selector::{FIELD_SELECTOR_PATTERN, LABEL_SELECTOR_PATTERN};

/// The schema of a PackageManifest (status fields typed, the CSV description open).
fn manifest_schema(ref_prefix: &str) -> Value {
    let string = json!({"type": "string"});
    let link = json!({"type": "object", "properties": {"name": string, "url": string}});
    let deprecation = json!({"type": "object", "properties": {"message": string}, "required": ["message"]});
    json!({
        "description": "PackageManifest holds information about a package, which is a reference to one (or more) channels under a single package.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
            "metadata": {"$ref": format!("{ref_prefix}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")},
            "spec": {"type": "object", "description": "Always empty."},
            "status": {
                "type": "object",
                "description": "PackageManifestStatus represents the current status of the PackageManifest.",
                "properties": {
                    "catalogSource": {"type": "string", "description": "Name of the CatalogSource this package belongs to."},
                    "catalogSourceDisplayName": string,
                    "catalogSourcePublisher": string,
                    "catalogSourceNamespace": {"type": "string", "description": "Namespace of the CatalogSource this package belongs to."},
                    "provider": link,
                    "packageName": {"type": "string", "description": "Name of the package."},
                    "defaultChannel": {"type": "string", "description": "The channel a Subscription without spec.channel follows."},
                    "deprecation": deprecation,
                    "channels": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "name": string,
                            "currentCSV": {"type": "string", "description": "Name of the ClusterServiceVersion at the head of the channel."},
                            "currentCSVDesc": {"type": "object", "description": "Metadata of the head ClusterServiceVersion.", "x-kubernetes-preserve-unknown-fields": true},
                            "deprecation": deprecation,
                            "entries": {"type": "array", "items": {"type": "object", "properties": {"name": string, "version": string, "deprecation": deprecation}}},
                        },
                        "required": ["name", "currentCSV"],
                    }},
                },
                "required": ["catalogSource", "catalogSourceDisplayName", "catalogSourcePublisher", "catalogSourceNamespace", "provider", "packageName", "channels", "defaultChannel"],
            },
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "PackageManifest"}],
    })
}

fn list_schema(ref_prefix: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": format!("{ref_prefix}io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")},
            "items": {"type": "array", "items": {"$ref": format!("{ref_prefix}com.github.operator-framework.operator-lifecycle-manager.pkg.package-server.apis.operators.v1.PackageManifest")}},
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "PackageManifestList"}],
    })
}

const MANIFEST_DEF: &str = "com.github.operator-framework.operator-lifecycle-manager.pkg.package-server.apis.operators.v1.PackageManifest";
const LIST_DEF: &str = "com.github.operator-framework.operator-lifecycle-manager.pkg.package-server.apis.operators.v1.PackageManifestList";

const STATUS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";

/// The operations, each as (path, operationId, what, kind): what the server routes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Get,
    Icon,
}

fn operations() -> [(String, &'static str, &'static str, Kind); 4] {
    let gv = format!("/apis/{GROUP}/{VERSION}");
    [
        (format!("{gv}/{PLURAL}"), "listOperatorsCoreosComV1PackageManifestForAllNamespaces", "list PackageManifests in every namespace", Kind::List),
        (format!("{gv}/namespaces/{{namespace}}/{PLURAL}"), "listOperatorsCoreosComV1NamespacedPackageManifest", "list PackageManifests", Kind::List),
        (format!("{gv}/namespaces/{{namespace}}/{PLURAL}/{{name}}"), "readOperatorsCoreosComV1NamespacedPackageManifest", "read the specified PackageManifest", Kind::Get),
        (format!("{gv}/namespaces/{{namespace}}/{PLURAL}/{{name}}/icon"), "readOperatorsCoreosComV1NamespacedPackageManifestIcon", "read the icon of the specified PackageManifest", Kind::Icon),
    ]
}

/// (name, location, description, schema) of an operation's parameters.
fn parameters(path: &str, kind: Kind) -> Vec<(&'static str, &'static str, &'static str, Value)> {
    let string = json!({"type": "string"});
    let mut out = Vec::new();
    if path.contains("{namespace}") {
        out.push(("namespace", "path", "object name and auth scope, such as for teams and projects", string.clone()));
    }
    if path.contains("{name}") {
        out.push(("name", "path", "name of the PackageManifest (the package)", string.clone()));
    }
    match kind {
        Kind::List => {
            out.push(("labelSelector", "query", "A selector to restrict the list by labels: a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a, joined by commas.", json!({"type": "string", "pattern": LABEL_SELECTOR_PATTERN})));
            out.push(("fieldSelector", "query", "A selector to restrict the list by fields: only metadata.name=<name>, == and != are supported.", json!({"type": "string", "pattern": FIELD_SELECTOR_PATTERN})));
        }
        // `?icons=true` (get) and `?watch=true` (list, answered 405) are left out: the server
        // reads any other value as false, which a boolean parameter would call invalid.
        Kind::Get => {}
        Kind::Icon => out.push(("resourceVersion", "query", "With If-None-Match: the client has the icon already (304).", string)),
    }
    out
}

/// Error answers of an operation, by status code.
fn errors(kind: Kind) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![
        ("401", "Unauthorized: not through the Kubernetes API server (front-proxy client certificate and X-Remote-User)"),
        ("403", "Forbidden: the user may not get or list packagemanifests here"),
        ("500", "The request could not be authorized (the SubjectAccessReview failed); retry"),
    ];
    match kind {
        Kind::List => {
            out.push(("400", "The label or field selector does not parse; the message says where"));
            out.push(("405", "watch=true: packagemanifests cannot be watched"));
        }
        Kind::Get | Kind::Icon => out.push(("404", "No package of that name in a catalog visible from the namespace")),
    }
    out
}

/// The Swagger 2.0 document.
pub fn v2() -> Value {
    let item_ref = format!("#/definitions/{MANIFEST_DEF}");
    let list_ref = format!("#/definitions/{LIST_DEF}");
    let mut paths = Map::new();
    for (path, id, description, kind) in operations() {
        if kind == Kind::Icon {
            // Not in upstream's v2 document either; kube-apiserver merges this one into the
            // cluster's, where it would be new.
            continue;
        }
        let schema_ref = if kind == Kind::List { &list_ref } else { &item_ref };
        let params: Vec<Value> = parameters(&path, kind)
            .into_iter()
            .map(|(name, location, description, schema)| {
                let mut p = json!({"name": name, "in": location, "description": description, "required": location == "path", "uniqueItems": true});
                if let (Value::Object(p), Value::Object(schema)) = (&mut p, schema) {
                    p.extend(schema);
                }
                p
            })
            .collect();
        let mut responses = Map::new();
        responses.insert("200".into(), json!({"description": "OK", "schema": {"$ref": schema_ref}}));
        for (code, why) in errors(kind) {
            responses.insert(code.into(), json!({"description": why}));
        }
        paths.insert(path, json!({"get": {
            "description": description,
            "operationId": id,
            "produces": ["application/json"],
            "schemes": ["https"],
            "parameters": params,
            "responses": responses,
            "x-kubernetes-action": if kind == Kind::List { "list" } else { "get" },
            "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "PackageManifest"},
        }}));
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "OLM packageserver", "version": VERSION},
        "paths": paths,
        "definitions": {
            MANIFEST_DEF: manifest_schema("#/definitions/"),
            LIST_DEF: list_schema("#/definitions/"),
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "description": "Standard object metadata.", "x-kubernetes-preserve-unknown-fields": true},
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta": {"type": "object", "description": "Standard list metadata.", "x-kubernetes-preserve-unknown-fields": true},
        },
    })
}

/// The `/openapi/v3` index.
pub fn v3_index() -> Value {
    json!({"paths": {format!("apis/{GROUP}/{VERSION}"): {"serverRelativeURL": format!("/openapi/v3/apis/{GROUP}/{VERSION}")}}})
}

/// The OpenAPI 3 document of packages.operators.coreos.com/v1.
pub fn v3() -> Value {
    let prefix = "#/components/schemas/";
    let status = json!({"application/json": {"schema": {"$ref": format!("{prefix}{STATUS_DEF}")}}});
    let mut paths = Map::new();
    for (path, id, description, kind) in operations() {
        let params: Vec<Value> = parameters(&path, kind)
            .into_iter()
            .map(|(name, location, description, schema)| {
                let mut p = json!({"name": name, "in": location, "description": description, "required": location == "path", "schema": schema});
                // Names of the fixture the fuzzing serves, so its examples reach a package.
                match name {
                    "namespace" => p["example"] = json!("olm"),
                    "name" => p["example"] = json!("etcd"),
                    _ => {}
                }
                p
            })
            .collect();
        let mut responses = Map::new();
        let ok = match kind {
            Kind::List => json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{prefix}{LIST_DEF}")}}}}),
            Kind::Get => json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{prefix}{MANIFEST_DEF}")}}}}),
            Kind::Icon => json!({
                "description": "The icon, with its media type (a grey square as image/svg+xml when the package has none)",
                "content": {"image/*": {"schema": {"type": "string", "format": "binary"}}}
            }),
        };
        responses.insert("200".into(), ok);
        if kind == Kind::Icon {
            responses.insert("304".into(), json!({"description": "Not modified (If-None-Match with resourceVersion)"}));
        }
        for (code, why) in errors(kind) {
            responses.insert(code.into(), json!({"description": why, "content": status}));
        }
        let mut operation = json!({
            "description": description,
            "operationId": id,
            "parameters": params,
            "responses": responses,
            "x-kubernetes-action": if kind == Kind::List { "list" } else { "get" },
            "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "PackageManifest"},
        });
        if kind == Kind::Icon {
            if let Some(params) = operation["parameters"].as_array_mut() {
                params.push(json!({"name": "If-None-Match", "in": "header", "required": false, "description": "The icon's ETag", "schema": {"type": "string"}}));
            }
        }
        paths.insert(path, json!({"get": operation}));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "OLM packageserver", "version": VERSION},
        "paths": paths,
        "components": {"schemas": {
            MANIFEST_DEF: manifest_schema(prefix),
            LIST_DEF: list_schema(prefix),
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            STATUS_DEF: {
                "description": "Status is a return value for calls that don't return other objects.",
                "type": "object",
                "required": ["kind", "apiVersion", "status", "message", "reason", "code"],
                "properties": {
                    "kind": {"type": "string"},
                    "apiVersion": {"type": "string"},
                    "metadata": {"type": "object"},
                    "status": {"type": "string", "description": "Failure"},
                    "message": {"type": "string", "description": "What is wrong, as a sentence."},
                    "reason": {"type": "string", "description": "BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed or InternalError."},
                    "code": {"type": "integer"},
                    "details": {"type": "object", "properties": {"name": {"type": "string"}, "group": {"type": "string"}, "kind": {"type": "string"}}},
                },
            },
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_v3_operation_declares_its_path_parameters_and_errors() {
        let doc = v3();
        let paths = doc["paths"].as_object().expect("paths");
        assert_eq!(paths.len(), 4);
        for (path, item) in paths {
            let names: Vec<&str> = item["get"]["parameters"].as_array().expect("parameters").iter().filter_map(|p| p["name"].as_str()).collect();
            for placeholder in ["namespace", "name"] {
                assert_eq!(path.contains(&format!("{{{placeholder}}}")), names.contains(&placeholder), "{path}: {names:?}");
            }
            for code in ["200", "401", "403"] {
                assert!(item["get"]["responses"].get(code).is_some(), "{path} does not declare {code}");
            }
        }
    }

    #[test]
    fn v2_keeps_upstreams_paths_and_only_describes_errors() {
        let doc = v2();
        let paths = doc["paths"].as_object().expect("paths");
        assert_eq!(paths.len(), 3, "no icon path in the merged v2 document");
        assert!(doc["definitions"].get(STATUS_DEF).is_none(), "a Status of ours would clash with kube-apiserver's");
        for item in paths.values() {
            assert!(item["get"]["responses"]["401"].get("schema").is_none());
        }
    }
}
