#include "dtensor/ops/common/detail/strategy_util.h"

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::detail {

Tensor meta_tensor(IntSpan shape, DType dtype) {
  const Tensor one = empty({1}, TensorOptions(dtype));
  return Tensor(one.storage(), dtype, Shape(shape.begin(), shape.end()), Shape(shape.size(), 0));
}

StrategyRows mapped_rows(absl::Span<const int64_t> map) {
  StrategyRows rows;
  for (size_t d = 0; d < map.size(); ++d) {
    if (map[d] >= 0) rows.push_back({Shard(map[d]), Shard(static_cast<int64_t>(d))});
  }
  add_partial_passthrough_rows(rows, 2);
  return rows;
}

void add_partial_passthrough_rows(StrategyRows& rows, int64_t width) {
  rows.push_back(uniform_row(width, Partial(ReduceOp::kMax)));
  rows.push_back(uniform_row(width, Partial(ReduceOp::kMin)));
}

Placements uniform_row(int64_t width, Placement p) {
  return Placements(static_cast<size_t>(width), p);
}

StrategyRows rows_all_but(int64_t ndim, int64_t dim, int64_t width) {
  StrategyRows rows;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d != dim) rows.push_back(uniform_row(width, Shard(d)));
  }
  return rows;
}

OpInfo make_op(std::string_view name, std::vector<std::string> input_names, Linearity linearity) {
  OpInfo op;
  op.name = std::string(name);
  op.input_names = std::move(input_names);
  op.linearity = linearity;
  return op;
}

OpInfo gradient_op(const char* name, std::vector<std::string> input_names, Linearity linearity) {
  OpInfo op = make_op(name, std::move(input_names), linearity);
  op.differentiable = false;
  op.saved_inputs = 0;
  return op;
}

SampleInput sample(Shape shape, DType dtype, double low, double high) {
  return SampleInput{TensorMeta(std::move(shape), dtype), low, high};
}

Shape broadcast_inputs(const OpSchema& s, int64_t first, int64_t last) {
  if (last < 0) last = s.num_inputs() - 1;
  Shape out = s.input(first).shape();
  for (int64_t i = first + 1; i <= last; ++i) {
    out = broadcast_pair(s.name(), out, s.input(i).shape(), s.op().input_name(i));
  }
  return out;
}

}  // namespace dtensor::detail
