#!/usr/bin/env bash
# NVRTC for the CUDA compile checks: the pinned nvidia-cuda-nvrtc-cu12 wheel in a virtual
# environment kept in a cache folder (SPARSILE_CI_CACHE, default ~/.cache/sparsile-ci).
# Prints the path of libnvrtc.so.12 on its last line, or nothing when it cannot be
# installed (no network): the NVRTC tests then say that they skipped.
set -euo pipefail

PYTHON=${PYTHON:-python3}
CACHE=${SPARSILE_CI_CACHE:-$HOME/.cache/sparsile-ci}
VERSION=12.9.86
venv="$CACHE/nvrtc-$VERSION"
lib="$venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
if ! ls $lib >/dev/null 2>&1; then
  rm -rf "$venv"
  mkdir -p "$CACHE"
  if ! { "$PYTHON" -m venv "$venv" && "$venv/bin/pip" install -q "nvidia-cuda-nvrtc-cu12==$VERSION"; } >&2; then
    echo "nvrtc: install failed; the NVRTC checks will skip" >&2
    exit 0
  fi
fi
ls $lib | head -n 1
