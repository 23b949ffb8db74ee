//! The search for a selection: upstream's breadth-first walk of the choices, taking
//! the first candidate that still leaves a solution, done with chronological
//! backtracking (plus pruning and backjumping that do not change the answer).

use crate::problem::{Problem, SearchFail, VarId};

/// Upper bound on candidate attempts in one search; reaching it is reported, never looped on.
const STEP_BUDGET: u64 = 2_000_000;

impl<'a> Problem<'a> {
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
