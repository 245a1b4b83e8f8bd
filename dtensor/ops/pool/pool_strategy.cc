// Registration of the pool family: pad, max_pool{1,2,3}d_with_indices, adaptive_max_pool2d,
// avg_pool{1,2,3}d, adaptive_avg_pool{1,2}d, upsample_nearest{1,2,3}d,
// _upsample_nearest_exact{1,2,3}d, upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d,
// upsample_bicubic2d, and their gradient ops (<name>_backward for the linear ones,
// max_pool_backward for the max ones; differentiable, for the double backward). The backward
// formulas are in pool_backward.cc, the DTensor forms in pool_dtensor.cc.
//
// Rows for one mesh dim: every leading (batch, channel) dim d sharded alike on the outputs and
// the inputs, [S(d) | S(d)] ([S(d), S(d) | S(d)] for values and indices): the planes are
// independent, so no communication. A spatially sharded input matches no row and is gathered
// along its spatial dims, except the max / avg pools of an input sharded on its first spatial dim
// only, which exchange halos before dispatch (pool_dtensor.cc). The linear ops (avg pools, adaptive
// avg pools, interpolation, and the gradient ops) also pass Partial inputs through.
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/detail/pool_backward.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::WindowArgs;
using detail::WindowKind;
using Locals = absl::Span<const Tensor>;

// One registered window op.
struct Spec {
  const char* name;
  WindowKind kind;
  int64_t nd;  // spatial dims (pad: from its args)
  std::vector<ArgList> arg_sets;
  bool batchless = true;  // (C, *spatial) inputs are allowed too
};

bool is_max(WindowKind k) {
  return k == WindowKind::kMaxPool || k == WindowKind::kAdaptiveMax;
}

WindowArgs parse(const Spec& spec, absl::Span<const ArgValue> args) {
  return detail::parse_window_args(spec.kind, spec.nd, spec.name, args);
}

// [S(d) ... | S(d) ...] for every leading dim d of an `ndim`-dim input with `nd` spatial dims.
StrategyRows lead_rows(int64_t ndim, int64_t nd, int64_t width) {
  StrategyRows rows;
  for (int64_t d = 0; d < ndim - nd; ++d) rows.push_back(detail::uniform_row(width, Shard(d)));
  return rows;
}

Shape spatial_tail(IntSpan shape, int64_t nd) {
  return Shape(shape.end() - nd, shape.end());
}

// The forward samples: leading dims even (3w+1), uneven (2w+1) and empty (w-1) shards, float64
// (and one float32 call but for the max ops), for every arg set. The max ops draw from +-1e6:
// their (values, indices) outputs make the finite-difference check step by 1e-2, and two reals
// of a window that close would move the maximum (a kink) — with this spread they almost never
// are; the integers of the strategy validation still tie, as they may.
std::vector<OpSample> forward_samples(const Spec& spec, int64_t w) {
  const bool max = is_max(spec.kind);
  const double range = max ? 1e6 : 5;
  const auto sample = [range](Shape shape, DType dtype = kFloat64) {
    return detail::sample(std::move(shape), dtype, -range, range);
  };
  std::vector<OpSample> out;
  for (const ArgList& args : spec.arg_sets) {
    const WindowArgs a = parse(spec, args);
    Shape spatial = a.nd == 1 ? Shape{9} : Shape{6, 7, 8};
    spatial.resize(static_cast<size_t>(a.nd));
    const auto with = [&](Shape lead) {
      lead.insert(lead.end(), spatial.begin(), spatial.end());
      return lead;
    };
    out.push_back({{sample(with({3 * w + 1, 2}))}, args});
    out.push_back({{sample(with({2, 2 * w + 1}))}, args});
    out.push_back({{sample(with({detail::short_size(w), 3}))}, args});
    if (spec.batchless)
      out.push_back({{sample(with({2 * w + 1}), max ? kFloat64 : kFloat32)}, args});
  }
  return out;
}

void register_forward(Registry& r, const Spec& spec) {
  OpInfo op = detail::make_op(spec.name, {"self"});
  const bool max = is_max(spec.kind);
  op.linearity = max || spec.kind == WindowKind::kPad ? Linearity::kNone : Linearity::kLinear;
  op.meta = [spec, max](const OpSchema& s) {
    const WindowArgs a = parse(spec, s.args());
    const DTensorSpec& in = s.input(0);
    if (a.kind != WindowKind::kPad || a.mode != detail::PadMode::kConstant) {
      detail::check_floating_dtype(spec.name, in.dtype());
    }
    Shape out = detail::window_out_shape(a, in.shape());
    if (!max) return OutputMetas{TensorMeta(std::move(out), in.dtype())};
    return OutputMetas{TensorMeta(out, in.dtype()), TensorMeta(out, kInt64)};
  };
  op.strategy = [spec, max](const OpSchema& s) {
    return lead_rows(s.input(0).ndim(), parse(spec, s.args()).nd, max ? 3 : 2);
  };
  if (max) {
    op.kernel = [spec](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
      auto [v, i] = detail::window_max_forward(l[0], parse(spec, c.schema().args()));
      out[0] = std::move(v);
      out[1] = std::move(i);
    };
    op.backward = std::bind_front(detail::max_window_grad, spec.nd);
    op.saved_inputs = 0;
    op.saved_outputs = 2u;
  } else {
    op.kernel = single_output([spec](const KernelContext& c, Locals l) {
      return detail::window_forward(l[0], parse(spec, c.schema().args()));
    });
    op.backward = detail::window_grad;
    op.saved_inputs = 0;
  }
  op.samples = [spec](int64_t w) { return forward_samples(spec, w); };
  r.add(std::move(op));
}

