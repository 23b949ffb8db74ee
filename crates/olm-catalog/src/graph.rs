//! A channel's upgrade graph, on petgraph: one node per channel entry, one edge per
//! upgrade edge, pointing from the newer entry to the bundle it upgrades from.
//!
//! * `replaces: B` and `skips: [B]` give an edge to `B`, found by name. A name no
//!   entry of the channel has (an older bundle, or one in another channel) gets a
//!   node of its own that no entry is: then "what upgrades from B" is a look at B's
//!   incoming edges whether or not B is in the channel.
//! * `skipRange: R` gives an edge to every other entry whose version is in `R`.
//!
//! Both the catalog's validation (head, cycles, stranded entries, the replaces chain)
//! and the resolver (channel order, upgrade candidates of an installed operator) read
//! the same graph. Head, cycle and stranded-entry rules follow operator-registry and
//! look at `replaces` and `skips` edges only; `skipRange` edges are upgrade paths, not
//! structure.

use std::collections::{HashMap, HashSet};

use petgraph::Direction;
use petgraph::algo::{astar, tarjan_scc};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{EdgeFiltered, EdgeRef};

use crate::version::{Version, VersionRange};

/// Most (entry with a skipRange, entry) pairs a channel's graph checks to draw its skipRange
/// edges. A channel with more still has its replaces and skips edges, and its successors are
/// found by asking the ranges; only a path to the head then takes a skipRange for its first
/// step alone.
pub const MAX_SKIP_RANGE_PAIRS: usize = 1 << 18;

/// What kind of upgrade edge an edge is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// `replaces`: the entry's predecessor in the channel.
    Replaces,
    /// `skips`: a bundle the entry upgrades from and makes uninstallable.
    Skips,
    /// `skipRange`: a bundle whose version is in the entry's range.
    SkipRange,
}

/// The upgrade edges one channel entry declares. Implemented by the catalog's
/// [`crate::ChannelEntry`] and by the resolver's entries.
pub trait UpgradeEdges {
    /// The bundle name.
    fn name(&self) -> &str;
    /// The bundle this one replaces.
    fn replaces(&self) -> Option<&str>;
    /// Bundles this one skips.
    fn skips(&self) -> &[String];
    /// The parsed `skipRange`.
    fn skip_range(&self) -> Option<&VersionRange>;

    /// The kind of edge from this entry to the bundle `name` at `version`: it replaces
    /// it, skips it, or its skipRange contains the version (first that holds).
    fn edge_to(&self, name: &str, version: Option<&Version>) -> Option<EdgeKind> {
        if self.replaces() == Some(name) {
            Some(EdgeKind::Replaces)
        } else if self.skips().iter().any(|s| s == name) {
            Some(EdgeKind::Skips)
        } else if matches!((self.skip_range(), version), (Some(r), Some(v)) if r.contains(v)) {
            Some(EdgeKind::SkipRange)
        } else {
            None
        }
    }

    /// Whether this entry is an upgrade from the bundle `name` at `version`.
    fn upgrades_from(&self, name: &str, version: Option<&Version>) -> bool {
        self.edge_to(name, version).is_some()
    }
}

/// One channel's upgrade graph. Entries are numbered in the order given to
/// [`ChannelGraph::new`]; every method speaks of entries by that number. Methods that
/// read a `skipRange` again take the same entries (`entry(i)` is entry `i`).
#[derive(Debug, Clone, Default)]
pub struct ChannelGraph {
    /// Nodes `0..entries` are the entries; later nodes are names only referenced.
    graph: DiGraph<(), EdgeKind, u32>,
    entries: u32,
    /// The node of each name (with duplicate entry names, the last entry's).
    by_name: HashMap<Box<str>, u32>,
    /// Entries with a skipRange, in order.
    ranged: Vec<u32>,
    /// Whether the skipRange edges are drawn (see [`MAX_SKIP_RANGE_PAIRS`]).
    skip_range_edges: bool,
    /// Entries no entry replaces or skips, in order.
    heads: Vec<u32>,
    /// The head: the one entry of `heads`, or, where there are several (opm refuses such a
    /// channel), the one of them that no skipRange reaches either, when exactly one is. Real
    /// replaces-mode packages have such channels (gitlab-runner-operator's stable: v1.23.1 is
    /// replaced by nothing but inside v1.26.0's skipRange); upstream's SQLite-era catalogs
    /// served them, with the newest as the head, and an installed v1.23.1 upgrades by that
    /// skipRange.
    head: Option<u32>,
    /// From the unique head following `replaces`, stopping at a missing target or a loop.
    replaces_chain: Vec<u32>,
}

