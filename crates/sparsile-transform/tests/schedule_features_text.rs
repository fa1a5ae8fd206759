//! Text-IR before/after files of the primitives that need loop-IR features: each
//! `schedule/{partition,cache_write,cache_read,reduction,rfactor}/X.before` starts with comment lines naming the calls
//! to apply in order (`# parallel_with C i_2 balanced A_A_J_indptr`,
//! `# cache_write C i_2 C`, `# bound C k2_2 32`, `# vectorize C k2_2`); the function is
//! parsed, scheduled, verified and printed, and the result compared with `X.after`
//! (`SPARSILE_BLESS=1` rewrites it). `X.after` must parse back to the same text.

mod expected_text;

use std::path::Path;

use sparsile_ir::loops::{verify, Func};
use sparsile_transform::schedule::bound::bound;
use sparsile_transform::schedule::cache_read::cache_read;
use sparsile_transform::schedule::cache_write::cache_write;
use sparsile_transform::schedule::partition::parallel_with;
use sparsile_transform::schedule::reduction::parallel_reduce;
use sparsile_transform::schedule::rfactor::rfactor;
use sparsile_transform::schedule::split::split;
use sparsile_transform::schedule::vectorize::vectorize;
use sparsile_transform::schedule::{LoopPartition, LoopRef, ReductionStrategy, SplitTail};

fn apply(func: &Func, call: &str, file: &Path) -> Func {
    let words: Vec<&str> = call.split_whitespace().collect();
    let target = LoopRef::new(words[1], words[2]);
    let result = match words[0] {
        "parallel_with" => {
            let partition = match words[3] {
                "static" => LoopPartition::Static,
                "dynamic" => LoopPartition::Dynamic,
                "balanced" => LoopPartition::Balanced {
                    indptr: words[4].to_string(),
                },
                other => panic!("{}: unknown partition {other}", file.display()),
            };
            parallel_with(func, &target, &partition)
        }
        "cache_write" => cache_write(func, &target, words[3]).map(|(f, _)| f),
        "cache_read" => cache_read(func, &target, words[3]).map(|(f, _)| f),
        "parallel_reduce" => {
            let strategy = match words[3] {
                "atomic" => ReductionStrategy::Atomic,
                "per_thread" => ReductionStrategy::PerThread {
                    copies: words[4].parse().unwrap(),
                },
                other => panic!("{}: unknown strategy {other}", file.display()),
            };
            parallel_reduce(func, &target, strategy)
        }
        "split" => split(
            func,
            &target,
            words[3].parse().unwrap(),
            SplitTail::InnerFixed,
        )
        .map(|(f, _, _)| f),
        "rfactor" => rfactor(func, &target, &LoopRef::new(words[1], words[3])).map(|(f, _)| f),
        "bound" => bound(func, &target, words[3].parse().unwrap()),
        "vectorize" => vectorize(func, &target),
        other => panic!("{}: unknown call {other}", file.display()),
    };
    let out = result.unwrap_or_else(|e| panic!("{}: {call}: {e}", file.display()));
    verify(&out).unwrap_or_else(|e| panic!("{}: {call}: {e:?}\n{out}", file.display()));
    out
}

#[test]
fn before_and_after_files() {
    let mut seen = 0;
    for dir in [
        "partition",
        "cache_write",
        "cache_read",
        "reduction",
        "rfactor",
    ] {
        for file in expected_text::before_files(dir) {
            let path = &file.path;
            let mut func = file.func;
            let before = func.to_string();
            for call in &file.calls {
                func = apply(&func, call, path);
            }
            let after = func.to_string();
            assert_ne!(
                after,
                before,
                "{}: the calls changed nothing",
                path.display()
            );
            expected_text::check_after(path, &after);
            seen += 1;
        }
    }
    assert!(seen >= 6);
}
