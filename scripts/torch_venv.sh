# shellcheck shell=bash
# Sourced by the scripts that compare with PyTorch (bench_kernels_vs_pytorch.sh,
# bench_vs_pytorch.sh): ensure_torch_venv CALLER makes sure "$TORCH_VENV/bin/python" imports
# torch, creating the virtual environment (outside the repository) on first use from
# download.pytorch.org's CPU wheels, or PyPI's torch when that index is unreachable.
ensure_torch_venv() {
  if ! "$TORCH_VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "[$1] installing PyTorch (CPU) into $TORCH_VENV" >&2
    python3 -m venv "$TORCH_VENV"
    "$TORCH_VENV/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu ||
      "$TORCH_VENV/bin/pip" install -q torch
  fi
}
