#!/usr/bin/env bash
# The GPU benchmark, for a machine with an NVIDIA GPU, its driver, and Python with
# torch, CuPy and torch-geometric, but no Rust toolchain: it runs a `sparsile` binary
# built elsewhere (`cargo build --release -p sparsile-cli`) from this checkout.
#
#   bench/gpu.sh [--sparsile PATH] [--python PY] [--out DIR] [--suite FILE] [--quick]
#                [--all-recipes] [--peers LIST] [--rounds N] [--warmup N] [--repeat N]
#                [--skip-product-check]
#
#   --sparsile PATH    the binary (default: target/release/sparsile of this checkout)
#   --python PY        the Python of the peers (default: $PYTHON, else python3)
#   --out DIR          where results go (default: ./sparsile-gpu-YYYYmmdd-HHMMSS)
#   --suite FILE       the cases (default: bench/suite-gpu.json: SpMM and SDDMM at
#                      K = 32, 64, 128, 256 and SpMV on the suite matrices, found under
#                      SPARSILE_DATA_DIR, default ../shared/data beside the checkout)
#   --quick            data/cora.mtx only (bundled), at the same operations and widths
#   --all-recipes      every GPU recipe per case (--recipes all), not only the GPU rule's
#   --peers LIST       GPU peers (default cusparse,torch,pyg)
#   --rounds N, --warmup N, --repeat N   passed to sparsile bench (defaults 1, 10, 100)
#   --skip-product-check   skip step 2
#
# Steps:
#   1. checks: the binary runs; the GPU (nvidia-smi, when present); the Python packages
#      (reported; a missing one makes its peer report "unsupported", it stops nothing);
#      NVRTC (SPARSILE_NVRTC, else the nvidia-cuda-nvrtc-cu12 or CUDA 13 nvidia-cuda-nvrtc
#      wheel in the Python's site-packages, which torch's CUDA wheels bring, else the
#      loader's search path).
#   2. the product path: `sparsile run --target cuda` on Cora (SpMM, SDDMM, SpMV with
#      every GPU recipe that applies) against `sparsile eval` (the f64 interpreter):
#      the checksums must agree, or the script stops.
#   3. `sparsile bench --target cuda` on the suite against every GPU peer: the table on
#      the terminal and in OUT/bench.txt, the records in OUT/bench.json.
# OUT/env.txt records the GPU, driver, binary and package versions.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
sparsile="$repo/target/release/sparsile"
python="${PYTHON:-python3}"
out="sparsile-gpu-$(date +%Y%m%d-%H%M%S)"
suite="$here/suite-gpu.json"
quick=0
recipes=()
peers="cusparse,torch,pyg"
rounds=1
warmup=10
repeat=100
product_check=1

die() { echo "gpu.sh: $*" >&2; exit 1; }
need_value() {
  if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (try --help)"; fi
}

while [ $# -gt 0 ]; do
  case "$1" in
    --sparsile) need_value "$@"; sparsile="$2"; shift 2 ;;
    --python) need_value "$@"; python="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --suite) need_value "$@"; suite="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --all-recipes) recipes=(--recipes all); shift ;;
    --peers) need_value "$@"; peers="$2"; shift 2 ;;
    --rounds) need_value "$@"; rounds="$2"; shift 2 ;;
    --warmup) need_value "$@"; warmup="$2"; shift 2 ;;
    --repeat) need_value "$@"; repeat="$2"; shift 2 ;;
    --skip-product-check) product_check=0; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) die "unknown option $1 (try --help)" ;;
  esac
done

# Paths given relative to where the script was started stay so after the cd below.
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
case "$sparsile" in */*) sparsile="$(abs "$sparsile")" ;; esac
suite="$(abs "$suite")"
out="$(abs "$out")"
case "$python" in */*) python="$(abs "$python")" ;; esac

echo "== 1. checks"
[ -x "$sparsile" ] || die "no sparsile binary at $sparsile: build it with 'cargo build --release -p sparsile-cli' (on any machine with Rust for this OS and CPU) and pass --sparsile PATH"
version="$("$sparsile" --version 2>&1)" || die "$sparsile does not run here: $version"
echo "sparsile: $sparsile ($version)"
command -v "$python" >/dev/null 2>&1 || die "no Python interpreter '$python': pass --python or set PYTHON"
"$python" -c 'import numpy' 2>/dev/null || die "$python has no NumPy, which every peer needs: pip install numpy (or pass --python)"
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus="$(nvidia-smi -L 2>&1)" || die "nvidia-smi fails: $gpus"
  [ -n "$gpus" ] || die "nvidia-smi lists no GPU"
  echo "$gpus"
else
  echo "nvidia-smi not found: the GPU is checked by sparsile itself below"
