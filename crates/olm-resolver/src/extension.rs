//! OLM v1's choice of a bundle for a ClusterExtension, as operator-controller v1.11 makes it:
//! the package from the catalogs offered, the bundles in the channels asked for (all when
//! none) whose version satisfies the constraint, when something is installed and the policy is
//! `CatalogProvided` only the installed bundle or its successors in the channel graph
//! (`replaces`, `skips`, `olm.skipRange`), then not-deprecated before deprecated and the
//! highest version; the same bundle in several catalogs goes to the highest priority, and a
//! tie of priorities is refused. Pure: the controller gives it the ClusterCatalogs' content.

use std::cmp::Ordering;
use std::fmt;

use olm_catalog::constraint::Constraint;
use olm_catalog::{Bundle, Catalog, Package, Version};

/// One ClusterCatalog's content, as resolution sees it.
#[derive(Clone, Copy)]
pub struct Offer<'a> {
    pub catalog: &'a str,
    pub priority: i32,
    pub content: &'a Catalog,
}

/// Whether upgrades follow the catalog's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradePolicy {
    CatalogProvided,
    SelfCertified,
}

/// What the ClusterExtension asks for.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub package: &'a str,
    pub version: Option<&'a Constraint>,
    /// Empty: every channel.
    pub channels: &'a [String],
    pub policy: UpgradePolicy,
    /// The bundle installed now: (name, version).
    pub installed: Option<(&'a str, &'a Version)>,
}

/// The bundle chosen, and where from.
#[derive(Clone, Copy, Debug)]
pub struct Chosen<'a> {
    pub catalog: &'a str,
    pub package: &'a Package,
    pub bundle: &'a Bundle,
}

/// Why no bundle could be chosen, in words a person can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoBundle {
    /// No catalog offered has the package.
    NoPackage { package: String, catalogs: Vec<String> },
    /// The package is there, but no bundle passes the filters (upgrading: none the installed
    /// bundle may move to).
    NoneMatch { package: String, version: Option<String>, channels: Vec<String>, installed: Option<String>, highest: Option<String> },
    /// The best bundle is offered by several catalogs of the same priority.
    Ambiguous { package: String, bundle: String, catalogs: Vec<String>, priority: i32 },
}

impl fmt::Display for NoBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoBundle::NoPackage { package, catalogs } if catalogs.is_empty() => {
                write!(f, "no bundles found for package {package:?}: no ClusterCatalog is serving content (check their Serving condition and spec.source.catalog.selector)")
            }
            NoBundle::NoPackage { package, catalogs } => {
                write!(f, "no bundles found for package {package:?}: the catalogs {} do not have it; check spec.source.catalog.packageName", catalogs.join(", "))
            }
            NoBundle::NoneMatch { package, version, channels, installed, highest } => {
                if let Some(installed) = installed {
                    write!(f, "error upgrading from currently installed version {installed:?}: ")?;
                }
                write!(f, "no bundles found for package {package:?}")?;
                if let Some(version) = version {
                    write!(f, " matching version {version:?}")?;
                }
                if !channels.is_empty() {
                    write!(f, " in channels [{}]", channels.join(", "))?;
                }
                match (installed, highest) {
                    (Some(_), Some(highest)) => write!(f, " that the catalog lets it upgrade to (the newest it offers is {highest}; set upgradeConstraintPolicy: SelfCertified to go there anyway)"),
                    (None, Some(highest)) => write!(f, " (the newest it offers there is {highest})"),
                    _ => Ok(()),
                }
            }
            NoBundle::Ambiguous { package, bundle, catalogs, priority } => write!(
                f,
                "found bundles for package {package:?} in multiple catalogs with the same priority {priority}: {bundle} in {}; give one catalog a higher spec.priority or narrow spec.source.catalog.selector",
                catalogs.join(", ")
            ),
        }
    }
}

/// The bundle `request` gets from `offers`.
pub fn choose<'a>(offers: &[Offer<'a>], request: &Request<'_>) -> Result<Chosen<'a>, NoBundle> {
    let with_package: Vec<(&Offer<'a>, &'a Package)> = offers.iter().filter_map(|o| Some((o, o.content.package(request.package)?))).collect();
    if with_package.is_empty() {
        return Err(NoBundle::NoPackage { package: request.package.to_owned(), catalogs: offers.iter().map(|o| o.catalog.to_owned()).collect() });
    }
    let mut candidates: Vec<(&Offer<'a>, &'a Package, &'a Bundle)> = Vec::new();
    let mut highest: Option<&Bundle> = None;
    for (offer, package) in &with_package {
        for bundle in package.bundles() {
            if !in_channels(package, bundle, request.channels) {
                continue;
            }
            if highest.is_none_or(|h| bundle.version.cmp_precedence(&h.version) == Ordering::Greater) {
                highest = Some(bundle);
            }
            if request.version.is_some_and(|c| !c.matches(&bundle.version)) {
                continue;
            }
            if request.policy == UpgradePolicy::CatalogProvided
                && let Some((installed, version)) = request.installed
                && !(bundle.name == installed || is_successor(package, bundle, installed, version, request.channels))
            {
                continue;
            }
            candidates.push((offer, package, bundle));
        }
    }
    // Not deprecated first, then the highest version.
    let better = |a: &Bundle, b: &Bundle| b.deprecation.is_some().cmp(&a.deprecation.is_some()).then_with(|| a.version.cmp_precedence(&b.version));
    let Some(best) = candidates.iter().map(|c| c.2).max_by(|a, b| better(a, b)) else {
        return Err(NoBundle::NoneMatch {
            package: request.package.to_owned(),
            version: request.version.map(|c| c.as_str().to_owned()),
            channels: request.channels.to_vec(),
            installed: request.installed.map(|(_, v)| v.to_string()),
            highest: highest.map(|h| h.version.to_string()),
        });
    };
    let mut tied: Vec<&(&Offer<'a>, &'a Package, &'a Bundle)> =
        candidates.iter().filter(|c| better(c.2, best) == Ordering::Equal && c.2.name == best.name).collect();
    tied.sort_by(|a, b| b.0.priority.cmp(&a.0.priority).then_with(|| a.0.catalog.cmp(b.0.catalog)));
    let top = tied[0];
    let same: Vec<String> = tied.iter().filter(|c| c.0.priority == top.0.priority).map(|c| c.0.catalog.to_owned()).collect();
    if same.len() > 1 {
        return Err(NoBundle::Ambiguous { package: request.package.to_owned(), bundle: best.name.clone(), catalogs: same, priority: top.0.priority });
    }
    Ok(Chosen { catalog: top.0.catalog, package: top.1, bundle: top.2 })
}

/// Whether `bundle` is in one of `channels` (every bundle when none is named).
fn in_channels(package: &Package, bundle: &Bundle, channels: &[String]) -> bool {
    channels.is_empty() || channels.iter().any(|c| package.channel(c).is_some_and(|ch| ch.entry(&bundle.name).is_some()))
}

/// Whether the channel graph lets `installed` move to `bundle` in one step.
fn is_successor(package: &Package, bundle: &Bundle, installed: &str, version: &Version, channels: &[String]) -> bool {
    package
        .channels()
        .iter()
        .filter(|ch| channels.is_empty() || channels.contains(&ch.name))
        .any(|ch| ch.successors(installed, Some(version)).iter().any(|e| e.name == bundle.name))
}

#[cfg(test)]
mod tests;
