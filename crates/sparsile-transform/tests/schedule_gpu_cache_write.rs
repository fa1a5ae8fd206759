#![allow(clippy::result_large_err)]
#[path = "expected_text/mod.rs"]
mod expected_text;
use sparsile_ir::loops::{verify, Func, GpuAxis};
use sparsile_transform::schedule::*;
fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}
fn axis(text: &str) -> GpuAxis {
    GpuAxis::parse(text).unwrap_or_else(|| panic!("not an axis: {text}"))
}
fn call(func: &Func, line: &str) -> Func {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = match words.as_slice() {
        ["split", b, v, f] => {
            split(func, &at(b, v), f.parse().unwrap(), SplitTail::InnerFixed).map(|(f, _, _)| f)
        }
        ["reorder", b, vars @ ..] => {
            let loops: Vec<LoopRef> = vars.iter().map(|v| at(b, v)).collect();
            reorder(func, &loops)
        }
        ["bound", b, v, n] => bound(func, &at(b, v), n.parse().unwrap()),
        ["bind", b, v, a] => bind(func, &at(b, v), axis(a)),
        ["bind_atomic", b, v, a] => bind_atomic(func, &at(b, v), axis(a)),
        ["cache_write_shared", b, v, buffer] => {
            cache_write_shared(func, &at(b, v), buffer).map(|(f, _)| f)
        }
        _ => panic!("unknown call `{line}`"),
    };
    let out = out.unwrap_or_else(|e| panic!("`{line}`: {e}\n{func}"));
    verify(&out).unwrap_or_else(|e| panic!("`{line}`: does not verify: {e:?}\n{out}"));
    println!("== {line}\n{out}");
    out
}
#[test]
fn before_after_files() {
    for file in expected_text::before_files("gpu_cache_write") {
        let mut func = file.func.clone();
        for line in &file.calls {
            func = call(&func, line);
        }
        expected_text::check_after(&file.path, &func.to_string());
    }
}
