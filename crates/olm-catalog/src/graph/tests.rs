//! One test per graph rule, on channels shaped like published ones.

use super::*;
use crate::model::ChannelEntry;

/// A channel entry and its bundle's version.
struct Entry {
    entry: ChannelEntry,
    version: Version,
}

/// `etcdoperator.v{version}`, replacing, skipping and with a skipRange as given.
fn entry(version: &str, replaces: Option<&str>, skips: &[&str], range: Option<&str>) -> Entry {
    let entry = ChannelEntry {
        name: format!("etcdoperator.v{version}"),
        replaces: replaces.map(|r| format!("etcdoperator.v{r}")),
        skips: skips.iter().map(|s| format!("etcdoperator.v{s}")).collect(),
        skip_range: range.map(str::to_string),
        skip_range_parsed: range.map(|r| VersionRange::parse(r).unwrap()),
    };
    Entry { entry, version: Version::parse(version).unwrap() }
}

fn graph(entries: &[Entry]) -> ChannelGraph {
    ChannelGraph::new(entries.iter().map(|e| (&e.entry, Some(&e.version))))
}

fn names(entries: &[Entry], ids: impl IntoIterator<Item = usize>) -> Vec<&str> {
    ids.into_iter().map(|i| entries[i].entry.name.as_str()).collect()
}

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

#[test]
fn skipped_entries_are_neither_heads_nor_stranded() {
    let entries = [
        entry("0.9.4", Some("0.9.2"), &["0.9.3"], None),
        entry("0.9.3", Some("0.9.2"), &[], None),
        entry("0.9.2", Some("0.9.0"), &[], None),
        entry("0.9.0", None, &[], None),
    ];
    let g = graph(&entries);
    assert_eq!(names(&entries, g.heads()), ["etcdoperator.v0.9.4"]);
    assert_eq!(g.head(), Some(0));
    assert_eq!(names(&entries, g.replaces_chain()), ["etcdoperator.v0.9.4", "etcdoperator.v0.9.2", "etcdoperator.v0.9.0"]);
    assert!(g.stranded().is_empty());
    assert!(g.cycles().is_empty());
    assert!(g.is_skipped("etcdoperator.v0.9.3"));
    assert!(!g.is_skipped("etcdoperator.v0.9.2"));
    assert_eq!(g.skipped_by("etcdoperator.v0.9.3"), Some(0));
    // Both entries that replace 0.9.2 upgrade from it, in entry order.
    let succ = g.successors(|i| &entries[i].entry, "etcdoperator.v0.9.2", Some(&v("0.9.2")));
    assert_eq!(names(&entries, succ), ["etcdoperator.v0.9.4", "etcdoperator.v0.9.3"]);
    let succ = g.successors(|i| &entries[i].entry, "etcdoperator.v0.9.3", Some(&v("0.9.3")));
    assert_eq!(names(&entries, succ), ["etcdoperator.v0.9.4"]);
    assert_eq!(g.replaces_of(1), Some(2));
    assert_eq!(g.replaces_of(3), None);
}

#[test]
fn skip_range_edges_are_upgrades_but_not_structure() {
    let entries = [
        entry("2.0.0", Some("1.1.0"), &[], Some(">=1.0.0 <2.0.0")),
        entry("1.1.0", Some("1.0.0"), &[], None),
        entry("1.0.0", None, &[], None),
    ];
    let g = graph(&entries);
    let kinds = |from: usize, to: usize| -> Vec<EdgeKind> {
        let mut k: Vec<EdgeKind> = g
            .petgraph()
            .edges_connecting(NodeIndex::new(from), NodeIndex::new(to))
            .map(|e| *e.weight())
            .collect();
        k.sort();
        k
    };
    assert_eq!(kinds(0, 1), [EdgeKind::Replaces, EdgeKind::SkipRange]);
    assert_eq!(kinds(0, 2), [EdgeKind::SkipRange]);
    assert_eq!(g.head(), Some(0));
    // An installed bundle the channel does not list: found by its version.
    let succ = g.successors(|i| &entries[i].entry, "etcdoperator.v1.0.5", Some(&v("1.0.5")));
    assert_eq!(names(&entries, succ), ["etcdoperator.v2.0.0"]);
    assert!(g.successors(|i| &entries[i].entry, "etcdoperator.v0.9.0", Some(&v("0.9.0"))).is_empty());
    // Without a version only names count.
    assert!(g.successors(|i| &entries[i].entry, "etcdoperator.v1.0.5", None).is_empty());

    // A skipRange alone does not make an entry the predecessor of another: two heads by
    // opm's rule. But 1.0.0 upgrades to 2.0.0 by its skipRange, so 2.0.0 is the head (as
    // gitlab-runner-operator's stable channel needs); there is no replaces chain to strand
    // anything from.
    let entries = [entry("2.0.0", None, &[], Some(">=1.0.0 <2.0.0")), entry("1.0.0", None, &[], None)];
    let g = graph(&entries);
    assert_eq!(names(&entries, g.heads()), ["etcdoperator.v2.0.0", "etcdoperator.v1.0.0"]);
    assert_eq!(g.head(), Some(0));
    assert!(g.stranded().is_empty());
    let path = g.path_to_head(|i| &entries[i].entry, "etcdoperator.v1.0.0", Some(&v("1.0.0"))).expect("a path");
    assert_eq!(path.len(), 1);
    // Two heads that no skipRange reaches: still no head.
    let entries = [entry("2.0.0", None, &[], Some(">=1.0.0 <1.5.0")), entry("1.6.0", None, &[], None)];
    assert_eq!(graph(&entries).head(), None);
}

