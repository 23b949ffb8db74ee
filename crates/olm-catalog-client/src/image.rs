//! Catalogs and bundles that are images: a CatalogSource's `spec.image` is pulled and its
//! file-based catalog loaded in-process (no registry Pod), polled by digest; a bundle whose
//! manifests are not in its catalog (the catalog names only its `image`, as every published
//! catalog does) is pulled when an InstallPlan needs it. Credentials come from the
//! CatalogSource's pull secrets and its namespace's default ServiceAccount.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, ResourceExt};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_image::{Credentials, ImageClient, ImageError};
use olm_resolver::CatalogKey;

use crate::{CatalogContent, ClientError};

/// How a catalog reaches its images.
#[derive(Clone, Debug)]
pub struct ImageAccess {
    /// The shared client and cache.
    pub client: Arc<ImageClient>,
    /// The catalog's pull secrets, read.
    pub creds: Credentials,
}

/// What a catalog image poll found.
#[derive(Debug)]
pub enum ImageFetch {
    /// The tag still names the digest already loaded.
    Unchanged {
        /// That digest.
        digest: String,
    },
    /// New content.
    Content(CatalogContent),
}

/// A catalog's pull secrets, read.
#[derive(Clone, Debug, Default)]
pub struct PullSecrets {
    /// Credentials for its bundle images and its own image.
    pub creds: Credentials,
    /// A sentence for each secret that is missing or cannot be used.
    pub problems: Vec<String>,
    /// `name@resourceVersion` of each (a changed or newly created secret makes the content be
    /// read again at once).
    pub versions: String,
}

/// Read the pull secrets of a CatalogSource: those its `spec.secrets` names, then the
/// `imagePullSecrets` of the `default` ServiceAccount of its namespace (upstream's unpack Pods
/// run as that account, so the kubelet used them), all in its namespace. The first one listed
/// with credentials for a registry wins.
pub async fn pull_secrets(client: &kube::Client, catalog: &CatalogSource) -> Result<PullSecrets, (String, kube::Error)> {
    let namespace = catalog.namespace().unwrap_or_default();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let default_account = accounts
        .get_opt(DEFAULT_SERVICE_ACCOUNT)
        .await
        .map_err(|err| (format!("get ServiceAccount {namespace}/{DEFAULT_SERVICE_ACCOUNT}"), err))?;
    let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut versions = Vec::new();
    for (name, listed_in) in secret_names(catalog, default_account.as_ref()) {
        match api.get_opt(&name).await {
            Ok(Some(secret)) => {
                versions.push(format!("{name}@{}", secret.resource_version().unwrap_or_default()));
                found.push(secret);
            }
            Ok(None) => {
                versions.push(format!("{name}@missing"));
                problems.push(format!("pull secret {namespace}/{name} ({listed_in}) does not exist"));
            }
            Err(err) => return Err((format!("get Secret {namespace}/{name}"), err)),
        }
    }
    let (creds, unusable) = credentials_from_secrets(&namespace, &found);
    problems.extend(unusable);
    Ok(PullSecrets { creds, problems, versions: versions.join(",") })
}

/// The ServiceAccount whose `imagePullSecrets` a catalog's pulls also use.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The names of a catalog's pull secrets, in order, each with where it is listed; a name
/// listed twice is read once.
fn secret_names(catalog: &CatalogSource, default_account: Option<&ServiceAccount>) -> Vec<(String, String)> {
    let from_spec = catalog.spec.secrets.iter().flatten().map(|n| (n.trim().to_owned(), "spec.secrets".to_owned()));
    let from_account = default_account
        .and_then(|sa| sa.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (r.name.trim().to_owned(), format!("imagePullSecrets of ServiceAccount {DEFAULT_SERVICE_ACCOUNT}")));
    let mut seen = std::collections::BTreeSet::new();
    from_spec
        .chain(from_account)
        .filter(|(name, _)| !name.is_empty() && seen.insert(name.clone()))
        .collect()
}

