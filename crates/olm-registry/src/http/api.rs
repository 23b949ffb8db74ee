//! Our own HTTP API: catalogs, packages (with their channels, heads and icons) and bundles,
//! as JSON views over the snapshots.

use super::*;

pub(super) async fn list_catalogs(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let catalogs: Vec<Value> = state
        .catalogs
        .iter()
        .map(|c| {
            let mut v = catalog_status(&c);
            if let Value::Object(map) = &mut v {
                map.insert("links".into(), catalog_links(&c.name));
            }
            v
        })
        .collect();
    hashed_json(&headers, &json!({"catalogs": catalogs}))
}

pub(super) fn catalog_links(name: &str) -> Value {
    json!({
        "packages": format!("/api/v1/catalogs/{name}/packages"),
        "all": format!("/catalogs/{name}/api/v1/all"),
        "metas": format!("/catalogs/{name}/api/v1/metas"),
    })
}

pub(super) async fn get_catalog(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    match state.catalogs.get(&name) {
        Some(c) => {
            let mut v = catalog_status(&c);
            if let Value::Object(map) = &mut v {
                map.insert("links".into(), catalog_links(&c.name));
            }
            hashed_json(&headers, &v)
        }
        None => unknown_catalog(&state, &name).into_response(),
    }
}

/// Head bundle of a package's default channel (else of its first channel) and its CSV.
pub(super) fn package_csv(pkg: &Package) -> Option<Value> {
    let bundle = pkg.default_head().or_else(|| {
        pkg.channels().iter().find_map(|c| c.head()).and_then(|h| pkg.bundle(&h.name))
    })?;
    convert::bundle_csv(pkg, bundle).map(|(csv, _)| csv)
}

pub(super) async fn list_packages(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let packages: Vec<Value> = snapshot
            .catalog
            .packages()
            .iter()
            .map(|pkg| {
                let csv = package_csv(pkg);
                let spec = csv.as_ref().and_then(|c| c.get("spec"));
                let mut out = Map::new();
                out.insert("name".into(), Value::String(pkg.name.clone()));
                out.insert(
                    "displayName".into(),
                    spec.and_then(|s| s.get("displayName")).cloned().unwrap_or_else(|| Value::String(String::new())),
                );
                out.insert("defaultChannel".into(), Value::String(pkg.default_channel.clone()));
                let head = pkg.default_channel().and_then(|c| c.head()).map(|h| h.name.clone());
                out.insert("currentCSV".into(), head.map(Value::String).unwrap_or(Value::Null));
                if let Some(b) = pkg.default_head() {
                    out.insert("version".into(), Value::String(convert::bundle_version(b)));
                }
                out.insert("provider".into(), spec.and_then(|s| s.get("provider")).cloned().unwrap_or_else(|| json!({})));
                out.insert("channels".into(), pkg.channels().iter().map(|c| Value::String(c.name.clone())).collect());
                if let Some(d) = &pkg.deprecation {
                    out.insert("deprecation".into(), json!({"message": d}));
                }
                out.insert("link".into(), Value::String(format!("/api/v1/catalogs/{name}/packages/{}", pkg.name)));
                Value::Object(out)
            })
            .collect();
        Ok(json!({"catalog": name, "packages": packages}))
    })
}

pub(super) async fn get_package(State(state): State<AppState>, Path((name, package)): Path<(String, String)>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let catalog = &snapshot.catalog;
        let pkg = catalog.package(&package).ok_or_else(|| unknown_package(&name, catalog, &package))?;
        Ok(package_manifest(&name, pkg))
    })
}