#[test]
fn cycles_are_found_over_replaces_and_skips() {
    let entries = [
        entry("3.0.0", Some("2.0.0"), &[], None),
        entry("2.0.0", Some("1.0.0"), &[], None),
        entry("1.0.0", Some("2.0.0"), &[], Some(">=3.0.0")),
        entry("0.5.0", None, &[], None),
    ];
    let g = graph(&entries);
    let cycles: Vec<Vec<&str>> = g.cycles().into_iter().map(|c| names(&entries, c)).collect();
    assert_eq!(cycles, [["etcdoperator.v2.0.0", "etcdoperator.v1.0.0"]]);
    // The skipRange edge 1.0.0 -> 3.0.0 would close a larger cycle; it does not count.
    assert_eq!(names(&entries, g.heads()), ["etcdoperator.v3.0.0", "etcdoperator.v0.5.0"]);
    // A chain that loops stops where it comes back.
    assert_eq!(g.replaces_walk(0), (vec![0, 1, 2], true));

    let entries = [entry("1.0.0", Some("1.0.0"), &[], None)];
    let g = graph(&entries);
    assert_eq!(g.cycles(), [vec![0]]);
    assert_eq!(g.heads().count(), 0);

    let entries = [entry("1.1.0", None, &["1.0.0"], None), entry("1.0.0", None, &["1.1.0"], None)];
    assert_eq!(graph(&entries).cycles(), [vec![0, 1]]);
}

#[test]
fn two_heads_have_no_chain_and_no_stranded_entries() {
    let entries = [
        entry("1.1.0", Some("1.0.0"), &[], None),
        entry("1.0.0", None, &[], None),
        entry("2.0.0", None, &[], None),
    ];
    let g = graph(&entries);
    assert_eq!(names(&entries, g.heads()), ["etcdoperator.v1.1.0", "etcdoperator.v2.0.0"]);
    assert_eq!(g.head(), None);
    assert_eq!(g.replaces_chain().count(), 0);
    assert!(g.stranded().is_empty());
    assert_eq!(g.path_to_head(|i| &entries[i].entry, "etcdoperator.v1.0.0", Some(&v("1.0.0"))), None);
}

#[test]
fn stranded_entries_are_off_the_chain_and_not_skipped() {
    let entries = [
        entry("3.0.0", Some("2.0.0"), &["1.0.0"], None),
        entry("2.0.0", None, &[], None),
        entry("1.0.0", Some("0.5.0"), &[], None),
        entry("0.5.0", None, &[], None),
    ];
    let g = graph(&entries);
    assert_eq!(g.head(), Some(0));
    assert_eq!(names(&entries, g.stranded()), ["etcdoperator.v0.5.0"]);
}

#[test]
fn path_to_head_jumps_by_skips_and_skip_range() {
    let entries = [
        entry("3.0.0", Some("2.0.0"), &["1.2.0"], None),
        entry("2.0.0", Some("1.2.0"), &[], Some(">=1.0.0 <1.2.0")),
        entry("1.2.0", Some("1.1.0"), &[], None),
        entry("1.1.0", Some("1.0.0"), &[], None),
        entry("1.0.0", Some("0.9.0"), &[], None),
    ];
    let g = graph(&entries);
    let path = |name: &str, version: &str| {
        g.path_to_head(|i| &entries[i].entry, &format!("etcdoperator.v{name}"), Some(&v(version)))
            .map(|p| p.into_iter().map(|(i, k)| (entries[i].entry.name.as_str(), k)).collect::<Vec<_>>())
    };
    assert_eq!(path("3.0.0", "3.0.0"), Some(vec![]));
    assert_eq!(path("1.2.0", "1.2.0"), Some(vec![("etcdoperator.v3.0.0", EdgeKind::Skips)]));
    assert_eq!(
        path("1.0.0", "1.0.0"),
        Some(vec![("etcdoperator.v2.0.0", EdgeKind::SkipRange), ("etcdoperator.v3.0.0", EdgeKind::Replaces)])
    );
    // Installed bundles the channel does not list: by name (0.9.0 is replaced) ...
    assert_eq!(
        path("0.9.0", "0.9.0"),
        Some(vec![
            ("etcdoperator.v1.0.0", EdgeKind::Replaces),
            ("etcdoperator.v2.0.0", EdgeKind::SkipRange),
            ("etcdoperator.v3.0.0", EdgeKind::Replaces)
        ])
    );
    // ... or by version (1.0.7 is in 2.0.0's skipRange).
    assert_eq!(
        path("1.0.7", "1.0.7"),
        Some(vec![("etcdoperator.v2.0.0", EdgeKind::SkipRange), ("etcdoperator.v3.0.0", EdgeKind::Replaces)])
    );
    // Nothing upgrades from 0.1.0.
    assert_eq!(path("0.1.0", "0.1.0"), None);
}

