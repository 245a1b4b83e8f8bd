// Backward formulas of the elementwise ops, written with DTensor ops (so they run sharded and
// cached like forward). Gradients of broadcast inputs are summed back to the input's shape and
// cast to its dtype (reduce_to). Formulas are with respect to the inputs as the kernel saw
// them; ctx.input / ctx.output are the saved values.
#include "dtensor/ops/elementwise/detail/elementwise_backward.h"

#include <absl/container/flat_hash_map.h>

#include <cmath>
#include <functional>
#include <string>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {
namespace {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

constexpr uint32_t kIn0 = 1u, kIn1 = 2u, kIn01 = 3u, kIn12 = 6u, kIn012 = 7u, kOut0 = 1u;

// The gradient for input i: reduce_to its spec when it needs one.
DTensor for_input(const BackwardContext& c, int64_t i, const DTensor& g) {
  return c.needs_input_grad(i) ? reduce_to(g, c.input_spec(i)) : DTensor();
}

DTensor as_float(const DTensor& mask, DType dtype) {
  return cast(mask, dtype);
}

DTensorList add_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0]), for_input(c, 1, g[0])};
}
DTensorList sub_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0]), c.needs_input_grad(1) ? for_input(c, 1, -g[0]) : DTensor()};
}
DTensorList mul_bw(const BackwardContext& c, Grads g) {
  return {c.needs_input_grad(0) ? for_input(c, 0, g[0] * c.input(1)) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, g[0] * c.input(0)) : DTensor()};
}
DTensorList div_bw(const BackwardContext& c, Grads g) {
  const DTensor& b = c.input(1);
  DTensorList out = {c.needs_input_grad(0) ? for_input(c, 0, g[0] / b) : DTensor(), DTensor()};
  // -g (a / b) / b, PyTorch's order: b * b overflows (and underflows) where the quotients do not
  // (a = 3e38, b = -3e38 in float32: 0 instead of -3.3e-39).
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, -g[0] * (c.input(0) / b / b));
  return out;
}
// PyTorch's rule: ties split the gradient evenly, the loser gets 0, and where a or b is NaN
// (unordered: neither wins nor ties) both get the whole gradient.
template <bool kMax>
DTensorList extremum_bw(const BackwardContext& c, Grads g) {
  const DTensor &a = c.input(0), &b = c.input(1);
  const DType dt = g[0].dtype();
  const DTensor ties = as_float(eq(a, b), dt) * 0.5;
  const DTensor a_wins = 1.0 - as_float(kMax ? lt(a, b) : gt(a, b), dt) - ties;
  const DTensor b_wins = 1.0 - as_float(kMax ? gt(a, b) : lt(a, b), dt) - ties;
  return {c.needs_input_grad(0) ? for_input(c, 0, g[0] * a_wins) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, g[0] * b_wins) : DTensor()};
}
DTensorList where_bw(const BackwardContext& c, Grads g) {
  const DTensor cond = as_float(c.input(0), g[0].dtype());
  return {DTensor(), c.needs_input_grad(1) ? for_input(c, 1, g[0] * cond) : DTensor(),
          c.needs_input_grad(2) ? for_input(c, 2, g[0] - g[0] * cond) : DTensor()};
}

// copy_ / fill_ / zero_ overwrite self: self's gradient is zero, src's the incoming one.
DTensorList overwrite_bw(const BackwardContext& c, Grads g) {
  DTensorList out = {c.needs_input_grad(0) ? for_input(c, 0, zeros_like(g[0])) : DTensor()};
  if (c.num_inputs() > 1) out.push_back(for_input(c, 1, g[0]));
  return out;
}

