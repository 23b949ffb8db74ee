//! The OpenAPI 3 description of the HTTP API, served at `/openapi.json`.

use serde_json::{Value, json};

fn param(name: &str, location: &str, description: &str, required: bool) -> Value {
    json!({"name": name, "in": location, "required": required, "description": description, "schema": {"type": "string"}})
}

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

/// The whole document.
pub fn document() -> Value {
    let catalog = param("catalog", "path", "Catalog name, as given to `--catalog NAME=DIR`", true);
    let conditional = json!([
        {"name": "If-None-Match", "in": "header", "required": false, "schema": {"type": "string"}},
        {"name": "If-Modified-Since", "in": "header", "required": false, "schema": {"type": "string"}}
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
                    "parameters": with_conditional(vec![catalog.clone()]),
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
                        catalog.clone(),
                        param("schema", "query", "Exact schema, e.g. olm.bundle; empty = any", false),
                        param("package", "query", "Exact package field; empty = any", false),
                        param("name", "query", "Exact name field; empty = any", false)
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
                    "responses": {"200": json_ok("Catalogs", "CatalogList"), "304": {"description": "Not modified"}}
                }
            },
            "/api/v1/catalogs/{catalog}": {
                "get": {
                    "summary": "One catalog's load status",
                    "parameters": [catalog.clone()],
                    "responses": {"200": json_ok("Catalog status", "CatalogStatus"), "404": error_response("Unknown catalog")}
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
                    "parameters": with_conditional(vec![catalog.clone(), param("package", "path", "Package name", true)]),
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
                    "parameters": [catalog.clone(), param("package", "path", "Package name", true)],
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
                        param("bundle", "path", "Bundle name (usually the CSV name)", true),
                        param("package", "query", "Package, when the bundle name exists in several packages", false)
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
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3 document"}}}}
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
