//! The resolution problem: one variable per bundle that could be chosen, with its
//! package, APIs, dependency candidates and conflicts. Resolution ([`crate::resolve`])
//! builds and solves it; explanations ([`crate::explain`]) read it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::index::{Catalogs, matches};
use crate::model::{Entry, Gvk, Requirement};
use crate::request::{Request, Subscription};

/// A fast non-cryptographic hasher for the resolver's small keys (the inputs are
/// catalog content, not attacker-chosen at request rate).
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Candidates of one requirement, best first, or why they cannot be ordered.
type DepCandidates = Result<Arc<[Src]>, String>;

pub(crate) type VarId = u32;

/// Where a variable's bundle comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Src {
    /// Index into `Request::installed`.
    Installed(u32),
    /// (catalog index, entry index).
    Catalog(u32, u32),
}

#[derive(Debug, Clone)]
pub(crate) struct DepSlot {
    /// Index into the entry's `dependencies`.
    pub dep: usize,
    pub candidates: Vec<VarId>,
    /// Packages and APIs of the candidates (sorted): selecting a bundle of another
    /// package that provides none of these APIs cannot take a candidate away.
    pub pkgs: Vec<u32>,
    pub gvks: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub src: Src,
    pub pkg: Option<u32>,
    pub gvks: Vec<u32>,
    pub prohibited: bool,
    /// Index of a failed Subscription whose package this catalog bundle belongs to: the
    /// user asked for that package in a way that cannot be met, so no other
    /// Subscription may pull it in as a dependency.
    pub blocked_by: Option<usize>,
    /// Explicit conflicts (an upgrade candidate and the bundle it replaces).
    pub conflicts: Vec<VarId>,
    pub deps: Vec<DepSlot>,
    pub expanded: bool,
    /// Some dependency has no candidate at all: never selectable.
    pub dead: bool,
}

/// The candidates of one Subscription.
#[derive(Debug, Clone)]
pub(crate) struct SubPlan {
    pub candidates: Vec<VarId>,
    pub current: Option<VarId>,
}

/// Why a search gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchFail {
    Unsatisfiable,
    TooComplex,
}

pub(crate) struct Problem<'a> {
    pub cats: &'a Catalogs,
    pub req: &'a Request,
    /// Indices of the catalogs visible from the namespace.
    pub visible: Vec<u32>,
    pub vars: Vec<Var>,
    var_of: FxMap<Src, VarId>,
    pub(crate) pkg_ids: FxMap<String, u32>,
    pub(crate) gvk_ids: FxMap<Gvk, u32>,
    /// Dependency candidates per dependent catalog (`None`: installed) and requirement.
    dep_cache: FxMap<Option<u32>, FxMap<Requirement, DepCandidates>>,
    /// Packages of failed Subscriptions (package → Subscription index).
    pub blocked: HashMap<String, usize>,
}