// Scalar forms: args (scalar, dtype).
DTensorList same_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0])};
}
DTensorList neg_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, -g[0])};
}
DTensorList mul_scalar_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * c.scalar(0))};
}
DTensorList div_scalar_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] / c.scalar(0))};
}
// d(s / x) = -s / x^2, from x alone: the output is not saved, so a write to it after the forward
// does not make backward raise (PyTorch's 2 / x is 2 * reciprocal(x) and keeps no visible tensor).
DTensorList rdiv_scalar_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, -g[0] * c.scalar(0) / x / x)};
}
DTensorList pow_bw(const BackwardContext& c, Grads g) {
  const double e = c.scalar(0).to_double();
  if (e == 0.0) return {for_input(c, 0, g[0] * 0.0)};
  return {for_input(c, 0, g[0] * e * pow(c.input(0), Scalar(e - 1.0)))};
}

// Unary ops.
DTensorList abs_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DType dt = g[0].dtype();
  return {
      for_input(c, 0, g[0] * (as_float(gt(x, Scalar(0)), dt) - as_float(lt(x, Scalar(0)), dt)))};
}
DTensorList exp_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * c.output(0))};
}
DTensorList log_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] / c.input(0))};
}
DTensorList sqrt_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * 0.5 / c.output(0))};
}
// d rsqrt(x) = -x^(-3/2) / 2 = -out^3 / 2.
DTensorList rsqrt_bw(const BackwardContext& c, Grads g) {
  const DTensor& y = c.output(0);
  return {for_input(c, 0, g[0] * (y * y * y) * -0.5)};
}
// The activations' gradients: one fused op each (gelu_backward etc., registered in
// elementwise_strategy.cc), sharded like any pointwise op; args are the forward's.
// Under create_graph (autograd/create_graph.h) the fused op, which has no derivative, is replaced
// by `composite` (the same derivative written with differentiable ops).
DTensorList activation_bw(const BackwardContext& c, Grads g, const char* grad_op,
                          const DTensor& saved,
                          const std::function<DTensor(const DTensor&)>& composite = nullptr) {
  if (!c.needs_input_grad(0)) return {DTensor()};
  if (composite != nullptr && autograd::in_create_graph()) {
    return {for_input(c, 0, g[0] * composite(saved))};
  }
  return {for_input(c, 0, dispatch(ops_op(grad_op), {&g[0], &saved}, c.args()))};
}
DTensorList sigmoid_bw(const BackwardContext& c, Grads g) {
  return activation_bw(c, g, "sigmoid_backward", c.output(0),
                       [](const DTensor& y) { return y * (1.0 - y); });
}
DTensorList tanh_bw(const BackwardContext& c, Grads g) {
  return activation_bw(c, g, "tanh_backward", c.output(0),
                       [](const DTensor& y) { return 1.0 - y * y; });
}
DTensorList relu_bw(const BackwardContext& c, Grads g) {
  // PyTorch's threshold_backward (out <= 0 ? 0 : g): a NaN output passes the gradient.
  return {for_input(c, 0, g[0] * as_float(logical_not(le(c.output(0), Scalar(0))), g[0].dtype()))};
}
// silu' = s (1 + x (1 - s)), s = sigmoid(x).
DTensorList silu_bw(const BackwardContext& c, Grads g) {
  return activation_bw(c, g, "silu_backward", c.input(0), [](const DTensor& x) {
    const DTensor s = sigmoid(x);
    return s * (x * (1.0 - s) + 1.0);
  });
}
// gelu' = Phi(x) + x phi(x) (erf form); tanh form: with u = k (x + 0.044715 x^3), k =
// sqrt(2 / pi), t = tanh(u): (1 + t) / 2 + x (1 - t^2) k (1 + 3 0.044715 x^2) / 2.
DTensorList gelu_bw(const BackwardContext& c, Grads g) {
  const bool tanh_form = c.arg<int64_t>(0) == static_cast<int64_t>(GeluApproximate::kTanh);
  return activation_bw(c, g, "gelu_backward", c.input(0), [tanh_form](const DTensor& x) {
    if (tanh_form) {
      const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
      const DTensor x2 = x * x;
      const DTensor t = tanh((x + x2 * x * a) * k);
      return (t + 1.0) * 0.5 + x * (1.0 - t * t) * ((x2 * (3.0 * a) + 1.0) * (0.5 * k));
    }
    return (erf(x * M_SQRT1_2) + 1.0) * 0.5 +
           x * exp(x * x * -0.5) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
  });
}
// sin' = cos, cos' = -sin, tan' = 1 + tan^2, erf' = 2/sqrt(pi) exp(-x^2), (2^x)' = 2^x ln 2,
// expm1' = out + 1, log1p' = 1 / (1 + x), log2' = 1 / (x ln 2), log10' = 1 / (x ln 10),
// (1/x)' = -out^2; rounding and sign have zero gradient almost everywhere (as PyTorch), frac's
// is 1.
DTensorList sin_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * cos(c.input(0)))};
}
DTensorList cos_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * -sin(c.input(0)))};
}
DTensorList tan_bw(const BackwardContext& c, Grads g) {
  const DTensor& y = c.output(0);
  return {for_input(c, 0, g[0] * (y * y + 1.0))};
}
DTensorList sinh_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * cosh(c.input(0)))};
}
DTensorList cosh_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * sinh(c.input(0)))};
}
// asin: 1 / sqrt(1 - x^2); acos the negation.
template <bool kNegate>
DTensorList asin_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor d = g[0] * rsqrt(1.0 - x * x);
  return {for_input(c, 0, kNegate ? -d : d)};
}
DTensorList atan_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, g[0] / (x * x + 1.0))};
}
// asinh: 1 / sqrt(x^2 + 1); acosh: 1 / sqrt(x^2 - 1).
template <int kSign>
DTensorList asinh_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, g[0] * rsqrt(x * x + static_cast<double>(kSign)))};
}
DTensorList atanh_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, g[0] / (1.0 - x * x))};
}
DTensorList erfc_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, g[0] * exp(x * x * -1.0) * (-2.0 / std::sqrt(M_PI)))};
}
// d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x).
DTensorList log_sigmoid_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * sigmoid(-c.input(0)))};
}
// hardsigmoid: 1/6 inside (-3, 3), 0 outside (PyTorch's hardsigmoid_backward).
DTensorList hardsigmoid_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor inside = as_float(lt(abs(x), Scalar(3.0)), g[0].dtype());
  return {for_input(c, 0, g[0] * inside * (1.0 / 6.0))};
}
// hardswish: 0 for x <= -3, (2x + 3) / 6 for -3 < x < 3, 1 for x >= 3 and for NaN: PyTorch
// 2.15's hardswish_backward (0 at -3 and 1 at 3, not the inner formula's -0.5 and 1.5). The
// slope is built from x alone (filled, so a NaN x gives 1, not NaN * 0) and multiplies g.
DTensorList hardswish_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor upper =
      masked_fill(x * (1.0 / 3.0) + 0.5, logical_not(lt(x, Scalar(3.0))), Scalar(1.0));
  return {for_input(c, 0, g[0] * masked_fill(upper, le(x, Scalar(-3.0)), Scalar(0.0)))};
}
// mish = x tanh(sp(x)) with sp = softplus: tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2).
DTensorList mish_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor t = tanh(log1p(exp(x)));
  return {for_input(c, 0, g[0] * (t + x * sigmoid(x) * (1.0 - t * t)))};
}
// selu: scale for x > 0, scale * alpha * exp(x) otherwise.
DTensorList selu_bw(const BackwardContext& c, Grads g) {
  constexpr double kAlpha = 1.6732632423543772848, kScale = 1.0507009873554804934;
  const DTensor& x = c.input(0);
  const DTensor pos = as_float(gt(x, Scalar(0.0)), g[0].dtype());
  // exp of min(x, 0): exp(x) itself overflows for large x, and inf * 0 would be NaN.
  const DTensor e = exp(clamp(x, std::nullopt, Scalar(0.0)));
  return {for_input(c, 0, g[0] * (pos * kScale + (1.0 - pos) * e * (kScale * kAlpha)))};
}
// The activations of issue 44, as PyTorch 2.15's backward kernels (softplus_backward,
// elu_backward, leaky_relu_backward, hardtanh_backward, glu_backward), kinks and NaN included
// (tests/ops/elementwise/torch_activation_refs.py). Each slope is built from x alone and
// multiplies g (a mask becomes 0 or 1 first, so a NaN or inf x gives no NaN from 0 * inf).
// softplus: 1 where beta x > threshold (the linear tail), else sigmoid(beta x) (PyTorch's
// z / (z + 1), z = exp(beta x)); NaN for a NaN x.
DTensorList softplus_bw(const BackwardContext& c, Grads g) {
  const DTensor bx = c.input(0) * c.scalar(0);
  return {for_input(c, 0, g[0] * masked_fill(sigmoid(bx), gt(bx, c.scalar(1)), Scalar(1.0)))};
}
// elu (input_scale s = 1) and celu (s = 1 / alpha): alpha s exp(s x) for x <= 0 (alpha s at
// 0: alpha for elu, 1 for celu), 1 for x > 0 and for NaN.
template <bool kCelu>
DTensorList elu_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const double alpha = c.scalar(0).to_double();
  const double s = kCelu ? 1.0 / alpha : 1.0;
  // exp(s x) overflows for large x > 0; those positions are overwritten with 1.
  const DTensor e = exp(x * s) * (alpha * s);
  return {for_input(c, 0, g[0] * masked_fill(e, logical_not(le(x, Scalar(0.0))), Scalar(1.0)))};
}
// leaky_relu: 1 for x > 0, negative_slope otherwise (at 0 and for NaN too).
DTensorList leaky_relu_bw(const BackwardContext& c, Grads g) {
  const DTensor pos = gt(c.input(0), Scalar(0.0));
  const DTensor slope = masked_fill(as_float(pos, g[0].dtype()), logical_not(pos), c.scalar(0));
  return {for_input(c, 0, g[0] * slope)};
}
// relu6 (hardtanh(x, 0, 6)): 1 strictly inside (0, 6) and for NaN, 0 at and beyond 0 and 6.
DTensorList relu6_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor outside = logical_or(le(x, Scalar(0.0)), ge(x, Scalar(6.0)));
  return {for_input(c, 0, g[0] * as_float(logical_not(outside), g[0].dtype()))};
}
// glu: with a, b the halves and s = sigmoid(b), grad_a = g s and grad_b = g s (1 - s) a,
// concatenated along dim (the dim is whole on each rank, so narrow and cat move no data).
DTensorList glu_bw(const BackwardContext& c, Grads g) {
  if (!c.needs_input_grad(0)) return {DTensor()};
  const DTensor& x = c.input(0);
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), x.dim(), "glu");
  const int64_t h = x.shape()[dim] / 2;
  const DTensor s = sigmoid(narrow(x, dim, h, h));
  const DTensor ga = g[0] * s;
  const DTensor gb = ga * (1.0 - s) * narrow(x, dim, 0, h);
  return {for_input(c, 0, cat({ga, gb}, dim))};
}
DTensorList erf_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, g[0] * exp(x * x * -1.0) * (2.0 / std::sqrt(M_PI)))};
}
// erfinv'(x) = sqrt(pi) / 2 * exp(erfinv(x)^2), from the output.
DTensorList erfinv_bw(const BackwardContext& c, Grads g) {
  const DTensor& y = c.output(0);
  return {for_input(c, 0, g[0] * exp(y * y) * (std::sqrt(M_PI) / 2.0))};
}
DTensorList exp2_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * c.output(0) * M_LN2)};
}
DTensorList expm1_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * (c.output(0) + 1.0))};
}
DTensorList log1p_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] / (c.input(0) + 1.0))};
}
DTensorList log2_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] / (c.input(0) * M_LN2))};
}
DTensorList log10_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] / (c.input(0) * M_LN10))};
}
DTensorList reciprocal_bw(const BackwardContext& c, Grads g) {
  const DTensor& y = c.output(0);
  return {for_input(c, 0, g[0] * (y * y) * -1.0)};
}
// Zeros (not g * 0, which would turn an inf or NaN gradient into NaN), as PyTorch.
DTensorList zero_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, zeros_like(g[0]))};
}
DTensorList cast_bw(const BackwardContext& c, Grads g) {
  return {cast(g[0], c.input_spec(0).dtype())};
}

