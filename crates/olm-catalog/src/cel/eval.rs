//! Evaluating a rule within a budget of steps: every node evaluated, every macro iteration
//! and every value a variable's copy holds costs one step, and a rule that runs past
//! [`EVAL_BUDGET`] stops with [`Stop::OverBudget`], which no `&&`/`||` swallows.
//! [`estimate`] is the same count made before any evaluation, with `properties` and lists
//! of unknown length taken as [`ASSUMED_LIST_LEN`] long.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::parse::{Expr, Node};
use super::{ASSUMED_LIST_LEN, ASSUMED_PROPERTY_VALUES, EVAL_BUDGET};
use crate::version::Version;

/// Why an evaluation stopped without a boolean.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stop {
    /// The rule took more than [`EVAL_BUDGET`] steps.
    OverBudget,
    /// The rule does not apply to these values (a missing field, a type mismatch): CEL's
    /// error value, which `&&` and `||` may absorb.
    Error(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Error(message)
    }
}
impl From<&str> for Stop {
    fn from(message: &str) -> Stop {
        Stop::Error(message.to_owned())
    }
}

type Env = Vec<(String, Value)>;

pub(super) struct Evaluation {
    env: Env,
    steps: u64,
}

impl Evaluation {
    pub fn new(properties: Vec<Value>) -> Evaluation {
        Evaluation { env: vec![("properties".to_string(), Value::Array(properties))], steps: 0 }
    }

    fn charge(&mut self, steps: u64) -> Result<(), Stop> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > EVAL_BUDGET { Err(Stop::OverBudget) } else { Ok(()) }
    }

    pub fn eval(&mut self, e: &Expr) -> Result<Value, Stop> {
        self.charge(1)?;
        Ok(match &e.node {
            Node::Lit(v) => v.clone(),
            Node::Ident(n) => {
                let value = self.env.iter().rev().find(|(k, _)| k == n).map(|(_, v)| v.clone());
                let value = value.ok_or_else(|| format!("unknown name {n}"))?;
                self.charge(copied(&value))?;
                value
            }
            Node::Member(t, name) => match self.eval(t)? {
                Value::Object(m) => m.get(name).cloned().ok_or_else(|| format!("no field {name}"))?,
                _ => return Err(format!("field {name} of a non-map").into()),
            },
            Node::Index(t, i) => match (self.eval(t)?, self.eval(i)?) {
                (Value::Object(m), Value::String(k)) => m.get(&k).cloned().ok_or_else(|| format!("no key {k}"))?,
                (Value::Array(a), Value::Number(n)) => {
                    n.as_u64().and_then(|i| a.get(usize::try_from(i).ok()?).cloned()).ok_or("index out of range")?
                }
                _ => return Err("bad index".into()),
            },
            Node::Not(x) => Value::Bool(!truth(&self.eval(x)?)?),
            Node::Neg(x) => match self.eval(x)? {
                Value::Number(n) => Value::from(n.as_i64().and_then(i64::checked_neg).ok_or("not a negatable integer")?),
                _ => return Err("negation of a non-number".into()),
            },
            // CEL's && and || tolerate an error on one side when the other decides; running
            // out of budget is not such an error.
            Node::And(a, b) => match self.boolean(a) {
                Ok(false) => Value::Bool(false),
                Ok(true) => Value::Bool(self.boolean(b)?),
                Err(Stop::OverBudget) => return Err(Stop::OverBudget),
                Err(err) => match self.boolean(b) {
                    Ok(false) => Value::Bool(false),
                    Err(Stop::OverBudget) => return Err(Stop::OverBudget),
                    _ => return Err(err),
                },
            },
            Node::Or(a, b) => match self.boolean(a) {
                Ok(true) => Value::Bool(true),
                Ok(false) => Value::Bool(self.boolean(b)?),
                Err(Stop::OverBudget) => return Err(Stop::OverBudget),
                Err(err) => match self.boolean(b) {
                    Ok(true) => Value::Bool(true),
                    Err(Stop::OverBudget) => return Err(Stop::OverBudget),
                    _ => return Err(err),
                },
            },
            Node::Cmp(op, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Value::Bool(compare(op, &x, &y)?)
            }
            Node::List(items) => Value::Array(items.iter().map(|i| self.eval(i)).collect::<Result<_, _>>()?),
            Node::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    let Value::String(k) = self.eval(k)? else { return Err("map keys must be strings".into()) };
                    let v = self.eval(v)?;
                    m.insert(k, v);
                }
                Value::Object(m)
            }
            Node::Call(target, name, args) => self.call(target.as_deref(), name, args)?,
        })
    }

    fn boolean(&mut self, e: &Expr) -> Result<bool, Stop> {
        let v = self.eval(e)?;
        truth(&v)
    }

    fn call(&mut self, target: Option<&Expr>, name: &str, args: &[Expr]) -> Result<Value, Stop> {
        match (target, name, args) {
            (Some(t), "exists" | "all" | "exists_one", [Expr { node: Node::Ident(var), .. }, pred]) => {
                let Value::Array(items) = self.eval(t)? else { return Err(format!("{name} needs a list").into()) };
                let mut count = 0usize;
                for item in items {
                    self.charge(1)?;
                    self.env.push((var.clone(), item));
                    let r = self.boolean(pred);
                    self.env.pop();
                    match (name, r) {
                        (_, Err(Stop::OverBudget)) => return Err(Stop::OverBudget),
                        ("exists", Ok(true)) => return Ok(Value::Bool(true)),
                        ("all", Ok(false)) => return Ok(Value::Bool(false)),
                        ("all", Err(e)) => return Err(e),
                        ("exists_one", Ok(true)) => count += 1,
                        _ => {}
                    }
                }
                Ok(Value::Bool(match name {
                    "exists" => false,
                    "all" => true,
                    _ => count == 1,
                }))
            }
            (None, "semver_compare", [a, b]) | (Some(a), "semver_compare", [b]) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                let parse = |v: &Value| -> Result<Version, Stop> {
                    let s = v.as_str().ok_or("semver_compare needs strings")?;
                    Version::parse(s.trim_start_matches('v')).map_err(|e| Stop::Error(format!("{s:?}: {e}")))
                };
                Ok(Value::from(match parse(&x)?.cmp_precedence(&parse(&y)?) {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                }))
            }
            (None, "size", [a]) | (Some(a), "size", []) => Ok(Value::from(match self.eval(a)? {
                Value::Array(v) => v.len(),
                Value::Object(m) => m.len(),
                Value::String(s) => s.chars().count(),
                _ => return Err("size of a scalar".into()),
            } as u64)),
            (Some(t), "has", []) | (None, "has", [t]) => match &t.node {
                Node::Member(obj, field) => Ok(Value::Bool(matches!(self.eval(obj)?, Value::Object(m) if m.contains_key(field)))),
                _ => Err("has() needs a field selection".into()),
            },
            (Some(t), "startsWith" | "endsWith" | "contains", [a]) => {
                let (Value::String(s), Value::String(p)) = (self.eval(t)?, self.eval(a)?) else {
                    return Err(format!("{name} needs strings").into());
                };
                Ok(Value::Bool(match name {
                    "startsWith" => s.starts_with(&p),
                    "endsWith" => s.ends_with(&p),
                    _ => s.contains(&p),
                }))
            }
            _ => Err(format!("function {name} is not supported").into()),
        }
    }
}

