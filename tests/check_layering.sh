#!/usr/bin/env bash
# Fails when a layer includes a header of a higher layer (DESIGN.md layering:
# tensor <- collectives <- device_mesh <- dtensor <- autograd <- ops <- rng <- nn/parallel <- optim
# <- checkpoint).
# The link step (--no-undefined) catches calls across layers; this catches header-only uses.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
order=(tensor collectives device_mesh dtensor autograd ops rng nn parallel optim checkpoint)
status=0
checked=0
for i in "${!order[@]}"; do
  layer=${order[$i]}
  [ -d "$layer" ] || continue
  forbidden=("${order[@]:$((i + 1))}")
  [ "$layer" = nn ] && forbidden=(parallel optim checkpoint)
  for higher in "${forbidden[@]}"; do
    # The umbrella header dtensor/dtensor.h includes every layer by design.
    hits=$(grep -rnE "#include [\"<]${higher}/" "$layer" --include='*.h' --include='*.cc' \
             --include='*.cu' --include='*.cuh' | grep -v '^dtensor/dtensor.h:' | grep -v 'dtensor/config.h' || true)
    if [ -n "$hits" ]; then
      echo "layering violation: $layer includes $higher:"
      echo "$hits"
      status=1
    fi
  done
  checked=$((checked + 1))
done
echo "checked $checked layers"
exit $status