// The pointwise math of elementwise_math.cc.
// g where `mask`, zero elsewhere, as a product (mul keeps a Partial(sum) gradient Partial;
// where and masked_fill are not linear in the registry): an inf or NaN gradient at a masked
// position gives NaN there, where PyTorch's where(mask, grad, 0) gives 0.
DTensor masked(const DTensor& g, const DTensor& mask) {
  return g * as_float(mask, g.dtype());
}
DTensorList square_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, g[0] * c.input(0) * 2.0)};
}
// d/dx x^e = e x^(e-1) (0 where e = 0), d/de x^e = x^e ln x (0 where x = 0 and e >= 0), as
// PyTorch.
DTensorList pow_tensor_bw(const BackwardContext& c, Grads g) {
  const DTensor &x = c.input(0), &e = c.input(1);
  DTensorList out(2);
  if (c.needs_input_grad(0)) {
    const DTensor d = g[0] * e * pow(x, e - 1.0);
    out[0] = for_input(c, 0, where(eq(e, Scalar(0)), zeros_like(d), d));
  }
  if (c.needs_input_grad(1)) {
    // log in the result's dtype: log of an integer x alone would be float32 (pow(int32 x,
    // float64 e) is float64).
    const DTensor d = g[0] * c.output(0) * log(cast(x, c.output(0).dtype()));
    out[1] =
        for_input(c, 1, where(logical_and(eq(x, Scalar(0)), ge(e, Scalar(0))), zeros_like(d), d));
  }
  return out;
}
// PyTorch's floor division (div(x, y, rounding_mode="floor")): the quotient of x - fmod(x, y),
// one less where fmod's sign is not y's, rounded to the nearest integer; x / y where y is 0.
// Not floor(x / y), which can round across an integer (x / y is 10 at (1, 0.1), where the
// remainder 0.0999... belongs to the quotient 9).
DTensor floor_quotient(const DTensor& x, const DTensor& y) {
  const DTensor mod = fmod(x, y);
  const DTensor off =
      logical_and(ne(mod, Scalar(0)), logical_xor(lt(y, Scalar(0)), lt(mod, Scalar(0))));
  const DTensor q = (x - mod) / y - as_float(off, mod.dtype());
  const DTensor fq = floor(q);
  const DTensor rounded = fq + as_float(gt(q - fq, Scalar(0.5)), q.dtype());
  return where(eq(y, Scalar(0)), x / y, rounded);
}
// fmod(x, y) = x - trunc(x / y) y, remainder(x, y) = x - floor(x / y) y; y's gradient uses
// PyTorch's quotients (trunc(x / y) for fmod, its floor division for remainder).
template <bool kFmod>
DTensorList mod_bw(const BackwardContext& c, Grads g) {
  DTensorList out = {for_input(c, 0, g[0]), DTensor()};
  if (c.needs_input_grad(1)) {
    const DTensor &x = c.input(0), &y = c.input(1);
    out[1] = for_input(c, 1, -g[0] * (kFmod ? trunc(x / y) : floor_quotient(x, y)));
  }
  return out;
}
// atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2); both 0 where x^2 + y^2 is 0 (the
// origin, or squares that underflow), as PyTorch 2.15, not 0 * inf = NaN.
DTensorList atan2_bw(const BackwardContext& c, Grads g) {
  const DTensor &y = c.input(0), &x = c.input(1);
  const DTensor r2 = x * x + y * y;
  const DTensor scaled = where(eq(r2, Scalar(0)), zeros_like(r2), g[0] / r2);
  return {c.needs_input_grad(0) ? for_input(c, 0, scaled * x) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, -scaled * y) : DTensor()};
}
// hypot(x, y) = h: dx = g x / h, dy = g y / h, multiplied before dividing (as PyTorch 2.15): g / h
// first overflows for a subnormal h (hypot(1e-310, 0): inf, and 0 * inf = NaN for y).
DTensorList hypot_bw(const BackwardContext& c, Grads g) {
  const DTensor& h = c.output(0);
  return {c.needs_input_grad(0) ? for_input(c, 0, g[0] * c.input(0) / h) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, g[0] * c.input(1) / h) : DTensor()};
}
// Scalar bounds: the gradient passes strictly inside them (min < x < max; 0 at a bound, for
// NaN and everywhere when min >= max), as PyTorch 2.15.
DTensorList clamp_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  return {for_input(c, 0, masked(g[0], logical_and(gt(x, c.scalar(0)), lt(x, c.scalar(1)))))};
}
DTensorList clamp_min_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, masked(g[0], gt(c.input(0), c.scalar(0))))};
}
DTensorList clamp_max_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, masked(g[0], lt(c.input(0), c.scalar(0))))};
}
// Tensor bounds, as PyTorch 2.15: where min < max, self gets the gradient strictly inside,
// min below, max above, and a tie of self with a bound splits it in halves between the two;
// where min == max, self gets it when it equals both, else the bound it lies beyond; where
// min > max (the result is max) max gets it. A NaN self keeps the gradient (and, with
// min > max, max gets it too); a NaN bound passes it to self unless self lies beyond the
// other bound. For example x = min = -1 < max: 0.5 to x and 0.5 to min. Each share is a
// product of g and a coefficient built from comparisons only (no NaN * 0).
DTensorList clamp_tensor_bw(const BackwardContext& c, Grads g) {
  const DTensor &x = c.input(0), &lo = c.input(1), &hi = c.input(2);
  const DType dt = g[0].dtype();
  const DTensor open = lt(lo, hi), ordered = le(lo, hi);
  const DTensor below = lt(x, lo), above = gt(x, hi);
  const DTensor at_lo = logical_and(eq(x, lo), open), at_hi = logical_and(eq(x, hi), open);
  DTensorList out(3);
  if (c.needs_input_grad(0)) {
    const DTensor share =
        1.0 - as_float(logical_or(below, above), dt) - as_float(logical_or(at_lo, at_hi), dt) * 0.5;
    out[0] = for_input(c, 0, g[0] * share);
  }
  if (c.needs_input_grad(1)) {
    const DTensor share = as_float(logical_and(below, ordered), dt) + as_float(at_lo, dt) * 0.5;
    out[1] = for_input(c, 1, g[0] * share);
  }
  if (c.needs_input_grad(2)) {
    const DTensor beyond = logical_or(gt(lo, hi), logical_and(above, ordered));
    out[2] = for_input(c, 2, g[0] * (as_float(beyond, dt) + as_float(at_hi, dt) * 0.5));
  }
  return out;
}
// logaddexp: g / (1 + exp(other - self)) and g / (1 + exp(self - other)), PyTorch's formulas
// (NaN where both are the same infinity, 0 and 1 where one is -inf or +inf).
DTensorList logaddexp_bw(const BackwardContext& c, Grads g) {
  const DTensor &a = c.input(0), &b = c.input(1);
  return {c.needs_input_grad(0) ? for_input(c, 0, g[0] / (exp(b - a) + 1.0)) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, g[0] / (exp(a - b) + 1.0)) : DTensor()};
}
// xlogy, as PyTorch: self gets xlogy(g, other), 0 where self == 0 and other <= 0; other gets
// g self / other.
DTensorList xlogy_bw(const BackwardContext& c, Grads g) {
  const DTensor &a = c.input(0), &b = c.input(1);
  DTensorList out(2);
  if (c.needs_input_grad(0)) {
    const DTensor zero_self = logical_and(eq(a, Scalar(0.0)), le(b, Scalar(0.0)));
    out[0] = for_input(c, 0, masked_fill(xlogy(g[0], b), zero_self, Scalar(0.0)));
  }
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, g[0] * a / b);
  return out;
}
// copysign, as PyTorch: self gets g * out / self (0 where self == 0; NaN for an infinite or NaN
// self), other gets zeros.
DTensorList copysign_bw(const BackwardContext& c, Grads g) {
  const DTensor& a = c.input(0);
  DTensorList out(2);
  if (c.needs_input_grad(0)) {
    out[0] = for_input(c, 0, g[0] * masked_fill(c.output(0) / a, eq(a, Scalar(0.0)), Scalar(0.0)));
  }
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, zeros_like(g[0]));
  return out;
}
DTensorList masked_fill_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, masked(g[0], logical_not(c.input(1)))), DTensor()};
}
DTensorList nan_to_num_bw(const BackwardContext& c, Grads g) {
  return {for_input(c, 0, masked(g[0], isfinite(c.input(0))))};
}
DTensorList lerp_scalar_bw(const BackwardContext& c, Grads g) {
  const double w = c.scalar(0).to_double();
  return {c.needs_input_grad(0) ? for_input(c, 0, g[0] * (1.0 - w)) : DTensor(),
          c.needs_input_grad(1) ? for_input(c, 1, g[0] * w) : DTensor()};
}
DTensorList lerp_bw(const BackwardContext& c, Grads g) {
  const DTensor& w = c.input(2);
  DTensorList out(3);
  if (c.needs_input_grad(0)) out[0] = for_input(c, 0, g[0] - g[0] * w);
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, g[0] * w);
  if (c.needs_input_grad(2)) out[2] = for_input(c, 2, g[0] * (c.input(1) - c.input(0)));
  return out;
}
// self + v t1 t2 and self + v t1 / t2.
DTensorList addcmul_bw(const BackwardContext& c, Grads g) {
  const Scalar v = c.scalar(0);
  DTensorList out = {for_input(c, 0, g[0]), DTensor(), DTensor()};
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, g[0] * c.input(2) * v);
  if (c.needs_input_grad(2)) out[2] = for_input(c, 2, g[0] * c.input(1) * v);
  return out;
}
DTensorList addcdiv_bw(const BackwardContext& c, Grads g) {
  const Scalar v = c.scalar(0);
  const DTensor& t2 = c.input(2);
  const DTensor scaled = g[0] * v / t2;
  DTensorList out = {for_input(c, 0, g[0]), DTensor(), DTensor()};
  if (c.needs_input_grad(1)) out[1] = for_input(c, 1, scaled);
  if (c.needs_input_grad(2)) out[2] = for_input(c, 2, -scaled * c.input(1) / t2);
  return out;
}

}  // namespace

