//! What a resolution is asked to do, and what it answers.

use serde::Serialize;

use crate::index::Catalogs;
use crate::model::{CatalogKey, Entry, Version};

/// An operator already present in the namespace (a non-copied CSV).
#[derive(Debug, Clone)]
pub struct Installed {
    /// Name, package, version, provided APIs and dependencies of the installed CSV.
    /// `channel` is ignored.
    pub entry: Entry,
    /// The catalog it came from, when known (information only).
    pub catalog: Option<CatalogKey>,
}

impl Installed {
    /// An installed operator described by its catalog entry: the bundle named `bundle`
    /// is looked up in `catalog` (then in every catalog) to learn the APIs it provides
    /// and requires. `version` overrides the catalog's version; when the bundle is in no
    /// catalog, only the package and version are known.
    pub fn from_catalogs(
        catalogs: &Catalogs,
        bundle: &str,
        package: &str,
        catalog: Option<&CatalogKey>,
        version: Option<Version>,
    ) -> Installed {
        let preferred = catalog.and_then(|k| catalogs.get(k));
        let found = preferred
            .into_iter()
            .chain(catalogs.iter())
            .find_map(|c| {
                let ids = c.by_name.get(bundle)?;
                ids.iter().map(|&i| &c.entries[i as usize]).find(|e| e.package == package || package.is_empty())
            })
            .cloned();
        let mut entry = found.unwrap_or_else(|| Entry { name: bundle.to_string(), ..Entry::default() });
        entry.channel = String::new();
        entry.default_channel = false;
        if !package.is_empty() {
            entry.package = package.to_string();
        }
        if version.is_some() {
            entry.version = version;
        }
        if entry.version.is_none() {
            // A CSV without spec.version counts as 0.0.0, as upstream reads it.
            entry.version = Some(Version::new(0, 0, 0));
        }
        Installed { entry, catalog: catalog.cloned() }
    }
}

/// A Subscription: a package from one catalog, optionally a channel and a first bundle.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The Subscription's name (used in errors); often the package name.
    pub name: String,
    pub package: String,
    /// `None`: the package's default channel is preferred, other channels may be used.
    pub channel: Option<String>,
    pub catalog: CatalogKey,
    /// The bundle to install first, when nothing is installed yet.
    pub starting_csv: Option<String>,
    /// The installed CSV this Subscription owns (`status.installedCSV`). When `None`,
    /// an installed operator of the same package is taken as the Subscription's.
    pub installed_csv: Option<String>,
}

impl Subscription {
    pub fn new(package: impl Into<String>, catalog: CatalogKey) -> Subscription {
        let package = package.into();
        Subscription { name: package.clone(), package, channel: None, catalog, starting_csv: None, installed_csv: None }
    }

    pub fn channel(mut self, channel: impl Into<String>) -> Subscription {
        self.channel = Some(channel.into());
        self
    }

    pub fn starting_csv(mut self, csv: impl Into<String>) -> Subscription {
        self.starting_csv = Some(csv.into());
        self
    }

    pub fn named(mut self, name: impl Into<String>) -> Subscription {
        self.name = name.into();
        self
    }
}

/// One resolution of one namespace.
#[derive(Debug, Clone)]
pub struct Request {
    pub namespace: String,
    /// The global catalog namespace, whose catalogs every namespace sees (default `olm`).
    pub global_namespace: String,
    pub installed: Vec<Installed>,
    pub subscriptions: Vec<Subscription>,
    /// The install modes the namespace's OperatorGroup asks of its operators (its targets:
    /// `AllNamespaces`; `OwnNamespace`; `SingleNamespace`; `MultiNamespace`, with
    /// `OwnNamespace` when the own namespace is one of them). An upgrade never goes to a
    /// bundle that does not support them all: its CSV would fail `UnsupportedOperatorGroup`
    /// and the running one would be replaced by nothing. Empty: not known, not checked.
    pub install_modes: Vec<String>,
}

impl Request {
    /// Whether `entry` supports every install mode the namespace's group asks for (a bundle
    /// whose catalog does not say is taken to).
    pub fn fits_install_modes(&self, entry: &Entry) -> bool {
        entry.install_modes.as_ref().is_none_or(|supported| self.install_modes.iter().all(|m| supported.contains(m)))
    }

    pub fn new(namespace: impl Into<String>) -> Request {
        Request {
            namespace: namespace.into(),
            global_namespace: "olm".to_string(),
            installed: Vec::new(),
            subscriptions: Vec::new(),
            install_modes: Vec::new(),
        }
    }
}

/// Why a bundle is in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// First install for a Subscription.
    Install,
    /// Replaces the installed bundle of a Subscription.
    Upgrade,
    /// Needed by another bundle.
    Dependency,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Install => "install",
            Reason::Upgrade => "upgrade",
            Reason::Dependency => "dependency",
        }
    }
}

/// A bundle newly selected from a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub name: String,
    pub package: String,
    pub channel: String,
    pub version: Option<Version>,
    pub catalog: CatalogKey,
    /// For an upgrade, the installed CSV it replaces; otherwise the catalog's `replaces`.
    pub replaces: Option<String>,
    pub reason: Reason,
    /// The Subscription this bundle answers, when it is not a dependency.
    pub subscription: Option<String>,
}

/// A Subscription that could not be resolved, with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionError {
    pub subscription: String,
    /// PascalCase category (metric label / Event reason).
    pub category: &'static str,
    pub message: String,
}

impl SubscriptionError {
    /// Resolution failures only change when catalogs or Subscriptions change, except
    /// for a search that ran out of budget.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The answer of one resolution.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    /// Newly selected bundles, sorted by name.
    pub bundles: Vec<Selected>,
    /// One entry per failed Subscription, in request order.
    pub errors: Vec<SubscriptionError>,
    /// Information that does not block anything (deprecation notices).
    pub notices: Vec<String>,
}