// <name>_backward(grad; the forward's args, the input's global shape): the transposed windows.
void register_backward(Registry& r, const Spec& spec) {
  OpInfo op = detail::gradient_op((std::string(spec.name) + "_backward").c_str(), {"grad"},
                                  Linearity::kLinear);
  const auto in_shape = [](absl::Span<const ArgValue> args) {
    return std::get<Shape>(args.back());
  };
  op.meta = [spec, in_shape](const OpSchema& s) {
    const WindowArgs a = parse(spec, s.args());
    const Shape in = in_shape(s.args());
    const Shape out = detail::window_out_shape(a, in);
    DT_CHECK(s.input(0).shape() == out, "[%s_backward] grad %s, expected %s", spec.name,
             shape_str(s.input(0).shape()), shape_str(out));
    return OutputMetas{TensorMeta(in, s.input(0).dtype())};
  };
  op.strategy = [spec](const OpSchema& s) {
    return lead_rows(s.input(0).ndim(), parse(spec, s.args()).nd, 2);
  };
  op.kernel = single_output([spec, in_shape](const KernelContext& c, Locals l) {
    const WindowArgs a = parse(spec, c.schema().args());
    const Shape global = in_shape(c.schema().args());
    Shape local(l[0].sizes().begin(), l[0].sizes().end() - a.nd);
    const Shape tail = spatial_tail(global, a.nd);
    local.insert(local.end(), tail.begin(), tail.end());
    return detail::window_backward(l[0], a, local);
  });
  // Linear in grad: its gradient is the forward window op of the incoming one (create_graph).
  op.differentiable = true;
  op.backward = detail::window_backward_grad;
  op.samples = [spec](int64_t w) {
    std::vector<OpSample> out;
    for (OpSample f : forward_samples(spec, w)) {
      const Shape in = f.inputs[0].meta.shape;
      const Shape grad = detail::window_out_shape(parse(spec, f.args), in);
      f.args.push_back(in);
      out.push_back({{detail::sample(grad, f.inputs[0].meta.dtype)}, f.args});
    }
    return out;
  };
  r.add(std::move(op));
}

