//! OLM catalogs: one model of packages, channels and bundles, loaders for the
//! three on-disk formats (File-Based Catalogs, legacy package manifests, bundle
//! directories), opm's validation rules, and rendering to FBC.
//!
//! No Kubernetes dependency: the resolver and the catalog server build on this.

pub mod canonical;
pub mod error;
mod ignore;
pub mod load;
pub mod model;
pub mod render;
pub mod source;
pub mod version;

pub use error::{CatalogError, Problem};
pub use model::{
    Bundle, Catalog, Channel, ChannelEntry, Constraint, ConstraintKind, DeprecationEntry,
    DeprecationReference, Document, Gvk, Icon, JsonText, Meta, MetaFilter, Package,
    PackageProperty, PackageRequired, Property, PropertyKind, RelatedImage,
};
pub use render::{ObjectMode, RenderOptions};
pub use source::{
    OutputFormat, SourceFormat, ValidationReport, detect_format, load_catalog,
    load_catalog_lenient, load_documents, validate,
};
pub use version::{RangeError, Version, VersionRange};
