//! Reading a catalog's content from its [`Location`]: the one dispatch over where a catalog's
//! content is, for the CatalogSource controller and the package server alike.
//!
//! What stays with each caller, because they differ on purpose: when to read (the controller
//! reads when the content's fingerprint changes or its poll interval or retry delay is over, and
//! keeps the content in the shared cache; the package server reads every catalog on its own
//! schedule, at most `--refresh` apart), reading the ConfigMap of a ConfigMap catalog (the
//! controller reads it before deciding whether to read, since its version is part of the
//! fingerprint, and makes the CatalogSource its owner; the package server reads it when it
//! reads), and what a pull secret that cannot be read means (the controller retries its
//! reconcile; the package server pulls anonymously, so it keeps serving).

use std::collections::BTreeMap;
use std::sync::Arc;

use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_resolver::CatalogKey;

use crate::image::{ImageAccess, ImageFetch, fetch_image};
use crate::location::{self, Location};
use crate::{CONNECT_TIMEOUT, CatalogContent, ClientError, configmap, grpc, http};

/// What a read gave.
#[derive(Debug)]
pub enum Read {
    /// Content read now.
    New(Box<CatalogContent>),
    /// The catalog image still has the digest of the content the caller had: that content.
    Unchanged(Arc<CatalogContent>),
}

impl Read {
    /// The content, new or not.
    pub fn into_content(self) -> Arc<CatalogContent> {
        match self {
            Read::New(content) => Arc::new(*content),
            Read::Unchanged(content) => content,
        }
    }
}

/// Read the content of `catalog` from `location` (from [`Location::of`]). A catalog server
/// (gRPC or HTTP) is listed whole, each of its answers within
/// [`FETCH_TIMEOUT`](crate::FETCH_TIMEOUT); a catalog image is pulled through `images`,
/// unless its tag still names the digest `loaded` was read from, which is then given back
/// ([`Read::Unchanged`]); a ConfigMap catalog is read from `configmap`, the data of its
/// ConfigMap as the caller read it (`None`: it does not exist). New content can pull bundle
/// images through `images`.
pub async fn read(
    catalog: &CatalogSource,
    location: &Location,
    images: &ImageAccess,
    configmap: Option<&BTreeMap<String, String>>,
    loaded: Option<&Arc<CatalogContent>>,
) -> Result<Read, ClientError> {
    let key = location::key(catalog);
    let priority = location::priority(catalog);
    let mut content = match location {
        Location::Grpc(_) | Location::Http(_) => list(location, key, priority).await?,
        Location::Image(image) => {
            let digest = loaded.and_then(|content| content.image_digest.as_deref());
            match fetch_image(images, image, key, priority, digest, &[]).await? {
                ImageFetch::Content(content) => content,
                ImageFetch::Unchanged { .. } => {
                    return loaded.cloned().map(Read::Unchanged).ok_or(ClientError::ContentLost);
                }
            }
        }
        Location::ConfigMap(name) => {
            let namespace = key.namespace.clone();
            let Some(data) = configmap else {
                return Err(ClientError::ConfigMapMissing { namespace, name: name.clone() });
            };
            configmap::content(key, priority, data)
                .map_err(|message| ClientError::ConfigMapContent { namespace, name: name.clone(), message })?
        }
    };
    content.images = Some(images.clone());
    Ok(Read::New(Box::new(content)))
}

/// The address a catalog server's errors name.
fn server_address(location: &Location) -> &str {
    match location {
        Location::Http(url) => http::base(url),
        other => other.as_str(),
    }
}

/// The whole listing of the catalog server at `location`.
async fn list(location: &Location, key: CatalogKey, priority: i32) -> Result<CatalogContent, ClientError> {
    match location {
        Location::Grpc(address) => grpc::list(address, key, priority).await,
        Location::Http(url) => http::list(url, key, priority).await,
        Location::Image(_) | Location::ConfigMap(_) => unreachable!("only a catalog server is listed"),
    }
}

