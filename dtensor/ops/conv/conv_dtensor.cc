// DTensor forms of the convolutions (registered in conv_strategy.cc): one convolution op, the
// bias added as a broadcast add of bias viewed [1, C, 1, ...] (a bias sharded like the output
// channels adds locally; a Partial output is reduced first), padding="same" with an odd total
// padding as a narrowed output (conv_args.h).
#include <algorithm>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/conv_args.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

DTensor conv_nd(int64_t nd, const DTensor& input, const DTensor& weight, const DTensor& bias,
                IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
                IntSpan output_padding, int64_t groups, const char* op) {
  // An unbatched input [C, *spatial] is a batch of one, as PyTorch's (the output has no batch
  // dim either).
  if (input.defined() && input.dim() == nd + 1) {
    return squeeze(conv_nd(nd, unsqueeze(input, 0), weight, bias, stride, padding, dilation,
                           transposed, output_padding, groups, op),
                   0);
  }
  DT_CHECK(input.defined() && input.dim() == nd + 2,
           "[%s] expected a %dD (batched) or %dD (unbatched) input DTensor ([N, C, *spatial] or "
           "[C, *spatial]), got %d dims",
           op, nd + 2, nd + 1, input.defined() ? input.dim() : int64_t{-1});
  return convolution(input, weight, bias, detail::conv_expand(stride, nd, "stride", op),
                     detail::conv_expand(padding, nd, "padding", op),
                     detail::conv_expand(dilation, nd, "dilation", op), transposed,
                     detail::conv_expand(output_padding, nd, "output_padding", op), groups);
}

DTensor conv_string(int64_t nd, const DTensor& input, const DTensor& weight, const DTensor& bias,
                    IntSpan stride, ConvPadding padding, IntSpan dilation, int64_t groups,
                    const char* op) {
  if (input.defined() && input.dim() == nd + 1) {  // unbatched, as conv_nd
    return squeeze(
        conv_string(nd, unsqueeze(input, 0), weight, bias, stride, padding, dilation, groups, op),
        0);
  }
  DT_CHECK(weight.defined() && weight.dim() == nd + 2, "[%s] expected a %dD weight", op, nd + 2);
  const Shape s = detail::conv_expand(stride, nd, "stride", op);
  const Shape d = detail::conv_expand(dilation, nd, "dilation", op);
  const Shape ws(weight.shape().begin(), weight.shape().end());
  const detail::ConvStringPadding sp = detail::conv_string_padding(padding, ws, s, d, op);
  DTensor y = conv_nd(nd, input, weight, bias, s, sp.padding, d, false, {0}, groups, op);
  for (int64_t i = 0; i < nd; ++i) {
    if (sp.trim[i] != 0) y = narrow(y, 2 + i, 1, y.size(2 + i) - 1);
  }
  return y;
}

// The mesh dim along which x is height-sharded for the halo path, or -1 when it does not apply.
int64_t halo_mesh_dim(const DTensor& x, const DTensor& w, const DTensor& b, IntSpan stride,
                      IntSpan padding, IntSpan dilation, bool transposed) {
  if (transposed || !x.device_mesh().contains_me() || x.dim() < 4 || stride[0] != 1 ||
      2 * padding[0] != dilation[0] * (w.size(2) - 1)) {
    return -1;
  }
  const int64_t m = detail::halo_mesh_dim(x, 2);
  for (const DTensor* t : {&w, &b}) {
    if (!t->defined()) continue;
    for (const Placement& p : t->placements()) {
      if (!p.is_replicate()) return -1;
    }
  }
  return m;
}

// The halo convolution: x's rows extended by `top` / `bottom` rows read as `pad` says, then a
// convolution with no height padding (padding's other entries as given).
DTensor halo_convolution(const DTensor& x, const DTensor& weight, const DTensor& bias,
                         IntSpan stride, IntSpan padding, IntSpan dilation, int64_t groups,
                         int64_t m, int64_t top, int64_t bottom, detail::HaloPad pad_mode) {
  const DeviceMesh& mesh = x.device_mesh();
  const int64_t world = mesh.size(m), height = x.size(2);
  // Each rank's rows extended by top / bottom rows (zeros, or rows of x, beyond the tensor's
  // edges). An empty shard takes one more row: it computes one output row (then dropped), so
  // that every rank's graph holds the collectives the backward runs.
  const detail::ChunkLayout c = detail::chunk_layout(height, world);
  std::vector<detail::RowRange> range;
  for (int64_t q = 0; q < world; ++q) {
    range.push_back({c.start[q] - top, c.start[q] + c.rows[q] + bottom + (c.rows[q] == 0 ? 1 : 0)});
  }
  const int64_t n = c.rows[mesh.get_coordinate()[m]];
  const DTensor ext = detail::halo_rows(x, 2, m, range, pad_mode);
  Placements partial_grad = x.placements();
  partial_grad[m] = Partial();
  const DTensor wl = weight.to_local_dtensor(partial_grad);
  const DTensor bl = bias.defined() ? bias.to_local_dtensor(partial_grad) : DTensor();
  Shape pad(padding.begin(), padding.end());
  pad[0] = 0;
  const Shape zero_op(padding.size(), 0);
  DTensor yl = convolution(ext, wl, bl, stride, pad, dilation, false, zero_op, groups);
  if (n == 0) yl = narrow(yl, 2, 0, 0);
  Shape out = yl.shape();
  out[0] = x.size(0);
  out[2] = height;
  return DTensor::from_local(yl, mesh, x.placements(), false, out);
}

}  // namespace

