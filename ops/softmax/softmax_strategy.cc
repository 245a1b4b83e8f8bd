// Sharding strategy of softmax and log_softmax: the softmax dim must be replicated, every other
// dim keeps its shard; Partial inputs are reduced first (the op is not linear).
#include "dtensor/propagation/registry.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

void register_softmax_like(Registry& r, const char* name) {
  OpInfo op;
  op.name = name;
  op.input_names = {"self"};
  op.linearity = Linearity::kNone;
  op.meta = [name](const OpSchema& s) {
    normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), name);
    DT_CHECK(is_floating(s.input(0).dtype()),
             "[%s] argument self has dtype %s, expected a floating dtype", name,
             dtype_name(s.input(0).dtype()));
    return OutputMetas{s.input(0).meta()};
  };
  op.strategy = [name](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n, name);
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d != dim) rows.push_back({Shard(d), Shard(d)});
    }
    return rows;
  };
  r.add(std::move(op));
}

}  // namespace

void register_softmax_ops(Registry& registry) {
  register_softmax_like(registry, "softmax");
  register_softmax_like(registry, "log_softmax");
}

}  // namespace dtensor
