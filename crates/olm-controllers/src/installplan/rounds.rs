//! The pure part of a pass over a plan's steps: which steps it applies and which CRD changes it
//! checks before writing anything ([`plan_pass`]), in which rounds; which steps of a round a CRD
//! not yet Established holds back, and what a round's results make of the steps
//! ([`Progress`]). `reconcile::execute` does the I/O between them.

use std::collections::HashMap;

use olm_api::v1alpha1::install_plan::{Step, StepStatus};
use serde_json::Value;

use super::decide::{Pass, StepError};
use crate::plan_steps::{execution_rank, resource_of};

/// What one pass does, decided from the steps alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassPlan {
    /// CRD steps whose change is read and checked before anything is written: an unsafe CRD
    /// upgrade then writes nothing, not even the CSV, which goes in the CRDs' round. A CRD
    /// already written and waiting to be Established is looked at again, not re-checked.
    pub crd_checks: Vec<usize>,
    /// Indices of the steps applied together, round after round (by
    /// [`crate::plan_steps::execution_rank`]).
    pub rounds: Vec<Vec<usize>>,
}

fn is_done(step: &Step) -> bool {
    matches!(step.status, StepStatus::Created | StepStatus::Present)
}

fn is_crd(step: &Step) -> bool {
    step.resource.kind == "CustomResourceDefinition"
}

fn is_csv(step: &Step) -> bool {
    step.resource.kind == "ClusterServiceVersion"
}

/// The pass over `steps`: every step not done yet, and a CSV done already when objects it owns
/// are still to be applied (applied again, a no-op, for its uid), in rounds; `scoped` when a
/// group's ServiceAccount installs (its rounds differ: see `execution_rank`).
pub fn plan_pass(steps: &[Step], scoped: bool) -> PassPlan {
    let owners_left: Vec<&str> = steps
        .iter()
        .filter(|s| !is_done(s) && !is_csv(s) && !is_crd(s))
        .map(|s| s.resolving.as_str())
        .collect();
    let mut todo: Vec<usize> = (0..steps.len())
        .filter(|&i| !is_done(&steps[i]) || (is_csv(&steps[i]) && owners_left.contains(&steps[i].resource.name.as_str())))
        .collect();
    // Stable: steps of one rank keep the plan's order.
    todo.sort_by_key(|&i| execution_rank(&steps[i], scoped));
    let crd_checks = todo.iter().copied().filter(|&i| is_crd(&steps[i]) && steps[i].status != StepStatus::WaitingForApi).collect();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut rank = None;
    for i in todo {
        let this = execution_rank(&steps[i], scoped);
        match rounds.last_mut() {
            Some(round) if rank == Some(this) => round.push(i),
            _ => rounds.push(vec![i]),
        }
        rank = Some(this);
    }
    PassPlan { crd_checks, rounds }
}

/// The outcome of applying one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub status: StepStatus,
    /// The uid of an applied ClusterServiceVersion (owner of its bundle's namespaced objects).
    pub csv_uid: Option<String>,
    /// A CRD step's share was parked for the next write of its CRD (status WaitingForApi).
    pub parked: bool,
}

/// The (group, kind) a CRD manifest defines.
pub fn defined_kind(manifest: Option<&str>) -> Option<(String, String)> {
    let value: Value = serde_json::from_str(manifest?).ok()?;
    let group = value.pointer("/spec/group")?.as_str()?.to_owned();
    let kind = value.pointer("/spec/names/kind")?.as_str()?.to_owned();
    Some((group, kind))
}

/// What a pass has made of the steps so far, carried from round to round.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The steps with their statuses as this pass left them.
    pub steps: Vec<Step>,
    /// The uid of each CSV applied, by name: the owner of its namespaced objects.
    pub csv_uids: HashMap<String, String>,
    /// Kinds whose CRD is not Established yet: their objects wait for a later pass.
    pending_kinds: Vec<(String, String)>,
    waiting_for_api: bool,
    parked: bool,
}

impl Progress {
    pub fn new(steps: Vec<Step>) -> Progress {
        Progress { steps, csv_uids: HashMap::new(), pending_kinds: Vec::new(), waiting_for_api: false, parked: false }
    }

    /// The steps of `round` that may be applied now: those of a kind whose CRD is not yet
    /// Established are held back (the pass is then waiting for the API).
    pub fn runnable(&mut self, round: &[usize]) -> Vec<usize> {
        let runnable: Vec<usize> = round
            .iter()
            .copied()
            .filter(|&i| {
                let r = &self.steps[i].resource;
                !self.pending_kinds.iter().any(|(group, kind)| *group == r.group && *kind == r.kind)
            })
            .collect();
        self.waiting_for_api |= runnable.len() < round.len();
        runnable
    }

    /// Take the results of applying `applied` (step indices, in the same order): each step's
    /// new status, the CSVs' uids, the kinds a CRD not Established holds back. The first error,
    /// which ends the pass; a step of a kind OLM does not apply is marked so.
    pub fn record(&mut self, applied: &[usize], results: Vec<Result<Applied, StepError>>) -> Option<StepError> {
        let mut first_error = None;
        for (&i, result) in applied.iter().zip(results) {
            match result {
                Ok(applied) => {
                    if applied.status == StepStatus::WaitingForApi {
                        self.waiting_for_api = true;
                        self.parked |= applied.parked;
                        // A parked share's CRD serves its kind already.
                        if !applied.parked {
                            self.pending_kinds.extend(defined_kind(self.steps[i].resource.manifest.as_deref()));
                        }
                    }
                    if let Some(uid) = applied.csv_uid {
                        self.csv_uids.insert(self.steps[i].resource.name.clone(), uid);
                    }
                    self.steps[i].status = applied.status;
                }
                Err(error) => {
                    if resource_of(&self.steps[i].resource.group, &self.steps[i].resource.kind).is_none() {
                        self.steps[i].status = StepStatus::UnsupportedResource;
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error
    }

    /// The pass, ended by `error` or done.
    pub fn finish(self, error: Option<StepError>) -> Pass {
        Pass { steps: self.steps, error, waiting_for_api: self.waiting_for_api, parked: self.parked }
    }
}

#[cfg(test)]
mod tests;
