#!/usr/bin/env bash
# Fuzzing: builds the fuzz targets of fuzz/ with libFuzzer's coverage instrumentation and
# runs each for a bounded time (first argument, seconds per target; default 20) on its
# committed corpus (fuzz/corpus/TARGET). New inputs go to a temporary folder; a panic, a
# crash, an input running past 10 s or using past 4 GB fails the run, and the input that
# did it is left in fuzz/artifacts/ (replay it: fuzz/target/HOST/release/TARGET FILE).
#
# Stable Rust is enough: the instrumentation is -Cpasses=sancov-module with LLVM's
# sanitizer-coverage options (what cargo fuzz passes), without a sanitizer (which would
# need nightly); --target keeps the flags off build scripts and proc macros.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${1:-20}"
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module \
  -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
  -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares \
  --cfg fuzzing"
# Its own target folder (whatever CARGO_TARGET_DIR says): the binaries run from there.
cargo build --release --locked --bins --target "$host" --target-dir target

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Kernels the native differential target compiles go to a private folder of this run.
export SPARSILE_CACHE_DIR="$work/kernel-cache"
mkdir -p artifacts
for target in mtx spt notation coord_ir loops_ir trace_json differential differential_native; do
  mkdir -p "$work/$target"
  if ! "target/$host/release/$target" "$work/$target" "corpus/$target" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=4096 \
      -artifact_prefix="artifacts/$target-" -print_final_stats=1 \
      >"$work/$target.log" 2>&1; then
    tail -60 "$work/$target.log"
    echo "fuzz target $target failed; the input is in fuzz/artifacts/" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target.log")
  echo "fuzz $target: $runs executions in ${seconds} s, no failure"
done
