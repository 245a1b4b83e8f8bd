// Registration of batch_norm_sums (the per-channel float64 sums of x and x^2 that batch_norm's
// statistics come from), batch_norm_affine (x * scale + shift per channel, batch_norm's output)
// and their gradient ops. Rows: the channel dim sharded keeps the per-channel [2, C] tensors
// (sums, factors, their gradients) sharded like it (S(1) <-> S(1), no communication); any
// other dim sharded leaves each rank the sums of its elements (S(d) -> Partial: one all-reduce
// of the [2, C] sums gives the global statistics, SyncBatchNorm) and needs the factors
// Replicate. Neither forward is linear (x^2; the shift): a Partial input is reduced first.
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/norm/detail/batch_norm_backward.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

void check_input(const DTensorSpec& x, const char* op) {
  DT_CHECK(x.ndim() >= 2 && is_floating(x.dtype()),
           "[%s] input must be a floating tensor of at least 2 dims (N, C, ...), got %s of %s", op,
           shape_str(x.shape()), dtype_name(x.dtype()));
}

// One row per dim d of x (input `x_input`): the sums (output 0 or input 0 of the gradient op)
// S(1) with x S(1); otherwise the sums `other` (Partial for the forward's output, Replicate
// for the gradient op's input) with x S(d).
StrategyRows sums_rows(const OpSchema& s, int64_t x_input, bool forward) {
  StrategyRows rows;
  for (int64_t d = 0; d < s.input(x_input).ndim(); ++d) {
    if (forward) {
      rows.push_back({d == 1 ? Shard(1) : Partial(), Shard(d)});
    } else {
      rows.push_back({Shard(d), d == 1 ? Shard(1) : Replicate(), Shard(d)});
    }
  }
  return rows;
}

std::vector<OpSample> sums_samples(int64_t w, bool with_grad) {
  using detail::sample;
  using detail::short_size;
  std::vector<OpSample> out;
  for (const Shape& shape : {Shape{3 * w + 1, 3, 4}, Shape{4, 3 * w + 1, 2}, Shape{2, 2 * w + 1},
                             Shape{short_size(w), 3, 2}, Shape{3, short_size(w), 2}}) {
    OpSample call;
    if (with_grad) call.inputs.push_back(sample({2, shape[1]}));
    call.inputs.push_back(sample(shape));
    out.push_back(std::move(call));
  }
  return out;
}

// batch_norm_affine's rows (forward: [y | x, factors]; gradient op: [grad_input, grad_factors |
// grad_output, x, factors]), one per dim d of x: the [2, C] tensors S(1) with x S(1); otherwise
// the factors Replicate and their gradient Partial.
StrategyRows affine_rows(const OpSchema& s, bool forward) {
  StrategyRows rows;
  const int64_t x_input = forward ? 0 : 1;
  for (int64_t d = 0; d < s.input(x_input).ndim(); ++d) {
    const Placement f = d == 1 ? Shard(1) : Replicate();
    if (forward) {
      rows.push_back({Shard(d), Shard(d), f});
    } else {
      rows.push_back({Shard(d), d == 1 ? Shard(1) : Partial(), Shard(d), Shard(d), f});
    }
  }
  return rows;
}

// factors [2, C] of x's float64 or float32 (batch_norm_affine's kernel dtype for x).
void check_factors(const DTensorSpec& f, const DTensorSpec& x, const char* op) {
  const DType want = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  DT_CHECK(f.shape() == (Shape{2, x.shape()[1]}) && f.dtype() == want,
           "[%s] argument factors has shape %s and dtype %s, expected [2, %d] of %s", op,
           shape_str(f.shape()), dtype_name(f.dtype()), x.shape()[1], dtype_name(want));
}

std::vector<OpSample> affine_samples(int64_t w, bool with_grad) {
  std::vector<OpSample> out = sums_samples(w, false);
  for (OpSample& call : out) {
    const Shape shape = call.inputs[0].meta.shape;
    if (with_grad) call.inputs.insert(call.inputs.begin(), detail::sample(shape));
    call.inputs.push_back(detail::sample({2, shape[1]}));
  }
  return out;
}

}  // namespace

