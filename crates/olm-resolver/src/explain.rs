//! Subscription candidates, and failures explained in words a person can act on.
//!
//! Every message names the Subscription and what it asked for, says in plain words why
//! it cannot be met, and ends with a suggestion.

use std::collections::{BTreeSet, HashSet};

use crate::index::IndexedCatalog;
use crate::model::{Dependency, Requirement, Version};
use crate::request::{Request, Subscription, SubscriptionError};
use crate::problem::{Problem, SearchFail, Src, SubPlan, VarId, current_of};

/// Categories (PascalCase) of Subscription failures.
pub mod category {
    pub const CATALOG_NOT_FOUND: &str = "CatalogNotFound";
    pub const CATALOG_EMPTY: &str = "CatalogEmpty";
    pub const PACKAGE_NOT_FOUND: &str = "PackageNotFound";
    pub const CHANNEL_NOT_FOUND: &str = "ChannelNotFound";
    pub const STARTING_CSV_NOT_FOUND: &str = "StartingCSVNotFound";
    pub const INVALID_CATALOG_GRAPH: &str = "InvalidUpgradeGraph";
    pub const INVALID_DEPENDENCY: &str = "InvalidDependency";
    pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
    pub const CONFLICTING_SUBSCRIPTIONS: &str = "ConflictingSubscriptions";
    pub const INSTALLED_OPERATORS_INCONSISTENT: &str = "InstalledOperatorsInconsistent";
    pub const TOO_COMPLEX: &str = "ResolutionTooComplex";
}

/// "Subscription etcd (package etcd, channel alpha, catalog community in namespace olm)".
pub(crate) fn describe(sub: &Subscription) -> String {
    let channel = match &sub.channel {
        Some(c) => format!("channel {c}"),
        None => "default channel".to_string(),
    };
    let start = match &sub.starting_csv {
        Some(s) => format!(", startingCSV {s}"),
        None => String::new(),
    };
    format!(
        "Subscription {} (package {}, {channel}{start}, catalog {} in namespace {})",
        sub.name, sub.package, sub.catalog.name, sub.catalog.namespace
    )
}

fn fail(sub: &Subscription, category: &'static str, why: String, suggestion: &str) -> SubscriptionError {
    SubscriptionError {
        subscription: sub.name.clone(),
        category,
        message: format!("{}: {why} Suggestion: {suggestion}", describe(sub)),
    }
}

