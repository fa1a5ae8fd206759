//! Tokens of the loop-level text IR, with their spans.
//!
//! Whitespace separates tokens; `#` starts a comment that runs to the end of the line.
//! Numbers are unsigned here (a leading `-` is a separate token); a number with a `.`
//! followed by a digit, or with an exponent, is a float literal, so `0..n` lexes as
//! `0`, `..`, `n`.

use std::fmt;

use crate::coord::ParseError;
use crate::Span;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    /// Digits of an unsigned integer literal.
    Int(String),
    /// Text of an unsigned float literal (`1.5`, `2e-3`, `1.0e10`).
    Float(String),
    /// An operator or delimiter, one or two characters.
    Punct(&'static str),
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) | Tok::Int(s) | Tok::Float(s) => write!(f, "`{s}`"),
            Tok::Punct(p) => write!(f, "`{p}`"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Two-character operators, tried before the one-character ones.
const PUNCT2: [&str; 7] = ["..", "<=", ">=", "==", "!=", "&&", "||"];
const PUNCT1: [&str; 17] = [
    "(", ")", "[", "]", "{", "}", ",", ":", "=", "+", "-", "*", "/", "%", "<", ">", ".",
];

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub(super) fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0usize;
    let mut line = 1u32;
    let mut line_start = 0usize;
    // Column bookkeeping: `col` is the column of byte `col_pos` on the current line, so
    // that each span costs only the characters since the previous one.
    let mut col_pos = 0usize;
    let mut col = 1u32;
    let mut span_at = |start: usize, end: usize, line: u32, line_start: usize| {
        if col_pos < line_start || col_pos > start {
            col_pos = line_start;
            col = 1;
        }
        col += src[col_pos..start].chars().count() as u32;
        col_pos = start;
        Span::new(line, col, start, end)
    };
    while pos < bytes.len() {
        let c = bytes[pos];
        let start = pos;
        if c == b'\n' {
            pos += 1;
            line += 1;
            line_start = pos;
        } else if c.is_ascii_whitespace() {
            pos += 1;
        } else if c == b'#' {
            while pos < bytes.len() && bytes[pos] != b'\n' {
                pos += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while pos < bytes.len() && (bytes[pos].is_ascii_alphanumeric() || bytes[pos] == b'_') {
                pos += 1;
            }
            tokens.push(Token {
                tok: Tok::Ident(src[start..pos].to_string()),
                span: span_at(start, pos, line, line_start),
            });
        } else if c.is_ascii_digit() {
            let mut is_float = false;
            while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                pos += 1;
            }
            if pos + 1 < bytes.len() && bytes[pos] == b'.' && bytes[pos + 1].is_ascii_digit() {
                is_float = true;
                pos += 1;
                while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                    pos += 1;
                }
            }
            if pos < bytes.len() && (bytes[pos] == b'e' || bytes[pos] == b'E') {
                let mut q = pos + 1;
                if q < bytes.len() && (bytes[q] == b'+' || bytes[q] == b'-') {
                    q += 1;
                }
                if q < bytes.len() && bytes[q].is_ascii_digit() {
                    is_float = true;
                    pos = q;
                    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                        pos += 1;
                    }
                }
            }
            if pos < bytes.len() && (bytes[pos].is_ascii_alphanumeric() || bytes[pos] == b'_') {
                return Err(ParseError::new(
                    span_at(pos, pos + 1, line, line_start),
                    format!("malformed number `{}`", &src[start..=pos]),
                ));
            }
            let text = src[start..pos].to_string();
            tokens.push(Token {
                tok: if is_float {
                    Tok::Float(text)
                } else {
                    Tok::Int(text)
                },
                span: span_at(start, pos, line, line_start),
            });
        } else if let Some(p) = PUNCT2
            .iter()
            .chain(PUNCT1.iter())
            .find(|p| src[start..].starts_with(**p))
        {
            pos += p.len();
            tokens.push(Token {
                tok: Tok::Punct(p),
                span: span_at(start, pos, line, line_start),
            });
        } else {
            let ch = src[start..].chars().next().unwrap_or('?');
            return Err(ParseError::new(
                span_at(start, start + ch.len_utf8(), line, line_start),
                format!("unexpected character `{ch}`"),
            ));
        }
    }
    tokens.push(Token {
        tok: Tok::Eof,
        span: span_at(pos, pos, line, line_start),
    });
    Ok(tokens)
}
