//! The subset of CEL that OLM `olm.constraint` `cel` rules use.
//!
//! A rule sees one variable, `properties`: the bundle's properties as a list of
//! `{type, value}` maps. Supported: literals (strings, integers, booleans, lists, maps),
//! member access, `&&` `||` `!`, comparisons, `in`, the macros `exists`, `all` and
//! `exists_one`, and the functions `size` and `semver_compare` (OLM's extension). A rule
//! outside this subset is reported when the catalog is read, not silently ignored.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use olm_catalog::version::Version;

/// A compiled CEL rule; equal and hashed by its text.
#[derive(Clone)]
pub struct CelRule {
    source: String,
    program: Arc<Expr>,
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CelRule({:?})", self.source)
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
    /// Compile a rule; the error says what part is not understood.
    pub fn compile(source: &str) -> Result<CelRule, String> {
        let tokens = lex(source)?;
        let mut p = Parser { tokens, pos: 0, depth: 0 };
        let expr = p.expr()?;
        if p.pos != p.tokens.len() {
            return Err(format!("unexpected {:?} after the end of the expression", p.tokens[p.pos]));
        }
        Ok(CelRule { source: source.to_string(), program: Arc::new(expr) })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a bundle with these properties (`{type, value}` maps) satisfies the rule
    /// (evaluation errors count as "no").
    pub fn matches_properties(&self, properties: Vec<Value>) -> bool {
        let mut env = vec![("properties".to_string(), Value::Array(properties))];
        matches!(eval(&self.program, &mut env, 0), Ok(Value::Bool(true)))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Sym(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    const SYMS: [&str; 19] =
        ["&&", "||", "==", "!=", "<=", ">=", "(", ")", "{", "}", "[", "]", ",", ":", ".", "!", "<", ">", "-"];
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("a string literal is not closed".into()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => text.push('\n'),
                            Some(&o) => text.push(o),
                            None => return Err("a string literal is not closed".into()),
                        }
                    }
                    Some(&o) => text.push(o),
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(text));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Int(text.parse().map_err(|_| format!("number {text} is too large"))?));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(sym) = SYMS.iter().find(|s| rest.starts_with(**s)) else {
                return Err(format!("character {c:?} is not part of the supported CEL subset"));
            };
            out.push(Tok::Sym(sym));
            i += sym.len();
        }
    }
    Ok(out)
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Value),
    Ident(String),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(Option<Box<Expr>>, String, Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(&'static str, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Map(Vec<(Expr, Expr)>),
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
    depth: usize,
}

const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }
    fn eat(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, sym: &str) -> Result<(), String> {
        if self.eat(sym) { Ok(()) } else { Err(format!("expected {sym:?} at {:?}", self.peek())) }
    }
    fn expr(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("the rule is nested too deeply".into());
        }
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(left)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.rel()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.rel()?));
        }
        Ok(left)
    }
    fn rel(&mut self) -> Result<Expr, String> {
        let left = self.unary()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                return Ok(Expr::Cmp(op, Box::new(left), Box::new(self.unary()?)));
            }
        }
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "in") {
            self.pos += 1;
            return Ok(Expr::Cmp("in", Box::new(left), Box::new(self.unary()?)));
        }
        Ok(left)
    }
    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.postfix()
    }
    fn args(&mut self) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }
    fn postfix(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return Err("expected a name after '.'".into());
                };
                self.pos += 1;
                if self.eat("(") {
                    e = Expr::Call(Some(Box::new(e)), name, self.args()?);
                } else {
                    e = Expr::Member(Box::new(e), name);
                }
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(idx));
            } else {
                return Ok(e);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let Some(t) = self.peek().cloned() else { return Err("the rule ends too early".into()) };
        self.pos += 1;
        match t {
            Tok::Str(s) => Ok(Expr::Lit(Value::String(s))),
            Tok::Int(i) => Ok(Expr::Lit(Value::from(i))),
            Tok::Ident(name) => match name.as_str() {
                "true" => Ok(Expr::Lit(Value::Bool(true))),
                "false" => Ok(Expr::Lit(Value::Bool(false))),
                "null" => Ok(Expr::Lit(Value::Null)),
                _ if self.eat("(") => Ok(Expr::Call(None, name, self.args()?)),
                _ => Ok(Expr::Ident(name)),
            },
            Tok::Sym("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Sym("[") => {
                let mut items = Vec::new();
                if !self.eat("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::List(items))
            }
            Tok::Sym("{") => {
                let mut entries = Vec::new();
                if !self.eat("}") {
                    loop {
                        let k = self.expr()?;
                        self.expect(":")?;
                        let v = self.expr()?;
                        entries.push((k, v));
                        if self.eat("}") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::Map(entries))
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

type Env = Vec<(String, Value)>;

fn eval(e: &Expr, env: &mut Env, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH * 4 {
        return Err("evaluation too deep".into());
    }
    let d = depth + 1;
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Ident(n) => env.iter().rev().find(|(k, _)| k == n).map(|(_, v)| v.clone()).ok_or(format!("unknown name {n}"))?,
        Expr::Member(t, name) => match eval(t, env, d)? {
            Value::Object(m) => m.get(name).cloned().ok_or(format!("no field {name}"))?,
            _ => return Err(format!("field {name} of a non-map")),
        },
        Expr::Index(t, i) => match (eval(t, env, d)?, eval(i, env, d)?) {
            (Value::Object(m), Value::String(k)) => m.get(&k).cloned().ok_or(format!("no key {k}"))?,
            (Value::Array(a), Value::Number(n)) => {
                n.as_u64().and_then(|i| a.get(i as usize).cloned()).ok_or("index out of range")?
            }
            _ => return Err("bad index".into()),
        },
        Expr::Not(x) => Value::Bool(!truth(&eval(x, env, d)?)?),
        Expr::Neg(x) => match eval(x, env, d)? {
            Value::Number(n) => Value::from(-n.as_i64().ok_or("not an integer")?),
            _ => return Err("negation of a non-number".into()),
        },
        Expr::And(a, b) => {
            // CEL's && and || tolerate an error on one side when the other decides.
            match eval(a, env, d).and_then(|v| truth(&v)) {
                Ok(false) => Value::Bool(false),
                Ok(true) => Value::Bool(truth(&eval(b, env, d)?)?),
                Err(err) => match eval(b, env, d).and_then(|v| truth(&v)) {
                    Ok(false) => Value::Bool(false),
                    _ => return Err(err),
                },
            }
        }
        Expr::Or(a, b) => match eval(a, env, d).and_then(|v| truth(&v)) {
            Ok(true) => Value::Bool(true),
            Ok(false) => Value::Bool(truth(&eval(b, env, d)?)?),
            Err(err) => match eval(b, env, d).and_then(|v| truth(&v)) {
                Ok(true) => Value::Bool(true),
                _ => return Err(err),
            },
        },
        Expr::Cmp(op, a, b) => {
            let (x, y) = (eval(a, env, d)?, eval(b, env, d)?);
            Value::Bool(match *op {
                "==" => x == y,
                "!=" => x != y,
                "in" => match &y {
                    Value::Array(items) => items.contains(&x),
                    Value::Object(m) => x.as_str().is_some_and(|k| m.contains_key(k)),
                    _ => return Err("'in' needs a list or map".into()),
                },
                _ => {
                    let ord = match (&x, &y) {
                        (Value::Number(p), Value::Number(q)) => p.as_f64().partial_cmp(&q.as_f64()),
                        (Value::String(p), Value::String(q)) => Some(p.cmp(q)),
                        _ => None,
                    }
                    .ok_or("values cannot be ordered")?;
                    match *op {
                        "<" => ord == Ordering::Less,
                        ">" => ord == Ordering::Greater,
                        "<=" => ord != Ordering::Greater,
                        _ => ord != Ordering::Less,
                    }
                }
            })
        }
        Expr::List(items) => Value::Array(items.iter().map(|i| eval(i, env, d)).collect::<Result<_, _>>()?),
        Expr::Map(entries) => {
            let mut m = Map::new();
            for (k, v) in entries {
                let Value::String(k) = eval(k, env, d)? else { return Err("map keys must be strings".into()) };
                m.insert(k, eval(v, env, d)?);
            }
            Value::Object(m)
        }
        Expr::Call(target, name, args) => call(target.as_deref(), name, args, env, d)?,
    })
}

fn truth(v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| "expected a boolean".to_string())
}

fn call(target: Option<&Expr>, name: &str, args: &[Expr], env: &mut Env, d: usize) -> Result<Value, String> {
    match (target, name, args) {
        (Some(t), "exists" | "all" | "exists_one", [Expr::Ident(var), pred]) => {
            let Value::Array(items) = eval(t, env, d)? else { return Err(format!("{name} needs a list")) };
            let mut count = 0usize;
            for item in items {
                env.push((var.clone(), item));
                let r = eval(pred, env, d).and_then(|v| truth(&v));
                env.pop();
                match (name, r) {
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
            let (x, y) = (eval(a, env, d)?, eval(b, env, d)?);
            let parse = |v: &Value| -> Result<Version, String> {
                let s = v.as_str().ok_or("semver_compare needs strings")?;
                Version::parse(s.trim_start_matches('v')).map_err(|e| format!("{s:?}: {e}"))
            };
            let ord = parse(&x)?.cmp_precedence(&parse(&y)?);
            Ok(Value::from(match ord {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }))
        }
        (None, "size", [a]) | (Some(a), "size", []) => Ok(Value::from(match eval(a, env, d)? {
            Value::Array(v) => v.len(),
            Value::Object(m) => m.len(),
            Value::String(s) => s.chars().count(),
            _ => return Err("size of a scalar".into()),
        } as u64)),
        (Some(t), "has", []) | (None, "has", [t]) => match t {
            Expr::Member(obj, field) => {
                Ok(Value::Bool(matches!(eval(obj, env, d)?, Value::Object(m) if m.contains_key(field))))
            }
            _ => Err("has() needs a field selection".into()),
        },
        (Some(t), "startsWith" | "endsWith" | "contains", [a]) => {
            let (Value::String(s), Value::String(p)) = (eval(t, env, d)?, eval(a, env, d)?) else {
                return Err(format!("{name} needs strings"));
            };
            Ok(Value::Bool(match name {
                "startsWith" => s.starts_with(&p),
                "endsWith" => s.ends_with(&p),
                _ => s.contains(&p),
            }))
        }
        _ => Err(format!("function {name} is not supported")),
    }
}

/// Check at compile time that every function and macro is one we evaluate.
pub(crate) fn check_supported(rule: &CelRule) -> Result<(), String> {
    fn walk(e: &Expr) -> Result<(), String> {
        match e {
            Expr::Call(t, name, args) => {
                let known = matches!(
                    name.as_str(),
                    "exists" | "all" | "exists_one" | "semver_compare" | "size" | "has" | "startsWith" | "endsWith" | "contains"
                );
                if !known {
                    return Err(format!("function {name}() is not in the supported CEL subset"));
                }
                if let Some(t) = t {
                    walk(t)?;
                }
                args.iter().try_for_each(walk)
            }
            Expr::Member(t, _) | Expr::Not(t) | Expr::Neg(t) => walk(t),
            Expr::Index(a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) => {
                walk(a)?;
                walk(b)
            }
            Expr::List(items) => items.iter().try_for_each(walk),
            Expr::Map(entries) => entries.iter().try_for_each(|(k, v)| {
                walk(k)?;
                walk(v)
            }),
            Expr::Lit(_) | Expr::Ident(_) => Ok(()),
        }
    }
    walk(&rule.program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_rules_are_reported() {
        assert!(CelRule::compile("properties.exists(p, p.type == 'x'").is_err());
        assert!(CelRule::compile("a ? b : c").is_err());
        let r = CelRule::compile("matches(properties, 'x')").expect("parses");
        assert!(check_supported(&r).is_err());
    }
}
