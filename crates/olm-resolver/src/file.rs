//! The request file of `olm resolve`, and the answer in its JSON/YAML shape.
//!
//! ```yaml
//! namespace: operators
//! globalNamespace: olm            # optional, default olm
//! catalogs:                       # path: an FBC root, package manifests or bundle directories
//! - {name: community, namespace: olm, priority: 0, path: ./catalog}
//! installed:                      # catalogNamespace and version optional
//! - {package: etcd, bundle: etcdoperator.v0.9.0, catalog: community, catalogNamespace: olm, version: 0.9.0}
//! subscriptions:                  # channel, startingCSV and name optional
//! - {package: etcd, channel: singlenamespace-alpha, catalog: community, catalogNamespace: olm}
//! ```
//! Paths are relative to the request file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::index::Catalogs;
use crate::model::{CatalogKey, CatalogSnapshot, Version};
use crate::request::{Installed, Request, Resolution, Subscription};

/// Why a request file (or a catalog it names) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot read request file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("request file {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("request file {}: {field}: {message}", path.display())]
    Invalid { path: PathBuf, field: String, message: String },
    /// `field` is the request's `catalogs[i].path`, `path` what it names.
    #[error("{field} (catalog {name}, {}): {source}", path.display())]
    Catalog { field: String, name: String, path: PathBuf, source: olm_catalog::CatalogError },
}

impl RequestError {
    /// PascalCase category (metric label / Event reason).
    pub fn category(&self) -> &'static str {
        match self {
            RequestError::Read { .. } => "RequestUnreadable",
            RequestError::Parse { .. } => "RequestMalformed",
            RequestError::Invalid { .. } => "RequestInvalid",
            RequestError::Catalog { .. } => "CatalogInvalid",
        }
    }

    /// Only reading can succeed on retry without anyone editing a file.
    pub fn is_retryable(&self) -> bool {
        match self {
            RequestError::Read { .. } => true,
            RequestError::Catalog { source, .. } => source.is_retryable(),
            _ => false,
        }
    }
}

