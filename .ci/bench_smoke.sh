#!/usr/bin/env bash
# Smoke test of the peer-comparison plumbing of `sparsile bench`: SciPy and the serial C
# loop (cloop) only, on the
# bundled Cora matrix, every operation; checks that every record is correct. No timing
# is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== bench smoke: bench/setup.sh --minimal (scipy)"
bash bench/setup.sh --minimal

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "== bench smoke: sparsile bench --peers scipy,cloop on data/cora.mtx"
cargo run --release --locked -q -p sparsile-cli -- bench \
  --op spmm,sddmm,spmv --k 32 --matrix data/cora.mtx --peers scipy,cloop \
  --threads 2 --warmup 1 --repeat 3 --rounds 2 --json "$out/records.json"

bench/.venv/bin/python - "$out/records.json" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))
systems = sorted({r["system"] for r in records})
assert systems == ["cloop", "scipy", "sparsile"], systems
assert len(records) == 9, len(records)
bad = [r for r in records if r["correct"] is not True]
for r in bad:
    print("not correct:", r["matrix"], r["op"], r["k"], r["system"], r.get("note"), r.get("max_abs_err"))
assert not bad, f"{len(bad)} record(s) not correct"
print(f"bench smoke: {len(records)} records, all correct")
PY