void register_batch_norm_ops(Registry& registry) {
  OpInfo sums = detail::make_op("batch_norm_sums", {"input"});
  sums.meta = [](const OpSchema& s) {
    check_input(s.input(0), "batch_norm_sums");
    return OutputMetas{TensorMeta(Shape{2, s.input(0).shape()[1]}, kFloat64)};
  };
  sums.strategy = [](const OpSchema& s) { return sums_rows(s, 0, true); };
  sums.backward = detail::batch_norm_sums_grad;
  sums.saved_inputs = 1u;  // input
  sums.kernel = single_output(
      [](const KernelContext&, absl::Span<const Tensor> l) { return batch_norm_sums(l[0]); });
  sums.samples = [](int64_t w) { return sums_samples(w, false); };
  registry.add(std::move(sums));

  // grad_input = g[0][k] + 2 * x * g[1][k]: linear in the gradient (a Partial one passes
  // through); differentiable (batch_norm's double backward, create_graph).
  OpInfo bw = detail::gradient_op("batch_norm_sums_backward", {"grad_output", "input"});
  bw.differentiable = true;
  bw.backward = detail::batch_norm_sums_backward_grad;
  bw.saved_inputs = 3u;  // grad_output, input
  bw.meta = [](const OpSchema& s) {
    const DTensorSpec& x = s.input(1);
    check_input(x, "batch_norm_sums_backward");
    DT_CHECK(s.input(0).shape() == (Shape{2, x.shape()[1]}),
             "[batch_norm_sums_backward] grad_output has shape %s, expected [2, %d]",
             shape_str(s.input(0).shape()), x.shape()[1]);
    return OutputMetas{x.meta()};
  };
  bw.strategy = [](const OpSchema& s) { return sums_rows(s, 1, false); };
  bw.kernel = single_output([](const KernelContext&, absl::Span<const Tensor> l) {
    return batch_norm_sums_backward(l[0], l[1]);
  });
  bw.samples = [](int64_t w) { return sums_samples(w, true); };
  registry.add(std::move(bw));

  OpInfo affine = detail::make_op("batch_norm_affine", {"input", "factors"});
  affine.meta = [](const OpSchema& s) {
    check_input(s.input(0), "batch_norm_affine");
    check_factors(s.input(1), s.input(0), "batch_norm_affine");
    return OutputMetas{s.input(0).meta()};
  };
  affine.strategy = [](const OpSchema& s) { return affine_rows(s, true); };
  affine.backward = detail::batch_norm_affine_grad;
  affine.saved_inputs = 3u;  // input, factors
  affine.kernel = single_output([](const KernelContext&, absl::Span<const Tensor> l) {
    return batch_norm_affine(l[0], l[1]);
  });
  affine.samples = [](int64_t w) { return affine_samples(w, false); };
  registry.add(std::move(affine));

  // grad_input = g * factors[0][k]; grad_factors = the sums of g * x and of g: linear in the
  // gradient (a Partial one passes through); differentiable (create_graph).
  OpInfo affine_bw =
      detail::gradient_op("batch_norm_affine_backward", {"grad_output", "input", "factors"});
  affine_bw.differentiable = true;
  affine_bw.backward = detail::batch_norm_affine_backward_grad;
  affine_bw.saved_inputs = 7u;  // grad_output, input, factors
  affine_bw.meta = [](const OpSchema& s) {
    const DTensorSpec& x = s.input(1);
    check_input(x, "batch_norm_affine_backward");
    check_factors(s.input(2), x, "batch_norm_affine_backward");
    DT_CHECK(s.input(0).shape() == x.shape(),
             "[batch_norm_affine_backward] grad_output has shape %s, expected the input's %s",
             shape_str(s.input(0).shape()), shape_str(x.shape()));
    return OutputMetas{x.meta(), s.input(2).meta()};
  };
  affine_bw.strategy = [](const OpSchema& s) { return affine_rows(s, false); };
  affine_bw.kernel = [](const KernelContext&, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    BatchNormAffineGrads gr = batch_norm_affine_backward(l[0], l[1], l[2]);
    out[0] = std::move(gr.grad_input);
    out[1] = std::move(gr.grad_factors);
  };
  affine_bw.samples = [](int64_t w) { return affine_samples(w, true); };
  registry.add(std::move(affine_bw));
}

}  // namespace dtensor
