//! The OpenAPI 3 description of the HTTP API, served at `/openapi.json`.
//!
//! It declares every answer the server gives, so a client generated from it, and the schema
//! fuzzing of fuzz/http/run.sh, meet no undeclared status or content type.

use serde_json::{Value, json};

fn param(name: &str, location: &str, description: &str, required: bool) -> Value {
    json!({"name": name, "in": location, "required": required, "description": description, "schema": {"type": "string"}})
}

/// `param` with an example value (a name in the repository's fixture catalog, so a tool that
/// tries the examples reaches real content).
fn param_eg(name: &str, location: &str, description: &str, required: bool, example: &str) -> Value {
    let mut p = param(name, location, description, required);
    p["example"] = json!(example);
    p
}

/// DNS-1123 subdomain, as `catalogd::dns1123_subdomain_error` checks it (no per-label length
/// limit: Kubernetes' subdomain rule has none either).
pub(crate) const DNS1123_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn json_ok(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "headers": {
            "ETag": {"description": "Strong validator; send it back in If-None-Match to get 304 Not Modified", "schema": {"type": "string"}}
        },
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
    })
}

/// Answers any operation can give, from the middleware in front of every route.
fn add_common_responses(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for operation in paths.values_mut().filter_map(|p| p.get_mut("get")) {
        if let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) {
            responses.insert("408".into(), json!({"description": "The answer took longer than the server's request timeout (--request-timeout)"}));
            responses.insert("413".into(), json!({"description": "The request carried a body larger than 64 KiB; every endpoint is a GET without one"}));
        }
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut doc = without_common_responses();
    add_common_responses(&mut doc);
    doc
}