/// The steps copying a variable's value costs: one per value in it, nested ones included
/// (copying is where the time goes).
fn copied(value: &Value) -> u64 {
    match value {
        Value::Array(items) => items.iter().fold(1, |sum, v| sum.saturating_add(copied(v))),
        Value::Object(m) => m.values().fold(1, |sum, v| sum.saturating_add(copied(v))),
        _ => 1,
    }
}

fn truth(v: &Value) -> Result<bool, Stop> {
    v.as_bool().ok_or_else(|| Stop::Error("expected a boolean".to_string()))
}

fn compare(op: &str, x: &Value, y: &Value) -> Result<bool, Stop> {
    Ok(match op {
        "==" => x == y,
        "!=" => x != y,
        "in" => match y {
            Value::Array(items) => items.contains(x),
            Value::Object(m) => x.as_str().is_some_and(|k| m.contains_key(k)),
            _ => return Err("'in' needs a list or map".into()),
        },
        _ => {
            let ord = match (x, y) {
                (Value::Number(p), Value::Number(q)) => p.as_f64().partial_cmp(&q.as_f64()),
                (Value::String(p), Value::String(q)) => Some(p.cmp(q)),
                _ => None,
            }
            .ok_or("values cannot be ordered")?;
            match op {
                "<" => ord == Ordering::Less,
                ">" => ord == Ordering::Greater,
                "<=" => ord != Ordering::Greater,
                _ => ord != Ordering::Less,
            }
        }
    })
}

/// The most steps evaluating `e` can take, lists of unknown length taken as
/// [`ASSUMED_LIST_LEN`] long (saturating: a huge estimate stays huge).
pub(super) fn estimate(e: &Expr) -> u64 {
    let children = || e.node.children().into_iter().fold(0u64, |sum, c| sum.saturating_add(estimate(c)));
    let own = match &e.node {
        // `properties` is the one list a rule is given; a macro's variable is one element.
        Node::Ident(name) if name == "properties" => 1 + ASSUMED_LIST_LEN * ASSUMED_PROPERTY_VALUES,
        Node::Ident(_) => 1 + ASSUMED_PROPERTY_VALUES,
        Node::Call(Some(t), name, args) if matches!(name.as_str(), "exists" | "all" | "exists_one") && args.len() == 2 => {
            let len = match &t.node {
                Node::List(items) => items.len() as u64,
                _ => ASSUMED_LIST_LEN,
            };
            // The target once, then per element one step, the element's copy and the predicate.
            return 1u64.saturating_add(estimate(t)).saturating_add(len.saturating_mul(2u64.saturating_add(estimate(&args[1]))));
        }
        _ => 1,
    };
    own.saturating_add(children())
}
