//! A compact way to write resolver scenarios as data.
#![allow(dead_code)]

use olm_resolver::{
    CatalogKey, CatalogSnapshot, Catalogs, Dependency, Deprecation, Entry, Gvk, Installed, Request, Requirement,
    Resolution, Subscription, Version, VersionRange,
};

pub fn gvk(g: &str, v: &str, k: &str) -> Gvk {
    Gvk::new(g, v, k)
}

pub fn range(text: &str) -> VersionRange {
    VersionRange::parse(text).expect("test range parses")
}

/// An entry builder: `e("a.v1", "1.0.0", "a", "stable").replaces("a.v0").provides(..)`.
#[derive(Clone)]
pub struct E(pub Entry);

pub fn e(name: &str, version: &str, package: &str, channel: &str) -> E {
    E(Entry {
        name: name.into(),
        package: package.into(),
        channel: channel.into(),
        version: Some(Version::parse(version).expect("test version parses")),
        ..Entry::default()
    })
}

impl E {
    pub fn replaces(mut self, r: &str) -> E {
        self.0.replaces = Some(r.into());
        self
    }
    pub fn skips(mut self, s: &[&str]) -> E {
        self.0.skips = s.iter().map(|x| x.to_string()).collect();
        self
    }
    pub fn skip_range(mut self, r: &str) -> E {
        self.0.skip_range = Some(range(r));
        self
    }
    /// Mark this entry's channel as the package's default channel.
    pub fn default(mut self) -> E {
        self.0.default_channel = true;
        self
    }
    pub fn provides(mut self, g: &str, v: &str, k: &str) -> E {
        self.0.provided_gvks.push(gvk(g, v, k));
        self
    }
    pub fn requires(mut self, g: &str, v: &str, k: &str) -> E {
        self.0.dependencies.push(Dependency::new(Requirement::Gvk(gvk(g, v, k))));
        self
    }
    pub fn requires_package(mut self, name: &str, r: &str) -> E {
        self.0.dependencies.push(Dependency::new(Requirement::Package { name: name.into(), range: range(r) }));
        self
    }
    pub fn requires_label(mut self, l: &str) -> E {
        self.0.dependencies.push(Dependency::new(Requirement::Label(l.into())));
        self
    }
    pub fn label(mut self, l: &str) -> E {
        self.0.labels.push(l.into());
        self
    }
    pub fn constraint(mut self, r: Requirement, message: &str) -> E {
        self.0.dependencies.push(Dependency { requirement: r, failure_message: Some(message.into()) });
        self
    }
    pub fn deprecated(mut self) -> E {
        self.0.deprecated = true;
        self
    }
    /// The install modes its CSV supports.
    pub fn install_modes(mut self, modes: &[&str]) -> E {
        self.0.install_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }
}

pub fn cat(name: &str, namespace: &str, priority: i32, entries: Vec<E>) -> CatalogSnapshot {
    CatalogSnapshot::new(CatalogKey::new(name, namespace), priority, entries.into_iter().map(|e| e.0).collect())
}

pub fn cat_with_deprecations(mut c: CatalogSnapshot, d: Vec<Deprecation>) -> CatalogSnapshot {
    c.deprecations = d;
    c
}

pub fn key(name: &str, namespace: &str) -> CatalogKey {
    CatalogKey::new(name, namespace)
}

/// An installed operator described directly (not looked up in a catalog).
pub fn installed(entry: E) -> Installed {
    let mut entry = entry.0;
    entry.channel = String::new();
    Installed { entry, catalog: None }
}

pub fn sub(package: &str, channel: &str, catalog: CatalogKey) -> Subscription {
    let s = Subscription::new(package, catalog);
    if channel.is_empty() { s } else { s.channel(channel) }
}

pub struct Scenario {
    pub catalogs: Catalogs,
    pub request: Request,
}

pub fn scenario(namespace: &str, catalogs: Vec<CatalogSnapshot>) -> Scenario {
    Scenario { catalogs: Catalogs::new(catalogs), request: Request::new(namespace) }
}

impl Scenario {
    pub fn installed(mut self, i: Installed) -> Scenario {
        self.request.installed.push(i);
        self
    }
    pub fn sub(mut self, s: Subscription) -> Scenario {
        self.request.subscriptions.push(s);
        self
    }
    /// The install modes the namespace's OperatorGroup asks for.
    pub fn group_install_modes(mut self, modes: &[&str]) -> Scenario {
        self.request.install_modes = modes.iter().map(|m| m.to_string()).collect();
        self
    }
    pub fn global(mut self, ns: &str) -> Scenario {
        self.request.global_namespace = ns.into();
        self
    }
    pub fn resolve(&self) -> Resolution {
        olm_resolver::resolve(&self.catalogs, &self.request)
    }
}

/// Selected bundles as "name@catalog" (catalog name only), sorted.
pub fn picked(r: &Resolution) -> Vec<String> {
    r.bundles.iter().map(|b| format!("{}@{}", b.name, b.catalog.name)).collect()
}

/// Selected bundle names, sorted.
pub fn names(r: &Resolution) -> Vec<String> {
    r.bundles.iter().map(|b| b.name.clone()).collect()
}

/// The error of one Subscription, panicking with the whole resolution when absent.
pub fn error_of<'r>(r: &'r Resolution, subscription: &str) -> &'r str {
    match r.errors.iter().find(|e| e.subscription == subscription) {
        Some(e) => &e.message,
        None => panic!("expected an error for Subscription {subscription}, got {r:#?}"),
    }
}

pub fn assert_contains(haystack: &str, needles: &[&str]) {
    for n in needles {
        assert!(haystack.contains(n), "expected {n:?} in:\n{haystack}");
    }
}

pub fn assert_ok(r: &Resolution) {
    assert!(r.errors.is_empty(), "unexpected errors: {:#?}", r.errors);
}
