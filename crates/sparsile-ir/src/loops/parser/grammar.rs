//! Recursive-descent parser over the token list; see the grammar in the module above.

use std::collections::HashMap;

use super::lexer::{Tok, Token};
use super::{ParseError, RESERVED};
use crate::coord::{AxisDecl, AxisStructure, BinaryOp, BufferRole, Extent, Param, UnaryOp};
use crate::id::{AxisId, VarId};
use crate::loops::expr::{CmpOp, Expr, LogicOp};
use crate::loops::func::{Buffer, BufferKind, BufferLayout, Func, Stage, Var, VarType};
use crate::loops::gpu::{BarrierScope, GpuAxis, GpuDim, WarpOp, WARP_SEGMENT_SUM};
use crate::loops::mma::{Mma, MmaShape, MmaType};
use crate::loops::stmt::{For, ForKind, Stmt};
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
    func: Func,
    axis_names: HashMap<String, AxisId>,
    /// Variables in scope, outermost first.
    scope: Vec<(String, VarId)>,
    /// Current nesting of expressions and statements (bounded, so that hostile input
    /// cannot exhaust the stack).
    depth: usize,
}

/// The deepest nesting of parentheses, calls, loads and statements accepted.
const MAX_DEPTH: usize = 200;

type PResult<T> = Result<T, ParseError>;

impl Parser {
    pub(super) fn new(toks: Vec<Token>) -> Parser {
        Parser {
            toks,
            pos: 0,
            func: Func::new("", Stage::Pos),
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

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek().tok, Tok::Punct(q) if q == p)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, p: &str) -> PResult<Span> {
        if self.is_punct(p) {
            Ok(self.bump().span)
        } else {
            Err(self.error_expected(&format!("`{p}`")))
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
        open: &'static str,
        close: &'static str,
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
            if !self.is_punct(",") {
                return Err(self.error_expected(&format!("`,` or `{close}`")));
            }
            self.bump();
        }
    }

