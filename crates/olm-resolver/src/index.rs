//! Catalogs indexed for resolution: built once per catalog content, shared by every
//! resolution (so a resolution costs what it touches, not the catalog size).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use olm_catalog::graph::ChannelGraph;

use crate::model::{CatalogKey, CatalogSnapshot, Deprecation, Entry, Gvk, Requirement};

/// Entries of one (package, channel) in channel order.
#[derive(Debug, Clone)]
pub(crate) struct ChannelIndex {
    /// Every entry of the channel (indices into the catalog's entries), input order.
    pub members: Vec<u32>,
    /// The channel order (head first, skipped entries left out), or why the channel
    /// has none.
    pub order: Result<Vec<u32>, String>,
    /// The upgrade graph of `members` (its entry `k` is `members[k]`).
    pub graph: ChannelGraph,
}

impl ChannelIndex {
    /// Entries of the channel that upgrade from `installed` (replace it, skip it, or
    /// have a skipRange containing its version), as indices into the catalog's entries;
    /// never the installed bundle itself (see [`ChannelGraph::successors`]).
    pub fn successors(&self, entries: &[Entry], installed: &Entry) -> Vec<u32> {
        self.graph
            .successors(|k| &entries[self.members[k] as usize], &installed.name, installed.version.as_ref())
            .into_iter()
            .map(|k| self.members[k])
            .collect()
    }

    /// The first entry of the channel (in input order) that skips the bundle `name`.
    pub fn skipped_by<'e>(&self, entries: &'e [Entry], name: &str) -> Option<&'e Entry> {
        self.graph.skipped_by(name).map(|k| &entries[self.members[k] as usize])
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PackageIndex {
    pub default_channel: Option<String>,
    pub channels: BTreeMap<String, ChannelIndex>,
}

/// One catalog with lookup tables.
#[derive(Debug, Clone)]
pub struct IndexedCatalog {
    pub key: CatalogKey,
    pub priority: i32,
    pub entries: Vec<Entry>,
    pub deprecations: Vec<Deprecation>,
    /// Packages left out of the catalog for their problems, with why.
    pub left_out: BTreeMap<String, String>,
    pub(crate) packages: BTreeMap<String, PackageIndex>,
    pub(crate) by_gvk: HashMap<Gvk, Vec<u32>>,
    pub(crate) by_package: HashMap<String, Vec<u32>>,
    pub(crate) by_label: HashMap<String, Vec<u32>>,
    pub(crate) by_name: HashMap<String, Vec<u32>>,
}

impl IndexedCatalog {
    pub fn new(snapshot: CatalogSnapshot) -> IndexedCatalog {
        let CatalogSnapshot { key, priority, entries, deprecations, left_out } = snapshot;
        let mut packages: BTreeMap<String, PackageIndex> = BTreeMap::new();
        let mut by_gvk: HashMap<Gvk, Vec<u32>> = HashMap::new();
        let mut by_package: HashMap<String, Vec<u32>> = HashMap::new();
        let mut by_label: HashMap<String, Vec<u32>> = HashMap::new();
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let i = i as u32;
            let pkg = packages.entry(e.package.clone()).or_default();
            if e.default_channel && pkg.default_channel.is_none() {
                pkg.default_channel = Some(e.channel.clone());
            }
            pkg.channels
                .entry(e.channel.clone())
                .or_insert_with(|| ChannelIndex { members: Vec::new(), order: Ok(Vec::new()), graph: ChannelGraph::default() })
                .members
                .push(i);
            for g in &e.provided_gvks {
                let v = by_gvk.entry(g.clone()).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
            by_package.entry(e.package.clone()).or_default().push(i);
            for l in &e.labels {
                by_label.entry(l.clone()).or_default().push(i);
            }
            by_name.entry(e.name.clone()).or_default().push(i);
        }
        for (pkg_name, pkg) in packages.iter_mut() {
            for (ch_name, ch) in pkg.channels.iter_mut() {
                ch.graph = ChannelGraph::new(ch.members.iter().map(|&i| {
                    let e = &entries[i as usize];
                    (e, e.version.as_ref())
                }));
                ch.order = channel_order(&entries, &ch.members, &ch.graph, pkg_name, ch_name);
            }
        }
        IndexedCatalog { key, priority, entries, deprecations, left_out, packages, by_gvk, by_package, by_label, by_name }
    }

    /// Package names in this catalog, sorted.
    pub fn package_names(&self) -> impl Iterator<Item = &str> {
        self.packages.keys().map(String::as_str)
    }

    /// Channel names of a package, sorted; `None` when the package is absent.
    pub fn channel_names(&self, package: &str) -> Option<Vec<&str>> {
        self.packages.get(package).map(|p| p.channels.keys().map(String::as_str).collect())
    }

    /// The default channel of a package.
    pub fn default_channel(&self, package: &str) -> Option<&str> {
        self.packages.get(package).and_then(|p| p.default_channel.as_deref())
    }

    /// Entries that may match `req` (a superset), or `None` meaning "scan all".
    fn prefilter(&self, req: &Requirement) -> Option<Vec<u32>> {
        match req {
            Requirement::Gvk(g) => Some(self.by_gvk.get(g).cloned().unwrap_or_default()),
            Requirement::Package { name, .. } => Some(self.by_package.get(name).cloned().unwrap_or_default()),
            Requirement::Label(l) => Some(self.by_label.get(l).cloned().unwrap_or_default()),
            Requirement::All(v) => v.iter().find_map(|r| self.prefilter(r)),
            Requirement::Any(v) => {
                let mut out = Vec::new();
                for r in v {
                    out.extend(self.prefilter(r)?);
                }
                out.sort_unstable();
                out.dedup();
                Some(out)
            }
            Requirement::Cel(_) | Requirement::Not(_) => None,
        }
    }

