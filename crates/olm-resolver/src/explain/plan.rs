//! A Subscription's candidates in preference order: its catalog, package and channels
//! (the default channel first), the channel order, and for an installed operator only
//! the upgrades from it; or why there are none.

use crate::index::IndexedCatalog;
use crate::problem::{Problem, Src, SubPlan, VarId, current_of};
use crate::request::{Subscription, SubscriptionError};

use super::{category, fail, join_limited, visible_list};

/// Work out the candidates of a Subscription, in preference order, or why there are none.
pub(crate) fn plan_subscription(p: &mut Problem<'_>, sub: &Subscription) -> Result<SubPlan, SubscriptionError> {
    let req = p.req;
    let Some(ci) = p.cats.position(&sub.catalog) else {
        return Err(fail(
            sub,
            category::CATALOG_NOT_FOUND,
            format!(
                "there is no catalog {} in namespace {}. Catalogs visible from namespace {}: {}.",
                sub.catalog.name,
                sub.catalog.namespace,
                req.namespace,
                visible_list(p)
            ),
            "set spec.source and spec.sourceNamespace to one of the visible catalogs, or create the catalog.",
        ));
    };
    if !p.visible.contains(&(ci as u32)) {
        return Err(fail(
            sub,
            category::CATALOG_NOT_FOUND,
            format!(
                "catalog {} is in namespace {}, which namespace {} cannot use: a Subscription only sees catalogs in its own namespace ({}) and in the global catalog namespace ({}).",
                sub.catalog.name, sub.catalog.namespace, req.namespace, req.namespace, req.global_namespace
            ),
            &format!(
                "create the catalog in namespace {} or {}, or create the Subscription in namespace {}.",
                req.namespace, req.global_namespace, sub.catalog.namespace
            ),
        ));
    }
    let cat: &IndexedCatalog = &p.cats.catalogs[ci];
    if cat.entries.is_empty() {
        return Err(fail(
            sub,
            category::CATALOG_EMPTY,
            format!("catalog {} in namespace {} holds no operators.", cat.key.name, cat.key.namespace),
            "check that the catalog's content is served and not empty, or point the Subscription at another catalog.",
        ));
    }
    let Some(pkg) = cat.packages.get(&sub.package) else {
        return Err(package_not_found(p, sub, cat));
    };
    if let Some(ch) = &sub.channel
        && !pkg.channels.contains_key(ch)
    {
        let names: Vec<String> = pkg.channels.keys().cloned().collect();
        let default = pkg.default_channel.as_deref().map(|d| format!(" (default: {d})")).unwrap_or_default();
        return Err(fail(
            sub,
            category::CHANNEL_NOT_FOUND,
            format!(
                "package {} in catalog {} has no channel {ch}; its channels are: {}{default}.",
                sub.package,
                cat.key.name,
                names.join(", ")
            ),
            "set spec.channel to one of those channels, or remove spec.channel to use the default channel.",
        ));
    }
    // Channels to search: the requested one, or all with the default channel first.
    let mut channels: Vec<&str> = match &sub.channel {
        Some(c) => vec![c.as_str()],
        None => pkg.channels.keys().map(String::as_str).collect(),
    };
    let default = pkg.default_channel.as_deref();
    channels.sort_by(|a, b| (Some(*b) == default).cmp(&(Some(*a) == default)).then(a.cmp(b)));

    let current = current_of(req, sub);
    let current_entry = current.map(|i| &req.installed[i as usize].entry);
    let starting = if current.is_none() { sub.starting_csv.as_deref() } else { None };

    let mut ordered: Vec<u32> = Vec::new();
    // First installs the namespace's OperatorGroup cannot run: left out, as upgrades are (a
    // CSV that would fail UnsupportedOperatorGroup is no install).
    let mut unfit: Vec<u32> = Vec::new();
    let mut found_start = false;
    for ch in &channels {
        let Some(chan) = pkg.channels.get(*ch) else { continue };
        if let Some(start) = starting {
            // Only the starting bundle; it may be one that others skip.
            let hits: Vec<u32> =
                chan.members.iter().copied().filter(|&i| cat.entries[i as usize].name == start).collect();
            found_start |= !hits.is_empty();
            ordered.extend(hits.into_iter().take(1));
            continue;
        }
        match &chan.order {
            Ok(order) => match current_entry {
                // Upgrades only: the entries with an edge from the installed bundle.
                // An upgrade the namespace's OperatorGroup cannot run is none: the installed
                // operator keeps running (the Subscription says why it stays behind).
                Some(cur) => {
                    let successors = chan.successors(&cat.entries, cur);
                    ordered.extend(
                        order
                            .iter()
                            .copied()
                            .filter(|i| successors.contains(i) && req.fits_install_modes(&cat.entries[*i as usize])),
                    );
                }
                None => {
                    let (fit, not): (Vec<u32>, Vec<u32>) =
                        order.iter().copied().partition(|i| req.fits_install_modes(&cat.entries[*i as usize]));
                    ordered.extend(fit);
                    unfit.extend(not);
                }
            },
            Err(msg) => {
                return Err(fail(
                    sub,
                    category::INVALID_CATALOG_GRAPH,
                    format!("catalog {}: {msg}.", cat.key.name),
                    "fix the upgrade graph of that channel in the catalog, or subscribe to another channel.",
                ));
            }
        }
    }
    if let Some(start) = starting
        && !found_start
    {
        let mut names: Vec<String> = Vec::new();
        for ch in &channels {
            if let Some(chan) = pkg.channels.get(*ch) {
                for &i in &chan.members {
                    let n = &cat.entries[i as usize].name;
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
        }
        let where_ = match &sub.channel {
            Some(c) => format!("channel {c} of package {}", sub.package),
            None => format!("package {}", sub.package),
        };
        return Err(fail(
            sub,
            category::STARTING_CSV_NOT_FOUND,
            format!(
                "there is no bundle named {start} in {where_} in catalog {}; the bundles there are: {}.",
                cat.key.name,
                join_limited(&names, 20)
            ),
            "set spec.startingCSV to one of those bundles, or remove it to start at the head of the channel.",
        ));
    }
    if ordered.is_empty() && !unfit.is_empty() {
        let mut names: Vec<String> = Vec::new();
        for &i in &unfit {
            let entry = &cat.entries[i as usize];
            let text = format!("{} ({})", entry.name, entry.install_modes.as_deref().unwrap_or_default().join(", "));
            if !names.contains(&text) {
                names.push(text);
            }
        }
        return Err(fail(
            sub,
            category::UNSUPPORTED_INSTALL_MODE,
            format!(
                "the namespace's OperatorGroup needs install mode {}, and no bundle of {} supports it; they support: {}.",
                req.install_modes.join(" and "),
                match &sub.channel {
                    Some(c) => format!("channel {c}"),
                    None => format!("package {}", sub.package),
                },
                join_limited(&names, 5)
            ),
            "change the OperatorGroup's targetNamespaces to what the bundles support (one OperatorGroup per namespace), or subscribe to a channel whose bundles support it.",
        ));
    }
    let ci = ci as u32;
    let mut candidates: Vec<VarId> = Vec::new();
    for &i in &ordered {
        let v = p.var(Src::Catalog(ci, i));
        if !candidates.contains(&v) {
            candidates.push(v);
        }
        if sub.channel.is_none() {
            // The same bundle in the package's other channels is the same choice.
            let name = &cat.entries[i as usize].name;
            for &j in cat.by_name.get(name).map(Vec::as_slice).unwrap_or_default() {
                let e = &cat.entries[j as usize];
                let in_scope = ordered.contains(&j) || starting.is_some();
                if j != i && e.package == sub.package && in_scope {
                    let w = p.var(Src::Catalog(ci, j));
                    if !candidates.contains(&w) {
                        candidates.push(w);
                    }
                }
            }
        }
    }
    let current_var = current.map(|i| p.var(Src::Installed(i)));
    if let Some(cv) = current_var {
        for &c in &candidates {
            p.add_conflict(c, cv);
        }
        candidates.push(cv);
    }
    Ok(SubPlan { candidates, current: current_var })
}

fn package_not_found(p: &Problem<'_>, sub: &Subscription, cat: &IndexedCatalog) -> SubscriptionError {
    let req = p.req;
    let mut visible_homes = Vec::new();
    let mut hidden_homes = Vec::new();
    for (i, c) in p.cats.catalogs.iter().enumerate() {
        if c.packages.contains_key(&sub.package) {
            let text = format!("catalog {} in namespace {}", c.key.name, c.key.namespace);
            if p.visible.contains(&(i as u32)) { visible_homes.push(text) } else { hidden_homes.push(text) }
        }
    }
    if let Some(problems) = cat.left_out.get(&sub.package) {
        let why = format!(
            "package {} of catalog {} (namespace {}) was left out of the catalog for its problems: {problems}",
            sub.package, cat.key.name, cat.key.namespace
        );
        let suggestion = format!(
            "the catalog's author must fix the package (CatalogSource {} lists its problems in status.message), or subscribe from another catalog.",
            cat.key.name
        );
        return fail(sub, category::PACKAGE_NOT_FOUND, why, &suggestion);
    }
    let mut why = format!("package {} is not in catalog {} (namespace {}).", sub.package, cat.key.name, cat.key.namespace);
    let suggestion;
    if let Some(home) = visible_homes.first() {
        why.push_str(&format!(" It is in {}.", visible_homes.join(" and ")));
        let (name, ns) = home
            .strip_prefix("catalog ")
            .and_then(|r| r.split_once(" in namespace "))
            .unwrap_or((home.as_str(), ""));
        suggestion = format!("set spec.source: {name} and spec.sourceNamespace: {ns}.");
    } else if !hidden_homes.is_empty() {
        why.push_str(&format!(
            " It is in {}, which namespace {} cannot see (only its own namespace and {}).",
            hidden_homes.join(" and "),
            req.namespace,
            req.global_namespace
        ));
        suggestion = format!("make that catalog available in namespace {} or {}.", req.namespace, req.global_namespace);
    } else {
        let similar: Vec<String> = cat
            .package_names()
            .filter(|n| similar_name(n, &sub.package))
            .map(str::to_string)
            .collect();
        if similar.is_empty() {
            why.push_str(" No catalog has a package with that name.");
        } else {
            why.push_str(&format!(" Packages with similar names in that catalog: {}.", join_limited(&similar, 10)));
        }
        suggestion = "check spec.name against the package names of the catalog.".to_string();
    }
    fail(sub, category::PACKAGE_NOT_FOUND, why, &suggestion)
}

fn similar_name(candidate: &str, wanted: &str) -> bool {
    let c = candidate.to_ascii_lowercase();
    let w = wanted.to_ascii_lowercase();
    if c.contains(&w) || w.contains(&c) {
        return true;
    }
    let strip = |s: &str| s.replace(['-', '_', '.'], "").replace("operator", "");
    let (cs, ws) = (strip(&c), strip(&w));
    !cs.is_empty() && !ws.is_empty() && (cs.contains(&ws) || ws.contains(&cs))
}
