#!/usr/bin/env bash
# Builds the API reference (Doxygen HTML) of the public headers into build/docs/html
# (DOCS_OUT overrides build/docs); open build/docs/html/index.html. Installs Debian's doxygen
# when it is missing (kept out of install_deps.sh so the test command does not pay for it).
# Fails when Doxygen reports any warning, an undocumented public declaration included
# (WARN_IF_UNDOCUMENTED in docs/api/Doxyfile); the warnings are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v doxygen >/dev/null; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  echo "[docs] installing doxygen"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends doxygen >/dev/null
fi
export DOCS_OUT=${DOCS_OUT:-build/docs}
mkdir -p "$DOCS_OUT"
rm -f "$DOCS_OUT/warnings.log"
doxygen docs/api/Doxyfile
if [ -s "$DOCS_OUT/warnings.log" ]; then
  echo "[docs] $(grep -c 'warning:' "$DOCS_OUT/warnings.log") Doxygen warning(s):" >&2
  cat "$DOCS_OUT/warnings.log" >&2
  exit 1
fi
echo "[docs] API reference: $DOCS_OUT/html/index.html"
