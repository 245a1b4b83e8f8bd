// The convolutions on local tensors: argument checks (PyTorch's rules), the unbatched and
// padding-string forms, float16 / bfloat16 through float32, and the switch to the CPU kernels
// (conv_cpu.cc) or the CUDA ones (conv_cuda.cu). One N-d path (convolution) serves the 1/2/3-d
// functions.
#include "dtensor/ops/conv/conv.h"

#include <string>

#include "dtensor/ops/conv/detail/conv_args.h"
#include "dtensor/ops/conv/detail/conv_kernels.h"
#include "dtensor/ops/conv/detail/conv_onednn.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace detail {

Shape conv_expand(IntSpan v, int64_t nd, const char* what, std::string_view op) {
  const int64_t n = static_cast<int64_t>(v.size());
  DT_CHECK(n == 1 || n == nd, "[%s] expected 1 or %d values for %s, got %s", op, nd, what,
           shape_str(v));
  return n == nd ? Shape(v.begin(), v.end()) : Shape(static_cast<size_t>(nd), v[0]);
}

Shape conv_output_shape(IntSpan input, IntSpan weight, IntSpan stride, IntSpan padding,
                        IntSpan dilation, bool transposed, IntSpan output_padding, int64_t groups,
                        std::string_view op) {
  const int64_t dim = static_cast<int64_t>(input.size()), nd = dim - 2;
  DT_CHECK(nd >= 1 && nd <= 3,
           "[%s] expected a batched input of 3 to 5 dims ([N, C, *spatial]), got shape %s", op,
           shape_str(input));
  DT_CHECK(static_cast<int64_t>(weight.size()) == dim,
           "[%s] weight of shape %s must have as many dims as input of shape %s", op,
           shape_str(weight), shape_str(input));
  for (IntSpan l : {stride, padding, dilation, output_padding}) {
    DT_CHECK(static_cast<int64_t>(l.size()) == nd, "[%s] expected %d values per list, got %s", op,
             nd, shape_str(l));
  }
  DT_CHECK(groups > 0, "[%s] non-positive groups is not supported (got %d)", op, groups);
  const int64_t cin = input[1];
  int64_t cout = 0;
  if (!transposed) {
    DT_CHECK(weight[0] % groups == 0 && cin == weight[1] * groups,
             "[%s] weight of shape %s with groups=%d expects %d input channels and output "
             "channels divisible by groups, got input of shape %s",
             op, shape_str(weight), groups, weight[1] * groups, shape_str(input));
    cout = weight[0];
  } else {
    DT_CHECK(cin == weight[0] && cin % groups == 0,
             "[%s] weight of shape %s expects %d input channels divisible by groups=%d, got input "
             "of shape %s",
             op, shape_str(weight), weight[0], groups, shape_str(input));
    cout = weight[1] * groups;
  }
  Shape out = {input[0], cout};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t in = input[2 + i], k = weight[2 + i], s = stride[i], p = padding[i],
                  d = dilation[i], op_ = output_padding[i];
    DT_CHECK(s > 0 && d > 0 && p >= 0 && k > 0,
             "[%s] expected stride and dilation > 0, padding >= 0 and kernel sizes > 0 (dim %d: "
             "stride %d, dilation %d, padding %d, kernel %d)",
             op, i, s, d, p, k);
    int64_t o = 0;
    if (!transposed) {
      o = (in + 2 * p - d * (k - 1) - 1) / s + 1;
      DT_CHECK(in + 2 * p - d * (k - 1) - 1 >= 0,
               "[%s] input spatial size %d (padded %d) is smaller than the dilated kernel %d "
               "(dim %d)",
               op, in, in + 2 * p, d * (k - 1) + 1, i);
    } else {
      DT_CHECK(op_ >= 0 && (op_ < s || op_ < d),
               "[%s] output padding must be smaller than either stride or dilation, got "
               "output_padding %d, stride %d, dilation %d (dim %d)",
               op, op_, s, d, i);
      o = (in - 1) * s - 2 * p + d * (k - 1) + op_ + 1;
      DT_CHECK(o > 0, "[%s] computed output size %d is too small (dim %d)", op, o, i);
    }
    out.push_back(o);
  }
  return out;
}

ConvStringPadding conv_string_padding(ConvPadding padding, IntSpan weight, IntSpan stride,
                                      IntSpan dilation, std::string_view op) {
  const int64_t nd = static_cast<int64_t>(weight.size()) - 2;
  ConvStringPadding r{Shape(static_cast<size_t>(nd), 0), Shape(static_cast<size_t>(nd), 0)};
  if (padding == ConvPadding::kValid) return r;
  for (int64_t i = 0; i < nd; ++i) {
    DT_CHECK(stride[i] == 1, "[%s] padding='same' is not supported for strided convolutions", op);
    const int64_t total = dilation[i] * (weight[2 + i] - 1);
    r.padding[i] = total / 2 + total % 2;
    r.trim[i] = total % 2;
  }
  return r;
}

}  // namespace detail

