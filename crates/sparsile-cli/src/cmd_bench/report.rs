//! The table `sparsile bench` prints: one row per (case, system), then the geometric
//! mean of Sparsile's speedup over the best peer (and over each peer) per operation.
//!
//! ```text
//! case            system     median ms  min-max ms   GFLOP/s  GB/s  floor ms  % floor  speedup  check
//! cora spmm K=32  sparsile       0.210  0.20-0.43      3.27   8.0     0.050     24.0  1.90x mkl  ok
//!                 mkl            0.400  0.39-0.41      1.72   4.2     0.050     12.5  1.90x    ok
//! ```

use std::collections::BTreeMap;

use crate::cmd_bench::metrics::geometric_mean;
use crate::cmd_bench::record::{Record, SPARSILE};
use crate::table::Table;

fn label(r: &Record) -> String {
    match r.k {
        Some(k) => format!("{} {} K={k}", r.matrix, r.op),
        None => format!("{} {}", r.matrix, r.op),
    }
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.1}"),
        Some(v) if v >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
        None => "-".into(),
    }
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

fn check(r: &Record) -> String {
    match (r.correct, &r.note) {
        (Some(true), _) => "ok".into(),
        (Some(false), _) => format!("WRONG (max err {:.2e})", r.max_abs_err.unwrap_or(f64::NAN)),
        (None, Some(note)) => note.clone(),
        (None, None) => "-".into(),
    }
}

/// The table of all records, in order.
pub fn table(records: &[Record]) -> String {
    let mut t = Table::new(
        &[
            "case",
            "system",
            "median ms",
            "min-max ms",
            "GFLOP/s",
            "GB/s",
            "floor ms",
            "% floor",
            "speedup",
            "check",
        ],
        &[
            false, false, true, true, true, true, true, true, true, false,
        ],
    );
    let mut last = String::new();
    for r in records {
        let case = label(r);
        let shown = if case == last {
            String::new()
        } else {
            case.clone()
        };
        last = case;
        let system = match (&r.format, r.recipe.as_deref()) {
            (Some(f), Some("default") | None) if r.system == SPARSILE => {
                format!("{} ({f})", r.system)
            }
            (Some(f), Some(recipe)) if r.system == SPARSILE => {
                format!("{} ({f}, {recipe})", r.system)
            }
            _ => r.system.clone(),
        };
        let range = match (r.min_ms, r.max_ms) {
            (Some(a), Some(b)) => format!("{}-{}", ms(Some(a)), ms(Some(b))),
            _ => "-".into(),
        };
        let speedup = match (r.speedup, &r.best_peer) {
            (Some(s), Some(p)) if r.system == SPARSILE => format!("{s:.2}x {p}"),
            (Some(s), _) => format!("{s:.2}x"),
            (None, _) => "-".into(),
        };
        t.row(vec![
            shown,
            system,
            ms(r.median_ms),
            range,
            num(r.gflops),
            num(r.gbs),
            ms(Some(r.floor_ms)),
            num(r.pct_of_floor),
            speedup,
            check(r),
        ]);
    }
    t.render()
}

