#!/usr/bin/env bash
# Creates bench/.venv with the Python peers of `sparsile bench`, from PyPI.
#
#   bench/setup.sh            scipy, MKL (sparse_dot_mkl + mkl), python-graphblas, matplotlib
#   bench/setup.sh --minimal  scipy only (what the CI smoke test needs)
#   bench/setup.sh --torch    everything above plus PyTorch (a wheel of several GB)
#   bench/setup.sh --gpu      the GPU peers of bench/gpu.sh (NumPy, CuPy for CUDA 12, PyTorch,
#                             PyG, NVRTC), on a machine with an NVIDIA GPU; torch_sparse is on
#                             PyPI only as source (it needs the CUDA toolkit to build), so the
#                             PyG peer goes through torch.sparse unless torch_sparse is
#                             installed another way (PyG's own wheel index)
#
# PYTHON picks the interpreter that creates the environment (default: python3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
mode=full
torch=0
gpu=0
for arg in "$@"; do
  case "$arg" in
    --minimal) mode=minimal ;;
    --torch) torch=1 ;;
    --gpu) mode=minimal; gpu=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
  esac
done

if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
pip() { "$venv/bin/python" -m pip install --quiet "$@"; }

pip numpy scipy
if [ "$mode" = full ]; then
  pip mkl sparse_dot_mkl python-graphblas matplotlib
fi
if [ "$torch" = 1 ]; then
  pip torch
fi
if [ "$gpu" = 1 ]; then
  pip torch cupy-cuda12x torch-geometric nvidia-cuda-nvrtc-cu12
fi
"$venv/bin/python" - <<'PY'
import glob, importlib, os, sys
for name in ["numpy", "scipy", "graphblas", "matplotlib", "torch", "cupy", "torch_geometric"]:
    try:
        importlib.import_module(name)
        print(f"  {name}: installed")
    except Exception:
        print(f"  {name}: not installed")
mkl_rt = glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*"))
print(f"  mkl (libmkl_rt): {mkl_rt[0] if mkl_rt else 'not installed'}")
PY
echo "bench/.venv ready"
