//! Lexing and parsing a rule into an [`Expr`] tree whose depth is bounded: every node knows
//! its depth, a node deeper than [`MAX_NESTING`] is refused where it is built, and the
//! recursive descent counts its own recursion against the same limit before it recurses
//! (so 40,000 `!` in a row are refused, not a stack overflow). `&&` and `||` chains are
//! built as balanced trees, as cel-go does, so a long list of conditions is not deep.

use serde_json::Value;

use super::{CelError, MAX_NESTING};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Sym(&'static str),
}

pub(super) fn lex(s: &str) -> Result<Vec<Tok>, CelError> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    const SYMS: [&str; 19] =
        ["&&", "||", "==", "!=", "<=", ">=", "(", ")", "{", "}", "[", "]", ",", ":", ".", "!", "<", ">", "-"];
    let unclosed = || CelError::Syntax("a string literal is not closed".into());
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(unclosed()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => text.push('\n'),
                            Some(&o) => text.push(o),
                            None => return Err(unclosed()),
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
            let too_large = || CelError::Syntax(format!("number {} is too large", crate::quote::quoted(&text)));
            out.push(Tok::Int(text.parse().map_err(|_| too_large())?));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(sym) = SYMS.iter().find(|s| rest.starts_with(**s)) else {
                return Err(CelError::Syntax(format!("character {c:?} is not part of the supported CEL subset")));
            };
            out.push(Tok::Sym(sym));
            i += sym.len();
        }
    }
    Ok(out)
}

/// One node of a rule, with the depth of the tree below it (a leaf is 1).
#[derive(Debug, Clone)]
pub(super) struct Expr {
    pub node: Node,
    pub depth: usize,
}

#[derive(Debug, Clone)]
pub(super) enum Node {
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

impl Node {
    /// The node's direct children.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Node::Lit(_) | Node::Ident(_) => Vec::new(),
            Node::Member(t, _) | Node::Not(t) | Node::Neg(t) => vec![t],
            Node::Index(a, b) | Node::And(a, b) | Node::Or(a, b) | Node::Cmp(_, a, b) => vec![a, b],
            Node::Call(t, _, args) => t.as_deref().into_iter().chain(args).collect(),
            Node::List(items) => items.iter().collect(),
            Node::Map(entries) => entries.iter().flat_map(|(k, v)| [k, v]).collect(),
        }
    }
}

/// A node over children that were each checked when built: its depth is one more than
/// theirs, and it is refused past [`MAX_NESTING`].
fn node(node: Node) -> Result<Expr, CelError> {
    let depth = 1 + node.children().iter().map(|c| c.depth).max().unwrap_or(0);
    if depth > MAX_NESTING {
        return Err(too_deep());
    }
    Ok(Expr { node, depth })
}

fn too_deep() -> CelError {
    CelError::Limit(format!(
        "the rule is nested more than {MAX_NESTING} levels deep (operators, calls, macros and parentheses all count); flatten it"
    ))
}

/// Build `items` joined by `op` as a balanced tree (left to right order kept).
fn balanced(op: &str, mut items: Vec<Expr>) -> Result<Expr, CelError> {
    if items.len() == 1 {
        return Ok(items.remove(0));
    }
    let right = items.split_off(items.len() / 2);
    let (l, r) = (Box::new(balanced(op, items)?), Box::new(balanced(op, right)?));
    node(if op == "&&" { Node::And(l, r) } else { Node::Or(l, r) })
}

pub(super) struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
    /// How deep the recursive descent is now.
    depth: usize,
}