#[test]
fn an_open_ended_skip_range_never_leads_back_to_what_a_bundle_replaces() {
    // A real package ships `olm.skipRange: '>=0.12.0'` on every bundle: each range also
    // covers the newer bundles.
    let entries = [
        entry("0.15.0", Some("0.14.0"), &[], Some(">=0.12.0")),
        entry("0.14.0", Some("0.13.0"), &[], Some(">=0.12.0")),
        entry("0.13.0", Some("0.12.0"), &[], Some(">=0.12.0")),
        entry("0.12.0", None, &[], Some(">=0.12.0")),
    ];
    let g = graph(&entries);
    assert_eq!(g.head(), Some(0));
    let successors = |name: &str| {
        let found = g.successors(|i| &entries[i].entry, &format!("etcdoperator.v{name}"), Some(&v(name)));
        names(&entries, found)
    };
    // The head upgrades to nothing, though every older range covers its version.
    assert!(successors("0.15.0").is_empty());
    assert_eq!(g.path_to_head(|i| &entries[i].entry, "etcdoperator.v0.15.0", Some(&v("0.15.0"))), Some(vec![]));
    // A middle bundle upgrades only to newer ones; the oldest to every other.
    assert_eq!(successors("0.13.0"), ["etcdoperator.v0.15.0", "etcdoperator.v0.14.0"]);
    assert_eq!(successors("0.12.0"), ["etcdoperator.v0.15.0", "etcdoperator.v0.14.0", "etcdoperator.v0.13.0"]);
    assert_eq!(
        g.path_to_head(|i| &entries[i].entry, "etcdoperator.v0.12.0", Some(&v("0.12.0"))),
        Some(vec![(0, EdgeKind::SkipRange)])
    );
    let mut older: Vec<usize> = g.predecessors("etcdoperator.v0.14.0").into_iter().collect();
    older.sort_unstable();
    assert_eq!(names(&entries, older), ["etcdoperator.v0.13.0", "etcdoperator.v0.12.0"]);
}

#[test]
fn duplicate_names_resolve_to_the_last_entry() {
    let entries = [
        entry("1.0.0", None, &[], None),
        entry("1.1.0", Some("1.0.0"), &[], None),
        entry("1.0.0", None, &[], None),
    ];
    let g = graph(&entries);
    assert_eq!(g.entry("etcdoperator.v1.0.0"), Some(2));
    assert_eq!(g.heads().collect::<Vec<_>>(), [0, 1]);
    assert_eq!(g.entry("etcdoperator.v0.1.0"), None);
    assert_eq!(g.len(), 3);
}

#[test]
fn a_channel_with_too_many_skip_range_pairs_draws_none_and_still_answers() {
    // 600 entries, each skipping every older version: 360,000 pairs, past the bound. A
    // few MB of catalog must not become hundreds of MB of edges.
    let versions: Vec<String> = (0..600).map(|i| format!("{i}.0.0")).collect();
    let entries: Vec<Entry> = versions
        .iter()
        .enumerate()
        .map(|(i, version)| {
            let replaces = i.checked_sub(1).map(|p| versions[p].as_str());
            entry(version, replaces, &[], Some(&format!("<{version}")))
        })
        .collect();
    assert!(entries.len() * entries.len() > MAX_SKIP_RANGE_PAIRS);
    let g = graph(&entries);
    assert!(!g.skip_range_edges_drawn());
    assert_eq!(g.petgraph().edge_count(), 599, "only the replaces edges are drawn");
    assert_eq!(names(&entries, g.heads()), ["etcdoperator.v599.0.0"]);
    // Successors still see every skipRange that contains the version.
    let entry_of = |i: usize| &entries[i].entry;
    assert_eq!(g.successors(entry_of, "etcdoperator.v597.0.0", Some(&v("597.0.0"))), [598, 599]);
    // The path to the head takes a skipRange for its first step.
    let path = g.path_to_head(entry_of, "etcdoperator.v1.0.0", Some(&v("1.0.0"))).expect("a path");
    assert_eq!(path, [(599, EdgeKind::SkipRange)]);

    // Under the bound, the same shape draws its skipRange edges.
    let small: Vec<Entry> = entries.into_iter().take(20).collect();
    let g = graph(&small);
    assert!(g.skip_range_edges_drawn());
    assert_eq!(g.petgraph().edge_count(), 19 + (0..20).sum::<usize>());
}
