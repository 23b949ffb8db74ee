//! OLM catalogs: one model of packages, channels and bundles, loaders for the
//! three on-disk formats (File-Based Catalogs, legacy package manifests, bundle
//! directories), opm's validation rules, and rendering to FBC.
//!
//! No Kubernetes dependency: the resolver and the catalog server build on this.
//!
//! Entry points:
//! * [`load::load_fbc`] – a File-Based Catalog directory → `(Catalog, Vec<Problem>)`
//!   (streaming, parallel; what the server uses);
//! * [`load_catalog`] / [`load_catalog_lenient`] – any source (format auto-detected,
//!   see [`source`]);
//! * [`validate`] – opm's rules over any source, every problem collected;
//! * [`source::render_documents`] + [`source::render_to_string`] – `olm catalog render`;
//! * [`Catalog`] – the immutable indexed snapshot (packages → channels/bundles,
//!   bundles by name, providers of a GVK, raw blobs for catalogd endpoints);
//! * [`walk::Walker`] – how every loader lists catalog directories (links, FIFOs, limits);
//! * [`VersionRange`] – blang/semver ranges (`skipRange`, `olm.package.required`).

pub mod canonical;
pub mod constraint;
pub mod cel;
pub mod configmap;
pub mod error;
mod ignore;
pub mod graph;
pub mod load;
pub mod model;
pub mod parsed;
mod parallel;
pub mod quote;
pub mod render;
pub mod source;
pub mod version;
pub mod walk;
mod text;

pub use error::{CatalogError, Problem};
pub use graph::{ChannelGraph, EdgeKind, UpgradeEdges};
pub use model::{
    Isolated, LeftOut,
    Bundle, Catalog, Channel, ChannelEntry, Constraint, ConstraintKind, DeprecationEntry,
    Blob, DeprecationReference, Document, Gvk, Icon, JsonText, Meta, MetaFilter, Package,
    PackageProperty, PackageRequired, Property, PropertyKind, RelatedImage, is_csv_object, supported_install_modes,
};
pub use render::{ObjectMode, RenderOptions};
pub use source::{
    OutputFormat, SourceFormat, ValidationReport, detect_format, load_catalog,
    load_catalog_lenient, load_documents, validate,
};
pub use version::{RangeError, Version, VersionRange};