/// The package icon as an image (like packageserver's `icon` subresource): the
/// `olm.package` icon, else the first icon of the default channel head's CSV.
pub(super) async fn get_icon(State(state): State<AppState>, Path((name, package)): Path<(String, String)>, headers: HeaderMap, uri: Uri) -> Response {
    use base64::Engine as _;
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    let catalog = &snapshot.catalog;
    let Some(pkg) = catalog.package(&package) else {
        return unknown_package(&name, catalog, &package).into_response();
    };
    let icon = pkg.icon.as_ref().map(|i| (i.base64data.clone(), i.mediatype.clone())).or_else(|| {
        let csv = package_csv(pkg)?;
        let first = csv.pointer("/spec/icon/0")?;
        Some((first.get("base64data")?.as_str()?.to_string(), first.get("mediatype")?.as_str()?.to_string()))
    });
    let decoded = icon.and_then(|(data, media)| {
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD.decode(compact).ok().map(|bytes| (bytes, media))
    });
    let Some((bytes, media)) = decoded.filter(|(b, _)| !b.is_empty()) else {
        return ApiError::new(StatusCode::NOT_FOUND, format!("package {} in catalog {name:?} has no icon", quoted(&package)))
            .with("catalog", name.as_str())
            .with("package", package.as_str())
            .into_response();
    };
    let etag = snapshot_etag(&snapshot, &uri);
    if none_match(&headers, &etag) {
        return not_modified(&etag, Some(snapshot.loaded_at));
    }
    let mut resp = Response::new(Body::from(bytes));
    let media = if media.is_empty() { "application/octet-stream".to_string() } else { media };
    insert_header(&mut resp, header::CONTENT_TYPE, &media);
    insert_header(&mut resp, header::ETAG, &etag);
    resp
}

/// The PackageManifest-like view of a package: packageserver's `status` fields.
pub(super) fn package_manifest(catalog_name: &str, pkg: &Package) -> Value {
    let mut channels = Vec::new();
    let mut provider: Option<Value> = None;
    // Channels often share a head; its description (CRD descriptors can be megabytes)
    // is built once.
    let mut descriptions: HashMap<&str, Value> = HashMap::new();
    for ch in pkg.channels() {
        let head = ch.head().and_then(|h| pkg.bundle(&h.name));
        let description = match head {
            Some(b) => descriptions
                .entry(b.name.as_str())
                .or_insert_with(|| {
                    convert::bundle_csv(pkg, b).map(|(c, _)| convert::csv_description(&c, true)).unwrap_or_else(|| json!({}))
                })
                .clone(),
            None => json!({}),
        };
        if (ch.name == pkg.default_channel || provider.is_none())
            && let Some(p) = description.get("provider") {
                provider = Some(p.clone());
            }
        let mut entries: Vec<(&olm_catalog::Bundle, Value)> = ch
            .entries()
            .iter()
            .filter_map(|e| pkg.bundle(&e.name))
            .filter(|b| !b.has_deprecated_property())
            .map(|b| {
                let mut entry = Map::new();
                entry.insert("name".into(), Value::String(b.name.clone()));
                entry.insert("version".into(), Value::String(convert::bundle_version(b)));
                if let Some(d) = &b.deprecation {
                    entry.insert("deprecation".into(), json!({"message": d}));
                }
                (b, Value::Object(entry))
            })
            .collect();
        // Newest first, as packageserver lists them.
        entries.sort_by(|a, b| b.0.cmp_version(a.0));
        let mut out = Map::new();
        out.insert("name".into(), Value::String(ch.name.clone()));
        out.insert("currentCSV".into(), Value::String(ch.head().map(|h| h.name.clone()).unwrap_or_default()));
        out.insert("currentCSVDesc".into(), description);
        if let Some(d) = &ch.deprecation {
            out.insert("deprecation".into(), json!({"message": d}));
        }
        out.insert("entries".into(), Value::Array(entries.into_iter().map(|(_, v)| v).collect()));
        channels.push(Value::Object(out));
    }
    let mut out = Map::new();
    out.insert("name".into(), Value::String(pkg.name.clone()));
    out.insert("packageName".into(), Value::String(pkg.name.clone()));
    out.insert("catalog".into(), Value::String(catalog_name.to_string()));
    out.insert("defaultChannel".into(), Value::String(pkg.default_channel.clone()));
    out.insert("provider".into(), provider.unwrap_or_else(|| json!({})));
    if let Some(d) = &pkg.deprecation {
        out.insert("deprecation".into(), json!({"message": d}));
    }
    out.insert("channels".into(), Value::Array(channels));
    Value::Object(out)
}