PointwiseGrad pointwise_grad(std::string_view name) {
  static const auto* table = new absl::flat_hash_map<std::string, PointwiseGrad>{
      {"add", {add_bw}},
      {"sub", {sub_bw}},
      {"mul", {mul_bw, kIn01}},
      {"div", {div_bw, kIn01}},
      {"maximum", {extremum_bw<true>, kIn01}},
      {"minimum", {extremum_bw<false>, kIn01}},
      {"where", {where_bw, kIn0}},
      {"add.Scalar", {same_bw}},
      {"sub.Scalar", {same_bw}},
      {"rsub.Scalar", {neg_bw}},
      {"mul.Scalar", {mul_scalar_bw}},
      {"div.Scalar", {div_scalar_bw}},
      {"rdiv.Scalar", {rdiv_scalar_bw, kIn0}},
      {"pow", {pow_bw, kIn0}},
      {"neg", {neg_bw}},
      {"abs", {abs_bw, kIn0}},
      {"exp", {exp_bw, 0, kOut0}},
      {"log", {log_bw, kIn0}},
      {"sqrt", {sqrt_bw, 0, kOut0}},
      {"rsqrt", {rsqrt_bw, 0, kOut0}},
      {"sigmoid", {sigmoid_bw, 0, kOut0}},
      {"tanh", {tanh_bw, 0, kOut0}},
      {"relu", {relu_bw, 0, kOut0}},
      {"silu", {silu_bw, kIn0}},
      {"gelu", {gelu_bw, kIn0}},
      {"sin", {sin_bw, kIn0}},
      {"cos", {cos_bw, kIn0}},
      {"tan", {tan_bw, 0, kOut0}},
      {"erf", {erf_bw, kIn0}},
      {"sinh", {sinh_bw, kIn0}},
      {"cosh", {cosh_bw, kIn0}},
      {"asin", {asin_bw<false>, kIn0}},
      {"acos", {asin_bw<true>, kIn0}},
      {"atan", {atan_bw, kIn0}},
      {"asinh", {asinh_bw<1>, kIn0}},
      {"acosh", {asinh_bw<-1>, kIn0}},
      {"atanh", {atanh_bw, kIn0}},
      {"erfc", {erfc_bw, kIn0}},
      {"log_sigmoid", {log_sigmoid_bw, kIn0}},
      {"hardsigmoid", {hardsigmoid_bw, kIn0}},
      {"hardswish", {hardswish_bw, kIn0}},
      {"mish", {mish_bw, kIn0}},
      {"selu", {selu_bw, kIn0}},
      {"relu6", {relu6_bw, kIn0}},
      {"softplus", {softplus_bw, kIn0}},
      {"elu", {elu_bw<false>, kIn0}},
      {"celu", {elu_bw<true>, kIn0}},
      {"leaky_relu", {leaky_relu_bw, kIn0}},
      {"glu", {glu_bw, kIn0}},
      {"erfinv", {erfinv_bw, 0, kOut0}},
      {"exp2", {exp2_bw, 0, kOut0}},
      {"expm1", {expm1_bw, 0, kOut0}},
      {"log1p", {log1p_bw, kIn0}},
      {"log2", {log2_bw, kIn0}},
      {"log10", {log10_bw, kIn0}},
      {"reciprocal", {reciprocal_bw, 0, kOut0}},
      {"floor", {zero_bw, 0}},
      {"ceil", {zero_bw, 0}},
      {"round", {zero_bw, 0}},
      {"trunc", {zero_bw, 0}},
      {"sign", {zero_bw, 0}},
      {"frac", {same_bw}},
      {"cast", {cast_bw}},
      {"square", {square_bw, kIn0}},
      {"pow.Tensor", {pow_tensor_bw, kIn01, kOut0}},
      {"fmod", {mod_bw<true>, kIn01}},
      {"remainder", {mod_bw<false>, kIn01}},
      {"fmod.Scalar", {same_bw}},
      {"remainder.Scalar", {same_bw}},
      {"atan2", {atan2_bw, kIn01}},
      {"hypot", {hypot_bw, kIn01, kOut0}},
      {"logaddexp", {logaddexp_bw, kIn01}},
      {"xlogy", {xlogy_bw, kIn01}},
      {"copysign", {copysign_bw, kIn0, kOut0}},
      {"clamp", {clamp_bw, kIn0}},
      {"clamp_min", {clamp_min_bw, kIn0}},
      {"clamp_max", {clamp_max_bw, kIn0}},
      {"clamp.Tensor", {clamp_tensor_bw, kIn012}},
      {"nan_to_num", {nan_to_num_bw, kIn0}},
      {"masked_fill", {masked_fill_bw, kIn1}},
      {"lerp.Scalar", {lerp_scalar_bw}},
      {"lerp", {lerp_bw, kIn012}},
      {"addcmul", {addcmul_bw, kIn12}},
      {"addcdiv", {addcdiv_bw, kIn12}},
      {"add_", {add_bw}},
      {"sub_", {sub_bw}},
      // In place: the formulas of the out-of-place ops (input 0 saved is self's old value).
      {"mul_", {mul_bw, kIn01}},
      {"div_", {div_bw, kIn01}},
      {"add_.Scalar", {same_bw}},
      {"sub_.Scalar", {same_bw}},
      {"mul_.Scalar", {mul_scalar_bw}},
      {"div_.Scalar", {div_scalar_bw}},
      {"copy_", {overwrite_bw}},
      {"fill_.Scalar", {overwrite_bw}},
      {"zero_", {overwrite_bw}},
  };
  auto it = table->find(std::string(name));
  return it == table->end() ? PointwiseGrad{} : it->second;
}

}  // namespace dtensor::detail