fi
"$python" - <<'PY'
import importlib
for name in ["numpy", "torch", "cupy", "torch_geometric", "torch_sparse"]:
    try:
        m = importlib.import_module(name)
        print(f"  {name} {getattr(m, '__version__', '?')}")
    except Exception as e:
        print(f"  {name}: not available ({type(e).__name__}: {e}); its peer will report 'unsupported'")
try:
    import torch
    print(f"  torch.cuda.is_available(): {torch.cuda.is_available()}")
except Exception:
    pass
PY
if [ -z "${SPARSILE_NVRTC:-}" ]; then
  found="$("$python" - <<'PY'
import glob, os, site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
dirs += [p for p in sys.path if p.endswith("-packages")]
for d in dirs:
    # CUDA 12's wheel (nvidia-cuda-nvrtc-cu12) and CUDA 13's (nvidia-cuda-nvrtc, under cu13).
    libs = sorted(glob.glob(os.path.join(d, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*")))
    libs += sorted(glob.glob(os.path.join(d, "nvidia", "cu13", "lib", "libnvrtc.so*")))
    libs = [l for l in libs if "builtins" not in l and ".alt." not in l]
    if libs:
        print(libs[-1])
        break
PY
)"
  if [ -n "$found" ]; then
    export SPARSILE_NVRTC="$found"
  elif ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
    echo "NVRTC: from the loader's search path"
  else
    die "NVRTC not found: pip install nvidia-cuda-nvrtc-cu12 into $python's environment, or set SPARSILE_NVRTC to a libnvrtc.so.12"
  fi
fi
if [ -n "${SPARSILE_NVRTC:-}" ]; then
  echo "NVRTC: $SPARSILE_NVRTC"
fi

mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "sparsile: $sparsile ($version)"
  echo "checkout: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "python: $("$python" --version 2>&1)"
  echo "SPARSILE_NVRTC: ${SPARSILE_NVRTC:-}"
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  "$python" -m pip list 2>/dev/null | grep -Ei '^(numpy|torch|cupy|torch.geometric|torch.sparse|nvidia-cuda-nvrtc)' || true
} > "$out/env.txt" 2>&1
cd "$repo"

if [ "$product_check" = 1 ]; then
  echo "== 2. sparsile run --target cuda against sparsile eval (data/cora.mtx)"
  check() {
    local recipe="$1" expr="$2" dim="$3"
    local args=(--expr "$expr" --input A=data/cora.mtx --dim "$dim" --json)
    "$sparsile" eval "${args[@]}" > "$out/eval.json" || die "sparsile eval failed on $expr"
    "$sparsile" run --target cuda --recipe "$recipe" --repeat 3 "${args[@]}" > "$out/run.json" \
      || die "sparsile run --target cuda --recipe $recipe failed on $expr (the error is above)"
    "$python" - "$out/eval.json" "$out/run.json" "$recipe" "$expr" <<'PY' || die "checksums differ: $recipe on $expr"
import json, sys
want = [o["checksum"] for o in json.load(open(sys.argv[1]))["outputs"]]
run = json.load(open(sys.argv[2]))
got = [o["checksum"] for o in run["outputs"]]
ok = len(got) == len(want) and all(abs(g - w) <= 1e-3 * (1 + abs(w)) for g, w in zip(got, want))
print(f"  {'ok   ' if ok else 'WRONG'} {sys.argv[3]:<12} {sys.argv[4]:<36} run {got} eval {want} "
      f"(median {run['median_seconds'] * 1e3:.3f} ms, host clock)")
sys.exit(0 if ok else 1)
PY
  }
  spmm='C[i,k] = A[i,j] * B[j,k]'
  sddmm='C[i,j] = A[i,j] * X[i,k] * Y[j,k]'
  spmv='y[i] = A[i,j] * x[j]'
  for r in gpu_rowwise gpu_nnz gpu_hyb; do check "$r" "$spmm" k=32; done
  for r in gpu_warp gpu_rowwise; do check "$r" "$sddmm" k=32; done
  for r in gpu_warp gpu_rowwise gpu_nnz gpu_hyb; do check "$r" "$spmv" j=2708; done
  rm -f "$out/eval.json" "$out/run.json"
fi

echo "== 3. sparsile bench --target cuda"
if [ "$quick" = 1 ]; then
  # shellcheck disable=SC2054 # the commas belong to the values
  cases=(--matrix data/cora.mtx --op spmm,sddmm,spmv --k 32,64,128,256)
else
  [ -f "$suite" ] || die "no suite file $suite"
  cases=(--suite "$suite")
fi
"$sparsile" bench --target cuda "${cases[@]}" ${recipes[@]+"${recipes[@]}"} --peers "$peers" \
  --python "$python" --bench-dir "$here" --rounds "$rounds" --warmup "$warmup" \
  --repeat "$repeat" --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
echo "results: $out (bench.json, bench.txt, env.txt)"
