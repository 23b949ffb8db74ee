//! The subset of CEL that OLM `olm.constraint` `cel` rules use, bounded.
//!
//! A rule sees one variable, `properties`: the bundle's properties as a list of
//! `{type, value}` maps. Supported: literals (strings, integers, booleans, lists, maps),
//! member access, `&&` `||` `!`, comparisons, `in`, the macros `exists`, `all` and
//! `exists_one`, and the functions `size`, `has`, `startsWith`, `endsWith`, `contains` and
//! `semver_compare` (OLM's extension). A rule outside this subset is reported when it is
//! resolved, not silently ignored.
//!
//! Why our own evaluator and not the `cel` crate: catalogs come from people the cluster admin
//! does not control, and the controllers evaluate their rules in-process, so a rule must be
//! refused before it can overflow a stack or run for minutes. The `cel` crate's parser
//! recurses without a depth limit and its interpreter has no cost budget, so neither can be
//! bounded from outside; OLM's rules use the small subset above, which is bounded here:
//! - [`MAX_RULE_CHARS`] characters (cel-go's default expression size limit);
//! - [`MAX_NESTING`] levels of nesting of any kind (unary operators, binary operators,
//!   calls, macros, parentheses), counted while parsing, so a deep rule never recurses
//!   deeper than that (`&&`/`||` chains are balanced trees, as in cel-go);
//! - an evaluation budget of [`EVAL_BUDGET`] steps, in the spirit of Kubernetes' CEL cost
//!   limits: checked when a catalog is read from an estimate ([`CelRule::check_limits`],
//!   so validate, render and serve refuse the rule naming the bundle), and enforced again
//!   while evaluating — a rule over budget fails its constraint, says so
//!   ([`CelRule::exceeded_budget`]) and is not evaluated again.

mod eval;
mod parse;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::quote::quoted;
use eval::{Evaluation, Stop};
use parse::{Expr, Node, Parser};

/// The longest rule, in characters.
pub const MAX_RULE_CHARS: usize = 100_000;
/// The deepest nesting of a rule.
pub const MAX_NESTING: usize = 100;
/// The most steps one evaluation of a rule may take.
pub const EVAL_BUDGET: u64 = 1_000_000;
/// The length an estimate takes for `properties` and other lists it cannot see.
pub const ASSUMED_LIST_LEN: u64 = 64;
/// The values an estimate takes one property to hold (`{type, value: {group, version,
/// kind}}` holds six).
pub const ASSUMED_PROPERTY_VALUES: u64 = 8;

/// Why a rule cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// Not CEL, or not the subset OLM evaluates.
    #[error("{0}")]
    Syntax(String),
    /// Past one of this module's bounds: refused when a catalog is read.
    #[error("{0}")]
    Limit(String),
}

/// A compiled CEL rule; equal and hashed by its text.
#[derive(Clone)]
pub struct CelRule {
    source: String,
    program: Arc<Expr>,
    /// Set once an evaluation ran out of budget: the rule is not evaluated again.
    over_budget: Arc<AtomicBool>,
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CelRule({})", quoted(&self.source))
    }
}

impl PartialEq for CelRule {
    fn eq(&self, other: &CelRule) -> bool {
        self.source == other.source
    }
}
impl Eq for CelRule {}
impl std::hash::Hash for CelRule {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.source.hash(state);
    }
}

impl CelRule {
    /// Compile a rule: the error says what part is not understood or which bound it passes.
    pub fn compile(source: &str) -> Result<CelRule, CelError> {
        let chars = source.chars().count();
        if chars > MAX_RULE_CHARS {
            return Err(CelError::Limit(format!(
                "the rule is {chars} characters long, more than the limit of {MAX_RULE_CHARS}; shorten it"
            )));
        }
        let program = Parser::parse(parse::lex(source)?)?;
        let cost = eval::estimate(&program);
        if cost > EVAL_BUDGET {
            return Err(CelError::Limit(format!(
                "evaluating the rule may take {} steps, more than the budget of {EVAL_BUDGET} (with {ASSUMED_LIST_LEN} properties per bundle); nest fewer macros (exists, all, exists_one)",
                if cost == u64::MAX { "more than 2^64".to_owned() } else { cost.to_string() }
            )));
        }
        Ok(CelRule { source: source.to_string(), program: Arc::new(program), over_budget: Arc::default() })
    }

    /// The bounds a catalog is checked against when it is read: `Err` only for a rule past
    /// a limit (a rule that is not valid CEL, or not in the subset, is reported when it is
    /// resolved, as before; another CEL implementation may evaluate it).
    pub fn check_limits(source: &str) -> Result<(), CelError> {
        match CelRule::compile(source) {
            Err(err @ CelError::Limit(_)) => Err(err),
            _ => Ok(()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a bundle with these properties (`{type, value}` maps) satisfies the rule
    /// (evaluation errors count as "no", as does a rule that ran out of budget, ever).
    pub fn matches_properties(&self, properties: Vec<Value>) -> bool {
        if self.exceeded_budget() {
            return false;
        }
        match Evaluation::new(properties).eval(&self.program) {
            Ok(Value::Bool(b)) => b,
            Err(Stop::OverBudget) => {
                self.over_budget.store(true, Ordering::Relaxed);
                false
            }
            _ => false,
        }
    }

    /// Whether an evaluation of this rule ran out of its budget of [`EVAL_BUDGET`] steps.
    pub fn exceeded_budget(&self) -> bool {
        self.over_budget.load(Ordering::Relaxed)
    }

    /// Check that every function and macro is one this module evaluates.
    pub fn check_supported(&self) -> Result<(), CelError> {
        fn walk(e: &Expr) -> Result<(), CelError> {
            if let Node::Call(_, name, _) = &e.node {
                let known = matches!(
                    name.as_str(),
                    "exists" | "all" | "exists_one" | "semver_compare" | "size" | "has" | "startsWith" | "endsWith" | "contains"
                );
                if !known {
                    return Err(CelError::Syntax(format!("function {name}() is not in the supported CEL subset")));
                }
            }
            e.node.children().into_iter().try_for_each(walk)
        }
        walk(&self.program)
    }
}

#[cfg(test)]
mod tests;
