//! operator-registry's `api.Registry` (and `api.ExperimentalRegistry`) over one catalog.
//!
//! Upstream serves one catalog per gRPC server, so each catalog gets its own server.
//! Errors reproduce upstream's: the query layer returns plain errors, which grpc-go
//! sends as status UNKNOWN with the message; clients match on "error or not", and a
//! few tools on the message, so both code and text are kept.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use olm_catalog::quote::quoted;
use olm_catalog::{Catalog, Gvk};
use tonic::{Request, Response, Status};

use olm_registry_api::convert;
use crate::metrics::Metrics;
use olm_registry_api::pb;
use crate::store::{CatalogSnapshot, ServedCatalog};

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The Registry service of one served catalog.
#[derive(Debug, Clone)]
pub struct RegistryService {
    catalog: Arc<ServedCatalog>,
    metrics: Arc<Metrics>,
}

impl RegistryService {
    pub fn new(catalog: Arc<ServedCatalog>, metrics: Arc<Metrics>) -> RegistryService {
        RegistryService { catalog, metrics }
    }

    fn snapshot(&self) -> Result<Arc<CatalogSnapshot>, Status> {
        self.catalog.snapshot().ok_or_else(|| {
            let why = self.catalog.status().last_error.unwrap_or_else(|| "still loading".into());
            Status::unavailable(format!("catalog {:?} has no loaded snapshot yet: {why}", self.catalog.name))
        })
    }

    fn done<T>(&self, method: &str, result: Result<T, Status>) -> Result<T, Status> {
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        };
        self.metrics.observe_grpc(&self.catalog.name, method, code);
        result
    }
}

/// Upstream's errors are plain Go errors: grpc-go reports them as UNKNOWN.
fn query_error(message: String) -> Status {
    Status::new(tonic::Code::Unknown, message)
}

fn stream_of<T: Send + 'static>(items: Vec<T>) -> ResponseStream<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

fn get_bundle(snapshot: &CatalogSnapshot, package: &str, channel: &str, name: &str) -> Result<pb::Bundle, String> {
    let catalog = &snapshot.catalog;
    let pkg = catalog.package(package).ok_or_else(|| format!("package {} not found", go_quote(package)))?;
    let ch = pkg
        .channel(channel)
        .ok_or_else(|| format!("package {}, channel {} not found", go_quote(package), go_quote(channel)))?;
    let not_found =
        || format!("package {}, channel {}, bundle {} not found", go_quote(package), go_quote(channel), go_quote(name));
    let entry = ch.entry(name).ok_or_else(not_found)?;
    let bundle = pkg.bundle(name).ok_or_else(not_found)?;
    let content = snapshot.bundle_contents.get_or_build(pkg, bundle);
    Ok(convert::trim(convert::api_bundle_from(&ch.name, Some(entry), bundle, &content)))
}

fn channel_entry(package: &str, channel: &str, bundle: &str, replaces: &str) -> pb::ChannelEntry {
    pb::ChannelEntry {
        package_name: package.to_string(),
        channel_name: channel.to_string(),
        bundle_name: bundle.to_string(),
        replaces: replaces.to_string(),
    }
}

fn provides(catalog: &Catalog, package: &str, bundle: &str, gvk: &Gvk) -> bool {
    catalog.bundle(package, bundle).is_some_and(|b| b.provided_gvks().any(|g| g == gvk))
}

/// Entries for a bundle that provides an API: itself (with its replaces) plus one per
/// skipped name other than its replaces; `only_in_channel` limits skips to channel members.
fn provider_entries(catalog: &Catalog, package: &str, channel: &olm_catalog::Channel, entry: &olm_catalog::ChannelEntry, only_in_channel: bool) -> Vec<pb::ChannelEntry> {
    let replaces = entry.replaces.as_deref().unwrap_or("");
    let mut out = vec![channel_entry(package, &channel.name, &entry.name, replaces)];
    for skip in &entry.skips {
        let in_channel = channel.entry(skip).is_some() && catalog.bundle(package, skip).is_some();
        if skip != replaces && (!only_in_channel || in_channel) {
            out.push(channel_entry(package, &channel.name, &entry.name, skip));
        }
    }
    out
}

fn latest_providers(catalog: &Catalog, gvk: &Gvk) -> Result<Vec<pb::ChannelEntry>, String> {
    let mut entries = Vec::new();
    for pkg in catalog.packages() {
        for ch in pkg.channels() {
            let Some(head) = ch.head() else { continue };
            if provides(catalog, &pkg.name, &head.name, gvk) {
                entries.extend(provider_entries(catalog, &pkg.name, ch, head, true));
            }
        }
    }
    if entries.is_empty() {
        return Err(no_providers(gvk));
    }
    Ok(entries)
}