fn without_common_responses() -> Value {
    let catalog = param_eg("catalog", "path", "Catalog name, as given to `--catalog NAME=DIR`", true, "community");
    // catalogd's endpoints refuse a name that is not a DNS-1123 subdomain (400).
    let mut catalogd_catalog = catalog.clone();
    catalogd_catalog["description"] = json!("Catalog name, as given to `--catalog NAME=DIR`: a DNS-1123 subdomain (lower case alphanumerics, '-' and '.', at most 253 characters)");
    catalogd_catalog["schema"] = json!({"type": "string", "minLength": 1, "maxLength": 253, "pattern": DNS1123_SUBDOMAIN});
    let if_none_match = json!({"name": "If-None-Match", "in": "header", "required": false, "description": "ETags of copies the client holds (or *): an unchanged answer is 304 Not Modified", "schema": {"type": "string"}});
    let conditional = json!([
        if_none_match.clone(),
        {"name": "If-Modified-Since", "in": "header", "required": false, "description": "HTTP date; honoured only without If-None-Match", "schema": {"type": "string"}}
    ]);
    let with_conditional = |mut params: Vec<Value>| -> Value {
        if let Value::Array(c) = conditional.clone() {
            params.extend(c);
        }
        Value::Array(params)
    };
    let jsonl = json!({
        "description": "Catalog blobs as JSON lines: one compact JSON object (keys sorted) per line, as catalogd serves them",
        "headers": {
            "ETag": {"schema": {"type": "string"}},
            "Last-Modified": {"description": "When the served snapshot was loaded", "schema": {"type": "string"}}
        },
        "content": {"application/jsonl": {"schema": {"type": "string"}}}
    });
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "olm catalog server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Catalog content over HTTP: catalogd-compatible endpoints under /catalogs/{catalog}/api/v1 and package/bundle views under /api/v1. Responses of 1 KiB or more are gzip-compressed when the client accepts gzip. The operator-registry gRPC API (api.Registry) is served on separate ports, one per catalog."
        },
        "paths": {
            "/catalogs/{catalog}/api/v1/all": {
                "get": {
                    "summary": "The whole catalog (catalogd compatible); HEAD is supported too",
                    "parameters": with_conditional(vec![catalogd_catalog.clone()]),
                    "responses": {
                        "200": jsonl.clone(),
                        "304": {"description": "Not modified"},
                        "400": error_response("The catalog name is not a DNS-1123 subdomain"),
                        "404": error_response("Unknown catalog"),
                        "503": error_response("The catalog has not loaded yet")
                    }
                }
            },
            "/catalogs/{catalog}/api/v1/metas": {
                "get": {
                    "summary": "Catalog blobs filtered by schema, package and name (catalogd compatible). `package` matches the blob's package field, so it does not return the olm.package blob itself; use schema=olm.package&name=<package> for that",
                    "parameters": with_conditional(vec![
                        catalogd_catalog,
                        param_eg("schema", "query", "Exact schema, e.g. olm.bundle; empty = any", false, "olm.channel"),
                        param_eg("package", "query", "Exact package field; empty = any", false, "etcd"),
                        param_eg("name", "query", "Exact name field; empty = any", false, "alpha")
                    ]),
                    "responses": {
                        "200": jsonl,
                        "304": {"description": "Not modified"},
                        "400": error_response("Unknown query parameter or invalid catalog name"),
                        "404": error_response("Unknown catalog"),
                        "503": error_response("The catalog has not loaded yet")
                    }
                }
            },
            "/api/v1/catalogs": {
                "get": {
                    "summary": "Served catalogs with their load status",
                    "parameters": [if_none_match.clone()],
                    "responses": {"200": json_ok("Catalogs", "CatalogList"), "304": {"description": "Not modified"}}
                }
            },
            "/api/v1/catalogs/{catalog}": {
                "get": {
                    "summary": "One catalog's load status",
                    "parameters": [catalog.clone(), if_none_match.clone()],
                    "responses": {
                        "200": json_ok("Catalog status", "CatalogStatus"),
                        "304": {"description": "Not modified"},
                        "404": error_response("Unknown catalog")
                    }
                }
            },
            "/api/v1/catalogs/{catalog}/packages": {
                "get": {
                    "summary": "Packages of a catalog",
                    "parameters": with_conditional(vec![catalog.clone()]),
                    "responses": {
                        "200": json_ok("Packages", "PackageList"),
                        "304": {"description": "Not modified"},
                        "404": error_response("Unknown catalog"),
                        "503": error_response("The catalog has not loaded yet")
                    }
                }
            },
            "/api/v1/catalogs/{catalog}/packages/{package}": {
                "get": {
                    "summary": "A package in the shape of a PackageManifest status: default channel, channels with their head CSV and its description, entries newest first",
                    "parameters": with_conditional(vec![catalog.clone(), param_eg("package", "path", "Package name", true, "etcd")]),
                    "responses": {
                        "200": json_ok("Package", "PackageManifest"),
                        "304": {"description": "Not modified"},
                        "404": error_response("Unknown catalog or package"),
                        "503": error_response("The catalog has not loaded yet")
                    }
                }
            },
            "/api/v1/catalogs/{catalog}/packages/{package}/icon": {
                "get": {
                    "summary": "The package icon as an image (the olm.package icon, else the default channel head's CSV icon)",
                    "parameters": [catalog.clone(), param_eg("package", "path", "Package name", true, "etcd"), if_none_match.clone()],
                    "responses": {
                        "200": {"description": "The image, with its media type", "content": {"image/*": {"schema": {"type": "string", "format": "binary"}}}},
                        "304": {"description": "Not modified"},
                        "404": error_response("Unknown catalog or package, or the package has no icon")
                    }
                }
            },
            "/api/v1/catalogs/{catalog}/bundles/{bundle}": {
                "get": {
                    "summary": "A bundle with its channel memberships, properties, CSV and other manifests",
                    "parameters": with_conditional(vec![
                        catalog,
                        param_eg("bundle", "path", "Bundle name (usually the CSV name)", true, "etcdoperator.v0.9.4"),
                        param_eg("package", "query", "Package, when the bundle name exists in several packages", false, "etcd")
                    ]),
                    "responses": {
                        "200": json_ok("Bundle", "Bundle"),
                        "304": {"description": "Not modified"},
                        "404": error_response("Unknown catalog, package or bundle"),
                        "409": error_response("The bundle name exists in several packages; add ?package="),
                        "503": error_response("The catalog has not loaded yet")
                    }
                }
            },
            "/healthz": {"get": {"summary": "Liveness: the process answers", "responses": {"200": {"description": "ok"}}}},
            "/readyz": {
                "get": {
                    "summary": "Readiness: every catalog has a loaded snapshot. The body lists each catalog with its last reload error",
                    "responses": {
                        "200": json_ok("Ready", "Readiness"),
                        "503": {"description": "Some catalog has no snapshot", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}}
                    }
                }
            },
            "/metrics": {"get": {"summary": "Prometheus metrics (OpenMetrics text)", "responses": {"200": {"description": "Metrics"}}}},
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "parameters": [if_none_match],
                    "responses": {"200": {"description": "OpenAPI 3 document", "content": {"application/json": {"schema": {"type": "object"}}}}, "304": {"description": "Not modified"}}
                }
            }
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {"type": "string", "description": "What was not found or is wrong, and where to look instead"},
                        "catalog": {"type": "string"},
                        "package": {"type": "string"},
                        "bundle": {"type": "string"},
                        "didYouMean": {"type": "array", "items": {"type": "string"}}
                    },
                    "additionalProperties": true
                },
                "CatalogStatus": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "directory": {"type": "string"},
                        "ready": {"type": "boolean"},
                        "packages": {"type": "integer"},
                        "channels": {"type": "integer"},
                        "bundles": {"type": "integer"},
                        "contentHash": {"type": "string"},
                        "loadedAt": {"type": "string"},
                        "loadMillis": {"type": "number"},
                        "lastSuccessfulReload": {"type": "string"},
                        "lastReloadError": {"type": "string", "nullable": true},
                        "lastReloadErrorAt": {"type": "string"},
                        "reloadErrors": {"type": "integer"},
                        "links": {"type": "object", "additionalProperties": {"type": "string"}}
                    }
                },
                "CatalogList": {
                    "type": "object",
                    "properties": {"catalogs": {"type": "array", "items": {"$ref": "#/components/schemas/CatalogStatus"}}}
                },
                "Readiness": {
                    "type": "object",
                    "properties": {
                        "ready": {"type": "boolean"},
                        "catalogs": {"type": "array", "items": {"$ref": "#/components/schemas/CatalogStatus"}}
                    }
                },
                "AppLink": {"type": "object", "properties": {"name": {"type": "string"}, "url": {"type": "string"}}},
                "Deprecation": {"type": "object", "properties": {"message": {"type": "string"}}},
                "PackageSummary": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "displayName": {"type": "string"},
                        "defaultChannel": {"type": "string"},
                        "currentCSV": {"type": "string", "nullable": true},
                        "version": {"type": "string"},
                        "provider": {"$ref": "#/components/schemas/AppLink"},
                        "channels": {"type": "array", "items": {"type": "string"}},
                        "deprecation": {"$ref": "#/components/schemas/Deprecation"},
                        "link": {"type": "string"}
                    }
                },
                "PackageList": {
                    "type": "object",
                    "properties": {
                        "catalog": {"type": "string"},
                        "packages": {"type": "array", "items": {"$ref": "#/components/schemas/PackageSummary"}}
                    }
                },
                "CSVDescription": {
                    "type": "object",
                    "description": "Fields of the channel head's ClusterServiceVersion, as in PackageManifest status",
                    "properties": {
                        "displayName": {"type": "string"},
                        "icon": {"type": "array", "items": {"type": "object", "properties": {"base64data": {"type": "string"}, "mediatype": {"type": "string"}}}},
                        "version": {"type": "string"},
                        "provider": {"$ref": "#/components/schemas/AppLink"},
                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                        "keywords": {"type": "array", "items": {"type": "string"}},
                        "links": {"type": "array", "items": {"$ref": "#/components/schemas/AppLink"}},
                        "maintainers": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}}},
                        "maturity": {"type": "string"},
                        "description": {"type": "string"},
                        "installModes": {"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"}, "supported": {"type": "boolean"}}}},
                        "customresourcedefinitions": {"type": "object"},
                        "apiservicedefinitions": {"type": "object"},
                        "nativeApis": {"type": "array", "items": {"type": "object"}},
                        "minKubeVersion": {"type": "string"},
                        "relatedImages": {"type": "array", "items": {"type": "string"}}
                    }
                },
                "PackageChannel": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "currentCSV": {"type": "string"},
                        "currentCSVDesc": {"$ref": "#/components/schemas/CSVDescription"},
                        "deprecation": {"$ref": "#/components/schemas/Deprecation"},
                        "entries": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"}, "version": {"type": "string"}, "deprecation": {"$ref": "#/components/schemas/Deprecation"}
                        }}}
                    }
                },
                "PackageManifest": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "packageName": {"type": "string"},
                        "catalog": {"type": "string"},
                        "defaultChannel": {"type": "string"},
                        "provider": {"$ref": "#/components/schemas/AppLink"},
                        "deprecation": {"$ref": "#/components/schemas/Deprecation"},
                        "channels": {"type": "array", "items": {"$ref": "#/components/schemas/PackageChannel"}}
                    }
                },
                "Bundle": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "package": {"type": "string"},
                        "version": {"type": "string"},
                        "release": {"type": "string"},
                        "image": {"type": "string"},
                        "channels": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"}, "head": {"type": "boolean"}, "replaces": {"type": "string"},
                            "skips": {"type": "array", "items": {"type": "string"}}, "skipRange": {"type": "string"}
                        }}},
                        "deprecation": {"$ref": "#/components/schemas/Deprecation"},
                        "properties": {"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"}, "value": {}}}},
                        "relatedImages": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "image": {"type": "string"}}}},
                        "csv": {"type": "object", "nullable": true, "description": "The ClusterServiceVersion (synthesized from olm.csv.metadata when the catalog does not inline it)"},
                        "csvSynthesized": {"type": "boolean"},
                        "objects": {"type": "array", "items": {"type": "object"}, "description": "Manifests inlined in the catalog"}
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operations(doc: &Value) -> Vec<(&String, &Value)> {
        doc["paths"].as_object().expect("paths").iter().map(|(path, item)| (path, &item["get"])).collect()
    }

    #[test]
    fn catalogd_catalog_names_are_constrained_as_the_server_checks_them() {
        let doc = document();
        for (path, op) in operations(&doc).into_iter().filter(|(p, _)| p.starts_with("/catalogs/")) {
            let catalog = op["parameters"].as_array().expect("parameters").iter().find(|p| p["name"] == "catalog").expect("catalog");
            assert_eq!(catalog["schema"]["pattern"], DNS1123_SUBDOMAIN, "{path}");
            assert_eq!(catalog["schema"]["maxLength"], 253, "{path}");
            assert!(op["responses"].get("400").is_some(), "{path}");
        }
    }

    #[test]
    fn every_answer_is_declared() {
        let doc = document();
        for (path, op) in operations(&doc) {
            let responses = &op["responses"];
            for code in ["408", "413"] {
                assert!(responses.get(code).is_some(), "{path} does not declare {code}");
            }
            let conditional = op["parameters"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == "If-None-Match"));
            assert_eq!(conditional, responses.get("304").is_some(), "{path}: If-None-Match and 304 go together");
            for param in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
                assert!(path.contains(&format!("{{{}}}", param["name"].as_str().unwrap_or_default())), "{path}: {param}");
            }
        }
    }
}
