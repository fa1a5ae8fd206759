#!/usr/bin/env bash
# The Python package: install it the way the README says (`pip install ./python`: pip
# builds the wheel with maturin, pyproject's build backend) into a fresh virtual
# environment, then run the pytest suite against the installed package.
#
# The build reuses the workspace's target folder (CARGO_TARGET_DIR, default ./target), so
# what `cargo test --workspace --release` built is not compiled again, and passes
# `--locked` to cargo (MATURIN_PEP517_ARGS), so a stale Cargo.lock fails as in .ci/run.
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

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export MATURIN_PEP517_ARGS="--locked${MATURIN_PEP517_ARGS:+ $MATURIN_PEP517_ARGS}"

echo "== python: $($PYTHON --version)"
$PYTHON -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"

echo "== python: pip install ./python (target folder $CARGO_TARGET_DIR, maturin args $MATURIN_PEP517_ARGS)"
start=$SECONDS
"$VPY" -m pip install -q ./python pytest scipy
echo "built and installed in $((SECONDS - start)) s"

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
