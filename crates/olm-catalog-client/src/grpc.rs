//! operator-registry gRPC (`api.Registry`) client: the listing becomes FBC documents, so a
//! gRPC catalog goes through the same model and validation as a file-based one.

use std::collections::{BTreeMap, HashMap};

use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;
use olm_resolver::CatalogKey;
use serde_json::{Value, json};
use tonic::transport::{Channel, Endpoint};

use super::{CONNECT_TIMEOUT, CatalogContent, ClientError, FETCH_TIMEOUT, InlineManifests, Location, answer};

/// Messages bigger than this are refused (a CSV with a big icon is a few MB at most).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

async fn connect(address: &str) -> Result<RegistryClient<Channel>, ClientError> {
    let connect_error = |message: String| ClientError::Connect {
        address: address.to_owned(),
        message,
    };
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|err| connect_error(format!("not a valid host:port ({err})")))?
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(FETCH_TIMEOUT);
    let channel = endpoint.connect().await.map_err(|err| {
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(inner) = source {
            message = format!("{message}: {inner}");
            source = inner.source();
        }
        connect_error(message)
    })?;
    Ok(RegistryClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// A connection to the server (TCP and the HTTP/2 handshake), dropped at once.
pub(super) async fn probe(address: &str) -> Result<(), ClientError> {
    connect(address).await.map(drop)
}

fn call_error(address: &str, call: &str, status: tonic::Status) -> ClientError {
    use tonic::Code;
    let retryable = matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted | Code::Internal | Code::Unknown
    );
    if status.code() == Code::Unavailable {
        return ClientError::Connect {
            address: address.to_owned(),
            message: status.message().to_owned(),
        };
    }
    ClientError::Call {
        address: address.to_owned(),
        call: call.to_owned(),
        message: format!("{:?}: {}", status.code(), status.message()),
        retryable,
    }
}

/// The full listing of the catalog at `address`, each answer within [`FETCH_TIMEOUT`].
pub(super) async fn list(address: &str, key: CatalogKey, priority: i32) -> Result<CatalogContent, ClientError> {
    let mut client = answer(address, connect(address)).await?;
    let listed = answer(address, async {
        client.list_packages(pb::ListPackageRequest {}).await.map_err(|s| call_error(address, "ListPackages", s))
    })
    .await?;
    let left_out = olm_registry_api::left_out::read(listed.metadata());
    let mut names = listed.into_inner();
    let mut packages = Vec::new();
    while let Some(name) = answer(address, async { names.message().await.map_err(|s| call_error(address, "ListPackages", s)) }).await? {
        let request = pb::GetPackageRequest { name: name.name.clone() };
        let package = answer(address, async {
            client.get_package(request).await.map_err(|s| call_error(address, &format!("GetPackage {}", name.name), s))
        })
        .await?;
        packages.push(package.into_inner());
    }
    let mut stream = answer(address, async {
        client.list_bundles(pb::ListBundlesRequest {}).await.map_err(|s| call_error(address, "ListBundles", s))
    })
    .await?
    .into_inner();
    let mut bundles = Vec::new();
    while let Some(bundle) = answer(address, async { stream.message().await.map_err(|s| call_error(address, "ListBundles", s)) }).await? {
        bundles.push(bundle);
    }
    let (documents, inline) = documents(&packages, bundles);
    let mut content = CatalogContent::from_documents(key, priority, documents, Some(Location::Grpc(address.to_owned())), inline)
        .map_err(|message| ClientError::Invalid {
            address: address.to_owned(),
            message,
        })?;
    content.add_left_out(left_out);
    Ok(content)
}

/// One bundle with its CSV and objects.
pub(super) async fn get_bundle(address: &str, package: &str, channel: &str, name: &str) -> Result<pb::Bundle, ClientError> {
    let mut client = connect(address).await?;
    let request = pb::GetBundleRequest {
        pkg_name: package.to_owned(),
        channel_name: channel.to_owned(),
        csv_name: name.to_owned(),
    };
    match client.get_bundle(request).await {
        Ok(answer) => Ok(answer.into_inner()),
        Err(status) if status.code() == tonic::Code::NotFound => Err(ClientError::BundleNotFound {
            catalog: address.to_owned(),
            package: package.to_owned(),
            bundle: name.to_owned(),
        }),
        Err(status) => Err(call_error(address, &format!("GetBundle {name}"), status)),
    }
}

fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// FBC documents for the listing, and the manifests that came with it.
pub(super) fn documents(
    packages: &[pb::Package],
    bundles: Vec<pb::Bundle>,
) -> (Vec<olm_catalog::Document>, InlineManifests) {
    let mut docs = Vec::new();
    let mut inline = HashMap::new();
    let mut deprecations: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for package in packages {
        let mut doc = json!({"schema": "olm.package", "name": package.name});
        if !package.default_channel_name.is_empty() {
            doc["defaultChannel"] = json!(package.default_channel_name);
        }
        docs.push(doc);
        if let Some(d) = &package.deprecation {
            deprecations
                .entry(package.name.clone())
                .or_default()
                .push(json!({"reference": {"schema": "olm.package"}, "message": d.message}));
        }
        for channel in &package.channels {
            if let Some(d) = &channel.deprecation {
                deprecations
                    .entry(package.name.clone())
                    .or_default()
                    .push(json!({"reference": {"schema": "olm.channel", "name": channel.name}, "message": d.message}));
            }
        }
    }
    // Channel entries, per (package, channel), in listing order.
    let mut channels: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    let mut seen_bundles: BTreeMap<(String, String), ()> = BTreeMap::new();
    for bundle in bundles {
        let mut entry = json!({"name": bundle.csv_name});
        if !bundle.replaces.is_empty() {
            entry["replaces"] = json!(bundle.replaces);
        }
        if !bundle.skips.is_empty() {
            entry["skips"] = json!(bundle.skips);
        }
        if !bundle.skip_range.is_empty() {
            entry["skipRange"] = json!(bundle.skip_range);
        }
        channels
            .entry((bundle.package_name.clone(), bundle.channel_name.clone()))
            .or_default()
            .push(entry);
        let key = (bundle.package_name.clone(), bundle.csv_name.clone());
        if seen_bundles.insert(key, ()).is_some() {
            continue;
        }
        if let Some(d) = &bundle.deprecation {
            deprecations
                .entry(bundle.package_name.clone())
                .or_default()
                .push(json!({"reference": {"schema": "olm.bundle", "name": bundle.csv_name}, "message": d.message}));
        }
        let mut properties: Vec<Value> = bundle
            .properties
            .iter()
            .map(|p| json!({"type": p.r#type, "value": parse_value(&p.value)}))
            .collect();
        let has = |t: &str, props: &[Value]| props.iter().any(|p| p["type"] == t);
        if !has("olm.package", &properties) {
            properties.push(json!({"type": "olm.package", "value": {"packageName": bundle.package_name, "version": bundle.version}}));
        }
        // Old sqlite-based registries list APIs but no properties.
        if !has("olm.gvk", &properties) {
            for g in &bundle.provided_apis {
                properties.push(json!({"type": "olm.gvk", "value": {"group": g.group, "version": g.version, "kind": g.kind}}));
            }
        }
        if !has("olm.gvk.required", &properties) {
            for g in &bundle.required_apis {
                properties.push(json!({"type": "olm.gvk.required", "value": {"group": g.group, "version": g.version, "kind": g.kind}}));
            }
        }
        if !bundle.csv_json.is_empty() {
            inline.insert(bundle.csv_name.clone(), (bundle.csv_json.clone(), bundle.object.clone()));
        }
        docs.push(json!({
            "schema": "olm.bundle",
            "name": bundle.csv_name,
            "package": bundle.package_name,
            "image": bundle.bundle_path,
            "properties": properties,
        }));
    }
    for ((package, channel), entries) in channels {
        docs.push(json!({"schema": "olm.channel", "package": package, "name": channel, "entries": entries}));
    }
    for (package, entries) in deprecations {
        docs.push(json!({"schema": "olm.deprecations", "package": package, "entries": entries}));
    }
    let documents = docs
        .into_iter()
        .map(|value| olm_catalog::Document { value, source: None })
        .collect();
    (documents, inline)
}