pub(super) async fn get_bundle(
    State(state): State<AppState>,
    Path((name, bundle)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let snapshot = match served(&state, &name) {
        Ok((_, s)) => s,
        Err(e) => return e.into_response(),
    };
    catalog_json(&headers, &uri, &snapshot, || {
        let catalog = &snapshot.catalog;
        let wanted_package = query.get("package").filter(|p| !p.is_empty());
        if let Some(p) = wanted_package
            && catalog.package(p).is_none() {
                return Err(unknown_package(&name, catalog, p));
            }
        let matches: Vec<&olm_catalog::Bundle> =
            catalog.bundles_named(&bundle).filter(|b| wanted_package.is_none_or(|p| b.package == *p)).collect();
        match matches.as_slice() {
            [] => {
                let mut err = ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!(
                        "bundle {} not found in catalog {name:?}; bundle names are listed per channel at /api/v1/catalogs/{name}/packages/<package>",
                        quoted(&bundle)
                    ),
                )
                .with("catalog", name.as_str())
                .with("bundle", bundle.as_str());
                let close = suggestions(&bundle, catalog.bundles().map(|b| b.name.as_str()));
                if !close.is_empty() {
                    err = err.with("didYouMean", close);
                }
                Err(err)
            }
            [one] => {
                let pkg = catalog.package(&one.package).ok_or_else(|| unknown_package(&name, catalog, &one.package))?;
                Ok(bundle_view(pkg, one))
            }
            several => {
                let packages: Vec<&str> = several.iter().map(|b| b.package.as_str()).collect();
                Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("bundle name {} exists in several packages ({}); add ?package=<name>", quoted(&bundle), packages.join(", ")),
                )
                .with("packages", packages))
            }
        }
    })
}

/// A bundle with its channel memberships, properties and manifests.
pub(super) fn bundle_view(pkg: &Package, bundle: &olm_catalog::Bundle) -> Value {
    let channels: Vec<Value> = pkg
        .channels()
        .iter()
        .filter_map(|ch| ch.entry(&bundle.name).map(|e| (ch, e)))
        .map(|(ch, e)| {
            let mut out = Map::new();
            out.insert("name".into(), Value::String(ch.name.clone()));
            out.insert("head".into(), Value::Bool(ch.head().is_some_and(|h| h.name == bundle.name)));
            if let Some(r) = &e.replaces {
                out.insert("replaces".into(), Value::String(r.clone()));
            }
            if !e.skips.is_empty() {
                out.insert("skips".into(), e.skips.clone().into());
            }
            if let Some(r) = &e.skip_range {
                out.insert("skipRange".into(), Value::String(r.clone()));
            }
            Value::Object(out)
        })
        .collect();
    let properties: Vec<Value> = bundle.properties.iter().map(|p| p.to_json()).collect();
    let related: Vec<Value> = bundle.related_images.iter().map(|r| json!({"name": r.name, "image": r.image})).collect();
    let mut out = Map::new();
    out.insert("name".into(), Value::String(bundle.name.clone()));
    out.insert("package".into(), Value::String(bundle.package.clone()));
    out.insert("version".into(), Value::String(convert::bundle_version(bundle)));
    if let Some(r) = &bundle.release {
        out.insert("release".into(), Value::String(r.clone()));
    }
    out.insert("image".into(), Value::String(bundle.image.clone()));
    out.insert("channels".into(), Value::Array(channels));
    if let Some(d) = &bundle.deprecation {
        out.insert("deprecation".into(), json!({"message": d}));
    }
    out.insert("properties".into(), Value::Array(properties));
    out.insert("relatedImages".into(), Value::Array(related));
    match convert::bundle_csv(pkg, bundle) {
        Some((csv, synthesized)) => {
            out.insert("csv".into(), csv);
            out.insert("csvSynthesized".into(), Value::Bool(synthesized));
        }
        None => {
            out.insert("csv".into(), Value::Null);
        }
    }
    out.insert("objects".into(), Value::Array(bundle.objects()));
    Value::Object(out)
}
