// Shapes shared by the distance family's Tensor and DTensor functions.
#pragma once

#include <utility>

#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

// cdist's inputs x1 [*a, P, M] and x2 [*b, R, M] broadcast over their batch dims (PyTorch's
// rule): the shapes to expand x1 and x2 to ([*, P, M], [*, R, M], * = broadcast(*a, *b)). Both
// ranks must be >= 2 (checked here).
inline std::pair<Shape, Shape> cdist_broadcast(IntSpan a, IntSpan b) {
  DT_CHECK(a.size() >= 2 && b.size() >= 2,
           "[cdist] expected x1 [*, P, M] and x2 [*, R, M] of rank >= 2, got %s and %s",
           shape_str(a), shape_str(b));
  Shape batch = broadcast_shapes(a.subspan(0, a.size() - 2), b.subspan(0, b.size() - 2), "cdist");
  Shape s1 = batch, s2 = batch;
  s1.insert(s1.end(), a.end() - 2, a.end());
  s2.insert(s2.end(), b.end() - 2, b.end());
  return {s1, s2};
}

}  // namespace dtensor::detail
