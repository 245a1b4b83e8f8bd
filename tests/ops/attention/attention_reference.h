// The attention reference the attention suites compare with: the math path on DTensor ops
// (scores materialised, softmax, matmul), so autograd gives its gradients too.
#pragma once

#include <limits>
#include <optional>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test {

// softmax(q k^T * scale + mask) v; `mask` bool (true: attend) or additive, `causal` hides
// keys j > i + diagonal from query i (diagonal 0: PyTorch's is_causal; S - L: its
// causal_lower_right). Rows that see no key are NaN here (callers avoid them or compare to 0).
inline DTensor attention_reference(const DTensor& q, const DTensor& k, const DTensor& v,
                                   const DTensor& mask, bool causal, double scale,
                                   int64_t diagonal = 0) {
  DTensor s = mul(matmul(q, transpose(k, 2, 3)), Scalar(scale));
  const double inf = std::numeric_limits<double>::infinity();
  if (mask.defined()) {
    s = mask.dtype() == kBool ? masked_fill(s, logical_not(mask), Scalar(-inf)) : add(s, mask);
  }
  if (causal) {
    const int64_t L = q.size(2), S = k.size(2);
    const Tensor rows =
        arange(static_cast<double>(diagonal), static_cast<double>(L + diagonal), 1.0)
            .reshape({L, 1});
    const Tensor cols = arange(0.0, static_cast<double>(S), 1.0).reshape({1, S});
    const Tensor hidden = gt(cols, rows).to(s.to_local().device());
    const DeviceMesh& mesh = s.device_mesh();
    s = masked_fill(s,
                    DTensor::from_local(hidden, mesh,
                                        Placements(static_cast<size_t>(mesh.ndim()), Replicate())),
                    Scalar(-inf));
  }
  return matmul(softmax(s, -1), v);
}

}  // namespace dtensor::test
