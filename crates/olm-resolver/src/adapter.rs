//! Conversion from `olm_catalog` catalogs to the resolver's view.

use olm_catalog::cel::CelRule;
use olm_catalog::model::{Catalog, Constraint, ConstraintKind, DeprecationReference, PackageRequired, PropertyKind};
use olm_catalog::quote::quoted;

use crate::model::{CatalogKey, CatalogSnapshot, Dependency, Deprecation, Entry, Gvk, Requirement};

fn gvk(g: &olm_catalog::Gvk) -> Gvk {
    Gvk::new(g.group.clone(), g.version.clone(), g.kind.clone())
}

fn package_requirement(p: &PackageRequired) -> Result<Requirement, String> {
    match &p.range {
        Some(range) => Ok(Requirement::Package { name: p.package_name.clone(), range: range.clone() }),
        None => Err(format!(
            "the required version range {:?} of package {} is not a valid range",
            p.version_range, p.package_name
        )),
    }
}

fn constraint_requirement(c: &Constraint) -> Result<Requirement, String> {
    let list = |items: &[Constraint]| items.iter().map(constraint_requirement).collect::<Result<Vec<_>, _>>();
    Ok(match &c.kind {
        ConstraintKind::Gvk(g) => Requirement::Gvk(gvk(g)),
        ConstraintKind::Package(p) => package_requirement(p)?,
        ConstraintKind::Cel { rule } => {
            let compiled = CelRule::compile(rule)
                .and_then(|r| r.check_supported().map(|()| r))
                .map_err(|e| format!("CEL rule {}: {e}", quoted(rule)))?;
            Requirement::Cel(compiled)
        }
        ConstraintKind::All(v) => Requirement::All(list(v)?),
        ConstraintKind::Any(v) => Requirement::Any(list(v)?),
        ConstraintKind::Not(v) => Requirement::Not(list(v)?),
    })
}

/// Every (bundle, channel) entry of a catalog, with its default-channel flag,
/// upgrade edges, provided and required APIs and dependencies.
pub fn snapshot(catalog: &Catalog, key: CatalogKey, priority: i32) -> CatalogSnapshot {
    let mut entries = Vec::new();
    let mut deprecations = Vec::new();
    for package in catalog.packages() {
        for d in &package.deprecations {
            let (scope, name) = match &d.reference {
                DeprecationReference::Package => ("olm.package", String::new()),
                DeprecationReference::Channel(c) => ("olm.channel", c.clone()),
                DeprecationReference::Bundle(b) => ("olm.bundle", b.clone()),
            };
            deprecations.push(Deprecation {
                scope: scope.to_string(),
                package: package.name.clone(),
                name,
                message: d.message.clone(),
            });
        }
        for channel in package.channels() {
            let is_default = channel.name == package.default_channel;
            for ce in channel.entries() {
                let Some(bundle) = package.bundle(&ce.name) else { continue };
                let mut entry = Entry {
                    name: ce.name.clone(),
                    package: package.name.clone(),
                    channel: channel.name.clone(),
                    default_channel: is_default,
                    replaces: ce.replaces.clone().filter(|r| !r.is_empty()),
                    skips: ce.skips.clone(),
                    skip_range: ce.skip_range_parsed.clone(),
                    version: Some(bundle.version.clone()),
                    deprecated: bundle.has_deprecated_property(),
                    install_modes: bundle.supported_install_modes().map(<[String]>::to_vec),
                    ..Entry::default()
                };
                let mut problems = Vec::new();
                for prop in &bundle.properties {
                    if !matches!(prop.kind, PropertyKind::BundleObject | PropertyKind::CsvMetadata) {
                        entry.properties.push((prop.type_name.clone(), prop.value_json.to_string()));
                    }
                    match &prop.kind {
                        PropertyKind::Gvk(g) => {
                            let g = gvk(g);
                            if !entry.provided_gvks.contains(&g) {
                                entry.provided_gvks.push(g);
                            }
                        }
                        PropertyKind::GvkRequired(g) => entry.dependencies.push(Dependency::new(Requirement::Gvk(gvk(g)))),
                        PropertyKind::PackageRequired(p) => match package_requirement(p) {
                            Ok(r) => entry.dependencies.push(Dependency::new(r)),
                            Err(e) => problems.push(e),
                        },
                        PropertyKind::Constraint(c) => match constraint_requirement(c) {
                            Ok(r) => entry
                                .dependencies
                                .push(Dependency { requirement: r, failure_message: c.failure_message.clone() }),
                            Err(e) => problems.push(e),
                        },
                        PropertyKind::Other if prop.type_name == "olm.label" || prop.type_name == "olm.label.required" => {
                            let label = serde_json::from_str::<serde_json::Value>(&prop.value_json.text())
                                .ok()
                                .and_then(|v| v.get("label").and_then(|l| l.as_str()).map(str::to_string));
                            match (label, prop.type_name.as_str()) {
                                (Some(l), "olm.label") => entry.labels.push(l),
                                (Some(l), _) => entry.dependencies.push(Dependency::new(Requirement::Label(l))),
                                (None, t) => problems.push(format!("property {t} has no \"label\" string")),
                            }
                        }
                        _ => {}
                    }
                }
                if !problems.is_empty() {
                    entry.invalid = Some(problems.join("; "));
                }
                entries.push(entry);
            }
        }
    }
    CatalogSnapshot { key, priority, entries, deprecations, left_out: Default::default() }
}

/// Load a catalog from disk in any format olm-catalog detects (FBC, package manifests,
/// bundle directories) and convert it. A file that cannot be read or parsed is an
/// error (the catalog is malformed); opm validation findings (a channel without a
/// unique head, a stranded entry, ...) are returned as warnings, because the resolver
/// reports them itself on the Subscriptions they affect.
pub fn load(
    path: &std::path::Path,
    key: CatalogKey,
    priority: i32,
) -> Result<(CatalogSnapshot, Vec<String>), olm_catalog::CatalogError> {
    let options = olm_catalog::RenderOptions { objects: olm_catalog::ObjectMode::CsvMetadata, image: None };
    let (_format, documents, load_problems) = olm_catalog::load_documents(path, &options)?;
    // A file that cannot be read refuses the catalog; a warning (a directory link not
    // followed) is said and takes nothing out.
    let (load_warnings, load_problems): (Vec<_>, Vec<_>) = load_problems.into_iter().partition(|p| p.warning);
    if !load_problems.is_empty() {
        return Err(olm_catalog::CatalogError::Invalid(load_problems));
    }
    let (snapshot, mut warnings) = from_documents(documents, key, priority);
    warnings.splice(0..0, load_warnings.iter().map(ToString::to_string));
    Ok((snapshot, warnings))
}

/// The resolver's snapshot of a catalog's documents (read from files or from the parsed form,
/// `olm_catalog::parsed`), and what is wrong with them, in words.
pub fn from_documents(documents: Vec<olm_catalog::model::Document>, key: CatalogKey, priority: i32) -> (CatalogSnapshot, Vec<String>) {
    let (catalog, problems) = Catalog::build(documents);
    // A local bundle directory has no image; that matters for installing, not resolving.
    let warnings = problems.iter().filter(|p| p.code != "MissingImage").map(ToString::to_string).collect();
    (snapshot(&catalog, key, priority), warnings)
}
