//! The resolution itself.
//!
//! Semantics follow upstream OLM v0: every bundle that could be chosen becomes a
//! variable; a Subscription needs one of its candidates, a bundle needs one candidate
//! per dependency; at most one bundle per package and one provider per API may be
//! selected; installed operators nobody subscribes to must stay. Upstream hands this to
//! a SAT solver and then walks the choices breadth-first, taking at each choice the
//! first candidate (in preference order) that still leaves a solution. We do exactly
//! that walk with chronological backtracking, which yields the same answer: the first
//! candidate that has any completion is the one kept.
//!
//! Where we differ on purpose: a Subscription that cannot be resolved does not stop the
//! others, and every failure is explained in words (see [`crate::explain`]).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

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

use crate::index::{Catalogs, matches};
use crate::model::{Entry, Gvk, Requirement};
use crate::request::{Reason, Request, Resolution, Selected, Subscription, SubscriptionError};

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

/// Upper bound on candidate attempts in one search; reaching it is reported, never looped on.
const STEP_BUDGET: u64 = 2_000_000;

pub(crate) struct Problem<'a> {
    pub cats: &'a Catalogs,
    pub req: &'a Request,
    /// Indices of the catalogs visible from the namespace.
    pub visible: Vec<u32>,
    pub vars: Vec<Var>,
    var_of: FxMap<Src, VarId>,
    pkg_ids: FxMap<String, u32>,
    gvk_ids: FxMap<Gvk, u32>,
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

    /// Search for a selection containing every `mandatory` variable and one candidate
    /// of every list in `choices`, preferring earlier candidates. Returns the selected
    /// variables (sorted).
    pub fn solve<'q>(&'q self, mandatory: &'q [VarId], choices: &[&'q [VarId]]) -> Result<Vec<VarId>, SearchFail> {
        Search::new(self).run(mandatory, choices)
    }

    /// The same search without pruning or backjumping: slow, obviously faithful.
    #[cfg(test)]
    pub fn solve_naive<'q>(&'q self, mandatory: &'q [VarId], choices: &[&'q [VarId]]) -> Result<Vec<VarId>, SearchFail> {
        let mut s = Search::new(self);
        s.naive = true;
        s.run(mandatory, choices)
    }
}

struct Frame {
    choice: usize,
    /// Next candidate index to try when backtracking into this choice.
    next: usize,
    picked: Option<VarId>,
    queue_len: usize,
    /// Conflict set gathered from earlier candidates of this choice that failed deeper.
    carried: Vec<VarId>,
}

/// One pending choice: its candidates, and what can affect them (`None`: check always).
#[derive(Clone, Copy)]
struct Choice<'p> {
    cands: &'p [VarId],
    touched_by: Option<(&'p [u32], &'p [u32])>,
    /// The selected bundle whose dependency this is (None for top-level choices).
    parent: Option<VarId>,
}

struct Search<'p, 'a> {
    p: &'p Problem<'a>,
    selected: Vec<bool>,
    pkg_owner: Vec<Option<VarId>>,
    gvk_owner: Vec<Option<VarId>>,
    queue: Vec<Choice<'p>>,
    /// Index of the choice being decided; later ones are pending.
    at: usize,
    /// Plain chronological backtracking without forward checks (the reference the
    /// tests compare the fast search against).
    naive: bool,
}

impl<'p, 'a> Search<'p, 'a> {
    fn new(p: &'p Problem<'a>) -> Search<'p, 'a> {
        Search {
            p,
            selected: vec![false; p.vars.len()],
            pkg_owner: vec![None; p.pkg_ids.len()],
            gvk_owner: vec![None; p.gvk_ids.len()],
            queue: Vec::new(),
            at: 0,
            naive: false,
        }
    }