/// Credentials from pull secrets (`kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg`),
/// and a sentence for each secret that could not be used.
pub fn credentials_from_secrets(namespace: &str, secrets: &[Secret]) -> (Credentials, Vec<String>) {
    let mut creds = Credentials::anonymous();
    let mut problems = Vec::new();
    for secret in secrets {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let origin = format!("pull secret {namespace}/{name}");
        let data = secret.data.as_ref();
        let doc = data
            .and_then(|d| d.get(".dockerconfigjson").or_else(|| d.get(".dockercfg")))
            .map(|b| b.0.as_slice());
        match doc {
            Some(bytes) => match Credentials::parse_docker_config(&origin, bytes) {
                Ok(found) => creds.merge(found),
                Err(message) => problems.push(message),
            },
            None => problems.push(format!(
                "{origin} has no .dockerconfigjson: create it with `kubectl create secret docker-registry {name} --docker-server=REGISTRY --docker-username=USER --docker-password=PASSWORD -n {namespace}`"
            )),
        }
    }
    (creds, problems)
}

/// Read the catalog image `image` unless the tag still names `loaded_digest`. Problems whose
/// codes are in `tolerated` do not leave a package out (OLM v1 needs no `defaultChannel`).
pub async fn fetch_image(
    access: &ImageAccess,
    image: &str,
    key: CatalogKey,
    priority: i32,
    loaded_digest: Option<&str>,
    tolerated: &[&str],
) -> Result<ImageFetch, ClientError> {
    let wrap = |source: ImageError| ClientError::Image { what: format!("catalog image of {key}"), source };
    let digest = access.client.digest_of(image, &access.creds).await.map_err(wrap)?;
    if loaded_digest == Some(digest.as_str()) {
        return Ok(ImageFetch::Unchanged { digest });
    }
    let unpacked = access.client.catalog(image, &access.creds).await.map_err(wrap)?;
    let (root, parsed) = (unpacked.root.clone(), unpacked.parsed.clone());
    let loaded = tokio::task::spawn_blocking(move || {
        // The catalog already parsed when the image carries it (`olm catalog push`); the
        // YAML otherwise, or when that form cannot be read.
        match parsed.map(|path| olm_catalog::parsed::read_file(&path, &root)) {
            Some(Ok(documents)) => Ok((documents, Vec::new())),
            Some(Err(err)) => {
                tracing::warn!(error = %err, "the catalog image's parsed form cannot be read; parsing its /configs instead");
                olm_catalog::load::load_fbc_documents(&root)
            }
            None => olm_catalog::load::load_fbc_documents(&root),
        }
    })
        .await
        .map_err(|err| ClientError::Invalid { address: image.to_owned(), message: err.to_string() })?
        .map_err(|err| ClientError::Invalid { address: image.to_owned(), message: relative(&err.to_string(), &unpacked.root) })?;
    let (documents, problems) = loaded;
    // Name files as they are in the image (`configs/...`), not by the scratch directory.
    let documents = documents
        .into_iter()
        .map(|mut doc| {
            doc.source = doc.source.map(|p| Arc::from(Path::new(&relative(&p.display().to_string(), &unpacked.root))));
            doc
        })
        .collect();
    let mut content = CatalogContent::from_documents_tolerating(key, priority, documents, None, Default::default(), tolerated)
        .map_err(|message| ClientError::Invalid { address: image.to_owned(), message: relative(&message, &unpacked.root) })?;
    content.problems.extend(problems.iter().map(|p| relative(&p.to_string(), &unpacked.root)));
    content.image_digest = Some(unpacked.digest.clone());
    content.images = Some(access.clone());
    Ok(ImageFetch::Content(content))
}

fn relative(text: &str, root: &Path) -> String {
    text.replace(&format!("{}/", root.display()), "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_secrets_come_first_then_the_default_service_account_s_each_once() {
        let catalog: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"sourceType": "grpc", "image": "r/c:1", "secrets": ["spec-pull", " ", "shared"]}
        }))
        .unwrap();
        let account: ServiceAccount = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "default", "namespace": "ns"},
            "imagePullSecrets": [{"name": "shared"}, {"name": "account-pull"}]
        }))
        .unwrap();
        let names = secret_names(&catalog, Some(&account));
        let listed: Vec<(&str, &str)> = names.iter().map(|(n, w)| (n.as_str(), w.as_str())).collect();
        assert_eq!(
            listed,
            [
                ("spec-pull", "spec.secrets"),
                ("shared", "spec.secrets"),
                ("account-pull", "imagePullSecrets of ServiceAccount default"),
            ]
        );
        assert_eq!(secret_names(&catalog, None).len(), 2);
    }
}
