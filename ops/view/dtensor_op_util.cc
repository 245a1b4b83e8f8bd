#include "ops/view/dtensor_op_util.h"

#include <absl/container/inlined_vector.h>

#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor {
// Weak until ops/ops_registry.cc is built into the library (see family_op).
const OpInfo& ops_op(std::string_view name) __attribute__((weak));
}  // namespace dtensor

namespace dtensor::detail {

const OpInfo& family_op(std::string_view name) {
  DT_CHECK(&dtensor::ops_op != nullptr,
           "[%s] the op registry (ops/ops_registry.cc) is not built into the ops library", name);
  return dtensor::ops_op(name);
}

std::shared_ptr<const OutputSharding> sharding_for(const OpInfo& op,
                                                   absl::Span<const DTensor* const> inputs,
                                                   absl::Span<const ArgValue> args) {
  DT_CHECK(!inputs.empty(), "[%s] needs at least one DTensor input", op.name);
  absl::InlinedVector<const DTensorSpec*, 4> specs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    DT_CHECK(inputs[i] != nullptr && inputs[i]->defined(),
             "[%s] argument %s is an undefined DTensor", op.name, op.input_name(i));
    specs.push_back(&inputs[i]->spec());
    DT_CHECK(specs[i]->mesh() == specs[0]->mesh(),
             "[%s] inputs live on different meshes (argument %s)", op.name, op.input_name(i));
  }
  return propagate(OpSchema(op, absl::MakeConstSpan(specs), args));
}

Tensor meta_tensor(IntSpan shape, DType dtype) {
  const Tensor one = empty({1}, TensorOptions(dtype));
  return Tensor(one.storage(), dtype, Shape(shape.begin(), shape.end()), Shape(shape.size(), 0));
}

void add_partial_passthrough_rows(StrategyRows& rows, int64_t width) {
  rows.push_back(uniform_row(width, Partial(ReduceOp::kMax)));
  rows.push_back(uniform_row(width, Partial(ReduceOp::kMin)));
}

Placements uniform_row(int64_t width, Placement p) {
  return Placements(static_cast<size_t>(width), p);
}

}  // namespace dtensor::detail