DTensor convolution(const DTensor& input, const DTensor& weight, const DTensor& bias,
                    IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
                    IntSpan output_padding, int64_t groups) {
  static const OpInfo& op = ops_op("convolution");
  DT_CHECK(input.defined() && weight.defined(), "[convolution] expected defined input and weight");
  if (input.dim() >= 4 && weight.dim() == input.dim()) {
    const int64_t m = halo_mesh_dim(input, weight, bias, stride, padding, dilation, transposed);
    if (m >= 0) {
      return halo_convolution(input, weight, bias, stride, padding, dilation, groups, m, padding[0],
                              padding[0], detail::HaloPad::kZeros);
    }
  }
  const ArgValue args[] = {Shape(stride.begin(), stride.end()),
                           Shape(padding.begin(), padding.end()),
                           Shape(dilation.begin(), dilation.end()),
                           transposed,
                           Shape(output_padding.begin(), output_padding.end()),
                           groups};
  DTensor y = dispatch(op, {&input, &weight}, args);
  if (!bias.defined()) return y;
  DT_CHECK(bias.dim() == 1 && bias.size(0) == y.size(1),
           "[convolution] bias must have one element per output channel (%d), got %d dims",
           y.size(1), bias.dim());
  Shape bshape(static_cast<size_t>(y.dim()), 1);
  bshape[1] = y.size(1);
  return add(y, view(bias, bshape));
}

namespace detail {

DTensor halo_padded_convolution(const DTensor& x, const DTensor& weight, const DTensor& bias,
                                IntSpan pads, std::string_view mode, IntSpan stride,
                                IntSpan dilation, int64_t groups) {
  const int64_t nd = x.dim() - 2;
  if (nd < 2 || weight.dim() != x.dim() || static_cast<int64_t>(pads.size()) != 2 * nd ||
      static_cast<int64_t>(stride.size()) != nd || static_cast<int64_t>(dilation.size()) != nd) {
    return DTensor();
  }
  const HaloPad pad_mode = mode == "reflect"     ? HaloPad::kReflect
                           : mode == "replicate" ? HaloPad::kReplicate
                           : mode == "circular"  ? HaloPad::kCircular
                                                 : HaloPad::kZeros;
  // The height's (top, bottom): pad's last pair is the first spatial dim's.
  const int64_t top = pads[2 * nd - 2], bottom = pads[2 * nd - 1], size = x.size(2);
  // As the zeros path (halo_mesh_dim above): an output as high as the input.
  const bool same_height = top + bottom == dilation[0] * (weight.size(2) - 1);
  if (pad_mode == HaloPad::kZeros || !same_height || size == 0 || top < 0 || bottom < 0) {
    return DTensor();
  }
  if (x.dim() < 4 || stride[0] != 1 || !x.device_mesh().contains_me()) return DTensor();
  const int64_t m = halo_mesh_dim(x, 2);
  if (m < 0) return DTensor();
  for (const DTensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    for (const Placement& p : t->placements()) {
      if (!p.is_replicate()) return DTensor();
    }
  }
  // The padding checked against the global shape by pad's own rule before any local work, so
  // that a padding the mode refuses (reflect by a whole dim, circular wrapping more than once,
  // replicate of an empty dim; the height's or another dim's) raises the same error on every
  // rank: the local pad below sees only this rank's rows, and an empty shard pads zeros, so it
  // would pass and wait in halo_rows for the ranks that raised.
  const std::string mode_name(mode);
  const std::string op = "conv" + std::to_string(nd) + "d padding_mode='" + mode_name + "'";
  WindowArgs pad_check = pad_args(pads, mode_name.c_str(), 0);
  pad_check.op = op.c_str();
  window_out_shape(pad_check, x.shape());
  // The other spatial dims are padded on every rank's own rows (not sharded: no communication).
  // Every spatial dim but the height (pad takes a pair per spatial dim of a batched input).
  Shape rest(pads.begin(), pads.end());
  rest[2 * nd - 2] = rest[2 * nd - 1] = 0;
  const bool pad_rest = std::any_of(rest.begin(), rest.end(), [](int64_t v) { return v != 0; });
  DTensor xp = x;
  if (pad_rest) {
    // On the local shard (pad of the sharded DTensor would gather the height); an empty shard
    // has no values to reflect or wrap: zeros keep its shape and its place in the graph.
    const DTensor xl = x.to_local_dtensor();
    const std::string local_mode = xl.size(2) == 0 ? "constant" : mode_name;
    const DTensor pl = pad(xl, rest, local_mode.c_str());
    Shape global = pl.shape();
    global[0] = x.size(0);
    global[2] = size;
    xp = DTensor::from_local(pl, x.device_mesh(), x.placements(), false, global);
  }
  return halo_convolution(xp, weight, bias, stride, Shape(static_cast<size_t>(nd), 0), dilation,
                          groups, m, top, bottom, pad_mode);
}

}  // namespace detail

DTensor conv1d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(1, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv1d");
}
DTensor conv2d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(2, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv2d");
}
DTensor conv3d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(3, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv3d");
}
DTensor conv1d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(1, input, weight, bias, stride, padding, dilation, groups, "conv1d");
}
DTensor conv2d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(2, input, weight, bias, stride, padding, dilation, groups, "conv2d");
}
DTensor conv3d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(3, input, weight, bias, stride, padding, dilation, groups, "conv3d");
}
DTensor conv_transpose1d(const DTensor& input, const DTensor& weight, const DTensor& bias,
                         IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                         IntSpan dilation) {
  return conv_nd(1, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose1d");
}
DTensor conv_transpose2d(const DTensor& input, const DTensor& weight, const DTensor& bias,
                         IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                         IntSpan dilation) {
  return conv_nd(2, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose2d");
}
DTensor conv_transpose3d(const DTensor& input, const DTensor& weight, const DTensor& bias,
                         IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                         IntSpan dilation) {
  return conv_nd(3, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose3d");
}

}  // namespace dtensor