impl<'a> Problem<'a> {
    pub fn new(cats: &'a Catalogs, req: &'a Request) -> Problem<'a> {
        let visible = cats
            .catalogs
            .iter()
            .enumerate()
            .filter(|(_, c)| c.key.namespace == req.namespace || c.key.namespace == req.global_namespace)
            .map(|(i, _)| i as u32)
            .collect();
        Problem {
            cats,
            req,
            visible,
            vars: Vec::new(),
            var_of: FxMap::default(),
            pkg_ids: FxMap::default(),
            gvk_ids: FxMap::default(),
            dep_cache: FxMap::default(),
            blocked: HashMap::new(),
        }
    }

    pub fn entry_of(&self, src: Src) -> &'a Entry {
        match src {
            Src::Installed(i) => &self.req.installed[i as usize].entry,
            Src::Catalog(c, e) => &self.cats.catalogs[c as usize].entries[e as usize],
        }
    }

    pub fn entry(&self, v: VarId) -> &'a Entry {
        self.entry_of(self.vars[v as usize].src)
    }

    pub fn var(&mut self, src: Src) -> VarId {
        if let Some(&v) = self.var_of.get(&src) {
            return v;
        }
        let e = self.entry_of(src);
        let pkg = if e.package.is_empty() {
            None
        } else {
            let n = self.pkg_ids.len() as u32;
            Some(match self.pkg_ids.get(&e.package) {
                Some(&id) => id,
                None => *self.pkg_ids.entry(e.package.clone()).or_insert(n),
            })
        };
        let mut gvks = Vec::with_capacity(e.provided_gvks.len());
        for g in &e.provided_gvks {
            let n = self.gvk_ids.len() as u32;
            let id = match self.gvk_ids.get(g) {
                Some(&id) => id,
                None => *self.gvk_ids.entry(g.clone()).or_insert(n),
            };
            if !gvks.contains(&id) {
                gvks.push(id);
            }
        }
        let id = self.vars.len() as VarId;
        self.vars.push(Var {
            src,
            pkg,
            gvks,
            prohibited: e.deprecated,
            blocked_by: match src {
                Src::Catalog(..) => self.blocked.get(&e.package).copied(),
                Src::Installed(_) => None,
            },
            conflicts: Vec::new(),
            deps: Vec::new(),
            expanded: false,
            dead: false,
        });
        self.var_of.insert(src, id);
        id
    }

    /// Keep catalog bundles of `package` out of every solution from now on.
    pub fn block_package(&mut self, package: &str, sub: usize) {
        self.blocked.entry(package.to_string()).or_insert(sub);
        for i in 0..self.vars.len() {
            let src = self.vars[i].src;
            if matches!(src, Src::Catalog(..)) && self.entry_of(src).package == package && self.vars[i].blocked_by.is_none() {
                self.vars[i].blocked_by = Some(sub);
            }
        }
    }

    pub fn add_conflict(&mut self, a: VarId, b: VarId) {
        self.vars[a as usize].conflicts.push(b);
        self.vars[b as usize].conflicts.push(a);
    }

    /// Visible catalogs in preference order for a dependent from catalog `from`
    /// (`None`: an installed operator): the dependent's own catalog, then higher
    /// priority, then the namespace's own catalogs, then name.
    pub fn catalog_order(&self, from: Option<u32>) -> Vec<u32> {
        let mut order = self.visible.clone();
        let ns = &self.req.namespace;
        order.sort_by(|&a, &b| {
            let ca = &self.cats.catalogs[a as usize];
            let cb = &self.cats.catalogs[b as usize];
            (Some(b) == from)
                .cmp(&(Some(a) == from))
                .then(cb.priority.cmp(&ca.priority))
                .then((&cb.key.namespace == ns).cmp(&(&ca.key.namespace == ns)))
                .then(ca.key.name.cmp(&cb.key.name))
                .then(ca.key.namespace.cmp(&cb.key.namespace))
        });
        order
    }

    /// Candidates for one requirement of a bundle from catalog `from`, best first:
    /// installed operators, then catalogs in preference order; within a catalog the
    /// default channels first, then package and channel name, then channel order.
    /// Entries that are skipped in their channel are never candidates.
    pub fn dep_candidates(&mut self, from: Option<u32>, req: &Requirement) -> Result<Arc<[Src]>, String> {
        if let Some(hit) = self.dep_cache.get(&from).and_then(|m| m.get(req)) {
            return hit.clone();
        }
        let result = self.compute_dep_candidates(from, req).map(Arc::from);
        self.dep_cache.entry(from).or_default().insert(req.clone(), result.clone());
        result
    }

    fn compute_dep_candidates(&self, from: Option<u32>, req: &Requirement) -> Result<Vec<Src>, String> {
        let mut out = Vec::new();
        let mut installed: Vec<u32> = (0..self.req.installed.len() as u32)
            .filter(|&i| matches(req, &self.req.installed[i as usize].entry))
            .collect();
        installed.sort_by(|&a, &b| {
            let ea = &self.req.installed[a as usize].entry;
            let eb = &self.req.installed[b as usize].entry;
            (&ea.package, &ea.name).cmp(&(&eb.package, &eb.name))
        });
        out.extend(installed.into_iter().map(Src::Installed));
        for c in self.catalog_order(from) {
            let cat = &self.cats.catalogs[c as usize];
            let hits = cat.find(req);
            if hits.is_empty() {
                continue;
            }
            let mut channels: Vec<(bool, &str, &str)> = hits
                .iter()
                .map(|&i| {
                    let e = &cat.entries[i as usize];
                    (e.default_channel, e.package.as_str(), e.channel.as_str())
                })
                .collect();
            channels.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)).then(a.2.cmp(b.2)));
            channels.dedup_by(|a, b| a.1 == b.1 && a.2 == b.2);
            for (_, pkg, ch) in channels {
                let Some(chan) = cat.packages.get(pkg).and_then(|p| p.channels.get(ch)) else { continue };
                let order = chan.order.as_ref().map_err(|e| format!("catalog {}: {e}", cat.key))?;
                for &i in order {
                    if matches(req, &cat.entries[i as usize]) {
                        out.push(Src::Catalog(c, i));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Compute dependency candidates for everything reachable from `roots`. An error
    /// names the bundle whose dependencies could not be worked out.
    pub fn expand(&mut self, roots: &[VarId]) -> Result<(), String> {
        let mut work: Vec<VarId> = roots.to_vec();
        while let Some(v) = work.pop() {
            if self.vars[v as usize].expanded {
                continue;
            }
            self.vars[v as usize].expanded = true;
            let src = self.vars[v as usize].src;
            let e = self.entry_of(src);
            if let Some(why) = &e.invalid {
                return Err(format!("bundle {} has a dependency that cannot be understood: {why}", e.name));
            }
            let from = match src {
                Src::Installed(_) => None,
                Src::Catalog(c, _) => Some(c),
            };
            let mut slots = Vec::with_capacity(e.dependencies.len());
            let mut dead = false;
            for (di, dep) in e.dependencies.iter().enumerate() {
                let srcs = self
                    .dep_candidates(from, &dep.requirement)
                    .map_err(|m| format!("bundle {} needs {}, but {m}", e.name, dep.requirement))?;
                let mut cands = Vec::with_capacity(srcs.len());
                for &s in srcs.iter() {
                    let c = self.var(s);
                    if !cands.contains(&c) {
                        cands.push(c);
                    }
                    if !self.vars[c as usize].expanded {
                        work.push(c);
                    }
                }
                dead |= cands.is_empty();
                let mut pkgs: Vec<u32> = cands.iter().filter_map(|&c| self.vars[c as usize].pkg).collect();
                pkgs.sort_unstable();
                pkgs.dedup();
                let mut gvks: Vec<u32> =
                    cands.iter().flat_map(|&c| self.vars[c as usize].gvks.iter().copied()).collect();
                gvks.sort_unstable();
                gvks.dedup();
                slots.push(DepSlot { dep: di, candidates: cands, pkgs, gvks });
            }
            let var = &mut self.vars[v as usize];
            var.deps = slots;
            var.dead = dead;
        }
        Ok(())
    }
}

/// Find the installed operator a Subscription owns.
pub(crate) fn current_of(req: &Request, sub: &Subscription) -> Option<u32> {
    let inst = &req.installed;
    if let Some(name) = &sub.installed_csv {
        return inst.iter().position(|i| &i.entry.name == name).map(|i| i as u32);
    }
    inst.iter().position(|i| i.entry.package == sub.package).map(|i| i as u32)
}
