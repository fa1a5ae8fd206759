//! Recursive-descent parser over the token list; see the grammar in the module above.

use std::collections::HashMap;

use super::lexer::{Tok, Token};
use super::{ParseError, RESERVED};
use crate::coord::derived::{DerivedBuffer, RuleSpec};
use crate::coord::expr::{BinaryOp, Expr, UnaryOp};
use crate::coord::program::{
    AxisDecl, AxisStructure, BufferDecl, BufferRole, Extent, IterVar, Param, Program,
};
use crate::coord::stmt::{IterAxis, IterKind, SparseIteration, Stmt, Store};
use crate::id::{AxisId, IterVarId};
use crate::{AxisKind, DType, IndexType, Span};

/// An axis declaration before its axis references are resolved.
struct RawAxis {
    decl: AxisDecl,
    parent: Option<(String, Span)>,
    operands: Vec<(String, Span)>,
}

pub(super) struct Parser {
    toks: Vec<Token>,
    pos: usize,
    program: Program,
    axis_names: HashMap<String, AxisId>,
    /// Variables in scope, outermost first.
    scope: Vec<(String, IterVarId)>,
    /// Current nesting of expressions and iterations (bounded, so that hostile input
    /// cannot exhaust the stack).
    depth: usize,
}

/// The deepest nesting of parentheses, calls, loads and iterations accepted.
const MAX_DEPTH: usize = 200;

type PResult<T> = Result<T, ParseError>;

impl Parser {
    pub(super) fn new(toks: Vec<Token>) -> Parser {
        Parser {
            toks,
            pos: 0,
            program: Program::new(""),
            axis_names: HashMap::new(),
            scope: Vec::new(),
            depth: 0,
        }
    }

    // ---- token helpers ----

    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    /// The span of the last token consumed.
    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    fn error_expected(&self, what: &str) -> ParseError {
        let t = self.peek();
        ParseError::new(t.span, format!("expected {what}, found {}", t.tok))
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek().tok == Tok::Punct(c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, c: char) -> PResult<Span> {
        if self.is_punct(c) {
            Ok(self.bump().span)
        } else {
            Err(self.error_expected(&format!("`{c}`")))
        }
    }

    fn is_keyword(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s == kw)
    }

    fn expect_keyword(&mut self, kw: &str) -> PResult<Span> {
        if self.is_keyword(kw) {
            Ok(self.bump().span)
        } else {
            Err(self.error_expected(&format!("`{kw}`")))
        }
    }

