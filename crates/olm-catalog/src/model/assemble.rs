//! Turning documents into a [`Catalog`], checking opm's rules on the way.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::blob::Dictionaries;
use super::catalog::{Bundle, BundleAddr, Catalog, Channel, DeprecationEntry, DeprecationReference, Package};
use super::json::get_ci;
use super::meta::{Document, Meta, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE};
use super::parse::{dns1123_label_error, parse_bundle, parse_channel, parse_deprecations, parse_package};
use super::property::Gvk;
use super::validate::check_package;
use crate::error::{CatalogError, Problem};

struct PendingChannel {
    channel: Channel,
}

/// A document turned into its blob and typed object (the expensive, parallel
/// part of building); the JSON tree is dropped afterwards.
#[allow(clippy::large_enum_variant)] // transient, one per document
pub(crate) enum Prepared {
    Failed(Problem),
    Item { meta: Meta, item: Item },
}

pub(crate) enum Item {
    Package(Result<Package, Problem>),
    Channel(Result<(Channel, Vec<Problem>), Problem>),
    Bundle(Result<Bundle, Problem>),
    Deprecations(Result<Vec<DeprecationEntry>, Problem>),
    Other,
}

/// `doc` turned into its blob and typed object; a bundle's blob is compressed against the
/// first bundle of its package that `dictionaries` saw (documents of one file or package,
/// read in order).
pub(crate) fn prepare(doc: Document, dictionaries: &mut Dictionaries) -> Prepared {
    let src = doc.source.as_deref();
    let (meta, ranges, text) = match Meta::from_value_with_ranges(&doc.value, doc.source.clone(), Some(dictionaries)) {
        Ok(m) => m,
        Err(e) => return Prepared::Failed(Problem::new(e).file(src)),
    };
    let Value::Object(obj) = &doc.value else {
        return Prepared::Failed(Problem::new("document is not an object").file(src));
    };
    let item = match meta.schema.as_str() {
        SCHEMA_PACKAGE => Item::Package(
            parse_package(obj, &meta)
                .map_err(|e| Problem::new(e).file(src).package(&meta.name)),
        ),
        SCHEMA_CHANNEL => Item::Channel(parse_channel(obj, &meta).map_err(|e| {
            Problem::new(e)
                .file(src)
                .package(&meta.package)
                .channel(&meta.name)
        })),
        SCHEMA_BUNDLE => Item::Bundle(parse_bundle(obj, &meta, &text, &ranges).map_err(|e| {
            Problem::new(e)
                .file(src)
                .package(&meta.package)
                .bundle(&meta.name)
        })),
        SCHEMA_DEPRECATIONS => Item::Deprecations(
            parse_deprecations(obj)
                .map_err(|e| Problem::new(e).file(src).package(&meta.package)),
        ),
        _ => Item::Other, // custom schema: kept as a meta only
    };
    Prepared::Item { meta, item }
}

impl Catalog {
    /// Strict build: any problem is an error listing every problem.
    pub fn from_documents(documents: Vec<Document>) -> Result<Catalog, CatalogError> {
        let (catalog, problems) = Catalog::build(documents);
        if problems.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError::Invalid(problems))
        }
    }

    /// Lenient build: returns the catalog of everything usable and every problem
    /// (opm's validation rules) found on the way.
    pub fn build(documents: Vec<Document>) -> (Catalog, Vec<Problem>) {
        // The documents of each package are prepared in order, on one thread, so that its
        // bundles compress against each other (`Dictionaries`); packages run in parallel.
        let mut by_package: Vec<Vec<(usize, Document)>> = Vec::new();
        let mut group_of: HashMap<String, usize> = HashMap::new();
        for (i, doc) in documents.into_iter().enumerate() {
            let package = document_package(&doc.value).unwrap_or_default();
            let group = *group_of.entry(package).or_insert_with(|| {
                by_package.push(Vec::new());
                by_package.len() - 1
            });
            by_package[group].push((i, doc));
        }
        let groups = crate::parallel::parallel_map_owned(by_package, |docs| {
            let mut dictionaries = Dictionaries::default();
            docs.into_iter().map(|(i, doc)| (i, prepare(doc, &mut dictionaries))).collect::<Vec<_>>()
        });
        let mut prepared: Vec<(usize, Prepared)> = groups.into_iter().flatten().collect();
        prepared.sort_unstable_by_key(|(i, _)| *i);
        assemble(prepared.into_iter().map(|(_, p)| p).collect())
    }
}

