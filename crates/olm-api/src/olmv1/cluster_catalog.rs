//! `ClusterCatalog`, `olm.operatorframework.io/v1`: a File-Based Catalog image that OLM pulls,
//! unpacks and serves over its catalog HTTP API (catalogd's `/api/v1/all` and `/api/v1/metas`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cel;
use super::rules::*;
use crate::enums::closed_string_enum;

closed_string_enum! {
    /// The kind of source of a catalog; only images exist.
    pub enum SourceType {
        Image = "Image",
    }
}

closed_string_enum! {
    /// `spec.availabilityMode`: whether the catalog is served (`Available`, the default) or
    /// deliberately not (`Unavailable`: its content is removed from the server and from
    /// resolution, but the object stays).
    pub enum AvailabilityMode {
        Unavailable = "Unavailable",
        Available = "Available",
    }
}

impl Default for AvailabilityMode {
    fn default() -> Self {
        AvailabilityMode::Available
    }
}

/// The desired state of a ClusterCatalog.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// kube-derive takes one `printcolumn(...)` per column; clippy mistakes them for duplicates.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "olm.operatorframework.io",
    version = "v1",
    kind = "ClusterCatalog",
    plural = "clustercatalogs",
    status = "ClusterCatalogStatus",
    derive = "PartialEq",
    printcolumn(name = "LastUnpacked", type_ = "date", json_path = ".status.lastUnpacked"),
    printcolumn(name = "Serving", type_ = "string", json_path = r#".status.conditions[?(@.type=="Serving")].status"#),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    doc = "A File-Based Catalog made available to the cluster: pulled from an image and served over HTTP."
)]
pub struct ClusterCatalogSpec {
    /// Where the catalog's content comes from.
    pub source: CatalogSource,
    /// A tie-breaker between catalogs that offer the same package: higher wins. Default 0.
    #[serde(default)]
    #[schemars(schema_with = "priority")]
    pub priority: i32,
    /// `Unavailable` stops serving the content (and using it for installs) without deleting
    /// the ClusterCatalog.
    #[serde(default)]
    pub availability_mode: AvailabilityMode,
}

/// The source of a catalog: a discriminated union on `type`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[(
    "has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)",
    "image is required when source type is Image, and forbidden otherwise",
)])))]
pub struct CatalogSource {
    #[serde(rename = "type")]
    pub type_: SourceType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
}

/// A catalog image, polled for a new digest when given by tag.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[(
    r#"self.ref.find('(@.*:)') != "" ? !has(self.pollIntervalMinutes) : true"#,
    "cannot specify pollIntervalMinutes while using digest-based image",
)])))]
pub struct ImageSource {
    /// A tag or digest reference, for example `quay.io/operatorhubio/catalog:latest`.
    #[serde(rename = "ref")]
    #[schemars(length(max = 1000), extend("x-kubernetes-validations" = cel(&[
        (IMAGE_DOMAIN, IMAGE_DOMAIN_MESSAGE),
        (IMAGE_NAME, IMAGE_NAME_MESSAGE),
        (IMAGE_DIGEST_OR_TAG, "must end with a digest or a tag"),
        (IMAGE_TAG_LENGTH, "tag is invalid. the tag must not be more than 127 characters"),
        (IMAGE_TAG_CHARACTERS, IMAGE_TAG_CHARACTERS_MESSAGE),
        (IMAGE_DIGEST_ALGORITHM, IMAGE_DIGEST_ALGORITHM_MESSAGE),
        (IMAGE_DIGEST_LENGTH, "digest is not valid. the encoded string must be at least 32 characters"),
        (IMAGE_DIGEST_HEX, "digest is not valid. the encoded string must only contain hex characters (A-F, a-f, 0-9)"),
    ])))]
    pub reference: String,
    /// How often, in minutes, a tag is checked for a new digest. Not allowed with a digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "poll_interval_minutes")]
    pub poll_interval_minutes: Option<i64>,
}

/// The observed state of a ClusterCatalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCatalogStatus {
    /// `Serving` (Available, Unavailable, UserSpecifiedUnavailable) and `Progressing`
    /// (Succeeded, Retrying, Blocked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Condition>,
    /// The digest the content being served was unpacked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<ResolvedCatalogSource>,
    /// Where the content is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<CatalogUrls>,
    /// When the content being served was unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unpacked: Option<Time>,
}

/// The source as resolved: an image by digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = cel(&[(
    "has(self.type) && self.type == 'Image' ? has(self.image) : !has(self.image)",
    "image is required when source type is Image, and forbidden otherwise",
)])))]
pub struct ResolvedCatalogSource {
    #[serde(rename = "type")]
    pub type_: SourceType,
    pub image: ResolvedImageSource,
}

/// An image resolved to its digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ResolvedImageSource {
    /// `registry/repository@sha256:…`.
    #[serde(rename = "ref")]
    #[schemars(length(max = 1000), extend("x-kubernetes-validations" = cel(&[
        (IMAGE_DOMAIN, IMAGE_DOMAIN_MESSAGE),
        (IMAGE_NAME, IMAGE_NAME_MESSAGE),
        (IMAGE_DIGEST, "must end with a digest"),
        (IMAGE_DIGEST_ALGORITHM, IMAGE_DIGEST_ALGORITHM_MESSAGE),
        (IMAGE_DIGEST_LENGTH, "digest is not valid. the encoded string must be at least 32 characters"),
        (IMAGE_DIGEST_HEX, "digest is not valid. the encoded string must only contain hex characters (A-F, a-f, 0-9)"),
    ])))]
    pub reference: String,
}

/// Where a catalog's content is served.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct CatalogUrls {
    /// The base URL: `<base>/api/v1/all` and `<base>/api/v1/metas` answer.
    #[schemars(length(max = 525), extend("x-kubernetes-validations" = cel(&[
        ("isURL(self)", "must be a valid URL"),
        (r#"isURL(self) ? (url(self).getScheme() == "http" || url(self).getScheme() == "https") : true"#, "scheme must be either http or https"),
    ])))]
    pub base: String,
}

impl ClusterCatalog {
    /// The image reference of the spec, when the source is an image.
    pub fn image(&self) -> Option<&ImageSource> {
        self.spec.source.image.as_ref()
    }

    /// The conditions of the status, empty when none.
    pub fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| s.conditions.as_slice())
    }
}
