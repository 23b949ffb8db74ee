//! opm's per-package rules, checked once every document of a package is in.

use std::collections::{BTreeMap, HashMap};

use super::catalog::{Channel, Package};
use crate::graph::ChannelGraph;
use crate::error::Problem;

pub(super) fn check_package(pkg: &mut Package, problems: &mut Vec<Problem>) {
    let src = pkg.source.clone();
    let name = pkg.name.clone();
    // Sort channels and bundles by name; rebuild indexes.
    pkg.channels.sort_by(|a, b| a.name.cmp(&b.name));
    pkg.channel_index = pkg
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    pkg.bundles.sort_by(|a, b| a.name.cmp(&b.name));
    pkg.bundle_index = pkg
        .bundles
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.clone(), i))
        .collect();

    if pkg.default_channel.is_empty() {
        problems.push(
            Problem::new("package has no defaultChannel")
                .code("MissingDefaultChannel")
                .file(src.as_deref())
                .package(&name)
                .fix("set defaultChannel to one of its channels"),
        );
    } else if !pkg.channel_index.contains_key(&pkg.default_channel) {
        problems.push(
            Problem::new(format!(
                "default channel {:?} does not exist",
                pkg.default_channel
            ))
            .code("MissingDefaultChannel")
            .file(src.as_deref())
            .package(&name)
            .fix(format!(
                "add an olm.channel named {:?} or set defaultChannel to one of: {}",
                pkg.default_channel,
                names(pkg.channels.iter().map(|c| c.name.as_str()))
            )),
        );
    }
    if pkg.channels.is_empty() {
        problems.push(
            Problem::new("package has no channels")
                .code("NoChannels")
                .file(src.as_deref())
                .package(&name)
                .fix("add an olm.channel blob listing its bundles"),
        );
    }

    let mut in_channels: HashMap<String, Vec<String>> = HashMap::new();
    for ch in &mut pkg.channels {
        let csrc = ch.source.clone();
        let (bundles, bundle_index) = (&pkg.bundles, &pkg.bundle_index);
        let version_of = |name: &str| bundle_index.get(name).map(|&i| &bundles[i].version);
        ch.graph = ChannelGraph::new(ch.entries.iter().map(|e| (e, version_of(&e.name))));
        if ch.entries.is_empty() {
            problems.push(
                Problem::new("channel has no entries")
                    .code("EmptyChannel")
                    .file(csrc.as_deref())
                    .package(&name)
                    .channel(&ch.name)
                    .fix("add at least one bundle entry"),
            );
            continue;
        }
        for e in &ch.entries {
            if pkg.bundle_index.contains_key(&e.name) {
                in_channels
                    .entry(e.name.clone())
                    .or_default()
                    .push(ch.name.clone());
            } else {
                problems.push(
                    Problem::new(format!(
                        "channel entry {:?} has no olm.bundle in the package",
                        e.name
                    ))
                    .file(csrc.as_deref())
                    .package(&name)
                    .channel(&ch.name)
                    .bundle(&e.name)
                    .code("MissingBundle")
                    .fix("add the olm.bundle or remove the entry from the channel"),
                );
            }
        }
        check_graph(ch, &name, problems);
    }
    for b in &mut pkg.bundles {
        match in_channels.remove(&b.name) {
            Some(mut chs) => {
                chs.sort();
                b.channels = chs;
            }
            None => problems.push(
                Problem::new("bundle is not in any channel")
                    .code("BundleNotInChannel")
                    .file(b.source.as_deref())
                    .package(&name)
                    .bundle(&b.name)
                    .fix(
                        "add an entry for it to a channel of the package, or remove the bundle",
                    ),
            ),
        }
    }
    for b in &pkg.bundles {
        if b.image.is_empty() && !b.has_objects() {
            problems.push(
                Problem::new("bundle image is not set and the bundle inlines no manifests (olm.bundle.object)")
                    .file(b.source.as_deref())
                    .package(&name)
                    .bundle(&b.name)
                    .code("MissingImage")
                    .fix("set \"image\" to the bundle image reference"),
            );
        }
    }
    // Unique versions (version + release).
    let mut by_version: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for b in &pkg.bundles {
        let key = match &b.release {
            Some(r) => format!("{}-{}", b.version, r),
            None => b.version.to_string(),
        };
        by_version.entry(key).or_default().push(&b.name);
    }
    for (v, bs) in by_version {
        if bs.len() > 1 {
            problems.push(
                Problem::new(format!(
                    "bundles {} share version {v}",
                    names(bs.iter().copied())
                ))
                .code("DuplicateVersion")
                .file(src.as_deref())
                .package(&name)
                .fix("give every bundle of a package a distinct version"),
            );
        }
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = it.map(|s| format!("{s:?}")).collect();
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

/// Head, cycles and stranded entries (operator-registry's `validateReplacesChain`
/// rules), read from the channel's graph.
fn check_graph(ch: &Channel, package: &str, problems: &mut Vec<Problem>) {
    let src = ch.source.clone();
    let graph = ch.graph();
    let heads: Vec<usize> = graph.heads().collect();
    match heads.as_slice() {
        [_] => {}
        [] => problems.push(
            Problem::new(
                "channel has no head: every entry is replaced or skipped by another (a cycle)",
            )
            .code("NoHead")
            .file(src.as_deref())
            .package(package)
            .channel(&ch.name)
            .fix("break the cycle so exactly one entry is not replaced or skipped"),
        ),
        many => {
            let mut hs: Vec<&str> = many.iter().map(|&i| ch.entries[i].name.as_str()).collect();
            hs.sort();
            let problem = match graph.head() {
                // Served (the other heads upgrade by a skipRange), but opm refuses it: a warning.
                Some(head) => Problem::new(format!(
                    "channel has {} heads by replaces and skips: {} (opm refuses such a channel); all but {:?} are inside a newer entry's skipRange, so it is the head",
                    hs.len(),
                    names(hs.iter().copied()),
                    ch.entries[head].name
                ))
                .warning(),
                None => Problem::new(format!("channel has {} heads: {}", hs.len(), names(hs.iter().copied()))),
            };
            problems.push(
                problem
                    .code("MultipleHeads")
                    .file(src.as_deref())
                    .package(package)
                    .channel(&ch.name)
                    .fix("make all but the newest of them replaced or skipped by another entry, so exactly one head remains"),
            );
        }
    }

    // Cycles over replaces/skips edges between entries.
    for cycle in graph.cycles() {
        let mut path: Vec<&str> = cycle.iter().map(|&i| ch.entries[i].name.as_str()).collect();
        path.push(ch.entries[cycle[0]].name.as_str());
        problems.push(
            Problem::new(format!("upgrade graph has a cycle: {}", path.join(" -> ")))
                .code("Cycle")
                .file(src.as_deref())
                .package(package)
                .channel(&ch.name)
                .fix("remove one replaces/skips edge of the cycle"),
        );
    }

    // Stranded entries. We apply the set-based rule of operator-registry's
    // `validateReplacesChain` (follow `replaces` from the head through every entry; an
    // entry is stranded when it is neither on that chain nor skipped by any entry). The
    // newer graph-based variant stops at skipped entries and rejects real published
    // catalogs (e.g. clusterpulse fast-v0 in the community v4.21 index), so we do not
    // use it.
    if let Some(head) = graph.head() {
        let mut stranded: Vec<&str> = graph.stranded().into_iter().map(|i| ch.entries[i].name.as_str()).collect();
        if !stranded.is_empty() {
            stranded.sort();
            problems.push(
                Problem::new(format!(
                    "stranded entries (neither on the replaces chain from head {:?} nor skipped by any entry): {}",
                    ch.entries[head].name,
                    names(stranded.iter().copied())
                )).code("StrandedEntries")
                .file(src.as_deref())
                .package(package)
                .channel(&ch.name)
                .fix("make an entry on the chain replace each of them, or list them in some entry's skips, or remove them"),
            );
        }
    }
}