impl ChannelGraph {
    /// Build the graph of a channel from its entries and the version of each (which
    /// `skipRange` edges need; `None` when unknown).
    pub fn new<'a, E>(entries: impl IntoIterator<Item = (&'a E, Option<&'a Version>)>) -> ChannelGraph
    where
        E: UpgradeEdges + ?Sized + 'a,
    {
        let entries: Vec<(&E, Option<&Version>)> = entries.into_iter().collect();
        let n = entries.len() as u32;
        let mut graph = DiGraph::with_capacity(entries.len(), entries.len());
        let mut by_name: HashMap<Box<str>, u32> = HashMap::with_capacity(entries.len());
        for (i, (e, _)) in entries.iter().enumerate() {
            graph.add_node(());
            by_name.insert(e.name().into(), i as u32);
        }
        for (i, (e, _)) in entries.iter().enumerate() {
            // petgraph lists a node's edges newest first: add them in reverse so they
            // are walked as written (replaces, then skips in order).
            let targets = e.replaces().into_iter().map(|r| (r, EdgeKind::Replaces));
            let targets = targets.chain(e.skips().iter().map(|s| (s.as_str(), EdgeKind::Skips)));
            for (target, kind) in targets.collect::<Vec<_>>().into_iter().rev() {
                let to = match by_name.get(target) {
                    Some(&to) => to,
                    None => {
                        let to = graph.add_node(()).index() as u32;
                        by_name.insert(target.into(), to);
                        to
                    }
                };
                graph.add_edge(NodeIndex::new(i), NodeIndex::new(to as usize), kind);
            }
        }
        let ranged: Vec<u32> = (0..n).filter(|&i| entries[i as usize].0.skip_range().is_some()).collect();
        // Every (ranged entry, entry) pair is one containment check and maybe one edge: a
        // catalog of a few MB could otherwise ask for billions. Real channels need at most a
        // few hundred (690 in the whole community catalog); past the bound the skipRange
        // edges are not drawn, and what needs them (successors) asks the ranges instead.
        let skip_range_edges = ranged.len().saturating_mul(entries.len()) <= MAX_SKIP_RANGE_PAIRS;
        if skip_range_edges {
            for &i in &ranged {
                let Some(range) = entries[i as usize].0.skip_range() else { continue };
                for (j, (_, version)) in entries.iter().enumerate() {
                    if j != i as usize && version.is_some_and(|v| range.contains(v)) {
                        graph.add_edge(NodeIndex::new(i as usize), NodeIndex::new(j), EdgeKind::SkipRange);
                    }
                }
            }
        }
        let mut g = ChannelGraph {
            graph,
            entries: n,
            by_name,
            ranged,
            skip_range_edges,
            heads: Vec::new(),
            head: None,
            replaces_chain: Vec::new(),
        };
        g.heads = (0..n).filter(|&i| !g.has_incoming(i, |k| k != EdgeKind::SkipRange)).collect();
        g.head = match g.heads[..] {
            [head] => Some(head),
            [_, _, ..] if g.skip_range_edges => {
                let mut unreached = g.heads.iter().copied().filter(|&i| !g.has_incoming(i, |_| true));
                match (unreached.next(), unreached.next()) {
                    (Some(head), None) => Some(head),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(head) = g.head {
            g.replaces_chain = g.replaces_walk(head as usize).0.into_iter().map(|i| i as u32).collect();
        }
        g
    }

    /// Whether the skipRange edges are drawn: false past [`MAX_SKIP_RANGE_PAIRS`].
    pub fn skip_range_edges_drawn(&self) -> bool {
        self.skip_range_edges
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries as usize
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The underlying petgraph graph (nodes past [`ChannelGraph::len`] are names that
    /// entries refer to but no entry has).
    pub fn petgraph(&self) -> &DiGraph<(), EdgeKind, u32> {
        &self.graph
    }

    /// The entry with this name.
    pub fn entry(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).filter(|&&i| i < self.entries).map(|&i| i as usize)
    }

    /// Entries that no entry replaces or skips, in entry order.
    pub fn heads(&self) -> impl Iterator<Item = usize> + '_ {
        self.heads.iter().map(|&i| i as usize)
    }

    /// The head: the one entry not replaced or skipped, or, among several, the one that no
    /// skipRange reaches either (see the field).
    pub fn head(&self) -> Option<usize> {
        self.head.map(|i| i as usize)
    }

    /// Entries from the unique head following `replaces` (newest first), stopping at a
    /// missing target or where the chain loops; empty without a unique head.
    pub fn replaces_chain(&self) -> impl Iterator<Item = usize> + '_ {
        self.replaces_chain.iter().map(|&i| i as usize)
    }

    /// The entry `entry` replaces, when it is in the channel.
    pub fn replaces_of(&self, entry: usize) -> Option<usize> {
        self.graph
            .edges(NodeIndex::new(entry))
            .find(|e| *e.weight() == EdgeKind::Replaces)
            .map(|e| e.target().index())
            .filter(|&t| t < self.len())
    }

    /// Entries from `from` following `replaces`, and whether the chain came back to an
    /// entry already on it (where it stops).
    pub fn replaces_walk(&self, from: usize) -> (Vec<usize>, bool) {
        let mut on_chain = vec![false; self.len()];
        let mut chain = Vec::new();
        let mut cur = Some(from);
        while let Some(i) = cur {
            if on_chain[i] {
                return (chain, true);
            }
            on_chain[i] = true;
            chain.push(i);
            cur = self.replaces_of(i);
        }
        (chain, false)
    }

    /// Whether some entry skips the bundle `name`.
    pub fn is_skipped(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|&n| self.has_incoming(n, |k| k == EdgeKind::Skips))
    }

    /// The first entry (in entry order) that skips the bundle `name`.
    pub fn skipped_by(&self, name: &str) -> Option<usize> {
        let &n = self.by_name.get(name)?;
        self.graph
            .edges_directed(NodeIndex::new(n as usize), Direction::Incoming)
            .filter(|e| *e.weight() == EdgeKind::Skips)
            .map(|e| e.source().index())
            .min()
    }

    /// The cycles over `replaces` and `skips` edges: one per strongly connected component
    /// that loops (petgraph's Tarjan), named from its first entry in entry order along the
    /// shortest way back to it, in entry order of those first entries. A self-replacing
    /// entry is a cycle of one.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let structural = EdgeFiltered::from_fn(&self.graph, |e| *e.weight() != EdgeKind::SkipRange);
        let mut cycles: Vec<Vec<usize>> = tarjan_scc(&structural)
            .into_iter()
            .filter_map(|component| {
                // Nodes past the entries are names only referenced: no outgoing edges, no loops.
                let start = component.iter().map(|n| n.index()).min()?;
                if component.len() == 1 {
                    return self.structural_targets(start).any(|t| t == start).then(|| vec![start]);
                }
                let members: HashSet<NodeIndex<u32>> = component.into_iter().collect();
                let inside = EdgeFiltered::from_fn(&self.graph, |e| {
                    *e.weight() != EdgeKind::SkipRange && members.contains(&e.source()) && members.contains(&e.target())
                });
                // The shortest way back to `start` through each of its successors; ties go to
                // the first edge as written.
                let mut best: Option<Vec<NodeIndex<u32>>> = None;
                for next in self.structural_targets(start).filter(|t| members.contains(&NodeIndex::new(*t))) {
                    let back = astar(&inside, NodeIndex::new(next), |n| n.index() == start, |_| 1usize, |_| 0);
                    if let Some((_, path)) = back
                        && best.as_ref().is_none_or(|b| path.len() < b.len())
                    {
                        best = Some(path);
                    }
                }
                let back = best?;
                let mut cycle = vec![start];
                cycle.extend(back[..back.len() - 1].iter().map(|n| n.index()));
                Some(cycle)
            })
            .collect();
        cycles.sort_by_key(|cycle| cycle[0]);
        cycles
    }

