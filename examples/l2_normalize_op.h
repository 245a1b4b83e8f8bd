// A user-registered op, written the way the library writes its own (see register_op in
// dtensor/ops/ops_registry.h): l2_normalize(x, dim, eps) = x / max(||x||_2 along dim, eps), as
// torch.nn.functional.normalize. Used by examples/custom_op.cc and by the strategy-validation
// test, which checks this op's rows as it checks the library's.
#pragma once

#include <dtensor/dtensor.h>

namespace l2_example {

namespace dt = dtensor;

// Registers "l2_normalize" once per process (every rank) and returns it.
inline const dt::OpInfo& l2_normalize_op() {
  static const dt::OpInfo& op = []() -> const dt::OpInfo& {
    dt::OpInfo info;
    info.name = "l2_normalize";
    info.input_names = {"self"};
    // Args (eps, dim): eps (index 0) is a runtime value that never changes the sharding, dim
    // (index 1 on) is static, part of the propagation cache key.
    info.schema_info.static_argnum = 1;
    info.meta = [](const dt::OpSchema& s) {
      dt::normalize_dim(s.arg<int64_t>(1), s.input(0).ndim(), "l2_normalize");
      DT_CHECK(dt::is_floating(s.input(0).dtype()),
               "[l2_normalize] argument self has dtype %s, expected a floating dtype",
               dt::dtype_name(s.input(0).dtype()));
      return dt::OutputMetas{s.input(0).meta()};
    };
    // Rows for one mesh dim, [output | input]: any dim but `dim` may be sharded, alike on both;
    // `dim` must be whole. The engine adds [R | R] and expands the rows over every mesh dim;
    // Partial inputs are reduced first (linearity kNone, the default).
    info.strategy = [](const dt::OpSchema& s) {
      const int64_t n = s.input(0).ndim();
      const int64_t dim = dt::normalize_dim(s.arg<int64_t>(1), n, "l2_normalize");
      dt::StrategyRows rows;
      for (int64_t d = 0; d < n; ++d) {
        if (d != dim) rows.push_back({dt::Shard(d), dt::Shard(d)});
      }
      return rows;
    };
    // The local computation on each rank's shard (whole along dim, by the rows above).
    info.kernel = dt::single_output([](const dt::KernelContext& c, absl::Span<const dt::Tensor> l) {
      const int64_t dims[] = {c.arg<int64_t>(1)};
      return l[0] / dt::clamp_min(dt::vector_norm(l[0], 2.0, dims, true), c.scalar(0));
    });
    // d/dx: (g - y sum(g y)) / n where the norm exceeds eps, g / eps elsewhere; written with
    // DTensor ops, so it runs sharded like the forward.
    info.backward = [](const dt::autograd::BackwardContext& c, absl::Span<const dt::DTensor> g) {
      const dt::DTensor& x = c.input(0);
      const dt::DTensor& y = c.output(0);
      const double eps = c.arg<double>(0);
      const int64_t dims[] = {c.arg<int64_t>(1)};
      const dt::DTensor norm = dt::vector_norm(x, 2.0, dims, true);
      const dt::DTensor along = g[0] - y * dt::sum(g[0] * y, dims, true);
      return dt::DTensorList{dt::where(dt::gt(norm, dt::Scalar(eps)), along, g[0]) /
                             dt::clamp_min(norm, dt::Scalar(eps))};
    };
    info.saved_inputs = 1u;   // x
    info.saved_outputs = 1u;  // y
    // Sample calls (global shapes for `world` ranks: even, uneven and empty shards) for the
    // suites that check every registered op.
    info.samples = [](int64_t world) {
      const auto in = [](dt::Shape shape) {
        return dt::SampleInput{dt::TensorMeta(shape, dt::kFloat64)};
      };
      // world - 1 rows: the last rank's shard is empty (every op must handle that).
      const int64_t few = world > 1 ? world - 1 : 1;
      return std::vector<dt::OpSample>{{{in({3 * world + 1, 5})}, {1e-6, int64_t{1}}},
                                       {{in({2, 2 * world + 1, 3})}, {0.5, int64_t{-1}}},
                                       {{in({3 * world + 1, 4})}, {1e-6, int64_t{0}}},
                                       {{in({few, 4})}, {1e-6, int64_t{1}}}};
    };
    return dt::register_op(std::move(info));
  }();
  return op;
}

// The DTensor function: dispatch propagates the sharding (cached), redistributes if needed,
// runs the kernel and records the backward when an input requires grad.
inline dt::DTensor l2_normalize(const dt::DTensor& x, int64_t dim, double eps = 1e-12) {
  const dt::ArgValue args[] = {eps, dim};
  return dt::dispatch(l2_normalize_op(), {&x}, args);
}

}  // namespace l2_example
