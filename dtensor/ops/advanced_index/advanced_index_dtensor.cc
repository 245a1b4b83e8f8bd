// The DTensor forms of index and index_put (registered in advanced_index_strategy.cc).
#include <absl/container/inlined_vector.h>
#include <absl/strings/str_format.h>

#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// The dispatch inputs of a call: self (and values), then the present indices; and the dims.
Shape gather_inputs(const char* op, const DTensor& self, DTensorIndices indices,
                    absl::InlinedVector<const DTensor*, 6>& in) {
  DT_CHECK(self.defined(), "[%s] argument self is an undefined DTensor", op);
  const Shape dims = detail::indexed_dims(op, indices, self.dim());
  for (int64_t d : dims) {
    DT_CHECK(indices[d]->defined(), "[%s] argument indices[%d] is an undefined DTensor", op, d);
    in.push_back(&*indices[d]);
  }
  return dims;
}

}  // namespace

DTensor index(const DTensor& self, DTensorIndices indices) {
  static const OpInfo& op = ops_op("index");
  absl::InlinedVector<const DTensor*, 6> in{&self};
  const ArgValue args[] = {gather_inputs("index", self, indices, in)};
  return dispatch(op, in, args);
}

DTensor index_put(const DTensor& self, DTensorIndices indices, const DTensor& values,
                  bool accumulate) {
  static const OpInfo& op = ops_op("index_put");
  DT_CHECK(values.defined(), "[index_put] argument values is an undefined DTensor");
  absl::InlinedVector<const DTensor*, 6> in{&self, &values};
  const ArgValue args[] = {gather_inputs("index_put", self, indices, in), accumulate};
  return dispatch(op, in, args);
}

const DTensor& index_put_(const DTensor& self, DTensorIndices indices, const DTensor& values,
                          bool accumulate) {
  return copy_(self, index_put(self, indices, values, accumulate));
}

}  // namespace dtensor