    /// With a unique head: entries neither on the replaces chain from it nor skipped by
    /// any entry (operator-registry's set-based `validateReplacesChain` rule), in entry
    /// order. Without a unique head there is no chain to be stranded from: empty.
    pub fn stranded(&self) -> Vec<usize> {
        if self.heads.len() != 1 {
            return Vec::new();
        }
        let mut on_chain = vec![false; self.len()];
        for i in self.replaces_chain() {
            on_chain[i] = true;
        }
        (0..self.len())
            .filter(|&i| !on_chain[i] && !self.has_incoming(i as u32, |k| k == EdgeKind::Skips))
            .collect()
    }

    /// Entries that upgrade from the bundle `name` at `version` (replace it, skip it,
    /// or have a skipRange containing the version), in entry order. The bundle need not
    /// be in the channel. An entry of that name is never one, even when its own skipRange
    /// contains `version` (real heads' do): that would be an upgrade to itself. Nor is an
    /// entry the bundle itself upgrades from, directly or through others, by `replaces` or
    /// `skips` (its [`ChannelGraph::predecessors`]): a skipRange with no upper bound
    /// (`>=0.12.0` on every bundle of a real package) covers newer versions too, and taking
    /// it would walk the channel backwards and write a CSV replacing its own replacement.
    /// Upstream gets the same answer from channel order: the installed bundle, a candidate
    /// of its own range, ranks above everything it replaces. `entry(i)` must give entry `i`
    /// as built.
    pub fn successors<'e, E>(&self, entry: impl Fn(usize) -> &'e E, name: &str, version: Option<&Version>) -> Vec<usize>
    where
        E: UpgradeEdges + ?Sized + 'e,
    {
        let mut out: Vec<usize> = match self.by_name.get(name) {
            Some(&n) => self
                .graph
                .edges_directed(NodeIndex::new(n as usize), Direction::Incoming)
                .filter(|e| *e.weight() != EdgeKind::SkipRange)
                .map(|e| e.source().index())
                .collect(),
            None => Vec::new(),
        };
        if let Some(v) = version {
            out.extend(
                self.ranged
                    .iter()
                    .map(|&i| i as usize)
                    .filter(|&i| entry(i).skip_range().is_some_and(|r| r.contains(v))),
            );
        }
        out.retain(|&i| entry(i).name() != name);
        if !out.is_empty() {
            let older = self.predecessors(name);
            out.retain(|i| !older.contains(i));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Entries the bundle `name` upgrades from, directly or through others, following
    /// `replaces` and `skips` (not skipRange, which may point either way), in no order.
    pub fn predecessors(&self, name: &str) -> HashSet<usize> {
        let mut seen = HashSet::new();
        let Some(&start) = self.by_name.get(name) else { return seen };
        let mut stack = vec![start as usize];
        while let Some(node) = stack.pop() {
            for target in self.structural_targets(node) {
                if seen.insert(target) {
                    stack.push(target);
                }
            }
        }
        seen
    }

    /// The shortest upgrade path from the bundle `name` at `version` (in the channel or
    /// not) to the unique head: each step an entry and the kind of edge by which it
    /// upgrades from the step before. Empty when the bundle is the head; `None` without
    /// a unique head or when no path leads there. Ties go to the earliest entry. In a
    /// channel past [`MAX_SKIP_RANGE_PAIRS`], a skipRange is taken for the first step only.
    pub fn path_to_head<'e, E>(
        &self,
        entry: impl Fn(usize) -> &'e E,
        name: &str,
        version: Option<&Version>,
    ) -> Option<Vec<(usize, EdgeKind)>>
    where
        E: UpgradeEdges + ?Sized + 'e,
    {
        let head = self.head()?;
        let own = self.entry(name);
        if own == Some(head) {
            return Some(Vec::new());
        }
        let reversed = petgraph::visit::Reversed(&self.graph);
        let mut best: Option<(usize, Vec<(usize, EdgeKind)>)> = None;
        for first in self.successors(&entry, name, version) {
            let Some(kind) = entry(first).edge_to(name, version) else { continue };
            let Some((cost, nodes)) = astar(reversed, NodeIndex::new(first), |n| n.index() == head, |_| 1usize, |_| 0)
            else {
                continue;
            };
            if best.as_ref().is_some_and(|(c, _)| *c <= cost) {
                continue;
            }
            let mut path = vec![(first, kind)];
            for pair in nodes.windows(2) {
                let (older, newer) = (pair[0], pair[1]);
                let kind = self
                    .graph
                    .edges_connecting(newer, older)
                    .map(|e| *e.weight())
                    .min()
                    .unwrap_or(EdgeKind::SkipRange);
                path.push((newer.index(), kind));
            }
            best = Some((cost, path));
        }
        best.map(|(_, path)| path)
    }

    /// Entry targets of `replaces` and `skips` edges from `entry`, as written.
    fn structural_targets(&self, entry: usize) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .edges(NodeIndex::new(entry))
            .filter(|e| *e.weight() != EdgeKind::SkipRange)
            .map(|e| e.target().index())
            .filter(|&t| t < self.len())
    }

    fn has_incoming(&self, node: u32, kind: impl Fn(EdgeKind) -> bool) -> bool {
        self.graph
            .edges_directed(NodeIndex::new(node as usize), Direction::Incoming)
            .any(|e| kind(*e.weight()))
    }
}

#[cfg(test)]
mod tests;
