//! Why a bundle cannot be chosen: deprecated, blocked, clashing, missing a provider,
//! or only in combination; found by trying the search again without it, and put in words.

use std::collections::HashSet;

use crate::model::Requirement;
use crate::problem::{Problem, SearchFail, Src, VarId};

use super::{join_limited, name_of, own_message, short, versions_of, visible_list};

/// Why one variable cannot be selected.
pub(super) enum Why {
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

pub(super) fn clash_between(p: &Problem<'_>, a: VarId, b: VarId) -> Option<String> {
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

pub(super) struct Explainer<'x, 'a> {
    pub(super) p: &'x Problem<'a>,
    pub(super) mandatory: &'x [VarId],
    pub(super) base: &'x [VarId],
    pub(super) budget: usize,
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

    pub(super) fn why_not(&mut self, v: VarId, depth: usize, visiting: &mut HashSet<VarId>) -> Why {
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
    pub(super) fn render(&self, why: &Why) -> (String, String) {
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
            r if r.cel_over_budget() => (
                format!(
                    "{who} requires {r}{own}, but evaluating that CEL rule took more than the budget of {} steps, so no operator satisfies it",
                    olm_catalog::cel::EVAL_BUDGET
                ),
                "ask the bundle's author to simplify the rule (nest fewer macros), or use another bundle.".to_string(),
            ),
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