fn no_providers(gvk: &Gvk) -> String {
    format!(
        "no channel entries found that provide group:{} version:{} kind:{}",
        go_quote(&gvk.group),
        go_quote(&gvk.version),
        go_quote(&gvk.kind)
    )
}

fn gvk_of(group: String, version: String, kind: String) -> Gvk {
    Gvk { group, version, kind }
}

#[tonic::async_trait]
impl pb::registry_server::Registry for RegistryService {
    type ListPackagesStream = ResponseStream<pb::PackageName>;
    type GetChannelEntriesThatReplaceStream = ResponseStream<pb::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = ResponseStream<pb::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = ResponseStream<pb::ChannelEntry>;
    type ListBundlesStream = ResponseStream<pb::Bundle>;

    async fn list_packages(&self, _: Request<pb::ListPackageRequest>) -> Result<Response<Self::ListPackagesStream>, Status> {
        let result = self.snapshot().map(|snap| {
            let names = snap.catalog.packages().iter().map(|p| pb::PackageName { name: p.name.clone() }).collect();
            let mut response = Response::new(stream_of(names));
            // Which packages are not in the listing, and why (opm's clients ignore it).
            let left_out = snap
                .left_out
                .iter()
                .map(|l| (l.package.clone(), l.problems.iter().take(3).map(ToString::to_string).collect()))
                .collect();
            olm_registry_api::left_out::insert(response.metadata_mut(), &left_out);
            response
        });
        self.done("ListPackages", result)
    }

    async fn get_package(&self, request: Request<pb::GetPackageRequest>) -> Result<Response<pb::Package>, Status> {
        let name = request.into_inner().name;
        let result = self.snapshot().and_then(|snap| {
            let pkg = snap.catalog.package(&name).ok_or_else(|| query_error(format!("package {} not found", go_quote(&name))))?;
            // channels() is sorted by name, as upstream sorts them.
            let channels = pkg
                .channels()
                .iter()
                .map(|ch| pb::Channel {
                    name: ch.name.clone(),
                    csv_name: ch.head().map(|h| h.name.clone()).unwrap_or_default(),
                    deprecation: ch.deprecation.as_ref().map(|m| pb::Deprecation { message: m.clone() }),
                })
                .collect();
            Ok(Response::new(pb::Package {
                name: pkg.name.clone(),
                channels,
                default_channel_name: pkg.default_channel.clone(),
                deprecation: pkg.deprecation.as_ref().map(|m| pb::Deprecation { message: m.clone() }),
            }))
        });
        self.done("GetPackage", result)
    }

    async fn get_bundle(&self, request: Request<pb::GetBundleRequest>) -> Result<Response<pb::Bundle>, Status> {
        let req = request.into_inner();
        let result = self.snapshot().and_then(|snap| {
            get_bundle(&snap, &req.pkg_name, &req.channel_name, &req.csv_name).map(Response::new).map_err(query_error)
        });
        self.done("GetBundle", result)
    }

    async fn get_bundle_for_channel(&self, request: Request<pb::GetBundleInChannelRequest>) -> Result<Response<pb::Bundle>, Status> {
        let req = request.into_inner();
        let result = self.snapshot().and_then(|snap| {
            let catalog = &snap.catalog;
            let pkg = catalog
                .package(&req.pkg_name)
                .ok_or_else(|| query_error(format!("package {} not found", go_quote(&req.pkg_name))))?;
            let ch = pkg.channel(&req.channel_name).ok_or_else(|| {
                query_error(format!("package {}, channel {} not found", go_quote(&req.pkg_name), go_quote(&req.channel_name)))
            })?;
            let head = ch.head().map(|h| h.name.clone()).unwrap_or_default();
            get_bundle(&snap, &pkg.name, &ch.name, &head).map(Response::new).map_err(query_error)
        });
        self.done("GetBundleForChannel", result)
    }

