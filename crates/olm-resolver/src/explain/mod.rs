//! Subscription candidates, and failures explained in words a person can act on.
//!
//! Every message names the Subscription and what it asked for, says in plain words why
//! it cannot be met, and ends with a suggestion. `plan` works out a Subscription's
//! candidates; `why` finds and words why a bundle cannot be chosen.

mod plan;
mod why;

use std::collections::{BTreeSet, HashSet};

use crate::index::IndexedCatalog;
use crate::model::{Dependency, Version};
use crate::problem::{Problem, SearchFail, Src, VarId};
use crate::request::{Request, Subscription, SubscriptionError};

pub(crate) use plan::plan_subscription;
use why::{Explainer, clash_between};

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
    pub const UNSUPPORTED_INSTALL_MODE: &str = "UnsupportedInstallMode";
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