ConvPadding conv_padding(std::string_view padding) {
  if (padding == "valid") return ConvPadding::kValid;
  DT_CHECK(padding == "same", "[conv] invalid padding string '%s' (expected 'same' or 'valid')",
           std::string(padding));
  return ConvPadding::kSame;
}

namespace {

bool is_16bit(DType d) {
  return d == kFloat16 || d == kBFloat16;
}

// Contiguous in the kernels' compute type (float32 for 16-bit floats).
Tensor compute_form(const Tensor& t) {
  if (!t.defined()) return t;
  return (is_16bit(t.dtype()) ? t.to(kFloat32) : t).contiguous();
}

void check_tensors(const Tensor& input, const Tensor& weight, const Tensor& bias, const char* op) {
  DT_CHECK(input.defined() && weight.defined(), "[%s] expected defined input and weight", op);
  dispatch_floating(input.dtype(), op, []<typename T>() {});
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    DT_CHECK(t->dtype() == input.dtype() && t->device() == input.device(),
             "[%s] %s must have the input's dtype and device, got %s on %s (expected %s on %s)", op,
             t == &weight ? "weight" : "bias", dtype_name(t->dtype()), t->device().str(),
             dtype_name(input.dtype()), input.device().str());
  }
}

// The kernels' geometry: im = the conv's input (the conv_transpose's output).
detail::ConvGeometry geometry(IntSpan input, IntSpan output, IntSpan weight, IntSpan stride,
                              IntSpan padding, IntSpan dilation, bool transposed, int64_t groups) {
  detail::ConvGeometry g;
  const IntSpan im = transposed ? output : input, col = transposed ? input : output;
  const size_t nd = input.size() - 2, lead = 3 - nd;
  g.n = input[0];
  g.groups = groups;
  g.ci = im[1];
  g.co = col[1];
  for (size_t i = 0; i < nd; ++i) {
    g.im[lead + i] = im[2 + i];
    g.col[lead + i] = col[2 + i];
    g.k[lead + i] = weight[2 + i];
    g.stride[lead + i] = stride[i];
    g.pad[lead + i] = padding[i];
    g.dil[lead + i] = dilation[i];
  }
  return g;
}

// conv1d/2d/3d and conv_transpose*: the unbatched form (input of nd + 1 dims) runs batched.
Tensor conv_nd(int64_t nd, const Tensor& input, const Tensor& weight, const Tensor& bias,
               IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
               IntSpan output_padding, int64_t groups, const char* op) {
  DT_CHECK(input.defined() && (input.dim() == nd + 1 || input.dim() == nd + 2),
           "[%s] expected a %dD (unbatched) or %dD (batched) input, got %s", op, nd + 1, nd + 2,
           input.defined() ? shape_str(input.sizes()) : std::string("(undefined)"));
  const bool unbatched = input.dim() == nd + 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  Tensor y = convolution(x, weight, bias, detail::conv_expand(stride, nd, "stride", op),
                         detail::conv_expand(padding, nd, "padding", op),
                         detail::conv_expand(dilation, nd, "dilation", op), transposed,
                         detail::conv_expand(output_padding, nd, "output_padding", op), groups);
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_string(int64_t nd, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   IntSpan stride, ConvPadding padding, IntSpan dilation, int64_t groups,
                   const char* op) {
  DT_CHECK(weight.defined() && weight.dim() == nd + 2, "[%s] expected a %dD weight", op, nd + 2);
  const Shape s = detail::conv_expand(stride, nd, "stride", op);
  const Shape d = detail::conv_expand(dilation, nd, "dilation", op);
  const detail::ConvStringPadding sp =
      detail::conv_string_padding(padding, weight.sizes(), s, d, op);
  Tensor y = conv_nd(nd, input, weight, bias, s, sp.padding, d, false, {0}, groups, op);
  for (int64_t i = 0; i < nd; ++i) {
    if (sp.trim[i] != 0) y = y.narrow(y.dim() - nd + i, 1, y.size(y.dim() - nd + i) - 1);
  }
  return y.contiguous();
}

}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
                   IntSpan padding, IntSpan dilation, bool transposed, IntSpan output_padding,
                   int64_t groups) {
  const char* op = transposed ? "conv_transpose" : "convolution";
  check_tensors(input, weight, bias, op);
  const Shape out = detail::conv_output_shape(input.sizes(), weight.sizes(), stride, padding,
                                              dilation, transposed, output_padding, groups, op);
  DT_CHECK(!bias.defined() || bias.sizes() == Shape{out[1]},
           "[%s] bias of shape %s must have one element per output channel (%d)", op,
           shape_str(bias.sizes()), out[1]);
  const Tensor x = compute_form(input), w = compute_form(weight), b = compute_form(bias);
  Tensor y = empty(out, TensorOptions(x.dtype(), x.device()));
  if (y.numel() > 0) {
    const detail::ConvGeometry g =
        geometry(x.sizes(), out, w.sizes(), stride, padding, dilation, transposed, groups);
    if (x.device().is_cuda()) {
      transposed ? detail::conv_data_cuda(g, x, w, b, y) : detail::conv_forward_cuda(g, x, w, b, y);
    } else {
      transposed ? detail::conv_data_cpu(g, x, w, b, y) : detail::conv_forward_cpu(g, x, w, b, y);
    }
  }
  return y.to(input.dtype());
}