/// Whether the catalog server at `location` still answers (a connection, not a read): the
/// cheap check between two reads, so a server that died is noticed within seconds. A catalog
/// image or ConfigMap has no server to ask: `Ok`.
pub async fn probe(location: &Location) -> Result<(), ClientError> {
    let work = async {
        match location {
            Location::Grpc(address) => grpc::probe(address).await,
            Location::Http(url) => http::probe(url).await,
            Location::Image(_) | Location::ConfigMap(_) => Ok(()),
        }
    };
    match tokio::time::timeout(2 * CONNECT_TIMEOUT, work).await {
        Ok(result) => result,
        Err(_) => Err(ClientError::Timeout { address: server_address(location).to_owned(), timeout: 2 * CONNECT_TIMEOUT }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::catalog_source::CatalogSourceSpec;

    fn catalog(spec: serde_json::Value) -> CatalogSource {
        let spec: CatalogSourceSpec = serde_json::from_value(spec).expect("spec");
        let mut c = CatalogSource::new("legacy", spec);
        c.metadata.namespace = Some("olm".into());
        c
    }

    /// An image client whose cache goes with the directory returned.
    fn images() -> (tempfile::TempDir, ImageAccess) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let client = olm_image::ImageClient::new(dir.path(), olm_image::RegistryConfig::default(), olm_image::Limits::default()).expect("client");
        (dir, ImageAccess { client: Arc::new(client), creds: olm_image::Credentials::anonymous() })
    }

    #[tokio::test]
    async fn a_configmap_catalog_is_read_from_its_data_or_says_what_is_wrong() {
        let c = catalog(serde_json::json!({"sourceType": "configmap", "configMap": "legacy", "priority": 3}));
        let location = Location::of(&c).expect("valid");
        let (_cache, access) = images();
        let data = BTreeMap::from([(
            configmap::PACKAGES_KEY.to_owned(),
            "- packageName: demo\n  channels:\n  - name: stable\n    currentCSV: demo.v1\n".to_owned(),
        ), (
            configmap::CSVS_KEY.to_owned(),
            "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {name: demo.v1}\n  spec: {version: 1.0.0}\n".to_owned(),
        )]);
        let Read::New(content) = read(&c, &location, &access, Some(&data), None).await.expect("read") else {
            panic!("new content expected");
        };
        assert_eq!((content.key.clone(), content.priority, content.counts()), (CatalogKey::new("legacy", "olm"), 3, (1, 1)));
        assert!(content.images.is_some() && content.location.is_none());

        let missing = read(&c, &location, &access, None, None).await.expect_err("no ConfigMap");
        assert_eq!(
            (missing.to_string().as_str(), missing.category()),
            ("ConfigMap olm/legacy (spec.configMap) does not exist", "ConfigMapError")
        );
        let empty = BTreeMap::new();
        let invalid = read(&c, &location, &access, Some(&empty), None).await.expect_err("no packages");
        assert_eq!(
            (invalid.to_string().as_str(), invalid.category()),
            ("ConfigMap olm/legacy: data.packages is missing or lists no package", "InvalidCatalogContent")
        );
    }

    #[tokio::test]
    async fn a_server_that_does_not_answer_is_unreachable_and_named_by_its_url() {
        // Nothing listens on port 1 of the loopback: refused at once.
        let c = catalog(serde_json::json!({"sourceType": "grpc", "address": "http://127.0.0.1:1/catalogs/c/"}));
        let location = Location::of(&c).expect("valid");
        let (_cache, access) = images();
        let err = read(&c, &location, &access, None, None).await.expect_err("nothing listens");
        assert_eq!(err.category(), "CatalogUnreachable");
        assert!(err.to_string().starts_with("cannot connect to catalog http://127.0.0.1:1/catalogs/c: "), "{err}");
        assert!(probe(&location).await.is_err());
        assert!(probe(&Location::ConfigMap("legacy".into())).await.is_ok(), "nothing to ask");
    }
}
