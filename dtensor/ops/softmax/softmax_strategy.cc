// Registration of softmax, log_softmax and softmin: the softmax dim must be replicated, every
// other dim keeps its shard; Partial inputs are reduced first (the op is not linear).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/softmax/detail/softmax_backward.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::log_softmax_grad;
using detail::softmax_grad;
using detail::softmin_grad;

// Every dim but the softmax dim may stay sharded, the same way on all `n_tensors` (outputs then
// inputs); the softmax dim must be whole.
StrategyRows softmax_rows(const OpSchema& s, const char* name, size_t n_tensors) {
  const int64_t n = s.input(0).ndim();
  return detail::rows_all_but(n, normalize_dim(s.arg<int64_t>(0), n, name),
                              static_cast<int64_t>(n_tensors));
}

// Sample calls: even, uneven and empty shards of a non-softmax dim; `n_inputs` inputs of one
// shape (the backward ops take the gradient and the forward's output).
std::vector<OpSample> softmax_samples(int64_t w, size_t n_inputs) {
  using detail::sample;
  const auto call = [n_inputs](Shape shape, int64_t dim) {
    return OpSample{std::vector<SampleInput>(n_inputs, sample(std::move(shape))), {dim}};
  };
  return {call({3 * w + 1, 5}, 1), call({3 * w + 1, 5}, 0), call({2, 2 * w + 1, 3}, -1),
          call({detail::short_size(w), 4}, 1)};
}

void register_softmax_like(Registry& r, const char* name, Tensor (*local)(const Tensor&, int64_t),
                           BackwardFn backward) {
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
  op.strategy = [name](const OpSchema& s) { return softmax_rows(s, name, 2); };
  op.samples = [](int64_t w) { return softmax_samples(w, 1); };
  r.add(std::move(op));
}

// The gradient ops: (grad_output, output, dim) -> grad_input, all of one shape and dtype.
// Backward is not differentiated again (no double backward), so they have no formula.
void register_softmax_grad(Registry& r, const char* name,
                           Tensor (*local)(const Tensor&, const Tensor&, int64_t)) {
  OpInfo op;
  op.name = name;
  op.differentiable = false;
  op.kernel = single_output([local](const KernelContext& c, absl::Span<const Tensor> l) {
    return local(l[0], l[1], c.arg<int64_t>(0));
  });
  op.input_names = {"grad_output", "output"};
  // output * (g - sum(g * output)) is linear in g: a Partial gradient passes through unreduced.
  op.linearity = Linearity::kLinearInFirst;
  op.meta = [name](const OpSchema& s) {
    normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), name);
    DT_CHECK(s.input(0).shape() == s.input(1).shape() && s.input(0).dtype() == s.input(1).dtype() &&
                 is_floating(s.input(0).dtype()),
             "[%s] grad_output (%s, %s) and output (%s, %s) must have one shape and one floating "
             "dtype",
             name, shape_str(s.input(0).shape()), dtype_name(s.input(0).dtype()),
             shape_str(s.input(1).shape()), dtype_name(s.input(1).dtype()));
    return OutputMetas{s.input(0).meta()};
  };
  op.strategy = [name](const OpSchema& s) { return softmax_rows(s, name, 3); };
  op.samples = [](int64_t w) { return softmax_samples(w, 2); };
  r.add(std::move(op));
}

}  // namespace

void register_softmax_ops(Registry& registry) {
  register_softmax_like(registry, "softmax", &softmax, softmax_grad);
  register_softmax_like(registry, "log_softmax", &log_softmax, log_softmax_grad);
  register_softmax_like(registry, "softmin", &softmin, softmin_grad);
  register_softmax_grad(registry, "softmax_backward", &softmax_backward);
  register_softmax_grad(registry, "log_softmax_backward", &log_softmax_backward);
}

}  // namespace dtensor