    /// Any identifier, reserved or not.
    fn expect_word(&mut self, what: &str) -> PResult<(String, Span)> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                Ok((s, self.bump().span))
            }
            _ => Err(self.error_expected(what)),
        }
    }

    /// A name being declared or referenced: an identifier that is not reserved.
    fn expect_name(&mut self, what: &str) -> PResult<(String, Span)> {
        match &self.peek().tok {
            Tok::Ident(s) if !RESERVED.contains(&s.as_str()) => {
                let s = s.clone();
                Ok((s, self.bump().span))
            }
            _ => Err(self.error_expected(what)),
        }
    }

    /// `open item { "," item } close`, or `open close`.
    fn list<T>(
        &mut self,
        open: char,
        close: char,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        self.expect_punct(open)?;
        let mut items = Vec::new();
        if self.eat_punct(close) {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.eat_punct(close) {
                return Ok(items);
            }
            if !self.is_punct(',') {
                return Err(self.error_expected(&format!("`,` or `{close}`")));
            }
            self.bump();
        }
    }

    /// Whether the token `k` ahead starts an axis attribute (`nonunique` or `word =`).
    fn is_attr_start(&self, k: usize) -> bool {
        match self.peek_at(k) {
            Tok::Ident(s) if s == "nonunique" || s == "nopad" => true,
            Tok::Ident(_) => *self.peek_at(k + 1) == Tok::Punct('='),
            _ => false,
        }
    }

    // ---- program and declarations ----

    pub(super) fn program(mut self) -> PResult<Program> {
        self.expect_keyword("func")?;
        let (name, _) = self.expect_name("a function name")?;
        self.program.name = name;
        let params = self.list('(', ')', |p| p.expect_name("a parameter name"))?;
        for (pname, span) in params {
            if self.program.param_by_name(&pname).is_some() {
                return Err(ParseError::new(
                    span,
                    format!("parameter `{pname}` is declared twice"),
                ));
            }
            self.program.params.push(Param { name: pname });
        }
        self.expect_punct('{')?;
        let mut raw_axes = Vec::new();
        while self.is_keyword("axis") {
            let raw = self.axis()?;
            if self.axis_names.contains_key(&raw.decl.name) {
                return Err(ParseError::new(
                    raw.decl.span,
                    format!("axis `{}` is declared twice", raw.decl.name),
                ));
            }
            let id = AxisId(raw_axes.len() as u32);
            self.axis_names.insert(raw.decl.name.clone(), id);
            raw_axes.push(raw);
        }
        for raw in raw_axes {
            let mut decl = raw.decl;
            decl.parent = match raw.parent {
                None => None,
                Some((n, span)) => Some(self.resolve_axis(&n, span)?),
            };
            if decl.structure != AxisStructure::Bound {
                let ids = raw
                    .operands
                    .iter()
                    .map(|(n, span)| self.resolve_axis(n, *span))
                    .collect::<PResult<Vec<_>>>()?;
                decl.structure = match decl.structure {
                    AxisStructure::Union(_) => AxisStructure::Union(ids),
                    _ => AxisStructure::Intersect(ids),
                };
            }
            self.program.axes.push(decl);
        }
        while self.is_keyword("buffer") {
            let b = self.buffer()?;
            if self.program.buffer_by_name(&b.name).is_some() {
                return Err(ParseError::new(
                    b.span,
                    format!("buffer `{}` is declared twice", b.name),
                ));
            }
            self.program.buffers.push(b);
        }
        while self.is_keyword("derived") && matches!(self.peek_at(1), Tok::Ident(_)) {
            let d = self.derived()?;
            self.program.derived.push(d);
        }
        let body = self.stmts_until_close()?;
        self.program.body = body;
        if self.peek().tok != Tok::Eof {
            return Err(self.error_expected("end of input"));
        }
        Ok(self.program)
    }

    fn resolve_axis(&self, name: &str, span: Span) -> PResult<AxisId> {
        self.axis_names
            .get(name)
            .copied()
            .ok_or_else(|| ParseError::new(span, format!("unknown axis `{name}`")))
    }

    fn extent(&mut self) -> PResult<Extent> {
        let negative = self.eat_punct('-');
        match self.peek().tok.clone() {
            Tok::Int(digits) => {
                let span = self.bump().span;
                Ok(Extent::Const(int_literal(&digits, negative, span)?))
            }
            Tok::Ident(name) if !negative && !RESERVED.contains(&name.as_str()) => {
                let span = self.bump().span;
                self.program
                    .param_by_name(&name)
                    .map(Extent::Param)
                    .ok_or_else(|| ParseError::new(span, format!("unknown parameter `{name}`")))
            }
            _ => Err(self.error_expected(if negative {
                "an integer"
            } else {
                "an integer or a parameter"
            })),
        }
    }

    fn axis(&mut self) -> PResult<RawAxis> {
        let start = self.expect_keyword("axis")?;
        let (name, _) = self.expect_name("an axis name")?;
        self.expect_punct('=')?;
        let (kind_name, kind_span) = self.expect_word("an axis kind")?;
        let kind: AxisKind = kind_name
            .parse()
            .map_err(|m: String| ParseError::new(kind_span, m))?;
        self.expect_punct('(')?;
        let mut parent = None;
        let two_positional = kind != AxisKind::DenseFixed
            || (*self.peek_at(1) == Tok::Punct(',') && !self.is_attr_start(2));
        if two_positional {
            if self.is_keyword("none") {
                self.bump();
            } else {
                parent = Some(self.expect_name("a parent axis or `none`")?);
            }
            self.expect_punct(',')?;
        }
        if self.is_attr_start(0) {
            return Err(self.error_expected("the axis length"));
        }
        let length = self.extent()?;
        let mut decl = AxisDecl::dense_fixed(name, length);
        decl.kind = kind;
        decl.padded = kind.is_sparse();
        let mut seen: Vec<&str> = Vec::new();
        while self.eat_punct(',') {
            let (attr, span) = self.expect_word("an axis attribute")?;
            let key = match attr.as_str() {
                "nnz" => "nnz",
                "per" => "per",
                "idx" => "idx",
                "nonunique" => "nonunique",
                "nopad" => "nopad",
                _ => {
                    return Err(ParseError::new(
                        span,
                        format!(
                            "expected an axis attribute (`nnz=`, `per=`, `idx=`, `nonunique` or `nopad`), found `{attr}`"
                        ),
                    ))
                }
            };
            if seen.contains(&key) {
                return Err(ParseError::new(
                    span,
                    format!("attribute `{key}` is given twice"),
                ));
            }
            seen.push(key);
            match key {
                "nonunique" => decl.unique = false,
                "nopad" => decl.padded = false,
                "idx" => {
                    self.expect_punct('=')?;
                    let (t, tspan) = self.expect_word("an index type")?;
                    decl.index_type = t
                        .parse::<IndexType>()
                        .map_err(|m| ParseError::new(tspan, m))?;
                }
                _ => {
                    self.expect_punct('=')?;
                    let e = self.extent()?;
                    if key == "nnz" {
                        decl.nnz = Some(e);
                    } else {
                        decl.nnz_per_parent = Some(e);
                    }
                }
            }
        }
        self.expect_punct(')')?;
        let mut operands = Vec::new();
        if self.eat_punct('=') {
            let (op, op_span) = self.expect_word("`union` or `intersect`")?;
            decl.structure = match op.as_str() {
                "union" => AxisStructure::Union(Vec::new()),
                "intersect" => AxisStructure::Intersect(Vec::new()),
                _ => {
                    return Err(ParseError::new(
                        op_span,
                        format!("expected `union` or `intersect`, found `{op}`"),
                    ))
                }
            };
            operands = self.list('(', ')', |p| p.expect_name("an axis name"))?;
        }
        decl.span = start.join(self.prev_span());
        Ok(RawAxis {
            decl,
            parent,
            operands,
        })
    }

    fn buffer(&mut self) -> PResult<BufferDecl> {
        let start = self.expect_keyword("buffer")?;
        let (name, _) = self.expect_name("a buffer name")?;
        self.expect_punct(':')?;
        let (dt, dt_span) = self.expect_word("an element type")?;
        let dtype: DType = dt.parse().map_err(|m| ParseError::new(dt_span, m))?;
        let names = self.list('[', ']', |p| p.expect_name("an axis name"))?;
        let axes = names
            .iter()
            .map(|(n, span)| self.resolve_axis(n, *span))
            .collect::<PResult<Vec<_>>>()?;
        let (role_name, role_span) =
            self.expect_word("a buffer role (`input`, `output` or `temp`)")?;
        let role = match role_name.as_str() {
            "input" => BufferRole::Input,
            "output" => BufferRole::Output,
            "temp" => BufferRole::Temp,
            _ => {
                return Err(ParseError::new(
                    role_span,
                    format!(
                        "expected a buffer role (`input`, `output` or `temp`), found `{role_name}`"
                    ),
                ))
            }
        };
        Ok(BufferDecl {
            name,
            dtype,
            axes,
            role,
            span: start.join(self.prev_span()),
        })
    }

    /// `derived B = part(S, N) by NAME(arg, …)`.
    fn derived(&mut self) -> PResult<DerivedBuffer> {
        let start = self.expect_keyword("derived")?;
        let buffer_ref = |p: &Self, name: &str, span: Span| {
            p.program
                .buffer_by_name(name)
                .ok_or_else(|| ParseError::new(span, format!("unknown buffer `{name}`")))
        };
        let (name, span) = self.expect_name("a buffer name")?;
        let buffer = buffer_ref(self, &name, span)?;
        if self.program.derivation(buffer).is_some() {
            return Err(ParseError::new(
                span,
                format!("buffer `{name}` is derived twice"),
            ));
        }
        self.expect_punct('=')?;
        let (word, word_span) = self.expect_word("`part`")?;
        if word != "part" {
            return Err(ParseError::new(
                word_span,
                format!("expected `part`, found `{word}`"),
            ));
        }
        self.expect_punct('(')?;
        let (source_name, source_span) = self.expect_name("a buffer name")?;
        let source = buffer_ref(self, &source_name, source_span)?;
        self.expect_punct(',')?;
        let part = match &self.peek().tok {
            Tok::Int(digits) => {
                let digits = digits.clone();
                let span = self.bump().span;
                digits.parse::<usize>().map_err(|_| {
                    ParseError::new(span, format!("part number `{digits}` is too large"))
                })?
            }
            _ => return Err(self.error_expected("a part number")),
        };
        self.expect_punct(')')?;
        let (by, by_span) = self.expect_word("`by`")?;
        if by != "by" {
            return Err(ParseError::new(
                by_span,
                format!("expected `by`, found `{by}`"),
            ));
        }
        let (rule_name, _) = self.expect_word("a rule name")?;
        let args = self.list('(', ')', |p| match &p.peek().tok {
            Tok::Ident(s) | Tok::Int(s) => {
                let s = s.clone();
                Ok((s, p.bump().span))
            }
            _ => Err(p.error_expected("a rule argument (an identifier or an integer)")),
        })?;
        Ok(DerivedBuffer {
            buffer,
            source,
            part,
            rule: RuleSpec::new(rule_name, args.into_iter().map(|(a, _)| a).collect()),
            span: start.join(self.prev_span()),
        })
    }

    // ---- statements ----

    /// Statements up to and including the closing `}`.
    fn stmts_until_close(&mut self) -> PResult<Vec<Stmt>> {
        let mut stmts = Vec::new();
        while !self.eat_punct('}') {
            stmts.push(self.stmt()?);
        }
        Ok(stmts)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if self.is_keyword("iter") {
            self.enter()?;
            let it = self.iteration();
            self.depth -= 1;
            return Ok(Stmt::Iteration(it?));
        }
        match (&self.peek().tok, self.peek_at(1)) {
            (Tok::Ident(s), Tok::Punct('[')) if !RESERVED.contains(&s.as_str()) => {
                Ok(Stmt::Store(self.store()?))
            }
            (Tok::Ident(s), _) if s == "axis" || s == "buffer" => Err(ParseError::new(
                self.peek().span,
                format!("`{s}` declarations must come before the statements"),
            )),
            _ => Err(self.error_expected("`iter`, a store `buffer[...] = ...` or `}`")),
        }
    }

    fn store(&mut self) -> PResult<Store> {
        let (name, start) = self.expect_name("a buffer name")?;
        let buffer = self
            .program
            .buffer_by_name(&name)
            .ok_or_else(|| ParseError::new(start, format!("unknown buffer `{name}`")))?;
        let indices = self.list('[', ']', |p| p.expr())?;
        self.expect_punct('=')?;
        let value = self.expr()?;
        Ok(Store {
            buffer,
            indices,
            value,
            span: start.join(self.prev_span()),
        })
    }

    fn iteration(&mut self) -> PResult<SparseIteration> {
        let start = self.expect_keyword("iter")?;
        let (name, _) = self.expect_name("an iteration name")?;
        self.expect_keyword("over")?;
        let axes = self.list('[', ']', |p| {
            let (a, span) = p.expect_name("an axis name")?;
            let axis = p.resolve_axis(&a, span)?;
            p.expect_punct(':')?;
            let (k, kspan) = p.expect_word("`S` or `R`")?;
            let kind = match k.as_str() {
                "S" => IterKind::Spatial,
                "R" => IterKind::Reduction,
                _ => {
                    return Err(ParseError::new(
                        kspan,
                        format!("expected `S` or `R`, found `{k}`"),
                    ))
                }
            };
            Ok((axis, kind))
        })?;
        let mut fused: Vec<(usize, usize)> = Vec::new();
        while self.is_keyword("fuse") {
            let fuse_span = self.peek().span;
            self.bump();
            let group = self.list('(', ')', |p| {
                let (a, span) = p.expect_name("an axis name")?;
                Ok((p.resolve_axis(&a, span)?, a, span))
            })?;
            let Some((first, first_name, first_span)) = group.first() else {
                return Err(ParseError::new(fuse_span, "`fuse` needs axes".to_string()));
            };
            let Some(start) = axes.iter().position(|(a, _)| a == first) else {
                return Err(ParseError::new(
                    *first_span,
                    format!("axis `{first_name}` is not an axis of iteration `{name}`"),
                ));
            };
            for (k, (axis, aname, span)) in group.iter().enumerate() {
                if axes.get(start + k).map(|x| x.0) != Some(*axis) {
                    return Err(ParseError::new(
                        *span,
                        format!("fused axis `{aname}` is not the next axis of iteration `{name}`"),
                    ));
                }
            }
            fused.push((start, start + group.len()));
        }
        self.expect_keyword("as")?;
        let vars_open = self.peek().span;
        let var_names = self.list('(', ')', |p| p.expect_name("a variable name"))?;
        if var_names.len() != axes.len() {
            return Err(ParseError::new(
                vars_open,
                format!(
                    "iteration `{name}` has {} but binds {}",
                    plural(axes.len(), "axis", "axes"),
                    plural(var_names.len(), "variable", "variables")
                ),
            ));
        }
        let scope_len = self.scope.len();
        let mut iter_axes = Vec::new();
        for ((axis, kind), (vname, vspan)) in axes.into_iter().zip(var_names) {
            if self.scope.iter().any(|(n, _)| *n == vname) {
                return Err(ParseError::new(
                    vspan,
                    format!("variable `{vname}` is already in scope"),
                ));
            }
            if self.program.param_by_name(&vname).is_some() {
                return Err(ParseError::new(
                    vspan,
                    format!("variable `{vname}` has the name of a parameter"),
                ));
            }
            let var = self.program.vars.push(IterVar {
                name: vname.clone(),
                axis,
            });
            self.scope.push((vname, var));
            iter_axes.push(IterAxis { axis, kind, var });
        }
        self.expect_punct('{')?;
        let mut init = Vec::new();
        if self.is_keyword("init") {
            self.bump();
            self.expect_punct('{')?;
            init = self.stmts_until_close()?;
        }
        let body = self.stmts_until_close()?;
        self.scope.truncate(scope_len);
        Ok(SparseIteration {
            name,
            axes: iter_axes,
            init,
            body,
            span: start.join(self.prev_span()),
            fused,
        })
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.sum();
        self.depth -= 1;
        e
    }

    /// Counts one level of nesting; fails past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::new(
                self.peek().span,
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn sum(&mut self) -> PResult<Expr> {
        let mut lhs = self.term()?;
        // Each operator of a chain is one more level of the tree (`a + b + c` is
        // `(a + b) + c`): counted like nesting, so long chains cannot make trees deeper
        // than later recursive passes can walk.
        let mut chain = 0;
        loop {
            let op = match self.peek().tok {
                Tok::Punct('+') => BinaryOp::Add,
                Tok::Punct('-') => BinaryOp::Sub,
                _ => {
                    self.depth -= chain;
                    return Ok(lhs);
                }
            };
            self.enter()?;
            chain += 1;
            self.bump();
            let rhs = self.term()?;
            lhs = Expr::binary(op, lhs, rhs);
        }
    }

    fn term(&mut self) -> PResult<Expr> {
        let mut lhs = self.factor()?;
        // Each operator of a chain is one more level of the tree (`a + b + c` is
        // `(a + b) + c`): counted like nesting, so long chains cannot make trees deeper
        // than later recursive passes can walk.
        let mut chain = 0;
        loop {
            let op = match self.peek().tok {
                Tok::Punct('*') => BinaryOp::Mul,
                Tok::Punct('/') => BinaryOp::Div,
                Tok::Punct('%') => BinaryOp::Rem,
                _ => {
                    self.depth -= chain;
                    return Ok(lhs);
                }
            };
            self.enter()?;
            chain += 1;
            self.bump();
            let rhs = self.factor()?;
            lhs = Expr::binary(op, lhs, rhs);
        }
    }

    fn factor(&mut self) -> PResult<Expr> {
        let tok = self.peek().tok.clone();
        match tok {
            Tok::Punct('-') => {
                let minus = self.bump().span;
                match self.peek().tok.clone() {
                    Tok::Int(d) => {
                        let span = self.bump().span;
                        Ok(Expr::Int(int_literal(&d, true, span)?))
                    }
                    Tok::Float(text) => {
                        self.bump();
                        Ok(Expr::Float(-float_literal(&text)))
                    }
                    Tok::Ident(s) if s == "inf" => {
                        self.bump();
                        Ok(Expr::Float(f64::NEG_INFINITY))
                    }
                    _ => Err(ParseError::new(
                        minus,
                        format!(
                            "`-` must be followed by a number (negate an expression with `neg(...)`), found {}",
                            self.peek().tok
                        ),
                    )),
                }
            }
            Tok::Int(d) => {
                let span = self.bump().span;
                Ok(Expr::Int(int_literal(&d, false, span)?))
            }
            Tok::Float(text) => {
                self.bump();
                Ok(Expr::Float(float_literal(&text)))
            }
            Tok::Punct('(') => {
                self.bump();
                let e = self.expr()?;
                self.expect_punct(')')?;
                Ok(e)
            }
            Tok::Ident(s) if s == "inf" => {
                self.bump();
                Ok(Expr::Float(f64::INFINITY))
            }
            Tok::Ident(s) if s == "nan" => {
                self.bump();
                Ok(Expr::Float(f64::NAN))
            }
            Tok::Ident(name) if !RESERVED.contains(&name.as_str()) => {
                let span = self.bump().span;
                match self.peek().tok {
                    Tok::Punct('(') => self.call(&name, span),
                    Tok::Punct('[') => {
                        let buffer = self.program.buffer_by_name(&name).ok_or_else(|| {
                            ParseError::new(span, format!("unknown buffer `{name}`"))
                        })?;
                        let indices = self.list('[', ']', |p| p.expr())?;
                        Ok(Expr::Load { buffer, indices })
                    }
                    _ => {
                        if let Some((_, v)) = self.scope.iter().rev().find(|(n, _)| *n == name) {
                            Ok(Expr::Var(*v))
                        } else if let Some(p) = self.program.param_by_name(&name) {
                            Ok(Expr::Param(p))
                        } else {
                            Err(ParseError::new(
                                span,
                                format!("unknown variable or parameter `{name}`"),
                            ))
                        }
                    }
                }
            }
            _ => Err(self.error_expected("an expression")),
        }
    }

    fn call(&mut self, name: &str, span: Span) -> PResult<Expr> {
        let open = self.peek().span;
        let args = self.list('(', ')', |p| p.expr())?;
        let binary = match name {
            "max" => Some(BinaryOp::Max),
            "min" => Some(BinaryOp::Min),
            _ => None,
        };
        let arity_error = |n: usize| {
            ParseError::new(
                open,
                format!("`{name}` takes {n} argument(s), found {}", args.len()),
            )
        };
        if let Some(op) = binary {
            if args.len() != 2 {
                return Err(arity_error(2));
            }
            let mut it = args.into_iter();
            let (a, b) = (it.next(), it.next());
            match (a, b) {
                (Some(a), Some(b)) => Ok(Expr::binary(op, a, b)),
                _ => Err(ParseError::new(open, "internal: arity checked")),
            }
        } else if let Some(op) = UnaryOp::from_name(name) {
            if args.len() != 1 {
                return Err(arity_error(1));
            }
            let arg = args
                .into_iter()
                .next()
                .ok_or_else(|| ParseError::new(open, "internal: arity checked"))?;
            Ok(Expr::unary(op, arg))
        } else {
            Err(ParseError::new(
                span,
                format!(
                    "unknown function `{name}` (expected max, min, neg, exp, relu, sqrt, abs or log)"
                ),
            ))
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn int_literal(digits: &str, negative: bool, span: Span) -> PResult<i64> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    text.parse::<i64>().map_err(|_| {
        ParseError::new(
            span,
            format!("integer literal `{text}` does not fit in 64 bits"),
        )
    })
}

fn float_literal(text: &str) -> f64 {
    // The lexer only produces `digits[.digits][e[+-]digits]`, which `f64` always parses
    // (overflowing to infinity).
    text.parse::<f64>().unwrap_or(f64::NAN)
}