ConvGrads convolution_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                               IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
                               IntSpan output_padding, int64_t groups,
                               std::array<bool, 3> output_mask) {
  const char* op = "convolution_backward";
  check_tensors(input, weight, Tensor(), op);
  const Shape out = detail::conv_output_shape(input.sizes(), weight.sizes(), stride, padding,
                                              dilation, transposed, output_padding, groups, op);
  DT_CHECK(grad_output.defined() && grad_output.sizes() == out &&
               grad_output.dtype() == input.dtype() && grad_output.device() == input.device(),
           "[%s] grad_output must have the output's shape %s, dtype and device, got %s", op,
           shape_str(out),
           grad_output.defined() ? shape_str(grad_output.sizes()) : std::string("(undefined)"));
  const Tensor go = compute_form(grad_output), x = compute_form(input), w = compute_form(weight);
  const detail::ConvGeometry g =
      geometry(x.sizes(), out, w.sizes(), stride, padding, dilation, transposed, groups);
  const bool cuda = x.device().is_cuda();
  const TensorOptions opts(x.dtype(), x.device());
  ConvGrads r;
  if (!cuda && !transposed && output_mask[0] && output_mask[1]) {
    // Both gradients in one oneDNN call where it runs them (grad_output reordered once).
    Tensor gi = empty(x.sizes(), opts), gw = empty(w.sizes(), opts);
    if (detail::conv_backward_onednn(g, go, x, w, gi, gw)) {
      r.grad_input = gi.to(input.dtype());
      r.grad_weight = gw.to(weight.dtype());
      output_mask[0] = output_mask[1] = false;
    }
  }
  if (output_mask[0]) {
    Tensor gi = empty(x.sizes(), opts);
    if (gi.numel() > 0) {
      // The conv's input is the im side (conv_data); the conv_transpose's the col side.
      if (transposed) {
        cuda ? detail::conv_forward_cuda(g, go, w, Tensor(), gi)
             : detail::conv_forward_cpu(g, go, w, Tensor(), gi);
      } else {
        cuda ? detail::conv_data_cuda(g, go, w, Tensor(), gi)
             : detail::conv_data_cpu(g, go, w, Tensor(), gi);
      }
    }
    r.grad_input = gi.to(input.dtype());
  }
  if (output_mask[1]) {
    Tensor gw = empty(w.sizes(), opts);
    if (gw.numel() > 0) {
      const Tensor& im = transposed ? go : x;
      const Tensor& col = transposed ? x : go;
      cuda ? detail::conv_weight_cuda(g, im, col, gw) : detail::conv_weight_cpu(g, im, col, gw);
    }
    r.grad_weight = gw.to(weight.dtype());
  }
  if (output_mask[2]) {
    Shape dims = {0};
    for (int64_t i = 2; i < grad_output.dim(); ++i) dims.push_back(i);
    r.grad_bias = sum(grad_output, dims);
  }
  return r;
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(1, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv1d");
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(2, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv2d");
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              IntSpan padding, IntSpan dilation, int64_t groups) {
  return conv_nd(3, input, weight, bias, stride, padding, dilation, false, {0}, groups, "conv3d");
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(1, input, weight, bias, stride, padding, dilation, groups, "conv1d");
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(2, input, weight, bias, stride, padding, dilation, groups, "conv2d");
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation, int64_t groups) {
  return conv_string(3, input, weight, bias, stride, padding, dilation, groups, "conv3d");
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                        IntSpan dilation) {
  return conv_nd(1, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose1d");
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                        IntSpan dilation) {
  return conv_nd(2, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose2d");
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        IntSpan stride, IntSpan padding, IntSpan output_padding, int64_t groups,
                        IntSpan dilation) {
  return conv_nd(3, input, weight, bias, stride, padding, dilation, true, output_padding, groups,
                 "conv_transpose3d");
}

}  // namespace dtensor
