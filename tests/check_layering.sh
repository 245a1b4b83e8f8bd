#!/usr/bin/env bash
# Fails when a layer includes a header of a higher layer (DESIGN.md layering:
# tensor <- collectives <- device_mesh <- core <- autograd <- ops <- rng <- nn/parallel <- optim
# <- checkpoint, compile <- models), every layer being a folder dtensor/<layer>/ included as "dtensor/<layer>/x.h".
# The link step (--no-undefined) catches calls across layers; this catches header-only uses.
# It also checks the link graph as declared: a layer's library (dtensor_add_library and
# target_link_libraries of dtensor_<layer> in dtensor/<layer>/CMakeLists.txt and its *.cmake)
# lists no higher layer, and no target of tests/core (CMakeLists.txt and *.cmake under it)
# links a layer above the core: the core builds, links and tests without autograd.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root/dtensor" || exit 2
order=(tensor collectives device_mesh core autograd ops rng nn parallel optim checkpoint compile models)
status=0
checked=0
for i in "${!order[@]}"; do
  layer=${order[$i]}
  [ -d "$layer" ] || continue
  forbidden=("${order[@]:$((i + 1))}")
  [ "$layer" = nn ] && forbidden=(parallel optim checkpoint compile models)
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

# The dtensor::<layer> / dtensor_<layer> names linked by the link calls (dtensor_add_library,
# dtensor_add_test, dtensor_add_mpi_test, target_link_libraries) of the CMake files given, one
# per line; comments are dropped.
linked_layers() {
  awk '
    { sub(/#.*/, "") }
    !depth && /(dtensor_add_library|dtensor_add_test|dtensor_add_mpi_test|target_link_libraries)[ \t]*\(/ {
      depth = 0; inside = 1; text = ""
    }
    inside {
      text = text " " $0
      n = split($0, ch, "")
      for (k = 1; k <= n; k++) { if (ch[k] == "(") depth++; else if (ch[k] == ")") depth-- }
      if (depth <= 0) {
        # the call itself names its target first: skip it, report what it links
        sub(/^[^(]*\([ \t]*[^ \t)]+/, "", text)
        gsub(/[^ \t]+\.(cc|cu|cpp|h|cuh)/, "", text)  # source files
        while (match(text, /(^|[^A-Za-z0-9_])dtensor(::|_)[a-z_]+/)) {
          name = substr(text, RSTART, RLENGTH); sub(/^[^d]*/, "", name); print name
          text = substr(text, RSTART + RLENGTH)
        }
        inside = 0; depth = 0
      }
    }' "$@" | sed -E 's/^dtensor(::|_)//'
}

# A layer lists no higher layer among what it links.
for i in "${!order[@]}"; do
  layer=${order[$i]}
  [ -f "$layer/CMakeLists.txt" ] || continue
  forbidden=("${order[@]:$((i + 1))}")
  [ "$layer" = nn ] && forbidden=(parallel optim checkpoint compile models)
  mapfile -t files < <(find "$layer" -name CMakeLists.txt -o -name '*.cmake')
  for dep in $(linked_layers "${files[@]}" | sort -u); do
    for higher in "${forbidden[@]}"; do
      if [ "$dep" = "$higher" ]; then
        echo "link violation: dtensor_$layer links dtensor::$higher (a higher layer)"
        status=1
      fi
    done
  done
done

# tests/core links the core and what is below it, never a higher layer.
core_tests="$root/tests/core"
if [ -d "$core_tests" ]; then
  mapfile -t files < <(find "$core_tests" -name CMakeLists.txt -o -name '*.cmake')
  for dep in $(linked_layers "${files[@]}" | sort -u); do
    for higher in autograd ops rng nn parallel optim checkpoint compile models; do
      if [ "$dep" = "$higher" ]; then
        echo "link violation: a tests/core target links dtensor::$higher (above the core)"
        status=1
      fi
    done
  done
fi

echo "checked $checked layers"
exit $status
