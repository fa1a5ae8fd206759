//! Parses index notation text into an [`ast::Program`](super::ast::Program).
//!
//! Grammar (one declaration or statement per line; blank lines and `#` comments allowed):
//! ```text
//! decl   := "tensor" NAME ":" DTYPE "[" (dim ("," dim)*)? "]" FORMAT?   (FORMAT: rest of line)
//! stmt   := (access | NAME) ("=" | "+=" | "max=" | "min=") expr
//! access := NAME "[" (index ("," index)*)? "]"   index := NAME | access
//! expr   := term (("+" | "-") term)*             term := unary (("*" | "/") unary)*
//! unary  := "-" unary | NUMBER | "(" expr ")" | NAME "(" expr ("," expr)* ")" | access
//! ```
//! `max=` and `min=` are written without a space between the name and `=`. A bare `NAME`
//! on the left is the order-0 access `NAME[]` (a scalar output, declared with `[]`).
//!
//! ```
//! let ast = sparsile::notation::parse("tensor x: f32[n]\ntensor y: f32[n]\ny[i] = -x[i] * 2\n").unwrap();
//! assert_eq!(ast.tensors.len(), 2);
//! assert_eq!(ast.statements.len(), 1);
//! ```

use sparsile_formats::{Format, FormatError};
use sparsile_ir::coord::{BinaryOp, UnaryOp};
use sparsile_ir::{DType, Span};

use super::ast::{Access, AssignOp, Dim, Expr, Index, Program, Statement, TensorDecl};
use super::lexer::{lex, Tok, Token};
use super::NotationError;

/// Parses a whole program (syntax only; see [`check`](super::check) for the rest).
pub fn parse(text: &str) -> Result<Program, NotationError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        text,
        tokens,
        pos: 0,
        depth: 0,
    };
    p.program()
}