// max_pool_backward(grad, indices; input shape, nd): the gradient added at the indices.
void register_max_backward(Registry& r, std::vector<Spec> max_specs) {
  OpInfo op = detail::gradient_op("max_pool_backward", {"grad", "indices"});
  op.meta = [](const OpSchema& s) {
    const Shape in = s.arg<Shape>(0);
    const int64_t nd = s.arg<int64_t>(1), n = static_cast<int64_t>(in.size());
    const DTensorSpec& g = s.input(0);
    DT_CHECK(nd >= 1 && nd <= n && g.ndim() == n && s.input(1).shape() == g.shape() &&
                 s.input(1).dtype() == kInt64 && is_floating(g.dtype()),
             "[max_pool_backward] grad %s and int64 indices %s of one shape, input %s",
             shape_str(g.shape()), shape_str(s.input(1).shape()), shape_str(in));
    for (int64_t d = 0; d < n - nd; ++d) {
      DT_CHECK(g.shape()[d] == in[d], "[max_pool_backward] grad %s does not match input %s",
               shape_str(g.shape()), shape_str(in));
    }
    return OutputMetas{TensorMeta(in, g.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    return lead_rows(s.input(0).ndim(), s.arg<int64_t>(1), 3);
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const Shape global = c.arg<Shape>(0);
    const int64_t nd = c.arg<int64_t>(1);
    Shape local(l[0].sizes().begin(), l[0].sizes().end() - nd);
    const Shape tail = spatial_tail(global, nd);
    local.insert(local.end(), tail.begin(), tail.end());
    return detail::max_window_backward(l[0], l[1], local, nd);
  });
  // Linear in grad: its gradient is the incoming one gathered at the indices (create_graph).
  op.differentiable = true;
  op.saved_inputs = 2u;
  op.backward = detail::max_pool_backward_grad;
  op.samples = [max_specs](int64_t w) {
    std::vector<OpSample> out;
    for (const Spec& spec : max_specs) {
      for (const OpSample& f : forward_samples(spec, w)) {
        const Shape in = f.inputs[0].meta.shape;
        const Shape grad = detail::window_out_shape(parse(spec, f.args), in);
        int64_t plane = 1;
        for (int64_t v : spatial_tail(in, spec.nd)) plane *= v;
        const DType dt = f.inputs[0].meta.dtype;
        out.push_back({{detail::sample(grad, dt), detail::sample(grad, kInt64, 0, plane - 1)},
                       {in, spec.nd}});
      }
    }
    return out;
  };
  r.add(std::move(op));
}

Shape rep(int64_t nd, int64_t v) {
  return Shape(static_cast<size_t>(nd), v);
}

std::vector<Spec> specs() {
  std::vector<Spec> out;
  const char* const max_names[] = {"max_pool1d_with_indices", "max_pool2d_with_indices",
                                   "max_pool3d_with_indices"};
  const char* const avg_names[] = {"avg_pool1d", "avg_pool2d", "avg_pool3d"};
  const char* const nearest_names[] = {"upsample_nearest1d", "upsample_nearest2d",
                                       "upsample_nearest3d"};
  const char* const linear_names[] = {"upsample_linear1d", "upsample_bilinear2d",
                                      "upsample_trilinear3d"};
  const char* const nearest_exact_names[] = {
      "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"};
  for (int64_t nd = 1; nd <= 3; ++nd) {
    out.push_back({max_names[nd - 1],
                   WindowKind::kMaxPool,
                   nd,
                   {{rep(nd, 2), rep(nd, 2), rep(nd, 0), rep(nd, 1), false},
                    {rep(nd, 3), rep(nd, 2), rep(nd, 1), rep(nd, 1), true},
                    {rep(nd, 2), rep(nd, 1), rep(nd, 1), rep(nd, 2), false}}});
    out.push_back({avg_names[nd - 1],
                   WindowKind::kAvgPool,
                   nd,
                   {{rep(nd, 2), rep(nd, 2), rep(nd, 0), false, true, int64_t{0}},
                    {rep(nd, 3), rep(nd, 2), rep(nd, 1), true, false, int64_t{0}},
                    {rep(nd, 3), rep(nd, 2), rep(nd, 1), false, true, int64_t{nd == 1 ? 0 : 5}}}});
    ArgList nearest_size{rep(nd, 4)}, nearest_scale{rep(nd, 13)};
    ArgList linear_true{rep(nd, 4), true}, linear_false{rep(nd, 7), false};
    for (int64_t j = 0; j < nd; ++j) {
      nearest_size.push_back(0.0);
      linear_true.push_back(0.0);
      linear_false.push_back(0.0);
    }
    // scale 1.5 on a dim of 9 (1-d) or 6 / 7 / 8: the output sizes of floor(in * 1.5).
    ArgList nearest_scaled{nd == 1 ? Shape{13} : Shape{9, 10, 12}};
    ArgList linear_scaled{nd == 1 ? Shape{13} : Shape{9, 10, 12}, false};
    if (nd > 1) {
      std::get<Shape>(nearest_scaled[0]).resize(static_cast<size_t>(nd));
      std::get<Shape>(linear_scaled[0]).resize(static_cast<size_t>(nd));
    }
    for (int64_t j = 0; j < nd; ++j) {
      nearest_scaled.push_back(1.5);
      linear_scaled.push_back(1.5);
    }
    out.push_back(
        {nearest_names[nd - 1], WindowKind::kNearest, nd, {nearest_size, nearest_scaled}, false});
    out.push_back({linear_names[nd - 1],
                   WindowKind::kLinear,
                   nd,
                   {linear_true, linear_false, linear_scaled},
                   false});
    out.push_back({nearest_exact_names[nd - 1],
                   WindowKind::kNearestExact,
                   nd,
                   {nearest_size, nearest_scaled},
                   false});
    if (nd == 2) {
      out.push_back({"upsample_bicubic2d",
                     WindowKind::kCubic,
                     nd,
                     {linear_true, linear_false, linear_scaled},
                     false});
    }
  }
  out.push_back({"adaptive_avg_pool1d", WindowKind::kAdaptiveAvg, 1, {{Shape{4}}, {Shape{1}}}});
  out.push_back(
      {"adaptive_avg_pool2d", WindowKind::kAdaptiveAvg, 2, {{Shape{4, 3}}, {Shape{1, 1}}}});
  out.push_back(
      {"adaptive_max_pool2d", WindowKind::kAdaptiveMax, 2, {{Shape{4, 3}}, {Shape{2, 2}}}});
  out.push_back({"pad",
                 WindowKind::kPad,
                 0,
                 {{Shape{2, 1}, std::string_view("reflect"), 0.0},
                  {Shape{1, 2, 0, 1}, std::string_view("replicate"), 0.0},
                  {Shape{1, 1, 2, 0}, std::string_view("circular"), 0.0},
                  {Shape{2, -1, 1, 0}, std::string_view("constant"), 0.5}}});
  return out;
}

}  // namespace

void register_pool_ops(Registry& registry) {
  std::vector<Spec> max_specs;
  for (const Spec& spec : specs()) {
    register_forward(registry, spec);
    if (is_max(spec.kind)) {
      max_specs.push_back(spec);
    } else {
      register_backward(registry, spec);
    }
  }
  register_max_backward(registry, std::move(max_specs));
}

}  // namespace dtensor
