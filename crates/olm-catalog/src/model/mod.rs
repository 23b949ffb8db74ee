//! The catalog model: an immutable, indexed snapshot of packages, channels and
//! bundles, plus the raw FBC blobs it was built from.
//!
//! Build one with [`Catalog::build`] (lenient: always returns a catalog plus every
//! problem found) or [`Catalog::from_documents`] (strict: any problem is an error).
//! A `Catalog` is `Send + Sync` and never mutated after construction; share it as
//! `Arc<Catalog>`.
//!
//! Layers, each using only those above it: `json` helpers; `blob` texts; `property`
//! values; `meta` documents and blobs (and their canonical order); `catalog` the indexed
//! types (channel graphs from [`crate::graph`]); `parse` one document → one typed object;
//! `validate` opm's per-package rules; `assemble` documents → `Catalog` (`Catalog::build`
//! and `Catalog::from_documents` are defined there).

mod assemble;
mod blob;
mod catalog;
mod isolate;
mod json;
pub(crate) use json::json_kind;
mod meta;
mod parse;
mod property;
mod validate;

#[cfg(test)]
mod tests;

pub use blob::{Blob, JsonText};
pub use isolate::{Isolated, LeftOut};
pub use catalog::{
    Bundle, Catalog, Channel, ChannelEntry, DeprecationEntry, DeprecationReference, Icon, MetaFilter,
    Package, RelatedImage,
};
pub use meta::{Document, Meta, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE};
pub use property::{
    Constraint, ConstraintKind, Gvk, MAX_CONSTRAINT_BYTES, PROPERTY_BUNDLE_OBJECT, PROPERTY_CHANNEL,
    PROPERTY_CONSTRAINT, PROPERTY_CSV_METADATA, PROPERTY_DEPRECATED, PROPERTY_GVK, PROPERTY_GVK_REQUIRED,
    PROPERTY_PACKAGE, PROPERTY_PACKAGE_REQUIRED, PackageProperty, PackageRequired, Property, PropertyKind,
};

pub(crate) use assemble::{assemble as assemble_prepared, prepare as prepare_document};
pub(crate) use blob::Dictionaries;
pub(crate) use json::get_ci;
pub use json::is_csv as is_csv_object;
pub use parse::supported_install_modes;