    async fn get_channel_entries_that_replace(&self, request: Request<pb::GetAllReplacementsRequest>) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let name = request.into_inner().csv_name;
        let result = self.snapshot().and_then(|snap| {
            let catalog = &snap.catalog;
            let mut entries = Vec::new();
            for pkg in catalog.packages() {
                for ch in pkg.channels() {
                    for e in ch.entries() {
                        if pkg.bundle(&e.name).is_none() {
                            continue;
                        }
                        let replaces = e.replaces.as_deref().unwrap_or("");
                        if replaces == name {
                            entries.push(channel_entry(&pkg.name, &ch.name, &e.name, replaces));
                        }
                        // Upstream reports a skip with the entry's own replaces value.
                        for s in &e.skips {
                            if *s == name && s != replaces {
                                entries.push(channel_entry(&pkg.name, &ch.name, &e.name, replaces));
                            }
                        }
                    }
                }
            }
            if entries.is_empty() {
                return Err(query_error(format!("no channel entries found that replace {name}")));
            }
            Ok(Response::new(stream_of(entries)))
        });
        self.done("GetChannelEntriesThatReplace", result)
    }

    async fn get_bundle_that_replaces(&self, request: Request<pb::GetReplacementRequest>) -> Result<Response<pb::Bundle>, Status> {
        let req = request.into_inner();
        let result = self.snapshot().and_then(|snap| {
            let catalog = &snap.catalog;
            let pkg = catalog.package(&req.pkg_name).ok_or_else(|| query_error(format!("package {} not found", req.pkg_name)))?;
            let ch = pkg.channel(&req.channel_name).ok_or_else(|| {
                query_error(format!("package {}, channel {} not found", go_quote(&req.pkg_name), go_quote(&req.channel_name)))
            })?;
            let found = ch.entries().iter().find(|e| {
                pkg.bundle(&e.name).is_some()
                    && (e.replaces.as_deref() == Some(req.csv_name.as_str()) || e.skips.contains(&req.csv_name))
            });
            match found {
                Some(e) => get_bundle(&snap, &pkg.name, &ch.name, &e.name).map(Response::new).map_err(query_error),
                None => Err(query_error(format!(
                    "no entry found for package {}, channel {}",
                    go_quote(&req.pkg_name),
                    go_quote(&req.channel_name)
                ))),
            }
        });
        self.done("GetBundleThatReplaces", result)
    }

    async fn get_channel_entries_that_provide(&self, request: Request<pb::GetAllProvidersRequest>) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let req = request.into_inner();
        let gvk = gvk_of(req.group, req.version, req.kind);
        let result = self.snapshot().and_then(|snap| {
            let catalog = &snap.catalog;
            let mut entries = Vec::new();
            for pkg in catalog.packages() {
                for ch in pkg.channels() {
                    for e in ch.entries() {
                        if provides(catalog, &pkg.name, &e.name, &gvk) {
                            entries.extend(provider_entries(catalog, &pkg.name, ch, e, false));
                        }
                    }
                }
            }
            if entries.is_empty() {
                return Err(query_error(no_providers(&gvk)));
            }
            Ok(Response::new(stream_of(entries)))
        });
        self.done("GetChannelEntriesThatProvide", result)
    }

    async fn get_latest_channel_entries_that_provide(&self, request: Request<pb::GetLatestProvidersRequest>) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let req = request.into_inner();
        let gvk = gvk_of(req.group, req.version, req.kind);
        let result = self.snapshot().and_then(|snap| {
            latest_providers(&snap.catalog, &gvk).map(|e| Response::new(stream_of(e))).map_err(query_error)
        });
        self.done("GetLatestChannelEntriesThatProvide", result)
    }

    async fn get_default_bundle_that_provides(&self, request: Request<pb::GetDefaultProviderRequest>) -> Result<Response<pb::Bundle>, Status> {
        let req = request.into_inner();
        let gvk = gvk_of(req.group, req.version, req.kind);
        let result = self.snapshot().and_then(|snap| {
            let catalog = &snap.catalog;
            let mut latest = latest_providers(catalog, &gvk).map_err(query_error)?;
            latest.sort_by(|a, b| a.package_name.cmp(&b.package_name));
            for entry in &latest {
                let Some(pkg) = catalog.package(&entry.package_name) else { continue };
                if entry.channel_name == pkg.default_channel {
                    return get_bundle(&snap, &entry.package_name, &entry.channel_name, &entry.bundle_name)
                        .map(Response::new)
                        .map_err(query_error);
                }
            }
            Err(query_error(format!(
                "no entry found that provides group:{} version:{} kind:{}",
                go_quote(&gvk.group),
                go_quote(&gvk.version),
                go_quote(&gvk.kind)
            )))
        });
        self.done("GetDefaultBundleThatProvides", result)
    }

    async fn list_bundles(&self, _: Request<pb::ListBundlesRequest>) -> Result<Response<Self::ListBundlesStream>, Status> {
        let result = self.snapshot().map(|snap| {
            // One message per (package, channel, bundle) membership, converted lazily so a
            // big catalog is never materialized as one Vec of messages.
            let mut slots = Vec::new();
            for (p, pkg) in snap.catalog.packages().iter().enumerate() {
                for (c, ch) in pkg.channels().iter().enumerate() {
                    for (e, entry) in ch.entries().iter().enumerate() {
                        if pkg.bundle(&entry.name).is_some() {
                            slots.push((p as u32, c as u32, e as u32));
                        }
                    }
                }
            }
            let stream = futures::stream::iter(slots).filter_map(move |(p, c, e)| {
                let pkg = &snap.catalog.packages()[p as usize];
                let ch = &pkg.channels()[c as usize];
                let entry = &ch.entries()[e as usize];
                // Content a listing carries is built once per snapshot, as for GetBundle
                // (while the cache's bound allows): a listing is asked for again and again.
                let item = pkg.bundle(&entry.name).map(|b| {
                    Ok(convert::listed_bundle(&ch.name, Some(entry), b, || snap.bundle_contents.get_or_build(pkg, b)))
                });
                futures::future::ready(item)
            });
            Response::new(Box::pin(stream) as ResponseStream<pb::Bundle>)
        });
        self.done("ListBundles", result)
    }
}

