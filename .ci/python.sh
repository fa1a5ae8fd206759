#!/usr/bin/env bash
# The Python package: build the wheel, install it into a fresh virtual environment, run
# the pytest suite against the installed package.
#
# PyTorch (for the autograd and interop tests) is large: by default it is installed once
# into a cache folder (SPARSILE_CI_CACHE, default ~/.cache/sparsile-ci) that the fresh
# environment sees through a .pth file. SPARSILE_CI_TORCH=install installs it into the
# fresh environment instead (~4-6 min), =skip leaves it out; when it cannot be installed
# (no network) the torch tests skip and pytest's header says why.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_MODE=${SPARSILE_CI_TORCH:-cached}
CACHE=${SPARSILE_CI_CACHE:-$HOME/.cache/sparsile-ci}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== python: $($PYTHON --version)"
$PYTHON -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "maturin>=1.9.4,<2"

echo "== python: build the wheel"
start=$SECONDS
"$WORK/venv/bin/maturin" build --release --locked -m python/Cargo.toml -o "$WORK/wheels" 2>&1 | tail -n 2
echo "wheel built in $((SECONDS - start)) s"

echo "== python: install into a fresh venv"
"$VPY" -m pip install -q "$WORK"/wheels/sparsile-*.whl pytest scipy

case "$TORCH_MODE" in
  skip)
    echo "torch: not installed (SPARSILE_CI_TORCH=skip)" ;;
  install)
    start=$SECONDS
    "$VPY" -m pip install -q torch || echo "torch: install failed; its tests will skip"
    echo "torch step took $((SECONDS - start)) s" ;;
  cached)
    site="$CACHE/torch-$("$VPY" -c 'import sys; print("py%d%d" % sys.version_info[:2])')"
    if [ ! -f "$site/.complete" ]; then
      start=$SECONDS
      rm -rf "$site"
      if "$VPY" -m pip install -q --target "$site" torch; then
        touch "$site/.complete"
      else
        echo "torch: install failed; its tests will skip"
      fi
      echo "torch installed into the cache in $((SECONDS - start)) s"
    fi
    if [ -f "$site/.complete" ]; then
      purelib=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      echo "$site" > "$purelib/sparsile-ci-torch.pth"
      echo "torch: from the cache $site"
    fi ;;
  *)
    echo "unknown SPARSILE_CI_TORCH=$TORCH_MODE (expected cached, install or skip)" >&2; exit 2 ;;
esac

echo "== python: pytest"
cd "$WORK"
"$VPY" -c 'import sparsile, sys; assert "venv" in sparsile.__file__, sparsile.__file__; print("sparsile", sparsile.__version__, "from", sparsile.__file__)'
"$VPY" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests"
