//! Exact C spellings of integer and floating-point literals.
//!
//! Floating-point literals print the shortest decimal that reads back to the same value
//! (Rust's round-trip formatting), with an `f` suffix in `float` context, so the C
//! compiler sees exactly the IR's value: `0.1` in f32 context is `0.1f` (the f32 nearest
//! 0.1), in f64 context `0.1`. Infinities and NaN use `INFINITY` and `NAN` from
//! `<math.h>`. Integers outside the `int` range use `INT64_C`.

use super::expr::{Code, PREC_PRIMARY, PREC_UNARY};
use super::types::Ty;

/// An integer literal of type `int64_t` (or `int` when small, which converts exactly).
pub(crate) fn int_literal(n: i64) -> Code {
    let text = if n == i64::MIN {
        "INT64_MIN".to_string()
    } else if i32::try_from(n).is_ok() {
        n.to_string()
    } else {
        format!("INT64_C({n})")
    };
    let prec = if n < 0 && n != i64::MIN {
        PREC_UNARY
    } else {
        PREC_PRIMARY
    };
    Code { text, prec }
}

/// A floating-point literal in the type `ty` (which must be F32 or F64).
pub(crate) fn float_literal(x: f64, ty: Ty) -> Code {
    let (is_nan, is_inf, negative) = match ty {
        Ty::F32 => {
            let v = x as f32;
            (v.is_nan(), v.is_infinite(), v.is_sign_negative())
        }
        _ => (x.is_nan(), x.is_infinite(), x.is_sign_negative()),
    };
    let text = if is_nan {
        "NAN".to_string()
    } else if is_inf {
        if negative { "-INFINITY" } else { "INFINITY" }.to_string()
    } else {
        match ty {
            Ty::F32 => format!("{}f", with_point(format!("{:?}", x as f32))),
            _ => with_point(format!("{x:?}")),
        }
    };
    let prec = if text.starts_with('-') {
        PREC_UNARY
    } else {
        PREC_PRIMARY
    };
    Code { text, prec }
}

/// Makes sure a decimal has a `.` or an exponent, so that it is a floating constant.
fn with_point(s: String) -> String {
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_literals_are_exact_and_typed() {
        assert_eq!(float_literal(0.1, Ty::F64).text, "0.1");
        assert_eq!(float_literal(0.1, Ty::F32).text, "0.1f");
        assert_eq!(float_literal(2.0, Ty::F32).text, "2.0f");
        assert_eq!(float_literal(1e20, Ty::F32).text, "1e20f");
        assert_eq!(float_literal(1e300, Ty::F32).text, "INFINITY");
        assert_eq!(float_literal(-1e300, Ty::F32).text, "-INFINITY");
        assert_eq!(float_literal(f64::NAN, Ty::F64).text, "NAN");
        assert_eq!(float_literal(-0.5, Ty::F64).prec, PREC_UNARY);
        let third = 1.0f64 / 3.0;
        let printed = float_literal(third, Ty::F64).text;
        assert_eq!(printed.parse::<f64>().unwrap().to_bits(), third.to_bits());
        let printed = float_literal(third, Ty::F32).text;
        let value: f32 = printed.trim_end_matches('f').parse().unwrap();
        assert_eq!(value.to_bits(), (third as f32).to_bits());
    }

    #[test]
    fn int_literals() {
        assert_eq!(int_literal(7).text, "7");
        assert_eq!(int_literal(-7).prec, PREC_UNARY);
        assert_eq!(int_literal(1 << 40).text, "INT64_C(1099511627776)");
        assert_eq!(int_literal(i64::MIN).text, "INT64_MIN");
    }
}