/// Header a caller must send as "true" to get answers from experimental RPCs.
const ACKNOWLEDGE_EXPERIMENTAL: &str = "x-acknowledge-experimental";

/// `api.ExperimentalRegistry`: custom-schema blobs of one catalog.
#[derive(Debug, Clone)]
pub struct ExperimentalService {
    catalog: Arc<ServedCatalog>,
}

impl ExperimentalService {
    pub fn new(catalog: Arc<ServedCatalog>) -> ExperimentalService {
        ExperimentalService { catalog }
    }
}

fn valid_key_component(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[tonic::async_trait]
impl pb::experimental_registry_server::ExperimentalRegistry for ExperimentalService {
    type ExperimentalListPackageCustomSchemasStream = ResponseStream<prost_types::Struct>;

    async fn experimental_list_package_custom_schemas(&self, request: Request<pb::ExperimentalListPackageCustomSchemasRequest>) -> Result<Response<Self::ExperimentalListPackageCustomSchemasStream>, Status> {
        // Callers that did not opt in see an empty stream, as upstream does.
        let acknowledged = request.metadata().get(ACKNOWLEDGE_EXPERIMENTAL).and_then(|v| v.to_str().ok()) == Some("true");
        if !acknowledged {
            return Ok(Response::new(stream_of(Vec::new())));
        }
        let req = request.into_inner();
        if req.schema.is_empty() {
            return Err(Status::invalid_argument("schema is required"));
        }
        if !valid_key_component(&req.schema) {
            return Err(Status::invalid_argument(format!("invalid schema {}: must match ^[a-zA-Z0-9][a-zA-Z0-9._-]*$", quoted(&req.schema))));
        }
        if !req.package_name.is_empty() && !valid_key_component(&req.package_name) {
            return Err(Status::invalid_argument(format!(
                "invalid packageName {}: must match ^[a-zA-Z0-9][a-zA-Z0-9._-]*$",
                quoted(&req.package_name)
            )));
        }
        let Some(snap) = self.catalog.snapshot() else {
            return Err(Status::unavailable(format!("catalog {:?} has no loaded snapshot yet", self.catalog.name)));
        };
        const OLM_SCHEMAS: [&str; 4] = ["olm.package", "olm.channel", "olm.bundle", "olm.deprecations"];
        if OLM_SCHEMAS.contains(&req.schema.as_str()) {
            return Ok(Response::new(stream_of(Vec::new())));
        }
        let filter = olm_catalog::MetaFilter {
            schema: Some(&req.schema),
            package: (!req.package_name.is_empty()).then_some(req.package_name.as_str()),
            name: None,
        };
        let mut out = Vec::new();
        for meta in snap.catalog.metas(filter) {
            match serde_json::from_str::<serde_json::Value>(&meta.blob.text()) {
                Ok(serde_json::Value::Object(map)) => out.push(to_struct(map)),
                _ => return Err(Status::internal(format!("stored blob of schema {:?} is not a JSON object", meta.schema))),
            }
        }
        Ok(Response::new(stream_of(out)))
    }
}

fn to_struct(map: serde_json::Map<String, serde_json::Value>) -> prost_types::Struct {
    prost_types::Struct { fields: map.into_iter().map(|(k, v)| (k, to_proto_value(v))).collect() }
}

fn to_proto_value(v: serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(items) => {
            Kind::ListValue(prost_types::ListValue { values: items.into_iter().map(to_proto_value).collect() })
        }
        serde_json::Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}