/// Geometric means of Sparsile's speedups per operation: over the best peer, then over
/// each peer, from the records of each case (one group per case). Empty when no peer
/// ran. A case measured with several of Sparsile's recipes counts once, with its fastest
/// recipe (peers' speedups are against that one already).
pub fn geomeans(cases: &[Vec<Record>]) -> String {
    // op -> column ("best peer" or a peer name) -> speedups
    let mut by_op: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut columns: Vec<String> = vec!["best peer".into()];
    let correct = |r: &&Record| r.correct == Some(true) && r.speedup.is_some();
    for records in cases {
        let best = records
            .iter()
            .filter(correct)
            .filter(|r| r.system == SPARSILE)
            .max_by(|a, b| {
                a.speedup
                    .unwrap_or(0.0)
                    .total_cmp(&b.speedup.unwrap_or(0.0))
            });
        let peers = records
            .iter()
            .filter(correct)
            .filter(|r| r.system != SPARSILE);
        for r in best.into_iter().chain(peers) {
            let s = r.speedup.expect("filtered");
            let col = if r.system == SPARSILE {
                "best peer".to_string()
            } else {
                r.system.clone()
            };
            if !columns.contains(&col) {
                columns.push(col.clone());
            }
            by_op
                .entry(r.op.clone())
                .or_default()
                .entry(col)
                .or_default()
                .push(s);
        }
    }
    if by_op.is_empty() {
        return String::new();
    }
    let mut headers = vec!["op".to_string()];
    headers.extend(columns.iter().map(|c| format!("vs {c}")));
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut right = vec![false];
    right.extend(columns.iter().map(|_| true));
    let mut t = Table::new(&header_refs, &right);
    for (op, cols) in &by_op {
        let mut row = vec![op.clone()];
        for c in &columns {
            row.push(
                match cols
                    .get(c)
                    .and_then(|v| geometric_mean(v).map(|g| (g, v.len())))
                {
                    Some((g, n)) => format!("{g:.2}x ({n})"),
                    None => "-".into(),
                },
            );
        }
        t.row(row);
    }
    format!(
        "geometric mean of Sparsile's speedup (cases):\n{}",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        system: &str,
        median: Option<f64>,
        speedup: Option<f64>,
        correct: Option<bool>,
    ) -> Record {
        Record {
            matrix: "cora".into(),
            op: "spmm".into(),
            k: Some(32),
            system: system.into(),
            format: (system == SPARSILE).then(|| "csr".into()),
            recipe: (system == SPARSILE).then(|| "default".into()),
            m: 1,
            n: 1,
            nnz: 1,
            threads: 2,
            median_ms: median,
            min_ms: median,
            max_ms: median,
            gflops: median.map(|_| 1.0),
            gbs: median.map(|_| 2.0),
            floor_ms: 0.5,
            pct_of_floor: median.map(|m| 50.0 / m),
            speedup,
            best_peer: (system == SPARSILE).then(|| "mkl".into()),
            correct,
            max_abs_err: None,
            note: correct.is_none().then(|| "mkl: no SDDMM".into()),
            version: None,
            compile_ms: None,
            flops: 2.0,
            bytes: 4.0,
            bandwidth_gbs: 10.0,
            peak_gflops: 100.0,
            target: None,
            device: None,
            preprocess_ms: None,
            times_ms: Vec::new(),
        }
    }

    #[test]
    fn table_shows_the_case_once_and_the_checks() {
        let rows = vec![
            rec(SPARSILE, Some(1.0), Some(2.0), Some(true)),
            rec("mkl", Some(2.0), Some(2.0), Some(true)),
            rec("graphblas", None, None, None),
        ];
        let text = table(&rows);
        assert_eq!(text.matches("cora spmm K=32").count(), 1, "{text}");
        assert!(text.contains("sparsile (csr)"), "{text}");
        let mut tuned = rows[0].clone();
        tuned.recipe = Some("rowwise:k=32".into());
        assert!(table(&[tuned]).contains("sparsile (csr, rowwise:k=32)"));
        assert!(text.contains("2.00x mkl"), "{text}");
        assert!(text.contains("mkl: no SDDMM"), "{text}");
    }

    #[test]
    fn geomeans_skip_wrong_results() {
        let cases = vec![
            vec![rec(SPARSILE, Some(1.0), Some(2.0), Some(true))],
            vec![rec(SPARSILE, Some(1.0), Some(8.0), Some(true))],
            vec![rec(SPARSILE, Some(1.0), Some(100.0), Some(false))],
            vec![rec("mkl", Some(1.0), Some(3.0), Some(true))],
        ];
        let text = geomeans(&cases);
        assert!(text.contains("4.00x (2)"), "{text}");
        assert!(text.contains("3.00x (1)"), "{text}");
        assert_eq!(
            geomeans(&[vec![rec(SPARSILE, Some(1.0), None, Some(true))]]),
            ""
        );
    }

    #[test]
    fn geomeans_count_the_best_recipe_of_a_case_once() {
        let cases = vec![
            vec![
                rec(SPARSILE, Some(2.0), Some(0.5), Some(true)),
                rec(SPARSILE, Some(1.0), Some(2.0), Some(true)),
                rec(SPARSILE, Some(0.5), Some(4.0), Some(false)),
            ],
            vec![rec(SPARSILE, Some(1.0), Some(9.0), Some(true))],
        ];
        // The first case's best correct recipe (2.0) once, then 9.0: sqrt(18).
        let text = geomeans(&cases);
        assert!(text.contains("4.24x (2)"), "{text}");
    }
}