/// The deepest an expression may be: parentheses, unary minus, function calls, indirect
/// accesses and each operator of a chain (`a + b + c` is `(a + b) + c`) count one level.
/// Parsing and every later pass recurse over expressions, so without a limit a few
/// kilobytes of parentheses or `+` terms overflow the stack.
pub const MAX_DEPTH: usize = 200;

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// Levels of expression nesting open now (see [`MAX_DEPTH`]).
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.tokens[(self.pos + k).min(self.tokens.len() - 1)].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    /// Opens one level of nesting; an error past [`MAX_DEPTH`].
    fn enter(&mut self) -> Result<(), NotationError> {
        if self.depth >= MAX_DEPTH {
            return Err(NotationError::TooDeep {
                max: MAX_DEPTH,
                span: self.peek().span,
            });
        }
        self.depth += 1;
        Ok(())
    }

    fn error(&self, expected: &str) -> NotationError {
        let t = self.peek();
        NotationError::UnexpectedToken {
            expected: expected.to_string(),
            found: t.tok.describe(),
            span: t.span,
        }
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> Result<Token, NotationError> {
        if self.peek().tok == tok {
            Ok(self.bump())
        } else {
            Err(self.error(expected))
        }
    }

    fn ident(&mut self, expected: &str) -> Result<(String, Span), NotationError> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                let t = self.bump();
                Ok((s, t.span))
            }
            _ => Err(self.error(expected)),
        }
    }

    fn end_of_line(&mut self) -> Result<(), NotationError> {
        match self.peek().tok {
            Tok::Newline => {
                self.bump();
                Ok(())
            }
            Tok::Eof => Ok(()),
            _ => Err(self.error("end of line")),
        }
    }

    fn program(&mut self) -> Result<Program, NotationError> {
        let mut prog = Program {
            tensors: Vec::new(),
            statements: Vec::new(),
        };
        loop {
            match &self.peek().tok {
                Tok::Eof => return Ok(prog),
                Tok::Newline => {
                    self.bump();
                }
                Tok::Ident(k) if k == "tensor" && matches!(self.peek_at(1), Tok::Ident(_)) => {
                    prog.tensors.push(self.decl()?)
                }
                _ => prog.statements.push(self.statement()?),
            }
        }
    }

    fn decl(&mut self) -> Result<TensorDecl, NotationError> {
        let kw = self.bump();
        let (name, _) = self.ident("a tensor name")?;
        self.expect(Tok::Colon, "`:`")?;
        let (dt, dt_span) = self.ident("an element type")?;
        let dtype: DType = dt.parse().map_err(|_| NotationError::UnknownDType {
            name: dt.clone(),
            span: dt_span,
        })?;
        self.expect(Tok::LBracket, "`[`")?;
        let mut dims = Vec::new();
        // `[]`: order 0 (a scalar).
        while self.peek().tok != Tok::RBracket || !dims.is_empty() {
            let t = self.peek().clone();
            match t.tok {
                Tok::Ident(s) => dims.push(Dim::Named(s)),
                Tok::Int(v) if v > 0 => dims.push(Dim::Const(v)),
                Tok::Int(v) => {
                    return Err(NotationError::BadDimension {
                        tensor: name,
                        value: v,
                        span: t.span,
                    })
                }
                _ => return Err(self.error("a dimension (a name or a positive integer)")),
            }
            self.bump();
            if self.peek().tok == Tok::Comma {
                self.bump();
            } else {
                break;
            }
        }
        let close = self.expect(Tok::RBracket, "`,` or `]`")?;
        // The format is the raw rest of the line (format strings contain `:` and `x`).
        let line_end = self.text[close.span.end..]
            .find('\n')
            .map_or(self.text.len(), |k| close.span.end + k);
        let raw = &self.text[close.span.end..line_end];
        let raw = raw.split('#').next().unwrap_or("");
        let lead = raw.len() - raw.trim_start().len();
        let fmt_text = raw.trim();
        let fstart = close.span.end + lead;
        let format_span = Span::new(
            close.span.line,
            close.span.col + 1 + lead as u32,
            fstart,
            fstart + fmt_text.len(),
        );
        let format = if fmt_text.is_empty() {
            Format::Dense
        } else {
            fmt_text.parse().map_err(|e: FormatError| {
                let reason = match e {
                    FormatError::BadFormatString { reason, .. } => reason,
                    other => other.to_string(),
                };
                NotationError::BadFormat {
                    text: fmt_text.to_string(),
                    reason,
                    span: format_span,
                }
            })?
        };
        while !matches!(self.peek().tok, Tok::Newline | Tok::Eof) {
            self.bump();
        }
        let span = Span::new(kw.span.line, kw.span.col, kw.span.start, line_end);
        self.end_of_line()?;
        Ok(TensorDecl {
            name,
            dtype,
            dims,
            format,
            span,
            format_span,
        })
    }

    fn statement(&mut self) -> Result<Statement, NotationError> {
        let lhs = match (&self.peek().tok, self.peek_at(1)) {
            // A scalar output written without brackets: `s = ...`.
            (Tok::Ident(name), Tok::Eq | Tok::PlusEq | Tok::Ident(_)) => {
                let (tensor, span) = (name.clone(), self.peek().span);
                self.bump();
                Access {
                    tensor,
                    indices: Vec::new(),
                    span,
                }
            }
            _ => self.access()?,
        };
        let op = match &self.peek().tok {
            Tok::Eq => AssignOp::Assign,
            Tok::PlusEq => AssignOp::Accumulate,
            Tok::Ident(name)
                if (name == "max" || name == "min")
                    && *self.peek_at(1) == Tok::Eq
                    && self.tokens[self.pos + 1].span.start == self.peek().span.end =>
            {
                let op = if name == "max" {
                    AssignOp::Max
                } else {
                    AssignOp::Min
                };
                self.bump();
                op
            }
            _ => return Err(self.error("`=`, `+=`, `max=` or `min=`")),
        };
        self.bump();
        let rhs = self.expr()?;
        let span = lhs.span.join(rhs.span());
        self.end_of_line()?;
        Ok(Statement { lhs, op, rhs, span })
    }

    fn access(&mut self) -> Result<Access, NotationError> {
        let (tensor, start) = self.ident("a tensor access like `A[i, j]`")?;
        self.expect(Tok::LBracket, "`[`")?;
        let mut indices = Vec::new();
        if self.peek().tok != Tok::RBracket {
            loop {
                let (name, span) = self.ident("an index variable")?;
                if self.peek().tok == Tok::LBracket {
                    self.pos -= 1;
                    self.enter()?;
                    indices.push(Index::Indirect(Box::new(self.access()?)));
                    self.depth -= 1;
                } else {
                    indices.push(Index::Var { name, span });
                }
                if self.peek().tok == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        let close = self.expect(Tok::RBracket, "`,` or `]`")?;
        Ok(Access {
            tensor,
            indices,
            span: start.join(close.span),
        })
    }

    fn expr(&mut self) -> Result<Expr, NotationError> {
        let mut lhs = self.term()?;
        let mut chain = 0;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinaryOp::Add,
                Tok::Minus => BinaryOp::Sub,
                _ => {
                    self.depth -= chain;
                    return Ok(lhs);
                }
            };
            self.enter()?;
            chain += 1;
            self.bump();
            let rhs = self.term()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn term(&mut self) -> Result<Expr, NotationError> {
        let mut lhs = self.unary()?;
        let mut chain = 0;
        loop {
            let op = match self.peek().tok {
                Tok::Star => BinaryOp::Mul,
                Tok::Slash => BinaryOp::Div,
                _ => {
                    self.depth -= chain;
                    return Ok(lhs);
                }
            };
            self.enter()?;
            chain += 1;
            self.bump();
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn unary(&mut self) -> Result<Expr, NotationError> {
        self.enter()?;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, NotationError> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Minus => {
                self.bump();
                let arg = self.unary()?;
                let span = t.span.join(arg.span());
                Ok(Expr::Unary {
                    op: UnaryOp::Neg,
                    arg: Box::new(arg),
                    span,
                })
            }
            Tok::Int(value) => {
                self.bump();
                Ok(Expr::Int {
                    value,
                    span: t.span,
                })
            }
            Tok::Float(value) => {
                self.bump();
                Ok(Expr::Float {
                    value,
                    span: t.span,
                })
            }
            Tok::LParen => {
                self.bump();
                let mut e = self.expr()?;
                let close = self.expect(Tok::RParen, "`)`")?;
                // A parenthesized expression spans its parentheses (accesses keep their own).
                if let Expr::Int { span, .. }
                | Expr::Float { span, .. }
                | Expr::Unary { span, .. }
                | Expr::Binary { span, .. } = &mut e
                {
                    *span = t.span.join(close.span);
                }
                Ok(e)
            }
            Tok::Ident(name) if *self.peek_at(1) == Tok::LParen => {
                self.bump();
                self.bump();
                let mut args = vec![self.expr()?];
                while self.peek().tok == Tok::Comma {
                    self.bump();
                    args.push(self.expr()?);
                }
                let close = self.expect(Tok::RParen, "`,` or `)`")?;
                let span = t.span.join(close.span);
                call(name, args, span)
            }
            Tok::Ident(_) => Ok(Expr::Access(self.access()?)),
            _ => Err(self.error("an expression")),
        }
    }
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span().join(rhs.span());
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
        span,
    }
}

fn call(name: String, mut args: Vec<Expr>, span: Span) -> Result<Expr, NotationError> {
    match (UnaryOp::from_name(&name), name.as_str(), args.len()) {
        (Some(op), _, 1) => Ok(Expr::Unary {
            op,
            arg: Box::new(args.remove(0)),
            span,
        }),
        (None, "max" | "min", 2) => {
            let op = if name == "max" {
                BinaryOp::Max
            } else {
                BinaryOp::Min
            };
            let rhs = args.remove(1);
            let lhs = args.remove(0);
            Ok(Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                span,
            })
        }
        _ => Err(NotationError::UnknownFunction {
            name,
            arity: args.len(),
            span,
        }),
    }
}