    /// Whether the token `k` ahead starts an axis attribute (`nonunique` or `word =`).
    fn is_attr_start(&self, k: usize) -> bool {
        match self.peek_at(k) {
            Tok::Ident(s) if s == "nonunique" || s == "nopad" => true,
            Tok::Ident(_) => *self.peek_at(k + 1) == Tok::Punct("="),
            _ => false,
        }
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

    // ---- function and declarations ----

    pub(super) fn func(mut self) -> PResult<Func> {
        let (stage_word, stage_span) = self.expect_word("`pos` or `flat`")?;
        self.func.stage = match stage_word.as_str() {
            "pos" => Stage::Pos,
            "flat" => Stage::Flat,
            _ => {
                return Err(ParseError::new(
                    stage_span,
                    format!("expected `pos` or `flat`, found `{stage_word}`"),
                ))
            }
        };
        self.expect_keyword("func")?;
        let (name, _) = self.expect_name("a function name")?;
        self.func.name = name;
        let params = self.list("(", ")", |p| p.expect_name("a parameter name"))?;
        for (pname, span) in params {
            if self.func.param_by_name(&pname).is_some() {
                return Err(ParseError::new(
                    span,
                    format!("parameter `{pname}` is declared twice"),
                ));
            }
            self.func.params.push(Param { name: pname });
        }
        self.expect_punct("{")?;
        let mut raw_axes = Vec::new();
        while self.is_keyword("axis") {
            let raw = self.axis()?;
            if self.axis_names.contains_key(&raw.decl.name) {
                return Err(ParseError::new(
                    raw.decl.span,
                    format!("axis `{}` is declared twice", raw.decl.name),
                ));
            }
            if self.func.param_by_name(&raw.decl.name).is_some() {
                return Err(ParseError::new(
                    raw.decl.span,
                    format!("axis `{}` has the name of a parameter", raw.decl.name),
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
            self.func.axes.push(decl);
        }
        while self.is_keyword("buffer") {
            let b = self.buffer()?;
            if self.func.buffer_by_name(&b.name).is_some() {
                return Err(ParseError::new(
                    b.span,
                    format!("buffer `{}` is declared twice", b.name),
                ));
            }
            self.func.buffers.push(b);
        }
        let body = self.stmts_until_close()?;
        self.func.body = body;
        if self.peek().tok != Tok::Eof {
            return Err(self.error_expected("end of input"));
        }
        Ok(self.func)
    }

    fn resolve_axis(&self, name: &str, span: Span) -> PResult<AxisId> {
        self.axis_names
            .get(name)
            .copied()
            .ok_or_else(|| ParseError::new(span, format!("unknown axis `{name}`")))
    }

    fn extent(&mut self) -> PResult<Extent> {
        let negative = self.eat_punct("-");
        match self.peek().tok.clone() {
            Tok::Int(digits) => {
                let span = self.bump().span;
                Ok(Extent::Const(int_literal(&digits, negative, span)?))
            }
            Tok::Ident(name) if !negative && !RESERVED.contains(&name.as_str()) => {
                let span = self.bump().span;
                self.func
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
        self.expect_punct("=")?;
        let (kind_name, kind_span) = self.expect_word("an axis kind")?;
        let kind: AxisKind = kind_name
            .parse()
            .map_err(|m: String| ParseError::new(kind_span, m))?;
        self.expect_punct("(")?;
        let mut parent = None;
        let two_positional = kind != AxisKind::DenseFixed
            || (*self.peek_at(1) == Tok::Punct(",") && !self.is_attr_start(2));
        if two_positional {
            if self.is_keyword("none") {
                self.bump();
            } else {
                parent = Some(self.expect_name("a parent axis or `none`")?);
            }
            self.expect_punct(",")?;
        }
        if self.is_attr_start(0) {
            return Err(self.error_expected("the axis length"));
        }
        let length = self.extent()?;
        let mut decl = AxisDecl::dense_fixed(name, length);
        decl.kind = kind;
        decl.padded = kind.is_sparse();
        let mut seen: Vec<&str> = Vec::new();
        while self.eat_punct(",") {
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
                    self.expect_punct("=")?;
                    let (t, tspan) = self.expect_word("an index type")?;
                    decl.index_type = t
                        .parse::<IndexType>()
                        .map_err(|m| ParseError::new(tspan, m))?;
                }
                _ => {
                    self.expect_punct("=")?;
                    let e = self.extent()?;
                    if key == "nnz" {
                        decl.nnz = Some(e);
                    } else {
                        decl.nnz_per_parent = Some(e);
                    }
                }
            }
        }
        self.expect_punct(")")?;
        let mut operands = Vec::new();
        if self.eat_punct("=") {
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
            operands = self.list("(", ")", |p| p.expect_name("an axis name"))?;
        }
        decl.span = start.join(self.prev_span());
        Ok(RawAxis {
            decl,
            parent,
            operands,
        })
    }

    fn buffer(&mut self) -> PResult<Buffer> {
        let start = self.expect_keyword("buffer")?;
        let (name, _) = self.expect_name("a buffer name")?;
        self.expect_punct(":")?;
        let (dt, dt_span) = self.expect_word("an element type")?;
        let dtype: DType = dt.parse().map_err(|m| ParseError::new(dt_span, m))?;
        let names_axes = match &self.peek_at(1) {
            Tok::Punct("]") => true,
            Tok::Ident(s) => self.axis_names.contains_key(s),
            _ => false,
        };
        let layout = if names_axes {
            let names = self.list("[", "]", |p| p.expect_name("an axis name"))?;
            BufferLayout::Axes(
                names
                    .iter()
                    .map(|(n, span)| self.resolve_axis(n, *span))
                    .collect::<PResult<Vec<_>>>()?,
            )
        } else {
            self.expect_punct("[")?;
            let len = self.expr()?;
            self.expect_punct("]")?;
            BufferLayout::Flat(len)
        };
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
        let kind_expected =
            "a buffer kind (`values`, `indptr(..)`, `indices(..)`, `scratch`, `local` or `shared`)";
        let (kind_name, kind_span) = self.expect_word(kind_expected)?;
        let kind = match kind_name.as_str() {
            "values" => BufferKind::Values,
            "scratch" => BufferKind::Scratch,
            "local" => BufferKind::Local,
            "shared" => BufferKind::Shared,
            "indptr" | "indices" => {
                self.expect_punct("(")?;
                let (tensor, _) = self.expect_name("a tensor name")?;
                self.expect_punct(",")?;
                let axis = match self.peek().tok.clone() {
                    Tok::Int(d) => {
                        let span = self.bump().span;
                        d.parse::<usize>().map_err(|_| {
                            ParseError::new(span, format!("axis number `{d}` is too large"))
                        })?
                    }
                    _ => return Err(self.error_expected("an axis number")),
                };
                self.expect_punct(")")?;
                if kind_name == "indptr" {
                    BufferKind::Indptr { tensor, axis }
                } else {
                    BufferKind::Indices { tensor, axis }
                }
            }
            _ => {
                return Err(ParseError::new(
                    kind_span,
                    format!("expected {kind_expected}, found `{kind_name}`"),
                ))
            }
        };
        Ok(Buffer {
            name,
            dtype,
            layout,
            role,
            kind,
            span: start.join(self.prev_span()),
        })
    }

    // ---- statements ----

    /// Statements up to and including the closing `}`; locals declared in them go out
    /// of scope at the end.
    fn stmts_until_close(&mut self) -> PResult<Vec<Stmt>> {
        let scope_len = self.scope.len();
        let mut stmts = Vec::new();
        while !self.eat_punct("}") {
            self.enter()?;
            let s = self.stmt();
            self.depth -= 1;
            stmts.push(s?);
        }
        self.scope.truncate(scope_len);
        Ok(stmts)
    }

    /// Declares a variable in the current scope.
    fn declare(&mut self, name: String, span: Span, ty: VarType) -> PResult<VarId> {
        if self.scope.iter().any(|(n, _)| *n == name) {
            return Err(ParseError::new(
                span,
                format!("variable `{name}` is already in scope"),
            ));
        }
        if self.func.param_by_name(&name).is_some() {
            return Err(ParseError::new(
                span,
                format!("variable `{name}` has the name of a parameter"),
            ));
        }
        let var = self.func.vars.push(Var {
            name: name.clone(),
            ty,
        });
        self.scope.push((name, var));
        Ok(var)
    }

    fn lookup_var(&self, name: &str) -> Option<VarId> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let start = self.peek().span;
        let word = match &self.peek().tok {
            Tok::Ident(s) => s.clone(),
            _ => return Err(self.error_expected("a statement or `}`")),
        };
        match word.as_str() {
            "for" => self.for_loop(),
            "if" => self.if_stmt(),
            "let" => {
                self.bump();
                let (name, nspan) = self.expect_name("a variable name")?;
                self.expect_punct(":")?;
                let (ty_name, ty_span) = self.expect_word("a type (`idx` or a float type)")?;
                let ty = if ty_name == "idx" {
                    VarType::Index
                } else {
                    VarType::Value(ty_name.parse::<DType>().map_err(|_| {
                        ParseError::new(
                            ty_span,
                            format!("expected a type (`idx` or a float type), found `{ty_name}`"),
                        )
                    })?)
                };
                self.expect_punct("=")?;
                if let Some(warp) = self.warp_call()? {
                    let var = self.declare(name, nspan, ty)?;
                    let (op, value, key, lanes) = warp;
                    return Ok(Stmt::WarpReduce {
                        var,
                        op,
                        value,
                        key,
                        lanes,
                        span: start.join(self.prev_span()),
                    });
                }
                // The value is evaluated before the local exists.
                let value = self.expr()?;
                let var = self.declare(name, nspan, ty)?;
                Ok(Stmt::Let {
                    var,
                    value,
                    span: start.join(self.prev_span()),
                })
            }
            "sync_threads" | "sync_warp" => {
                self.bump();
                let scope = if word == "sync_threads" {
                    BarrierScope::Block
                } else {
                    BarrierScope::Warp
                };
                Ok(Stmt::Barrier { scope, span: start })
            }
            "launch" => {
                self.bump();
                let (name, _) = self.expect_name("a launch name")?;
                self.expect_punct("{")?;
                let body = self.stmts_until_close()?;
                Ok(Stmt::Launch {
                    name,
                    body,
                    span: start.join(self.prev_span()),
                })
            }
            "prefetch" => {
                self.bump();
                let (name, nspan) = self.expect_word("a buffer name")?;
                let buffer = self
                    .func
                    .buffer_by_name(&name)
                    .ok_or_else(|| ParseError::new(nspan, format!("unknown buffer `{name}`")))?;
                let indices = self.list("[", "]", |p| p.expr())?;
                Ok(Stmt::Prefetch {
                    buffer,
                    indices,
                    span: start.join(self.prev_span()),
                })
            }
            "block" => {
                self.bump();
                let (mut name, _) = self.expect_word("a block name")?;
                while self.eat_punct(".") {
                    let (part, _) = self.expect_word("a block name part")?;
                    name.push('.');
                    name.push_str(&part);
                }
                self.expect_punct("{")?;
                let body = self.stmts_until_close()?;
                Ok(Stmt::Block {
                    name,
                    body,
                    span: start.join(self.prev_span()),
                })
            }
            "axis" | "buffer" => Err(ParseError::new(
                start,
                format!("`{word}` declarations must come before the statements"),
            )),
            "mma" if matches!(self.peek_at(1), Tok::Ident(_)) => self.mma(),
            "atomic" if matches!(self.peek_at(1), Tok::Ident(_)) => {
                self.bump();
                let (name, nspan) = self.expect_name("a buffer name")?;
                let buffer = self
                    .func
                    .buffer_by_name(&name)
                    .ok_or_else(|| ParseError::new(nspan, format!("unknown buffer `{name}`")))?;
                let indices = self.list("[", "]", |p| p.expr())?;
                self.expect_punct("+")?;
                self.expect_punct("=")?;
                let value = self.expr()?;
                Ok(Stmt::AtomicAdd {
                    buffer,
                    indices,
                    value,
                    span: start.join(self.prev_span()),
                })
            }
            _ if !RESERVED.contains(&word.as_str()) && *self.peek_at(1) == Tok::Punct("[") => {
                self.bump();
                let buffer = self
                    .func
                    .buffer_by_name(&word)
                    .ok_or_else(|| ParseError::new(start, format!("unknown buffer `{word}`")))?;
                let indices = self.list("[", "]", |p| p.expr())?;
                self.expect_punct("=")?;
                let value = self.expr()?;
                Ok(Stmt::Store {
                    buffer,
                    indices,
                    value,
                    span: start.join(self.prev_span()),
                })
            }
            _ if !RESERVED.contains(&word.as_str()) && *self.peek_at(1) == Tok::Punct("=") => {
                self.bump();
                let var = self
                    .lookup_var(&word)
                    .ok_or_else(|| ParseError::new(start, format!("unknown variable `{word}`")))?;
                self.bump();
                let value = self.expr()?;
                Ok(Stmt::Assign {
                    var,
                    value,
                    span: start.join(self.prev_span()),
                })
            }
            _ => Err(self.error_expected(
                "a statement (`for`, `if`, `let`, `block`, `launch`, `sync_threads`, `sync_warp`, `x = ...` or `buffer[...] = ...`) or `}`",
            )),
        }
    }

    /// `mma SHAPE TYPE (row, col, depth) [where GUARD:] C[indices] += A * B`: the tile
    /// variables are in scope in the rest of the statement only; the operands are the two
    /// sides of the product's outermost `*`.
    fn mma(&mut self) -> PResult<Stmt> {
        let start = self.expect_keyword("mma")?;
        let (shape_name, shape_span) = self.expect_word("an mma shape (`m16n8k16`, ...)")?;
        let shape = MmaShape::parse(&shape_name).ok_or_else(|| {
            ParseError::new(
                shape_span,
                format!("expected an mma shape (`m16n8k16`, `m16n8k8` or `m16n8k4`), found `{shape_name}`"),
            )
        })?;
        let (ty_name, ty_span) = self.expect_word("an mma type (`f16`, `bf16` or `tf32`)")?;
        let ty = MmaType::parse(&ty_name).ok_or_else(|| {
            ParseError::new(
                ty_span,
                format!("expected an mma type (`f16`, `bf16` or `tf32`), found `{ty_name}`"),
            )
        })?;
        let scope_len = self.scope.len();
        self.expect_punct("(")?;
        let mut vars = Vec::new();
        for k in 0..3 {
            if k > 0 {
                self.expect_punct(",")?;
            }
            let (name, nspan) = self.expect_name("a tile variable name")?;
            vars.push(self.declare(name, nspan, VarType::Index)?);
        }
        self.expect_punct(")")?;
        // `where[` starts an accumulator named `where`.
        let guard = if self.is_keyword("where") && *self.peek_at(1) != Tok::Punct("[") {
            self.bump();
            let guard = self.expr()?;
            self.expect_punct(":")?;
            Some(guard)
        } else {
            None
        };
        let (name, nspan) = self.expect_name("the accumulator buffer")?;
        let c = self
            .func
            .buffer_by_name(&name)
            .ok_or_else(|| ParseError::new(nspan, format!("unknown buffer `{name}`")))?;
        let c_indices = self.list("[", "]", |p| p.expr())?;
        self.expect_punct("+")?;
        self.expect_punct("=")?;
        let product_span = self.peek().span;
        let product = self.expr()?;
        let Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } = product
        else {
            return Err(ParseError::new(
                product_span.join(self.prev_span()),
                "expected the product of the two operands (`A * B`) after `+=`".to_string(),
            ));
        };
        self.scope.truncate(scope_len);
        Ok(Stmt::Mma(Mma {
            shape,
            ty,
            row: vars[0],
            col: vars[1],
            depth: vars[2],
            c,
            c_indices,
            a: *lhs,
            b: *rhs,
            guard,
            span: start.join(self.prev_span()),
        }))
    }

    /// The options after `reassociate` in `vectorized(reassociate, scalar_sums=N, masked)`,
    /// each at most once, in any order (the verifier checks the range of `scalar_sums`).
    fn reassociate_options(&mut self) -> PResult<(u32, bool)> {
        let expected = "`scalar_sums` or `masked`";
        let (mut scalar_sums, mut masked) = (None, false);
        while self.eat_punct(",") {
            let (word, span) = self.expect_word(expected)?;
            match word.as_str() {
                "scalar_sums" if scalar_sums.is_none() => {
                    self.expect_punct("=")?;
                    scalar_sums = Some(match self.peek().tok.clone() {
                        Tok::Int(d) => {
                            let span = self.bump().span;
                            d.parse::<u32>().map_err(|_| {
                                ParseError::new(
                                    span,
                                    format!("`{d}` is too large for `scalar_sums`"),
                                )
                            })?
                        }
                        _ => return Err(self.error_expected("the number of scalar partial sums")),
                    });
                }
                "masked" if !masked => masked = true,
                "scalar_sums" | "masked" => {
                    return Err(ParseError::new(span, format!("`{word}` is given twice")))
                }
                _ => {
                    return Err(ParseError::new(
                        span,
                        format!("expected {expected}, found `{word}`"),
                    ))
                }
            }
        }
        Ok((scalar_sums.unwrap_or(1), masked))
    }

    fn for_loop(&mut self) -> PResult<Stmt> {
        let start = self.expect_keyword("for")?;
        let (name, nspan) = self.expect_name("a loop variable name")?;
        self.expect_keyword("in")?;
        let lo = self.expr()?;
        self.expect_punct("..")?;
        let hi = self.expr()?;
        let mut kind = ForKind::Serial;
        if let Tok::Ident(word) = &self.peek().tok {
            kind =
                match word.as_str() {
                    "parallel" => ForKind::Parallel,
                    "vectorized" => ForKind::Vectorized,
                    "unrolled" => ForKind::Unrolled,
                    "batched" => ForKind::Batched,
                    "register_tiled" => ForKind::RegisterTiled,
                    "bind" => ForKind::Bound(GpuAxis::Block(GpuDim::X)),
                    _ => return Err(self.error_expected(
                        "`{` or a loop kind (`parallel`, `vectorized`, `unrolled`, `batched`, `register_tiled` or `bind`)",
                    )),
                };
            self.bump();
            if kind.gpu_axis().is_some() {
                kind = ForKind::Bound(self.gpu_axis()?);
            }
            if kind == ForKind::Parallel && self.eat_punct("(") {
                kind = self.partition()?;
                self.expect_punct(")")?;
            } else if kind == ForKind::Vectorized && self.eat_punct("(") {
                let expected = "`reassociate`";
                let (word, span) = self.expect_word(expected)?;
                if word != "reassociate" {
                    return Err(ParseError::new(
                        span,
                        format!("expected {expected}, found `{word}`"),
                    ));
                }
                let (scalar_sums, masked) = self.reassociate_options()?;
                kind = ForKind::VectorizedReduction {
                    scalar_sums,
                    masked,
                };
                self.expect_punct(")")?;
            }
        }
        self.expect_punct("{")?;
        let scope_len = self.scope.len();
        let var = self.declare(name, nspan, VarType::Index)?;
        let body = self.stmts_until_close()?;
        self.scope.truncate(scope_len);
        Ok(Stmt::For(For {
            var,
            lo,
            hi,
            kind,
            body,
            span: start.join(self.prev_span()),
        }))
    }

    /// `(blockIdx.x)` … `(threadIdx.z)` after `bind`.
    fn gpu_axis(&mut self) -> PResult<GpuAxis> {
        let expected = "a GPU axis (`blockIdx.x`, `threadIdx.y`, ...)";
        self.expect_punct("(")?;
        let (kind, span) = self.expect_word(expected)?;
        self.expect_punct(".")?;
        let (dim, _) = self.expect_word(expected)?;
        let axis = GpuAxis::parse(&format!("{kind}.{dim}")).ok_or_else(|| {
            ParseError::new(
                span.join(self.prev_span()),
                format!("expected {expected}, found `{kind}.{dim}`"),
            )
        })?;
        self.expect_punct(")")?;
        Ok(axis)
    }

    /// A warp reduction after `let x: T =`, or `None` when the value is an expression.
    #[allow(clippy::type_complexity)]
    fn warp_call(&mut self) -> PResult<Option<(WarpOp, Expr, Option<Expr>, u32)>> {
        let Tok::Ident(word) = &self.peek().tok else {
            return Ok(None);
        };
        let op = WarpOp::ALL.into_iter().find(|op| op.function() == word);
        let segmented = word == WARP_SEGMENT_SUM;
        if op.is_none() && !segmented {
            return Ok(None);
        }
        self.bump();
        self.expect_punct("(")?;
        let value = self.expr()?;
        self.expect_punct(",")?;
        let key = if segmented {
            let key = self.expr()?;
            self.expect_punct(",")?;
            Some(key)
        } else {
            None
        };
        let lanes = match self.peek().tok.clone() {
            Tok::Int(d) => {
                let span = self.bump().span;
                d.parse::<u32>().map_err(|_| {
                    ParseError::new(span, format!("`{d}` is too large for a lane count"))
                })?
            }
            _ => return Err(self.error_expected("the lanes of each group (an integer)")),
        };
        self.expect_punct(")")?;
        Ok(Some((op.unwrap_or(WarpOp::Sum), value, key, lanes)))
    }

    /// The partition inside `parallel(...)`: `dynamic` or `balanced INDPTR`.
    fn partition(&mut self) -> PResult<ForKind> {
        let expected = "a partition (`dynamic` or `balanced INDPTR`)";
        let (word, span) = self.expect_word(expected)?;
        match word.as_str() {
            "dynamic" => Ok(ForKind::ParallelDynamic),
            "balanced" => {
                let (name, nspan) = self.expect_name("an indptr buffer name")?;
                let indptr = self
                    .func
                    .buffer_by_name(&name)
                    .ok_or_else(|| ParseError::new(nspan, format!("unknown buffer `{name}`")))?;
                Ok(ForKind::ParallelBalanced { indptr })
            }
            _ => Err(ParseError::new(
                span,
                format!("expected {expected}, found `{word}`"),
            )),
        }
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let start = self.expect_keyword("if")?;
        let cond = self.expr()?;
        self.expect_punct("{")?;
        let then_body = self.stmts_until_close()?;
        let mut else_body = Vec::new();
        if self.is_keyword("else") {
            self.bump();
            self.expect_punct("{")?;
            else_body = self.stmts_until_close()?;
        }
        Ok(Stmt::If {
            cond,
            then_body,
            else_body,
            span: start.join(self.prev_span()),
        })
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.disjunction();
        self.depth -= 1;
        e
    }

    fn disjunction(&mut self) -> PResult<Expr> {
        let mut lhs = self.conjunction()?;
        let mut chain = 0;
        while self.eat_punct("||") {
            self.enter()?;
            chain += 1;
            let rhs = self.conjunction()?;
            lhs = logic(LogicOp::Or, lhs, rhs);
        }
        self.depth -= chain;
        Ok(lhs)
    }

    fn conjunction(&mut self) -> PResult<Expr> {
        let mut lhs = self.comparison()?;
        let mut chain = 0;
        while self.eat_punct("&&") {
            self.enter()?;
            chain += 1;
            let rhs = self.comparison()?;
            lhs = logic(LogicOp::And, lhs, rhs);
        }
        self.depth -= chain;
        Ok(lhs)
    }

    fn comparison(&mut self) -> PResult<Expr> {
        let lhs = self.sum()?;
        let Some(op) = self.cmp_op() else {
            return Ok(lhs);
        };
        self.bump();
        let rhs = self.sum()?;
        if self.cmp_op().is_some() {
            return Err(ParseError::new(
                self.peek().span,
                "comparisons do not chain; add parentheses",
            ));
        }
        Ok(Expr::cmp(op, lhs, rhs))
    }

    fn cmp_op(&self) -> Option<CmpOp> {
        match self.peek().tok {
            Tok::Punct(p) => CmpOp::ALL.into_iter().find(|op| op.symbol() == p),
            _ => None,
        }
    }

    fn sum(&mut self) -> PResult<Expr> {
        let mut lhs = self.term()?;
        // Each operator of a chain is one more level of the tree (`a + b + c` is
        // `(a + b) + c`): counted like nesting, so long chains cannot make trees deeper
        // than later recursive passes can walk.
        let mut chain = 0;
        loop {
            let op = match self.peek().tok {
                Tok::Punct("+") => BinaryOp::Add,
                Tok::Punct("-") => BinaryOp::Sub,
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
                Tok::Punct("*") => BinaryOp::Mul,
                Tok::Punct("/") => BinaryOp::Div,
                Tok::Punct("%") => BinaryOp::Rem,
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
            Tok::Punct("-") => {
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
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_punct(")")?;
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
                    Tok::Punct("(") => self.call(&name, span),
                    Tok::Punct("[") => {
                        let buffer = self.func.buffer_by_name(&name).ok_or_else(|| {
                            ParseError::new(span, format!("unknown buffer `{name}`"))
                        })?;
                        let indices = self.list("[", "]", |p| p.expr())?;
                        Ok(Expr::Load { buffer, indices })
                    }
                    _ => {
                        if let Some(v) = self.lookup_var(&name) {
                            Ok(Expr::Var(v))
                        } else if let Some(p) = self.func.param_by_name(&name) {
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
        if name == "search" {
            self.expect_punct("(")?;
            let (bname, bspan) = self.expect_name("a buffer name")?;
            let buffer = self
                .func
                .buffer_by_name(&bname)
                .ok_or_else(|| ParseError::new(bspan, format!("unknown buffer `{bname}`")))?;
            let mut args = Vec::new();
            for _ in 0..3 {
                self.expect_punct(",")?;
                args.push(self.expr()?);
            }
            self.expect_punct(")")?;
            let mut it = args.into_iter().map(Box::new);
            let (Some(lo), Some(hi), Some(value)) = (it.next(), it.next(), it.next()) else {
                return Err(ParseError::new(open, "internal: arity checked"));
            };
            return Ok(Expr::Search {
                buffer,
                lo,
                hi,
                value,
            });
        }
        let args = self.list("(", ")", |p| p.expr())?;
        let arity_error = |n: usize| {
            ParseError::new(
                open,
                format!("`{name}` takes {n} argument(s), found {}", args.len()),
            )
        };
        let binary = match name {
            "max" => Some(BinaryOp::Max),
            "min" => Some(BinaryOp::Min),
            _ => None,
        };
        if name == "select" {
            if args.len() != 3 {
                return Err(arity_error(3));
            }
            let mut it = args.into_iter();
            let (Some(c), Some(a), Some(b)) = (it.next(), it.next(), it.next()) else {
                return Err(ParseError::new(open, "internal: arity checked"));
            };
            Ok(Expr::select(c, a, b))
        } else if let Some(op) = binary {
            if args.len() != 2 {
                return Err(arity_error(2));
            }
            let mut it = args.into_iter();
            let (Some(a), Some(b)) = (it.next(), it.next()) else {
                return Err(ParseError::new(open, "internal: arity checked"));
            };
            Ok(Expr::binary(op, a, b))
        } else if let Some(op) = UnaryOp::from_name(name) {
            if args.len() != 1 {
                return Err(arity_error(1));
            }
            let Some(arg) = args.into_iter().next() else {
                return Err(ParseError::new(open, "internal: arity checked"));
            };
            Ok(Expr::Unary {
                op,
                arg: Box::new(arg),
            })
        } else {
            Err(ParseError::new(
                span,
                format!(
                    "unknown function `{name}` (expected select, search, max, min, neg, exp, relu, sqrt, abs or log)"
                ),
            ))
        }
    }
}

fn logic(op: LogicOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Logic {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
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
