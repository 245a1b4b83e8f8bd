// Registration of softmax and log_softmax: the softmax dim must be replicated, every other
// dim keeps its shard; Partial inputs are reduced first (the op is not linear).
#include "autograd/function.h"
#include "dtensor/propagation/dispatch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduction/reduction.h"
#include "dtensor/propagation/registry.h"
#include "ops/common/strategy_util.h"
#include "ops/softmax/softmax.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

using autograd::BackwardContext;

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), sums along the softmax
// dim (whole on every rank, as in forward).
DTensorList softmax_backward(const BackwardContext& c, absl::Span<const DTensor> g) {
  const DTensor& y = c.output(0);
  const int64_t dim[] = {c.arg<int64_t>(0)};
  return {y * (g[0] - sum(g[0] * y, dim, /*keepdim=*/true))};
}

DTensorList log_softmax_backward(const BackwardContext& c, absl::Span<const DTensor> g) {
  const int64_t dim[] = {c.arg<int64_t>(0)};
  return {g[0] - exp(c.output(0)) * sum(g[0], dim, /*keepdim=*/true)};
}

void register_softmax_like(Registry& r, const char* name,
                           Tensor (*local)(const Tensor&, int64_t), BackwardFn backward) {
  OpInfo op;
  op.name = name;
  op.backward = std::move(backward);
  op.saved_inputs = 0;
  op.saved_outputs = 1u;
  op.kernel = single_output([local](const KernelContext& c, absl::Span<const Tensor> l) {
    return local(l[0], c.arg<int64_t>(0));
  });
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
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 5})}, {int64_t{1}}},
                                 {{sample({3 * w + 1, 5})}, {int64_t{0}}},
                                 {{sample({2, 2 * w + 1, 3})}, {int64_t{-1}}}};
  };
  r.add(std::move(op));
}

}  // namespace

void register_softmax_ops(Registry& registry) {
  register_softmax_like(registry, "softmax", &softmax, softmax_backward);
  register_softmax_like(registry, "log_softmax", &log_softmax, log_softmax_backward);
}

}  // namespace dtensor
