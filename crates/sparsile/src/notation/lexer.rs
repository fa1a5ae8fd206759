//! Splits index notation text into tokens with spans. `#` starts a comment to the end of
//! the line; newlines are tokens (they end declarations and statements).
//!
//! ```
//! use sparsile::notation::lexer::{lex, Tok};
//! let toks = lex("C[i] += 2.5 # note\n").unwrap();
//! assert_eq!(toks[0].tok, Tok::Ident("C".into()));
//! assert_eq!(toks[4].tok, Tok::PlusEq);
//! assert_eq!(toks[5].tok, Tok::Float(2.5));
//! assert_eq!(toks[6].tok, Tok::Newline);
//! ```

use sparsile_ir::Span;

use super::NotationError;

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Colon,
    Comma,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Eq,
    PlusEq,
    Plus,
    Minus,
    Star,
    Slash,
    Newline,
    Eof,
}

impl Tok {
    /// How the token is described in error messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v}`"),
            Tok::Colon => "`:`".into(),
            Tok::Comma => "`,`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::Eq => "`=`".into(),
            Tok::PlusEq => "`+=`".into(),
            Tok::Plus => "`+`".into(),
            Tok::Minus => "`-`".into(),
            Tok::Star => "`*`".into(),
            Tok::Slash => "`/`".into(),
            Tok::Newline => "end of line".into(),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A token and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Tokenizes `text`; the result always ends with [`Tok::Eof`].
pub fn lex(text: &str) -> Result<Vec<Token>, NotationError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let span = |start: usize, end: usize, line: u32, line_start: usize| {
        Span::new(
            line,
            (text[line_start..start].chars().count() + 1) as u32,
            start,
            end,
        )
    };
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let single = match c {
            b'\n' => {
                out.push(Token {
                    tok: Tok::Newline,
                    span: span(start, start + 1, line, line_start),
                });
                i += 1;
                line += 1;
                line_start = i;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            b'[' => Some(Tok::LBracket),
            b']' => Some(Tok::RBracket),
            b'(' => Some(Tok::LParen),
            b')' => Some(Tok::RParen),
            b'=' => Some(Tok::Eq),
            b'-' => Some(Tok::Minus),
            b'*' => Some(Tok::Star),
            b'/' => Some(Tok::Slash),
            _ => None,
        };
        if let Some(tok) = single {
            i += 1;
            out.push(Token {
                tok,
                span: span(start, i, line, line_start),
            });
            continue;
        }
        if c == b'+' {
            let tok = if bytes.get(i + 1) == Some(&b'=') {
                i += 2;
                Tok::PlusEq
            } else {
                i += 1;
                Tok::Plus
            };
            out.push(Token {
                tok,
                span: span(start, i, line, line_start),
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                span: span(start, i, line, line_start),
            });
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let mut is_float = false;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i < bytes.len() && bytes[i] == b'.' {
                is_float = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    is_float = true;
                    i = j;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let s = &text[start..i];
            let sp = span(start, i, line, line_start);
            let bad = || NotationError::BadNumber {
                text: s.to_string(),
                span: sp,
            };
            let tok = if is_float {
                Tok::Float(s.parse().map_err(|_| bad())?)
            } else {
                Tok::Int(s.parse().map_err(|_| bad())?)
            };
            out.push(Token { tok, span: sp });
            continue;
        }
        let ch = text[start..].chars().next().unwrap_or('?');
        return Err(NotationError::UnexpectedChar {
            ch,
            span: span(start, start + ch.len_utf8(), line, line_start),
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        span: span(i, i, line, line_start),
    });
    Ok(out)
}