    /// Indices of entries satisfying `req`, in input order.
    pub(crate) fn find(&self, req: &Requirement) -> Vec<u32> {
        match self.prefilter(req) {
            Some(mut ids) => {
                ids.sort_unstable();
                ids.dedup();
                ids.retain(|&i| matches(req, &self.entries[i as usize]));
                ids
            }
            None => (0..self.entries.len() as u32).filter(|&i| matches(req, &self.entries[i as usize])).collect(),
        }
    }
}

/// Whether an entry satisfies a requirement.
pub fn matches(req: &Requirement, e: &Entry) -> bool {
    match req {
        Requirement::Gvk(g) => e.provided_gvks.contains(g),
        Requirement::Package { name, range } => {
            e.package == *name && e.version.as_ref().is_some_and(|v| range.contains(v))
        }
        Requirement::Label(l) => e.labels.contains(l),
        Requirement::All(v) => v.iter().all(|r| matches(r, e)),
        Requirement::Any(v) => v.iter().any(|r| matches(r, e)),
        Requirement::Not(v) => !v.iter().any(|r| matches(r, e)),
        Requirement::Cel(rule) => crate::model::cel_matches(rule, e),
    }
}

/// Order the entries of one channel from its graph: the head is the entry no other
/// entry replaces or skips, the order follows `replaces` from it, and every entry named
/// in some `skips` is left out. No head, a cycle or several chains make the channel
/// unusable.
pub(crate) fn channel_order(
    entries: &[Entry],
    members: &[u32],
    graph: &ChannelGraph,
    package: &str,
    channel: &str,
) -> Result<Vec<u32>, String> {
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let heads: Vec<usize> = graph.heads().collect();
    if heads.is_empty() {
        return Err(format!(
            "channel {channel:?} of package {package:?} has no head: every entry is replaced or skipped by another (the replaces/skips edges form a cycle)"
        ));
    }
    let name = |k: usize| entries[members[k] as usize].name.as_str();
    let mut chains: Vec<Vec<u32>> = Vec::new();
    for &head in &heads {
        let (walk, looped) = graph.replaces_walk(head);
        if looped {
            return Err(format!(
                "the replaces chain starting at {:?} in channel {channel:?} of package {package:?} loops back on itself",
                name(head)
            ));
        }
        chains.push(walk.into_iter().filter(|&k| !graph.is_skipped(name(k))).map(|k| members[k]).collect());
    }
    if chains.len() > 1
        && let Some(head) = graph.head()
    {
        // The other heads are inside a newer entry's skipRange (see `ChannelGraph::head`): the
        // chain from the head comes first, theirs after it, each entry once.
        let mut order: Vec<u32> = Vec::new();
        let first = chains.iter().position(|c| c.first() == Some(&members[head])).unwrap_or(0);
        let main = chains.remove(first);
        for member in main.into_iter().chain(chains.into_iter().flatten()) {
            if !order.contains(&member) {
                order.push(member);
            }
        }
        return Ok(order);
    }
    if chains.len() > 1 {
        let described: Vec<String> = chains
            .iter()
            .map(|c| match c.as_slice() {
                [] => "[]".to_string(),
                [one] => entries[*one as usize].name.clone(),
                [first, .., last] => format!("{}...{}", entries[*first as usize].name, entries[*last as usize].name),
            })
            .collect();
        return Err(format!(
            "channel {channel:?} of package {package:?} has {} separate replaces chains ({}), so the order of its entries is unknown; link them with replaces or skips",
            chains.len(),
            described.join(", ")
        ));
    }
    Ok(chains.pop().unwrap_or_default())
}

/// Every catalog the resolver may look at, indexed. Each index is shared: a controller builds
/// it once per catalog content and resolves against it as often as it likes (building it
/// takes milliseconds per thousand bundles, too much for every reconcile).
#[derive(Debug, Clone, Default)]
pub struct Catalogs {
    pub(crate) catalogs: Vec<Arc<IndexedCatalog>>,
}

impl Catalogs {
    pub fn new(snapshots: impl IntoIterator<Item = CatalogSnapshot>) -> Catalogs {
        Catalogs { catalogs: snapshots.into_iter().map(|s| Arc::new(IndexedCatalog::new(s))).collect() }
    }

    /// Catalogs indexed already.
    pub fn from_indexed(catalogs: impl IntoIterator<Item = Arc<IndexedCatalog>>) -> Catalogs {
        Catalogs { catalogs: catalogs.into_iter().collect() }
    }

    pub fn push(&mut self, snapshot: CatalogSnapshot) {
        self.catalogs.push(Arc::new(IndexedCatalog::new(snapshot)));
    }

    pub fn iter(&self) -> impl Iterator<Item = &IndexedCatalog> {
        self.catalogs.iter().map(|c| &**c)
    }

    pub fn get(&self, key: &CatalogKey) -> Option<&IndexedCatalog> {
        self.catalogs.iter().find(|c| &c.key == key).map(|c| &**c)
    }

    pub(crate) fn position(&self, key: &CatalogKey) -> Option<usize> {
        self.catalogs.iter().position(|c| &c.key == key)
    }

    /// Total number of (bundle, channel) entries.
    pub fn entry_count(&self) -> usize {
        self.catalogs.iter().map(|c| c.entries.len()).sum()
    }
}