/// A YAML scalar we read as text (`version: 1.0` must not become a float).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RequestDoc {
    namespace: String,
    #[serde(default)]
    global_namespace: Option<String>,
    #[serde(default)]
    catalogs: Vec<CatalogDoc>,
    #[serde(default)]
    installed: Vec<InstalledDoc>,
    #[serde(default)]
    subscriptions: Vec<SubscriptionDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CatalogDoc {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    priority: i32,
    path: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InstalledDoc {
    package: String,
    bundle: String,
    #[serde(default)]
    catalog: Option<String>,
    #[serde(default)]
    catalog_namespace: Option<String>,
    #[serde(default)]
    version: Option<Scalar>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SubscriptionDoc {
    #[serde(default)]
    name: Option<String>,
    package: String,
    #[serde(default)]
    channel: Option<String>,
    catalog: String,
    #[serde(default)]
    catalog_namespace: Option<String>,
    #[serde(rename = "startingCSV", default)]
    starting_csv: Option<String>,
    #[serde(rename = "installedCSV", default)]
    installed_csv: Option<String>,
}

/// A request file read and its catalogs loaded.
#[derive(Debug)]
pub struct LoadedRequest {
    pub catalogs: Catalogs,
    pub request: Request,
    /// Catalog problems that did not stop loading (opm validation findings).
    pub warnings: Vec<String>,
}

/// How [`load_request_text`] loads the catalog a request names: its path (resolved against
/// the request file's directory), key and priority → the snapshot and its warnings.
pub type CatalogLoader<'a> =
    dyn FnMut(&Path, CatalogKey, i32) -> Result<(CatalogSnapshot, Vec<String>), olm_catalog::CatalogError> + 'a;

/// Read a request file and load every catalog it names.
pub fn load_request(path: &Path) -> Result<LoadedRequest, RequestError> {
    let text = std::fs::read_to_string(path).map_err(|source| RequestError::Read { path: path.to_path_buf(), source })?;
    load_request_text(path, &text, &mut crate::adapter::load)
}

/// [`load_request`] on the text of the request file at `path`, loading catalogs with
/// `load_catalog` (the fuzz target gives one that never touches the disk).
pub fn load_request_text(
    path: &Path,
    text: &str,
    load_catalog: &mut CatalogLoader<'_>,
) -> Result<LoadedRequest, RequestError> {
    let doc: RequestDoc = serde_saphyr::from_str(text)
        .map_err(|e| RequestError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
    let invalid = |field: String, message: String| RequestError::Invalid { path: path.to_path_buf(), field, message };
    if doc.namespace.trim().is_empty() {
        return Err(invalid("namespace".into(), "must name the namespace to resolve".into()));
    }
    let global = doc.global_namespace.clone().filter(|g| !g.is_empty()).unwrap_or_else(|| "olm".to_string());
    let base = path.parent().unwrap_or(Path::new("."));

    let mut catalogs = Catalogs::default();
    let mut warnings = Vec::new();
    let mut keys: Vec<CatalogKey> = Vec::new();
    for (i, c) in doc.catalogs.iter().enumerate() {
        if c.name.is_empty() {
            return Err(invalid(format!("catalogs[{i}].name"), "must not be empty".into()));
        }
        let key = CatalogKey::new(c.name.clone(), c.namespace.clone().unwrap_or_else(|| global.clone()));
        if keys.contains(&key) {
            return Err(invalid(
                format!("catalogs[{i}]"),
                format!("catalog {} in namespace {} is listed twice", key.name, key.namespace),
            ));
        }
        let cat_path = base.join(&c.path);
        let (snapshot, problems) = load_catalog(&cat_path, key.clone(), c.priority)
            .map_err(|source| RequestError::Catalog {
                field: format!("catalogs[{i}].path"),
                name: c.name.clone(),
                path: cat_path.clone(),
                source,
            })?;
        for p in problems {
            warnings.push(format!("catalog {} ({}): {p}", c.name, cat_path.display()));
        }
        keys.push(key);
        catalogs.push(snapshot);
    }

    // A catalog named without its namespace: the only catalog of that name, else the
    // namespace's own, else the global one.
    let catalog_ns = |name: &str, ns: &Option<String>| -> String {
        if let Some(ns) = ns.as_ref().filter(|n| !n.is_empty()) {
            return ns.clone();
        }
        let same: Vec<&CatalogKey> = keys.iter().filter(|k| k.name == name).collect();
        match same.as_slice() {
            [one] => one.namespace.clone(),
            _ if same.iter().any(|k| k.namespace == doc.namespace) => doc.namespace.clone(),
            _ => global.clone(),
        }
    };

    let mut request = Request::new(doc.namespace.clone());
    request.global_namespace = global.clone();
    for (i, inst) in doc.installed.iter().enumerate() {
        if inst.bundle.is_empty() {
            return Err(invalid(format!("installed[{i}].bundle"), "must name the installed CSV".into()));
        }
        let version = match &inst.version {
            None => None,
            Some(v) => {
                let text = v.text();
                Some(Version::parse(text.trim_start_matches('v')).map_err(|e| {
                    invalid(format!("installed[{i}].version"), format!("{text:?} is not a semver version: {e}"))
                })?)
            }
        };
        let key = inst.catalog.as_ref().map(|c| CatalogKey::new(c.clone(), catalog_ns(c, &inst.catalog_namespace)));
        request.installed.push(Installed::from_catalogs(&catalogs, &inst.bundle, &inst.package, key.as_ref(), version));
    }
    for (i, s) in doc.subscriptions.iter().enumerate() {
        if s.package.is_empty() {
            return Err(invalid(format!("subscriptions[{i}].package"), "must name a package".into()));
        }
        if s.catalog.is_empty() {
            return Err(invalid(format!("subscriptions[{i}].catalog"), "must name a catalog".into()));
        }
        let key = CatalogKey::new(s.catalog.clone(), catalog_ns(&s.catalog, &s.catalog_namespace));
        let mut sub = Subscription::new(s.package.clone(), key);
        if let Some(n) = s.name.as_ref().filter(|n| !n.is_empty()) {
            sub.name = n.clone();
        }
        sub.channel = s.channel.clone().filter(|c| !c.is_empty());
        sub.starting_csv = s.starting_csv.clone().filter(|c| !c.is_empty());
        sub.installed_csv = s.installed_csv.clone().filter(|c| !c.is_empty());
        if s.name.is_some() && doc.subscriptions[..i].iter().any(|o| o.name.as_ref() == Some(&sub.name)) {
            return Err(invalid(
                format!("subscriptions[{i}].name"),
                format!("two Subscriptions are named {:?}; give them distinct names", sub.name),
            ));
        }
        request.subscriptions.push(sub);
    }
    Ok(LoadedRequest { catalogs, request, warnings })
}

/// One bundle of the answer, in the JSON/YAML shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleOut {
    pub name: String,
    pub package: String,
    pub catalog: String,
    pub catalog_namespace: String,
    /// Empty when the bundle replaces nothing.
    pub replaces: String,
    pub reason: String,
}

/// One failed Subscription, in the JSON/YAML shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorOut {
    pub subscription: String,
    pub message: String,
}

/// The answer of `olm resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Output {
    pub bundles: Vec<BundleOut>,
    pub errors: Vec<ErrorOut>,
}

impl Output {
    pub fn from_resolution(r: &Resolution) -> Output {
        Output {
            bundles: r
                .bundles
                .iter()
                .map(|b| BundleOut {
                    name: b.name.clone(),
                    package: b.package.clone(),
                    catalog: b.catalog.name.clone(),
                    catalog_namespace: b.catalog.namespace.clone(),
                    replaces: b.replaces.clone().unwrap_or_default(),
                    reason: b.reason.as_str().to_string(),
                })
                .collect(),
            errors: r
                .errors
                .iter()
                .map(|e| ErrorOut { subscription: e.subscription.clone(), message: e.message.clone() })
                .collect(),
        }
    }
}
