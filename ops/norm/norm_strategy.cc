// Sharding strategy of layer_norm and rms_norm: the normalised (trailing) dims must be
// replicated, the leading batch/sequence dims may be sharded (SequenceParallel's S(1)
// activations), weight and bias are replicated. Not linear: Partial inputs are reduced first.
// Inputs: self, then weight and bias when given; args: eps (runtime), normalized_shape,
// has_weight, has_bias (static).
#include "dtensor/propagation/registry.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

OutputMetas norm_meta(const OpSchema& s, std::string_view name) {
  const DTensorSpec& x = s.input(0);
  const Shape& ns = s.arg<Shape>(1);
  const int64_t k = static_cast<int64_t>(ns.size());
  DT_CHECK(is_floating(x.dtype()), "[%s] argument input has dtype %s, expected a floating dtype",
           name, dtype_name(x.dtype()));
  bool trailing = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; trailing && i < k; ++i) trailing = x.shape()[x.ndim() - k + i] == ns[i];
  DT_CHECK(trailing, "[%s] normalized_shape %s does not match the trailing dims of input shape %s",
           name, shape_str(ns), shape_str(x.shape()));
  for (int64_t i = 1; i < s.num_inputs(); ++i) {
    DT_CHECK(s.input(i).shape() == ns && s.input(i).dtype() == x.dtype(),
             "[%s] argument %s has shape %s and dtype %s, expected shape %s and dtype %s", name,
             s.op().input_name(i), shape_str(s.input(i).shape()), dtype_name(s.input(i).dtype()),
             shape_str(ns), dtype_name(x.dtype()));
  }
  return {x.meta()};
}

StrategyRows norm_rows(const OpSchema& s) {
  const int64_t batch_dims = s.input(0).ndim() - static_cast<int64_t>(s.arg<Shape>(1).size());
  StrategyRows rows;
  for (int64_t d = 0; d < batch_dims; ++d) {
    Placements row(1 + s.num_inputs(), Replicate());
    row[0] = Shard(d);
    row[1] = Shard(d);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

void register_norm_ops(Registry& registry) {
  OpInfo ln;
  ln.name = "layer_norm";
  ln.input_names = {"input", "weight", "bias"};
  ln.schema_info.static_argnum = 1;
  ln.meta = [](const OpSchema& s) { return norm_meta(s, "layer_norm"); };
  ln.strategy = norm_rows;
  registry.add(std::move(ln));

  OpInfo rms;
  rms.name = "rms_norm";
  rms.input_names = {"input", "weight"};
  rms.schema_info.static_argnum = 1;
  rms.meta = [](const OpSchema& s) { return norm_meta(s, "rms_norm"); };
  rms.strategy = norm_rows;
  registry.add(std::move(rms));
}

}  // namespace dtensor
