// Registration of convolution (conv1d/2d/3d and conv_transpose1d/2d/3d, one N-d op as
// aten::convolution) and its gradient op convolution_backward (differentiable: its own backward
// gives the double backward). Inputs: input, weight (the bias is added by the DTensor functions
// as a broadcast add, so that a bias sharded like the output channels needs no communication and
// a Partial output is reduced before it); args: stride, padding, dilation, transposed,
// output_padding, groups (static), and for the gradient op need_input, need_weight.
//
// Rows (one mesh dim; [output | input, weight]):
//   data parallel     [S(0) | S(0), R]
//   output channels   [S(1) | R, S(0)] (conv_transpose: weight S(1)), groups 1
//   input channels    [P | S(1), S(1)] (conv_transpose: weight S(0)), groups 1
//   depthwise         [S(1) | S(1), S(0)], groups = C_in = C_out
// Bilinear: the engine adds the Partial pass-through rows of each input. Spatial dims have no
// row: the DTensor functions exchange halos for height-sharded inputs themselves
// (conv_dtensor.cc); other spatially sharded inputs are redistributed.
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/conv_args.h"
#include "dtensor/ops/conv/detail/conv_backward.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

struct ConvArgs {
  Shape stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

template <typename Ctx>
ConvArgs conv_args(const Ctx& c) {
  return {c.template arg<Shape>(0), c.template arg<Shape>(1), c.template arg<Shape>(2),
          c.template arg<Shape>(4), c.template arg<bool>(3),  c.template arg<int64_t>(5)};
}

// The output shape of the forward whose input is the schema's input x_input (weight next).
Shape output_shape(const OpSchema& s, int64_t x_input, const char* op) {
  const ConvArgs a = conv_args(s);
  return detail::conv_output_shape(s.input(x_input).shape(), s.input(x_input + 1).shape(), a.stride,
                                   a.padding, a.dilation, a.transposed, a.output_padding, a.groups,
                                   op);
}

// Whether the op is depthwise (groups = C_in = C_out, one channel per group): its channels shard
// alike on input, weight (dim 0) and output.
bool depthwise(const OpSchema& s, int64_t x_input) {
  const ConvArgs a = conv_args(s);
  const Shape& x = s.input(x_input).shape();
  const Shape& w = s.input(x_input + 1).shape();
  return a.groups > 1 && x[1] == a.groups && w[1] == 1 && w[0] == a.groups;
}

// The rows of the forward: [y | x, w].
StrategyRows conv_rows(const OpSchema& s) {
  const ConvArgs a = conv_args(s);
  StrategyRows rows = {{Shard(0), Shard(0), Replicate()}};
  if (a.groups == 1) {
    rows.push_back({Shard(1), Replicate(), Shard(a.transposed ? 1 : 0)});
    rows.push_back({Partial(), Shard(1), Shard(a.transposed ? 0 : 1)});
  } else if (depthwise(s, 0)) {
    rows.push_back({Shard(1), Shard(1), Shard(0)});
  }
  return rows;
}

// The rows of the gradient op: [gi, gw | go, x, w], less the outputs not asked for.
StrategyRows conv_grad_rows(const OpSchema& s) {
  const ConvArgs a = conv_args(s);
  const bool ni = s.arg<bool>(6), nw = s.arg<bool>(7);
  StrategyRows full = {{Shard(0), Partial(), Shard(0), Shard(0), Replicate()}};
  if (a.groups == 1) {
    const int64_t wo = a.transposed ? 1 : 0, wi = a.transposed ? 0 : 1;
    full.push_back({Partial(), Shard(wo), Shard(1), Replicate(), Shard(wo)});
    full.push_back({Shard(1), Shard(wi), Replicate(), Shard(1), Shard(wi)});
  } else if (depthwise(s, 1)) {
    full.push_back({Shard(1), Shard(0), Shard(1), Shard(1), Shard(0)});
  }
  StrategyRows rows;
  for (Placements& r : full) {
    Placements row;
    if (ni) row.push_back(r[0]);
    if (nw) row.push_back(r[1]);
    row.insert(row.end(), r.begin() + 2, r.end());
    rows.push_back(std::move(row));
  }
  return rows;
}

// The groups of the local call: a depthwise convolution with its channels sharded holds
// x.size(1) of them (0 on an empty shard); otherwise the op's.
int64_t local_groups(int64_t groups, const Tensor& x) {
  return groups > 1 && x.size(1) < groups ? x.size(1) : groups;
}

// One sample call: input and weight shapes and the args.
OpSample conv_sample(Shape x, Shape w, Shape stride, Shape padding, Shape dilation, bool transposed,
                     Shape output_padding, int64_t groups) {
  using detail::sample;
  return {{sample(std::move(x), kFloat64, -3, 3), sample(std::move(w), kFloat64, -3, 3)},
          {std::move(stride), std::move(padding), std::move(dilation), transposed,
           std::move(output_padding), groups}};
}

// Shapes with even, uneven and empty shards on the batch and channel dims (w ranks), 1-, 2- and
// 3-d, strided, padded, dilated, grouped, depthwise and transposed.
std::vector<OpSample> conv_samples(int64_t w) {
  const int64_t sh = detail::short_size(w);
  return {
      conv_sample({3 * w + 1, w + 1, 5, 4}, {2 * w + 1, w + 1, 3, 2}, {1, 1}, {1, 0}, {1, 1}, false,
                  {0, 0}, 1),
      conv_sample({sh, sh, 5}, {3, sh, 3}, {2}, {1}, {2}, false, {0}, 1),
      conv_sample({2, w + 1, 3, 3, 3}, {w, w + 1, 2, 2, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, false,
                  {0, 0, 0}, 1),
      conv_sample({w + 1, 4, 6}, {6, 2, 3}, {1}, {1}, {1}, false, {0}, 2),
      conv_sample({2, 2 * w + 1, 7}, {2 * w + 1, 1, 3}, {1}, {1}, {1}, false, {0}, 2 * w + 1),
      conv_sample({w + 1, 2 * w + 1, 3, 4}, {2 * w + 1, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, true,
                  {1, 0}, 1),
      conv_sample({3 * w + 1, 4, 3}, {4, 3, 2}, {2}, {0}, {1}, true, {1}, 2),
      conv_sample({sh, sh, 4}, {sh, 2, 3}, {1}, {1}, {1}, true, {0}, 1),
      conv_sample({2, w + 1, 5}, {w + 1, 1, 3}, {2}, {1}, {1}, true, {1}, w + 1),
  };
}

// The gradient op's samples: the forward's, with grad_output of the output's shape, for each
// output mask.
std::vector<OpSample> conv_grad_samples(int64_t w) {
  std::vector<OpSample> out;
  int64_t i = 0;
  for (OpSample s : conv_samples(w)) {
    const Shape y = detail::conv_output_shape(
        s.inputs[0].meta.shape, s.inputs[1].meta.shape, std::get<Shape>(s.args[0]),
        std::get<Shape>(s.args[1]), std::get<Shape>(s.args[2]), std::get<bool>(s.args[3]),
        std::get<Shape>(s.args[4]), std::get<int64_t>(s.args[5]), "convolution_backward");
    s.inputs.insert(s.inputs.begin(), detail::sample(y, kFloat64, -3, 3));
    const int64_t mask = i++ % 3;  // both, input only, weight only
    s.args.push_back(mask != 2);
    s.args.push_back(mask != 1);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

void register_conv_ops(Registry& registry) {
  OpInfo conv = detail::make_op("convolution", {"input", "weight"}, Linearity::kMultilinear);
  conv.meta = [](const OpSchema& s) {
    DT_CHECK(s.input(0).dtype() == s.input(1).dtype(),
             "[convolution] weight dtype %s does not match input dtype %s",
             dtype_name(s.input(1).dtype()), dtype_name(s.input(0).dtype()));
    return OutputMetas{TensorMeta(output_shape(s, 0, "convolution"), s.input(0).dtype())};
  };
  conv.strategy = conv_rows;
  conv.backward = detail::convolution_grad;
  conv.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    const ConvArgs a = conv_args(c);
    const int64_t g = local_groups(a.groups, l[0]);
    if (g == 0) {  // a depthwise convolution's empty channel shard
      out[0] = zeros(c.output_shard(0).shape, TensorOptions(l[0].dtype(), l[0].device()));
      return;
    }
    out[0] = convolution(l[0], l[1], Tensor(), a.stride, a.padding, a.dilation, a.transposed,
                         a.output_padding, g);
  };
  conv.samples = conv_samples;
  registry.add(std::move(conv));

  OpInfo bw = detail::gradient_op("convolution_backward", {"grad_output", "input", "weight"});
  bw.meta = [](const OpSchema& s) {
    DT_CHECK(s.input(0).shape() == output_shape(s, 1, "convolution_backward"),
             "[convolution_backward] grad_output of shape %s does not match the output",
             shape_str(s.input(0).shape()));
    OutputMetas m;
    if (s.arg<bool>(6)) m.push_back(s.input(1).meta());
    if (s.arg<bool>(7)) m.push_back(s.input(2).meta());
    return m;
  };
  bw.strategy = conv_grad_rows;
  // Bilinear in (grad_output, input / weight): its gradients are convolution and
  // convolution_backward ops again (create_graph, any order). Saves its inputs only when a node is
  // recorded, i.e. under create_graph.
  bw.differentiable = true;
  bw.saved_inputs = ~uint32_t{0};
  bw.backward = detail::convolution_backward_grad;
  bw.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    const ConvArgs a = conv_args(c);
    const bool ni = c.arg<bool>(6), nw = c.arg<bool>(7);
    const int64_t g = local_groups(a.groups, l[1]);
    ConvGrads r;
    if (g == 0) {
      r.grad_input = zeros(l[1].sizes(), TensorOptions(l[1].dtype(), l[1].device()));
      r.grad_weight = zeros(l[2].sizes(), TensorOptions(l[2].dtype(), l[2].device()));
    } else {
      r = convolution_backward(l[0], l[1], l[2], a.stride, a.padding, a.dilation, a.transposed,
                               a.output_padding, g, {ni, nw, false});
    }
    int64_t o = 0;
    if (ni) out[o++] = std::move(r.grad_input);
    if (nw) out[o++] = std::move(r.grad_weight);
  };
  bw.samples = conv_grad_samples;
  registry.add(std::move(bw));
}

}  // namespace dtensor
