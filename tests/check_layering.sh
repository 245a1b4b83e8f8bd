#!/usr/bin/env bash
# Fails when a layer includes a header of a higher layer (DESIGN.md layering:
# tensor <- collectives <- device_mesh <- core <- autograd <- ops <- rng <- nn/parallel <- optim
# <- checkpoint), every layer being a folder dtensor/<layer>/ included as "dtensor/<layer>/x.h".
# The link step (--no-undefined) catches calls across layers; this catches header-only uses.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root/dtensor" || exit 2
order=(tensor collectives device_mesh core autograd ops rng nn parallel optim checkpoint)
status=0
checked=0
for i in "${!order[@]}"; do
  layer=${order[$i]}
  [ -d "$layer" ] || continue
  forbidden=("${order[@]:$((i + 1))}")
  [ "$layer" = nn ] && forbidden=(parallel optim checkpoint)
  for higher in "${forbidden[@]}"; do
    hits=$(grep -rnE "#include [\"<]dtensor/${higher}/" "$layer" --include='*.h' --include='*.cc' \
             --include='*.cu' --include='*.cuh' || true)
    if [ -n "$hits" ]; then
      echo "layering violation: $layer includes $higher:"
      echo "$hits"
      status=1
    fi
  done
  checked=$((checked + 1))
done
# The umbrella (dtensor/dtensor.h) includes every layer by design; no layer includes it.
hits=$(grep -rnE "#include [\"<]dtensor/dtensor.h[\">]" "${order[@]}" || true)
if [ -n "$hits" ]; then
  echo "layering violation: a layer includes the umbrella:"
  echo "$hits"
  status=1
fi
echo "checked $checked layers"
exit $status