fn visible_list(p: &Problem<'_>) -> String {
    if p.visible.is_empty() {
        return "none".to_string();
    }
    p.visible
        .iter()
        .map(|&c| {
            let k = &p.cats.catalogs[c as usize].key;
            format!("{} in namespace {}", k.name, k.namespace)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn join_limited(items: &[String], limit: usize) -> String {
    if items.len() <= limit {
        items.join(", ")
    } else {
        format!("{}, and {} more", items[..limit].join(", "), items.len() - limit)
    }
}

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
                Some(cur) => {
                    let successors = chan.successors(&cat.entries, cur);
                    ordered.extend(order.iter().copied().filter(|i| successors.contains(i)));
                }
                None => ordered.extend(order.iter().copied()),
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

pub(crate) fn invalid_dependency(_req: &Request, sub: &Subscription, msg: &str) -> SubscriptionError {
    let category = if msg.contains("replaces chain") || msg.contains("has no head") || msg.contains("loops back") {
        category::INVALID_CATALOG_GRAPH
    } else {
        category::INVALID_DEPENDENCY
    };
    fail(
        sub,
        category,
        format!("its dependencies cannot be worked out: {msg}."),
        "fix that bundle's dependency properties (or the channel's upgrade graph) in the catalog, or subscribe to another channel.",
    )
}

/// Name a variable's bundle for a sentence.
fn name_of(p: &Problem<'_>, v: VarId) -> String {
    let e = p.entry(v);
    match p.vars[v as usize].src {
        Src::Installed(_) => format!("installed operator {}", e.name),
        Src::Catalog(c, _) => {
            let k = &p.cats.catalogs[c as usize].key;
            format!("bundle {} (catalog {})", e.name, k.name)
        }
    }
}

fn short(p: &Problem<'_>, v: VarId) -> String {
    p.entry(v).name.clone()
}

/// Why one variable cannot be selected.
enum Why {
    Deprecated(VarId),
    /// The bundle's package is the one a failed Subscription asks for.
    Blocked(VarId, usize),
    /// `v` clashes with `by`, which is already there (installed or required elsewhere).
    Clash { v: VarId, by: VarId, what: String },
    NoProvider { v: VarId, dep: usize },
    CandidatesFail { v: VarId, dep: usize, each: Vec<(VarId, Why)>, more: usize },
    Combination { v: VarId },
    SelfConflict { c: VarId, v: VarId, what: String },
    Deep,
    TooComplex,
}

fn clash_between(p: &Problem<'_>, a: VarId, b: VarId) -> Option<String> {
    if a == b {
        return None;
    }
    let (va, vb) = (&p.vars[a as usize], &p.vars[b as usize]);
    if va.pkg.is_some() && va.pkg == vb.pkg {
        return Some(format!("both are from package {}; a namespace holds one operator per package", p.entry(a).package));
    }
    let ea = p.entry(a);
    let eb = p.entry(b);
    if let Some(g) = ea.provided_gvks.iter().find(|g| eb.provided_gvks.contains(g)) {
        return Some(format!("both provide the API {g}; only one operator in a namespace may provide an API"));
    }
    if va.conflicts.contains(&b) {
        return Some(format!("{} replaces {}", ea.name, eb.name));
    }
    None
}

struct Explainer<'x, 'a> {
    p: &'x Problem<'a>,
    mandatory: &'x [VarId],
    base: &'x [VarId],
    budget: usize,
}

impl Explainer<'_, '_> {
    fn feasible(&mut self, v: VarId) -> Result<bool, SearchFail> {
        if self.budget == 0 {
            return Err(SearchFail::TooComplex);
        }
        self.budget -= 1;
        let one = [v];
        match self.p.solve(self.mandatory, &[&one]) {
            Ok(_) => Ok(true),
            Err(SearchFail::Unsatisfiable) => Ok(false),
            Err(SearchFail::TooComplex) => Err(SearchFail::TooComplex),
        }
    }

    fn why_not(&mut self, v: VarId, depth: usize, visiting: &mut HashSet<VarId>) -> Why {
        let p = self.p;
        let var = &p.vars[v as usize];
        if var.prohibited {
            return Why::Deprecated(v);
        }
        if let Some(si) = var.blocked_by {
            return Why::Blocked(v, si);
        }
        for &b in self.base {
            if let Some(what) = clash_between(p, v, b) {
                return Why::Clash { v, by: b, what };
            }
        }
        if let Some(slot) = var.deps.iter().find(|s| s.candidates.is_empty()) {
            return Why::NoProvider { v, dep: slot.dep };
        }
        if depth >= 4 || !visiting.insert(v) {
            return Why::Deep;
        }
        for slot in &var.deps {
            let mut any = false;
            for &c in &slot.candidates {
                if clash_between(p, c, v).is_some() {
                    continue;
                }
                match self.feasible(c) {
                    Ok(true) => {
                        any = true;
                        break;
                    }
                    Ok(false) => {}
                    Err(_) => return Why::TooComplex,
                }
            }
            if !any {
                let mut each = Vec::new();
                for &c in slot.candidates.iter().take(3) {
                    let why = match clash_between(p, c, v) {
                        Some(what) => Why::SelfConflict { c, v, what },
                        None => self.why_not(c, depth + 1, visiting),
                    };
                    each.push((c, why));
                }
                let more = slot.candidates.len().saturating_sub(3);
                visiting.remove(&v);
                return Why::CandidatesFail { v, dep: slot.dep, each, more };
            }
        }
        visiting.remove(&v);
        Why::Combination { v }
    }

    /// Render a reason; the second value is a suggestion for its root cause.
    fn render(&self, why: &Why) -> (String, String) {
        let p = self.p;
        match why {
            Why::Deprecated(v) => (
                format!("{} is deprecated (olm.deprecated) and is never installed", name_of(p, *v)),
                "choose another channel or startingCSV.".to_string(),
            ),
            Why::Blocked(v, si) => {
                let sub = &p.req.subscriptions[*si];
                (
                    format!(
                        "{} is not used because it is from package {}, and Subscription {} for that package cannot be resolved (see its error)",
                        name_of(p, *v),
                        sub.package,
                        sub.name
                    ),
                    format!("fix Subscription {} first.", sub.name),
                )
            }
            Why::Clash { v, by, what } => {
                let owner = match p.vars[*by as usize].src {
                    Src::Installed(_) => "which is installed and owned by no Subscription".to_string(),
                    Src::Catalog(..) => "which the installed operators need".to_string(),
                };
                (
                    format!("{} cannot be installed next to {}, {owner}: {what}", name_of(p, *v), name_of(p, *by)),
                    format!(
                        "uninstall {} (delete its ClusterServiceVersion) or create a Subscription for its package so it can be upgraded or replaced.",
                        short(p, *by)
                    ),
                )
            }
            Why::NoProvider { v, dep } => self.no_provider(*v, *dep),
            Why::CandidatesFail { v, dep, each, more } => {
                let d = &p.entry(*v).dependencies[*dep];
                let mut parts = Vec::new();
                let mut suggestion = String::new();
                for (c, w) in each {
                    let (text, s) = self.render(w);
                    if suggestion.is_empty() {
                        suggestion = s;
                    }
                    parts.push(format!("{}: {text}", short(p, *c)));
                }
                let more = if *more > 0 { format!("; {more} more candidates fail as well") } else { String::new() };
                (
                    format!(
                        "{} requires {}{}, and no candidate can be used ({}{more})",
                        name_of(p, *v),
                        d.requirement,
                        own_message(d),
                        parts.join("; ")
                    ),
                    suggestion,
                )
            }
            Why::SelfConflict { c, v, what } => (
                format!("{} cannot be used by {}: {what}", short(p, *c), short(p, *v)),
                "use a catalog where the dependency is provided by another package.".to_string(),
            ),
            Why::Combination { v } => {
                let e = p.entry(*v);
                let reqs: Vec<String> = e.dependencies.iter().map(|d| d.requirement.to_string()).collect();
                (
                    format!(
                        "the requirements of {} can each be met, but not all at once: {}",
                        name_of(p, *v),
                        reqs.join("; ")
                    ),
                    "look for a version of the operators whose requirements agree, or remove one of the installed operators that narrows the choice.".to_string(),
                )
            }
            Why::Deep => (
                "its chain of dependencies is too deep to explain here".to_string(),
                "resolve the dependencies one Subscription at a time to find the blocking one.".to_string(),
            ),
            Why::TooComplex => (
                "the search for a combination took too long".to_string(),
                "reduce the number of candidate versions (pin a channel or startingCSV).".to_string(),
            ),
        }
    }

    fn no_provider(&self, v: VarId, dep: usize) -> (String, String) {
        let p = self.p;
        let ns = &p.req.namespace;
        let d = &p.entry(v).dependencies[dep];
        let who = name_of(p, v);
        let own = own_message(d);
        // Entries in visible catalogs that match but are never candidates (skipped).
        let mut skipped = Vec::new();
        let mut hidden = Vec::new();
        let mut deprecated_note = String::new();
        for (i, c) in p.cats.catalogs.iter().enumerate() {
            let hits = c.find(&d.requirement);
            if hits.is_empty() {
                continue;
            }
            if p.visible.contains(&(i as u32)) {
                for &h in &hits {
                    let e = &c.entries[h as usize];
                    if let Some(by) = c
                        .packages
                        .get(&e.package)
                        .and_then(|pk| pk.channels.get(&e.channel))
                        .and_then(|ch| ch.skipped_by(&c.entries, &e.name))
                    {
                        skipped.push(format!("{} is skipped by {} in channel {}", e.name, by.name, e.channel));
                    }
                }
            } else {
                hidden.push(format!("catalog {} in namespace {}", c.key.name, c.key.namespace));
            }
        }
        skipped.sort();
        skipped.dedup();
        let mut extra = String::new();
        if !skipped.is_empty() {
            extra.push_str(&format!(
                "; matching bundles exist but are never chosen because they are skipped ({})",
                join_limited(&skipped, 5)
            ));
        }
        if !hidden.is_empty() {
            extra.push_str(&format!(
                "; {} has it, but namespace {ns} cannot use catalogs outside {ns} and {}",
                hidden.join(" and "),
                p.req.global_namespace
            ));
        }
        match &d.requirement {
            Requirement::Gvk(g) => (
                format!(
                    "{who} requires the API {g}{own}, and no operator installed in namespace {ns} or in the catalogs it can use ({}) provides it{extra}{deprecated_note}",
                    visible_list(p)
                ),
                format!(
                    "add a catalog that has an operator providing {} ({}/{}), or install such an operator in namespace {ns} first.",
                    g.kind, g.group, g.version
                ),
            ),
            Requirement::Package { name, range } => {
                let versions = versions_of(p, name);
                let text = if versions.is_empty() {
                    format!(
                        "{who} requires package {name} with a version in range {}{own}, but no catalog namespace {ns} can use has package {name}{extra}",
                        range.as_str()
                    )
                } else {
                    deprecated_note.clear();
                    format!(
                        "{who} requires package {name} with a version in range {}{own}, and no version of {name} there matches; the versions there are: {}{extra}",
                        range.as_str(),
                        join_limited(&versions, 15)
                    )
                };
                (
                    text,
                    format!(
                        "add a catalog with a version of {name} in {}, or pick a version of {} whose requirement matches an available version.",
                        range.as_str(),
                        p.entry(v).package
                    ),
                )
            }
            r if r.uses_cel() => (
                format!(
                    "{who} requires {r}{own}, and no operator installed in namespace {ns} or in the catalogs it can use ({}) satisfies the rule{extra}",
                    visible_list(p)
                ),
                "add a catalog with an operator that satisfies the rule, or use another bundle.".to_string(),
            ),
            r => (
                format!(
                    "{who} requires {r}{own}, and no operator installed in namespace {ns} or in the catalogs it can use ({}) satisfies it{extra}",
                    visible_list(p)
                ),
                "add a catalog with an operator that satisfies the requirement.".to_string(),
            ),
        }
    }
}

fn own_message(d: &Dependency) -> String {
    match &d.failure_message {
        Some(m) if !m.is_empty() => format!(" (the bundle says: \"{m}\")"),
        _ => String::new(),
    }
}

/// Distinct versions of a package in the visible catalogs, ascending.
fn versions_of(p: &Problem<'_>, package: &str) -> Vec<String> {
    let mut set: BTreeSet<Version> = BTreeSet::new();
    for &c in &p.visible {
        let cat = &p.cats.catalogs[c as usize];
        for &i in cat.by_package.get(package).map(Vec::as_slice).unwrap_or_default() {
            if let Some(v) = &cat.entries[i as usize].version {
                set.insert(v.clone());
            }
        }
    }
    set.into_iter().map(|v| v.to_string()).collect()
}

/// A Subscription that cannot be resolved even on its own.
pub(crate) fn alone(
    p: &Problem<'_>,
    mandatory: &[VarId],
    base: &[VarId],
    sub: &Subscription,
    candidates: &[VarId],
    fail_kind: SearchFail,
) -> SubscriptionError {
    if fail_kind == SearchFail::TooComplex {
        return fail(
            sub,
            category::TOO_COMPLEX,
            "the search for a consistent set of bundles gave up after too many attempts.".to_string(),
            "pin spec.channel or spec.startingCSV to narrow the choice.",
        );
    }
    let mut ex = Explainer { p, mandatory, base, budget: 200 };
    let mut reasons: Vec<(String, String)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for &c in candidates.iter().take(4) {
        let mut visiting = HashSet::new();
        let why = ex.why_not(c, 0, &mut visiting);
        let r = ex.render(&why);
        names.push(short(p, c));
        reasons.push(r);
    }
    let head_text = match candidates.len() {
        0 => "there is no bundle to install.".to_string(),
        1 => format!("{}.", reasons[0].0),
        n => {
            let mut text = format!("none of the {n} candidate bundles can be installed. {}.", reasons[0].0);
            let mut seen = vec![reasons[0].0.clone()];
            for (i, (r, _)) in reasons.iter().enumerate().skip(1) {
                if !seen.contains(r) {
                    text.push_str(&format!(" Also, for {}: {r}.", names[i]));
                    seen.push(r.clone());
                }
            }
            text
        }
    };
    let suggestion = reasons.first().map(|r| r.1.clone()).unwrap_or_else(|| "check the catalog content.".to_string());
    fail(sub, category::CONSTRAINTS_NOT_SATISFIABLE, head_text, &suggestion)
}

/// Two Subscriptions that resolve alone but not together; the message is for `a`.
pub(crate) fn pair(
    p: &Problem<'_>,
    mandatory: &[VarId],
    a: (&Subscription, &[&[VarId]]),
    b: (&Subscription, &[&[VarId]]),
) -> SubscriptionError {
    let (sa, la) = a;
    let (sb, lb) = b;
    let sel_a = p.solve(mandatory, la).unwrap_or_default();
    let sel_b = p.solve(mandatory, lb).unwrap_or_default();
    let role = |v: VarId, sub: &Subscription| -> String {
        match p.vars[v as usize].src {
            Src::Installed(_) => format!("installed operator {} (kept for Subscription {})", short(p, v), sub.name),
            Src::Catalog(..) => format!("bundle {} (needed by Subscription {})", short(p, v), sub.name),
        }
    };
    let mut detail = None;
    'outer: for &x in &sel_a {
        if mandatory.contains(&x) {
            continue;
        }
        for &y in &sel_b {
            if x == y || mandatory.contains(&y) {
                continue;
            }
            if let Some(what) = clash_between(p, x, y) {
                detail = Some(format!("{} and {}: {what}", role(x, sa), role(y, sb)));
                break 'outer;
            }
        }
    }
    let same_package = sa.package == sb.package;
    let why = match (detail, same_package) {
        (_, true) => format!(
            "Subscription {} ({}) also subscribes to package {}, no bundle satisfies both, and a namespace holds one operator per package.",
            sb.name,
            sb.channel.as_deref().map(|c| format!("channel {c}")).unwrap_or_else(|| "default channel".into()),
            sa.package
        ),
        (Some(d), _) => format!("it cannot be resolved together with Subscription {}: {d}.", sb.name),
        (None, _) => format!(
            "it cannot be resolved together with Subscription {}: every combination of their bundles breaks a rule (one operator per package, one provider per API).",
            sb.name
        ),
    };
    fail(
        sa,
        category::CONFLICTING_SUBSCRIPTIONS,
        why,
        &format!("delete one of Subscriptions {} and {}, or install them in different namespaces.", sa.name, sb.name),
    )
}

pub(crate) fn conflict_many(_req: &Request, sub: &Subscription, others: &[&str]) -> SubscriptionError {
    fail(
        sub,
        category::CONFLICTING_SUBSCRIPTIONS,
        format!(
            "it resolves on its own, but not together with Subscriptions {}: the combination breaks a rule (one operator per package, one provider per API).",
            others.join(", ")
        ),
        "resolve these Subscriptions in separate namespaces, or remove one of them.",
    )
}

/// Why the installed operators nobody subscribes to cannot stay as they are.
pub(crate) fn base_failure(p: &Problem<'_>, mandatory: &[VarId], expand_error: Option<&str>) -> String {
    if let Some(e) = expand_error {
        return e.to_string();
    }
    let none: [VarId; 0] = [];
    let mut ex = Explainer { p, mandatory: &none, base: &none, budget: 100 };
    for &m in mandatory {
        let one = [m];
        if p.solve(&one, &[]).is_err() {
            let mut visiting = HashSet::new();
            let why = ex.why_not(m, 0, &mut visiting);
            return ex.render(&why).0;
        }
    }
    for (i, &a) in mandatory.iter().enumerate() {
        for &b in &mandatory[i + 1..] {
            if let Some(what) = clash_between(p, a, b) {
                return format!("{} and {}: {what}", name_of(p, a), name_of(p, b));
            }
        }
    }
    "the installed operators that no Subscription owns cannot all keep their dependencies".to_string()
}

pub(crate) fn blocked_by_installed(req: &Request, sub: &Subscription, msg: &str) -> SubscriptionError {
    fail(
        sub,
        category::INSTALLED_OPERATORS_INCONSISTENT,
        format!(
            "nothing can be resolved in namespace {} while the installed operators are inconsistent: {msg}.",
            req.namespace
        ),
        "delete the ClusterServiceVersion named above, or create a Subscription for its package.",
    )
}

/// `olm.deprecations` notices for what the namespace ends up with (information only).
pub(crate) fn deprecation_notices(p: &Problem<'_>, selected: &[VarId]) -> Vec<String> {
    let mut out = Vec::new();
    for &v in selected {
        let e = p.entry(v);
        let cats: Vec<&IndexedCatalog> = match p.vars[v as usize].src {
            Src::Catalog(c, _) => vec![&p.cats.catalogs[c as usize]],
            Src::Installed(i) => match &p.req.installed[i as usize].catalog {
                Some(k) => p.cats.get(k).into_iter().collect(),
                None => Vec::new(),
            },
        };
        for cat in cats {
            for d in &cat.deprecations {
                if d.package != e.package {
                    continue;
                }
                let hit = match d.scope.as_str() {
                    "olm.package" => true,
                    "olm.channel" => !e.channel.is_empty() && d.name == e.channel,
                    "olm.bundle" => d.name == e.name,
                    _ => false,
                };
                if hit {
                    let name = if d.scope == "olm.package" { &d.package } else { &d.name };
                    let text = format!("{}/{}: {}", d.scope, name, d.message);
                    if !out.contains(&text) {
                        out.push(text);
                    }
                }
            }
        }
    }
    out
}