    /// Whether `c` could still be selected next to the current selection and `v`.
    fn viable_with(&self, c: VarId, v: VarId) -> bool {
        if self.selected[c as usize] {
            return true;
        }
        let cv = &self.p.vars[c as usize];
        let vv = &self.p.vars[v as usize];
        if cv.prohibited || cv.dead || cv.blocked_by.is_some() {
            return false;
        }
        if c != v {
            if cv.pkg.is_some() && cv.pkg == vv.pkg {
                return false;
            }
            if cv.gvks.iter().any(|g| vv.gvks.contains(g)) || cv.conflicts.contains(&v) {
                return false;
            }
        }
        if let Some(pk) = cv.pkg
            && self.pkg_owner[pk as usize].is_some_and(|o| o != c)
        {
            return false;
        }
        if cv.gvks.iter().any(|&g| self.gvk_owner[g as usize].is_some_and(|o| o != c)) {
            return false;
        }
        !cv.conflicts.iter().any(|&x| self.selected[x as usize])
    }

    fn can_select(&self, v: VarId) -> bool {
        let var = &self.p.vars[v as usize];
        if var.prohibited || var.dead || var.blocked_by.is_some() {
            return false;
        }
        if let Some(pk) = var.pkg
            && self.pkg_owner[pk as usize].is_some_and(|o| o != v)
        {
            return false;
        }
        if var.gvks.iter().any(|&g| self.gvk_owner[g as usize].is_some_and(|o| o != v)) {
            return false;
        }
        if var.conflicts.iter().any(|&x| self.selected[x as usize]) {
            return false;
        }
        if self.naive {
            return !var.deps.iter().any(|slot| slot.candidates.is_empty());
        }
        if !var.deps.iter().all(|slot| slot.candidates.iter().any(|&c| self.viable_with(c, v))) {
            return false;
        }
        // Forward check: every pending choice that `v` could take candidates from must
        // keep one (what a SAT solver's unit propagation finds at this point).
        for q in &self.queue[self.at + 1..] {
            if let Some((pkgs, gvks)) = q.touched_by {
                let touched = var.pkg.is_some_and(|pk| pkgs.binary_search(&pk).is_ok())
                    || var.gvks.iter().any(|g| gvks.binary_search(g).is_ok());
                if !touched {
                    continue;
                }
            }
            if q.cands.iter().any(|&c| self.selected[c as usize]) {
                continue;
            }
            if !q.cands.iter().any(|&c| c == v || self.viable_with(c, v)) {
                return false;
            }
        }
        true
    }

    /// Selected variables that keep `c` from being selected next to `v` (see `viable_with`).
    fn viable_blockers(&self, c: VarId, v: VarId, out: &mut Vec<VarId>) {
        if self.selected[c as usize] {
            return;
        }
        let cv = &self.p.vars[c as usize];
        if let Some(pk) = cv.pkg
            && let Some(o) = self.pkg_owner[pk as usize]
            && o != c
        {
            out.push(o);
        }
        for &g in &cv.gvks {
            if let Some(o) = self.gvk_owner[g as usize]
                && o != c
            {
                out.push(o);
            }
        }
        out.extend(cv.conflicts.iter().copied().filter(|&x| self.selected[x as usize] && x != v));
    }

    /// Selected variables that keep `v` from being selected now (a superset is fine:
    /// with all of them still selected, `v` stays impossible). Used to jump back to
    /// the choice that caused a failure instead of retrying every choice in between.
    fn blockers(&self, v: VarId, out: &mut Vec<VarId>) {
        let var = &self.p.vars[v as usize];
        if var.prohibited || var.dead || var.blocked_by.is_some() {
            return;
        }
        self.viable_blockers(v, v, out);
        for slot in &var.deps {
            if !slot.candidates.iter().any(|&c| self.viable_with(c, v)) {
                for &c in &slot.candidates {
                    self.viable_blockers(c, v, out);
                }
            }
        }
        for q in &self.queue[self.at + 1..] {
            if q.cands.iter().any(|&c| self.selected[c as usize]) {
                continue;
            }
            if !q.cands.iter().any(|&c| c == v || self.viable_with(c, v)) {
                out.extend(q.parent);
                for &c in q.cands {
                    self.viable_blockers(c, v, out);
                }
            }
        }
    }

