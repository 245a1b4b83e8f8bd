#!/usr/bin/env bash
# Installs the Debian packages dtensor needs, only those that are missing.
# Idempotent and quiet when everything is already there. Must run as root (or via sudo).
set -euo pipefail

packages=(
  cmake g++ make
  libopenmpi-dev openmpi-bin
  libabsl-dev
  catch2
  libopenblas-dev
  libdnnl-dev  # oneDNN: the CPU bf16 GEMM (dtensor/ops/matmul/onednn.cc)
  libhwy-dev libsleef-dev
  nlohmann-json3-dev libisal-dev
  clang-format  # the format_check test (tests/check_format.sh, scripts/format.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "[install_deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "[install_deps] done"
