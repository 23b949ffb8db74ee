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

use crate::index::Catalogs;
use crate::problem::{Problem, Src, SubPlan, VarId, current_of};
use crate::request::{Reason, Request, Resolution, Selected, SubscriptionError};

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
    use crate::model::{CatalogKey, CatalogSnapshot, Dependency, Entry, Gvk, Requirement, Version, VersionRange};
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