    fn select(&mut self, v: VarId) {
        self.selected[v as usize] = true;
        let var = &self.p.vars[v as usize];
        if let Some(pk) = var.pkg {
            self.pkg_owner[pk as usize] = Some(v);
        }
        for &g in &var.gvks {
            self.gvk_owner[g as usize] = Some(v);
        }
        for slot in &var.deps {
            self.queue.push(Choice {
                cands: &slot.candidates,
                touched_by: Some((&slot.pkgs, &slot.gvks)),
                parent: Some(v),
            });
        }
    }

    fn unselect(&mut self, v: VarId) {
        self.selected[v as usize] = false;
        let var = &self.p.vars[v as usize];
        if let Some(pk) = var.pkg
            && self.pkg_owner[pk as usize] == Some(v)
        {
            self.pkg_owner[pk as usize] = None;
        }
        for &g in &var.gvks {
            if self.gvk_owner[g as usize] == Some(v) {
                self.gvk_owner[g as usize] = None;
            }
        }
    }

    fn run(mut self, mandatory: &'p [VarId], choices: &[&'p [VarId]]) -> Result<Vec<VarId>, SearchFail> {
        // Mandatory variables are choices with a single candidate, taken first.
        for m in mandatory {
            self.queue.push(Choice { cands: std::slice::from_ref(m), touched_by: None, parent: None });
        }
        self.queue.extend(choices.iter().map(|&cands| Choice { cands, touched_by: None, parent: None }));
        let mut stack: Vec<Frame> = Vec::new();
        let mut steps: u64 = 0;
        let mut i = 0usize;
        let mut start = 0usize;
        let mut carried: Vec<VarId> = Vec::new();
        loop {
            if i == self.queue.len() {
                let out: Vec<VarId> =
                    (0..self.selected.len() as VarId).filter(|&v| self.selected[v as usize]).collect();
                return Ok(out);
            }
            let cands = self.queue[i].cands;
            self.at = i;
            if start == 0 && cands.iter().any(|&c| self.selected[c as usize]) {
                stack.push(Frame {
                    choice: i,
                    next: cands.len(),
                    picked: None,
                    queue_len: self.queue.len(),
                    carried: Vec::new(),
                });
                i += 1;
                continue;
            }
            let mut picked = None;
            for (k, &c) in cands.iter().enumerate().skip(start) {
                steps += 1;
                if steps > STEP_BUDGET {
                    return Err(SearchFail::TooComplex);
                }
                if self.can_select(c) {
                    picked = Some((k, c));
                    break;
                }
            }
            if let Some((k, c)) = picked {
                let queue_len = self.queue.len();
                self.select(c);
                stack.push(Frame { choice: i, next: k + 1, picked: Some(c), queue_len, carried: std::mem::take(&mut carried) });
                i += 1;
                start = 0;
                continue;
            }
            // No candidate of choice `i` fits: gather the selections responsible and
            // jump back to the latest of them (choices in between cannot help).
            if self.naive {
                loop {
                    let Some(f) = stack.pop() else { return Err(SearchFail::Unsatisfiable) };
                    let Some(v) = f.picked else { continue };
                    self.unselect(v);
                    self.queue.truncate(f.queue_len);
                    if f.next < self.queue[f.choice].cands.len() {
                        i = f.choice;
                        start = f.next;
                        break;
                    }
                }
                continue;
            }
            let mut conflict = std::mem::take(&mut carried);
            conflict.extend(self.queue[i].parent);
            for &c in cands {
                self.blockers(c, &mut conflict);
            }
            conflict.sort_unstable();
            conflict.dedup();
            loop {
                let Some(f) = stack.pop() else { return Err(SearchFail::Unsatisfiable) };
                let Some(v) = f.picked else { continue };
                self.unselect(v);
                self.queue.truncate(f.queue_len);
                if conflict.binary_search(&v).is_ok() {
                    conflict.retain(|&x| x != v);
                    conflict.extend(f.carried);
                    i = f.choice;
                    start = f.next;
                    carried = conflict;
                    break;
                }
            }
        }
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

/// Resolve a namespace: what to install or upgrade for the Subscriptions, and what
/// keeps each failing Subscription from resolving.
pub fn resolve(catalogs: &Catalogs, request: &Request) -> Resolution {
    let mut p = Problem::new(catalogs, request);
    let mut errors: Vec<Option<SubscriptionError>> = vec![None; request.subscriptions.len()];
    let mut plans: Vec<Option<SubPlan>> = vec![None; request.subscriptions.len()];

    // Installed operators no Subscription owns must stay.
    let owned: HashSet<u32> = request.subscriptions.iter().filter_map(|s| current_of(request, s)).collect();
    let mut mandatory: Vec<VarId> = Vec::new();
    for i in 0..request.installed.len() as u32 {
        let v = p.var(Src::Installed(i));
        if !owned.contains(&i) {
            mandatory.push(v);
        }
    }
    let mut base_problem = p.expand(&mandatory).err();

    for (si, sub) in request.subscriptions.iter().enumerate() {
        match crate::explain::plan_subscription(&mut p, sub) {
            Ok(plan) => plans[si] = Some(plan),
            Err(e) => errors[si] = Some(e),
        }
    }
    // What a failed Subscription asked for must not come in through the back door.
    for (si, sub) in request.subscriptions.iter().enumerate() {
        if plans[si].is_none() {
            p.block_package(&sub.package, si);
        }
    }
    for (si, sub) in request.subscriptions.iter().enumerate() {
        let Some(plan) = &plans[si] else { continue };
        let mut roots = plan.candidates.clone();
        roots.extend(plan.current);
        if let Err(msg) = p.expand(&roots) {
            errors[si] = Some(crate::explain::invalid_dependency(request, sub, &msg));
            plans[si] = None;
        }
    }
    // The installed operator of a failed Subscription stays as it is.
    for (si, sub) in request.subscriptions.iter().enumerate() {
        if plans[si].is_none()
            && let Some(i) = current_of(request, sub)
        {
            let v = p.var(Src::Installed(i));
            if !mandatory.contains(&v) {
                mandatory.push(v);
                if let Err(e) = p.expand(&[v]) {
                    base_problem.get_or_insert(e);
                }
            }
        }
    }

    let ok: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].is_some()).collect();
    let lists = |set: &[usize]| -> Vec<&[VarId]> {
        set.iter().filter_map(|&i| plans[i].as_ref()).map(|pl| pl.candidates.as_slice()).collect()
    };

    let mut accepted: Vec<usize> = ok.clone();
    let mut solution = if base_problem.is_none() { p.solve(&mandatory, &lists(&ok)).ok() } else { None };

    if solution.is_none() && !ok.is_empty() {
        // Attribute the failure: find the Subscriptions that cannot resolve, keep the rest.
        accepted.clear();
        match p.solve(&mandatory, &[]) {
            Err(_) => {
                let msg = crate::explain::base_failure(&p, &mandatory, base_problem.as_deref());
                for &si in &ok {
                    errors[si] = Some(crate::explain::blocked_by_installed(request, &request.subscriptions[si], &msg));
                }
            }
            Ok(base_sel) => {
                let mut alone_ok: Vec<usize> = Vec::new();
                for &si in &ok {
                    let list = lists(&[si]);
                    match p.solve(&mandatory, &list) {
                        Ok(_) => alone_ok.push(si),
                        Err(fail) => {
                            let plan = plans[si].as_ref().map(|pl| pl.candidates.clone()).unwrap_or_default();
                            errors[si] = Some(crate::explain::alone(
                                &p,
                                &mandatory,
                                &base_sel,
                                &request.subscriptions[si],
                                &plan,
                                fail,
                            ));
                        }
                    }
                }
                for si in 0..request.subscriptions.len() {
                    if errors[si].is_some() && plans[si].is_some() {
                        p.block_package(&request.subscriptions[si].package, si);
                    }
                }
                // Subscriptions with something installed keep priority over new ones.
                alone_ok.sort_by_key(|&si| (plans[si].as_ref().is_none_or(|pl| pl.current.is_none()), si));
                for si in alone_ok {
                    let mut trial = accepted.clone();
                    trial.push(si);
                    if p.solve(&mandatory, &lists(&trial)).is_ok() {
                        accepted.push(si);
                        continue;
                    }
                    let culprits: Vec<usize> =
                        accepted.iter().copied().filter(|&t| p.solve(&mandatory, &lists(&[t, si])).is_err()).collect();
                    let sub = &request.subscriptions[si];
                    if culprits.is_empty() {
                        let others: Vec<&str> =
                            accepted.iter().map(|&t| request.subscriptions[t].name.as_str()).collect();
                        errors[si] = Some(crate::explain::conflict_many(request, sub, &others));
                        continue;
                    }
                    let si_new = plans[si].as_ref().is_none_or(|pl| pl.current.is_none());
                    let mut messages = Vec::new();
                    for &t in &culprits {
                        let tsub = &request.subscriptions[t];
                        messages.push(crate::explain::pair(&p, &mandatory, (sub, &lists(&[si])), (tsub, &lists(&[t]))));
                        let t_new = plans[t].as_ref().is_none_or(|pl| pl.current.is_none());
                        if si_new && t_new {
                            // Neither came first: both are told, neither is installed.
                            let text = crate::explain::pair(&p, &mandatory, (tsub, &lists(&[t])), (sub, &lists(&[si])));
                            errors[t] = Some(text);
                            accepted.retain(|&x| x != t);
                        }
                    }
                    let mut first = messages.remove(0);
                    for m in messages {
                        first.message.push('\n');
                        first.message.push_str(&m.message);
                    }
                    errors[si] = Some(first);
                }
                solution = p.solve(&mandatory, &lists(&accepted)).ok();
            }
        }
    }

    let mut bundles = Vec::new();
    if let Some(sel) = &solution {
        let mut why: HashMap<VarId, (Reason, Option<String>, String)> = HashMap::new();
        for &si in &accepted {
            let Some(plan) = &plans[si] else { continue };
            let sub = &request.subscriptions[si];
            for &c in &plan.candidates {
                let current_name = plan.current.map(|cv| p.entry(cv).name.clone());
                let reason = if current_name.is_some() { Reason::Upgrade } else { Reason::Install };
                why.entry(c).or_insert((reason, current_name, sub.name.clone()));
            }
        }
        for &v in sel {
            let Src::Catalog(c, _) = p.vars[v as usize].src else { continue };
            let e = p.entry(v);
            let cat = &catalogs.catalogs[c as usize];
            let (reason, replaces, subscription) = match why.get(&v) {
                Some((r, rep, s)) => (*r, rep.clone().or_else(|| e.replaces.clone()), Some(s.clone())),
                None => (Reason::Dependency, e.replaces.clone(), None),
            };
            bundles.push(Selected {
                name: e.name.clone(),
                package: e.package.clone(),
                channel: e.channel.clone(),
                version: e.version.clone(),
                catalog: cat.key.clone(),
                replaces,
                reason,
                subscription,
            });
        }
        bundles.sort_by(|a, b| a.name.cmp(&b.name).then(a.catalog.cmp(&b.catalog)));
    }
    let notices = crate::explain::deprecation_notices(&p, solution.as_deref().unwrap_or(&[]));
    Resolution { bundles, errors: errors.into_iter().flatten().collect(), notices }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CatalogKey, CatalogSnapshot, Dependency, Entry, Gvk, Version, VersionRange};
    use crate::request::{Installed, Request, Subscription};

    /// A small deterministic pseudo-random generator (no dependency needed).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn random_catalog(rng: &mut Lcg) -> Vec<Entry> {
        let packages = 3 + rng.next(5) as usize;
        let mut entries = Vec::new();
        for p in 0..packages {
            let versions = 1 + rng.next(4) as usize;
            let channels: &[&str] = if rng.next(3) == 0 { &["a", "b"] } else { &["a"] };
            for (ci, ch) in channels.iter().enumerate() {
                for v in 0..versions {
                    let mut deps = Vec::new();
                    for _ in 0..rng.next(3) {
                        let q = rng.next(packages as u64);
                        if rng.next(2) == 0 {
                            deps.push(Dependency::new(Requirement::Gvk(Gvk::new("g", "v", format!("K{q}")))));
                        } else {
                            let lo = rng.next(3);
                            let range = VersionRange::parse(&format!(">=1.{lo}.0 <1.{}.0", lo + 1 + rng.next(3)))
                                .expect("range");
                            deps.push(Dependency::new(Requirement::Package { name: format!("p{q}"), range }));
                        }
                    }
                    let mut gvks = vec![Gvk::new("g", "v", format!("K{p}"))];
                    if rng.next(4) == 0 {
                        gvks.push(Gvk::new("g", "v", format!("K{}", rng.next(packages as u64))));
                    }
                    entries.push(Entry {
                        name: format!("p{p}.v{v}"),
                        package: format!("p{p}"),
                        channel: ch.to_string(),
                        default_channel: ci == 0,
                        replaces: if v > 0 { Some(format!("p{p}.v{}", v - 1)) } else { None },
                        version: Some(Version::new(1, v as u64, 0)),
                        provided_gvks: gvks,
                        dependencies: deps,
                        deprecated: rng.next(10) == 0,
                        ..Entry::default()
                    });
                }
            }
        }
        entries
    }

    #[test]
    fn fast_search_finds_exactly_what_plain_backtracking_finds() {
        let mut rng = Lcg(7);
        let mut solved = 0;
        let mut unsat = 0;
        for round in 0..600 {
            let entries = random_catalog(&mut rng);
            let packages: Vec<String> = {
                let mut v: Vec<String> = entries.iter().map(|e| e.package.clone()).collect();
                v.dedup();
                v
            };
            let cats = Catalogs::new([CatalogSnapshot::new(CatalogKey::new("c", "olm"), 0, entries)]);
            let mut req = Request::new("ns");
            for _ in 0..1 + rng.next(3) {
                let pkg = &packages[rng.next(packages.len() as u64) as usize];
                if req.subscriptions.iter().all(|s| &s.package != pkg) {
                    req.subscriptions.push(Subscription::new(pkg.clone(), CatalogKey::new("c", "olm")));
                }
            }
            if rng.next(3) == 0 {
                let pkg = &packages[rng.next(packages.len() as u64) as usize];
                req.installed.push(Installed::from_catalogs(&cats, &format!("{pkg}.v0"), pkg, None, None));
            }
            let mut p = Problem::new(&cats, &req);
            let mut mandatory = Vec::new();
            let owned: HashSet<u32> = req.subscriptions.iter().filter_map(|s| current_of(&req, s)).collect();
            for i in 0..req.installed.len() as u32 {
                let v = p.var(Src::Installed(i));
                if !owned.contains(&i) {
                    mandatory.push(v);
                }
            }
            if p.expand(&mandatory).is_err() {
                continue;
            }
            let mut lists = Vec::new();
            for sub in &req.subscriptions {
                if let Ok(plan) = crate::explain::plan_subscription(&mut p, sub) {
                    let mut roots = plan.candidates.clone();
                    roots.extend(plan.current);
                    if p.expand(&roots).is_ok() {
                        lists.push(plan.candidates);
                    }
                }
            }
            let refs: Vec<&[VarId]> = lists.iter().map(Vec::as_slice).collect();
            let fast = p.solve(&mandatory, &refs);
            let slow = p.solve_naive(&mandatory, &refs);
            assert_eq!(fast, slow, "round {round}");
            if fast.is_ok() { solved += 1 } else { unsat += 1 }
        }
        assert!(solved > 50 && unsat > 20, "the generator must produce both outcomes: {solved} solved, {unsat} unsat");
    }
}