/// The `package` field of a document (keys are matched case-insensitively, as opm does).
fn document_package(value: &Value) -> Option<String> {
    let Value::Object(map) = value else { return None };
    get_ci(map, "package").and_then(Value::as_str).map(str::to_owned)
}

pub(crate) fn assemble(prepared: Vec<Prepared>) -> (Catalog, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut metas: Vec<Meta> = Vec::with_capacity(prepared.len());
    let mut packages: BTreeMap<String, Package> = BTreeMap::new();
    let mut channels: Vec<PendingChannel> = Vec::new();
    let mut bundles: Vec<Bundle> = Vec::new();
    let mut deprecations: Vec<(String, Vec<DeprecationEntry>, Option<Arc<Path>>)> = Vec::new();
    // (package, bundle) of the olm.bundle blobs that could not be read.
    let mut refused: HashSet<(Option<String>, Option<String>)> = HashSet::new();

    for p in prepared {
        let (meta, item) = match p {
            Prepared::Failed(problem) => {
                problems.push(problem);
                continue;
            }
            Prepared::Item { meta, item } => (meta, item),
        };
        let src = meta.source.as_deref();
        match item {
            Item::Package(Ok(p)) => {
                if p.name.is_empty() {
                    problems.push(
                        Problem::new("olm.package has no name")
                            .file(src)
                            .fix("set \"name\""),
                    );
                } else if packages.contains_key(&p.name) {
                    problems.push(
                        Problem::new("duplicate olm.package")
                            .file(src)
                            .package(&p.name)
                            .code("DuplicatePackage")
                            .fix("keep exactly one olm.package per package name"),
                    );
                } else {
                    if let Some(err) = dns1123_label_error(&p.name) {
                        problems.push(
                            Problem::new(format!(
                                "package name is not a valid DNS-1123 label: {err}"
                            ))
                            .file(src)
                            .package(&p.name)
                            .code("InvalidPackageName")
                            .fix(
                                "use lowercase letters, digits and '-', at most 63 characters",
                            ),
                        );
                    }
                    packages.insert(p.name.clone(), p);
                }
            }
            Item::Channel(Ok((ch, mut ps))) => {
                problems.append(&mut ps);
                channels.push(PendingChannel { channel: ch });
            }
            Item::Bundle(Ok(b)) => bundles.push(b),
            Item::Deprecations(Ok(entries)) => {
                deprecations.push((meta.package.clone(), entries, meta.source.clone()))
            }
            Item::Bundle(Err(e)) => {
                refused.insert((e.package.clone(), e.bundle.clone()));
                problems.push(e);
            }
            Item::Package(Err(e)) | Item::Channel(Err(e)) | Item::Deprecations(Err(e)) => problems.push(e),
            Item::Other => {}
        }
        metas.push(meta);
    }

    // Channels into packages.
    for PendingChannel { channel } in channels {
        let src = channel.source.clone();
        let Some(pkg) = packages.get_mut(&channel.package) else {
            problems.push(
                Problem::new(if channel.package.is_empty() {
                    "channel has no package".to_string()
                } else {
                    "channel refers to a package that has no olm.package".to_string()
                })
                .code("UnknownPackage")
                .file(src.as_deref())
                .package(&channel.package)
                .channel(&channel.name)
                .fix(
                    "add an olm.package blob for the package or fix the channel's \"package\"",
                ),
            );
            continue;
        };
        if pkg.channel_index.contains_key(&channel.name) {
            problems.push(
                Problem::new("duplicate channel")
                    .code("DuplicateChannel")
                    .file(src.as_deref())
                    .package(&pkg.name)
                    .channel(&channel.name)
                    .fix("merge the entries into one olm.channel blob"),
            );
            continue;
        }
        pkg.channel_index
            .insert(channel.name.clone(), pkg.channels.len());
        pkg.channels.push(channel);
    }

    // Bundles into packages.
    for bundle in bundles {
        let src = bundle.source.clone();
        let Some(pkg) = packages.get_mut(&bundle.package) else {
            problems.push(
                Problem::new("bundle refers to a package that has no olm.package").code("UnknownPackage")
                    .file(src.as_deref())
                    .package(&bundle.package)
                    .bundle(&bundle.name)
                    .fix("add an olm.package blob for the package or fix the bundle's \"package\""),
            );
            continue;
        };
        if pkg.bundle_index.contains_key(&bundle.name) {
            problems.push(
                Problem::new("duplicate bundle")
                    .code("DuplicateBundle")
                    .file(src.as_deref())
                    .package(&pkg.name)
                    .bundle(&bundle.name)
                    .fix("remove one of the two olm.bundle blobs with this name"),
            );
            continue;
        }
        pkg.bundle_index
            .insert(bundle.name.clone(), pkg.bundles.len());
        pkg.bundles.push(bundle);
    }

    // Deprecations.
    let mut seen_deprecations: HashSet<String> = HashSet::new();
    for (package, entries, src) in deprecations {
        let Some(pkg) = packages.get_mut(&package) else {
            problems.push(
                Problem::new("olm.deprecations refers to a package that has no olm.package")
                    .file(src.as_deref())
                    .package(&package)
                    .fix("fix \"package\" or remove the blob"),
            );
            continue;
        };
        if !seen_deprecations.insert(package.clone()) {
            problems.push(
                Problem::new("more than one olm.deprecations blob")
                    .file(src.as_deref())
                    .package(&package)
                    .fix("merge them into one"),
            );
            continue;
        }
        let mut refs = HashSet::new();
        for entry in entries {
            if !refs.insert(entry.reference.clone()) {
                problems.push(
                    Problem::new(format!(
                        "duplicate deprecation reference {:?}",
                        entry.reference
                    ))
                    .file(src.as_deref())
                    .package(&package)
                    .fix("keep one entry per reference"),
                );
                continue;
            }
            match &entry.reference {
                DeprecationReference::Package => pkg.deprecation = Some(entry.message.clone()),
                DeprecationReference::Channel(c) => match pkg.channel_index.get(c) {
                    Some(&i) => pkg.channels[i].deprecation = Some(entry.message.clone()),
                    None => problems.push(
                        Problem::new("deprecation refers to a channel that does not exist")
                            .file(src.as_deref())
                            .package(&package)
                            .channel(c)
                            .fix("fix the reference name or remove the entry"),
                    ),
                },
                DeprecationReference::Bundle(b) => match pkg.bundle_index.get(b) {
                    Some(&i) => pkg.bundles[i].deprecation = Some(entry.message.clone()),
                    None => problems.push(
                        Problem::new(
                            "deprecation refers to a bundle that does not exist in the package",
                        )
                        .file(src.as_deref())
                        .package(&package)
                        .bundle(b)
                        .fix("fix the reference name or remove the entry"),
                    ),
                },
            }
            pkg.deprecations.push(entry);
        }
    }

    // Per-package checks, channel graphs, indexes.
    for pkg in packages.values_mut() {
        check_package(pkg, &mut problems);
    }
    // A refused bundle was said once, with its cause: its channel entries are not said
    // again as missing.
    problems.retain(|p| p.code != "MissingBundle" || !refused.contains(&(p.package.clone(), p.bundle.clone())));

    let packages: Vec<Package> = packages.into_values().collect();
    let package_index = packages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i))
        .collect();
    let mut bundles_by_name: HashMap<String, Vec<BundleAddr>> = HashMap::new();
    let mut providers: HashMap<Gvk, Vec<BundleAddr>> = HashMap::new();
    for (pi, pkg) in packages.iter().enumerate() {
        for (bi, b) in pkg.bundles.iter().enumerate() {
            let addr = BundleAddr {
                package: pi as u32,
                bundle: bi as u32,
            };
            bundles_by_name
                .entry(b.name.clone())
                .or_default()
                .push(addr);
            let mut seen = HashSet::new();
            for gvk in b.provided_gvks() {
                if seen.insert(gvk) {
                    providers.entry(gvk.clone()).or_default().push(addr);
                }
            }
        }
    }

    let mut metas_by_package: HashMap<String, Vec<u32>> = HashMap::new();
    for (i, m) in metas.iter().enumerate() {
        if !m.package.is_empty() {
            metas_by_package
                .entry(m.package.clone())
                .or_default()
                .push(i as u32);
        }
    }

    let catalog = Catalog {
        packages,
        package_index,
        metas,
        metas_by_package,
        bundles_by_name,
        providers,
    };
    (catalog, problems)
}