impl Parser {
    pub fn parse(tokens: Vec<Tok>) -> Result<Expr, CelError> {
        let mut p = Parser { tokens, pos: 0, depth: 0 };
        let expr = p.expr()?;
        match p.tokens.get(p.pos) {
            None => Ok(expr),
            Some(t) => Err(CelError::Syntax(format!("unexpected {} after the end of the expression", describe(t)))),
        }
    }

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
    fn expect(&mut self, sym: &str) -> Result<(), CelError> {
        if self.eat(sym) {
            return Ok(());
        }
        let found = self.peek().map_or_else(|| "the end of the rule".to_owned(), describe);
        Err(CelError::Syntax(format!("expected {sym:?} but found {found}")))
    }
    /// Count one level of recursion before taking it.
    fn enter(&mut self) -> Result<(), CelError> {
        self.depth += 1;
        if self.depth > MAX_NESTING { Err(too_deep()) } else { Ok(()) }
    }
    fn leave<T>(&mut self, result: T) -> T {
        self.depth -= 1;
        result
    }

    fn expr(&mut self) -> Result<Expr, CelError> {
        self.enter()?;
        let result = self.or();
        self.leave(result)
    }
    fn or(&mut self) -> Result<Expr, CelError> {
        let mut items = vec![self.and()?];
        while self.eat("||") {
            items.push(self.and()?);
        }
        balanced("||", items)
    }
    fn and(&mut self) -> Result<Expr, CelError> {
        let mut items = vec![self.rel()?];
        while self.eat("&&") {
            items.push(self.rel()?);
        }
        balanced("&&", items)
    }
    fn rel(&mut self) -> Result<Expr, CelError> {
        let left = self.unary()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                return node(Node::Cmp(op, Box::new(left), Box::new(self.unary()?)));
            }
        }
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "in") {
            self.pos += 1;
            return node(Node::Cmp("in", Box::new(left), Box::new(self.unary()?)));
        }
        Ok(left)
    }
    fn unary(&mut self) -> Result<Expr, CelError> {
        let negate = if self.eat("!") {
            true
        } else if self.eat("-") {
            false
        } else {
            return self.postfix();
        };
        self.enter()?;
        let inner = self.unary().map(Box::new);
        let result = inner.and_then(|e| node(if negate { Node::Not(e) } else { Node::Neg(e) }));
        self.leave(result)
    }
    fn list_until(&mut self, close: &str) -> Result<Vec<Expr>, CelError> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(",")?;
        }
    }
    fn postfix(&mut self) -> Result<Expr, CelError> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return Err(CelError::Syntax("expected a name after '.'".into()));
                };
                self.pos += 1;
                e = if self.eat("(") {
                    let args = self.list_until(")")?;
                    node(Node::Call(Some(Box::new(e)), name, args))?
                } else {
                    node(Node::Member(Box::new(e), name))?
                };
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = node(Node::Index(Box::new(e), Box::new(idx)))?;
            } else {
                return Ok(e);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, CelError> {
        let Some(t) = self.peek().cloned() else {
            return Err(CelError::Syntax("the rule ends too early".into()));
        };
        self.pos += 1;
        match t {
            Tok::Str(s) => node(Node::Lit(Value::String(s))),
            Tok::Int(i) => node(Node::Lit(Value::from(i))),
            Tok::Ident(name) => match name.as_str() {
                "true" => node(Node::Lit(Value::Bool(true))),
                "false" => node(Node::Lit(Value::Bool(false))),
                "null" => node(Node::Lit(Value::Null)),
                _ if self.eat("(") => {
                    let args = self.list_until(")")?;
                    node(Node::Call(None, name, args))
                }
                _ => node(Node::Ident(name)),
            },
            Tok::Sym("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Sym("[") => {
                let items = self.list_until("]")?;
                node(Node::List(items))
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
                node(Node::Map(entries))
            }
            other => Err(CelError::Syntax(format!("unexpected {}", describe(&other)))),
        }
    }
}

/// A token as a message names it.
fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("name {}", crate::quote::quoted(s)),
        Tok::Str(s) => format!("string {}", crate::quote::quoted(s)),
        Tok::Int(i) => format!("number {i}"),
        Tok::Sym(s) => format!("{s:?}"),
    }
}
