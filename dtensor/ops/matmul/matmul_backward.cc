// Backward formulas of the matrix products, written with DTensor products (so the Megatron
// rows apply in backward too: a column-parallel weight's gradient comes out sharded like the
// weight, the input gradient of a column-parallel layer Partial).
#include "dtensor/ops/matmul/detail/matmul_backward.h"

#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

DTensorList mm_backward(const BackwardContext& c, Grads g) {
  DTensorList out(2);
  if (c.needs_input_grad(0)) out[0] = mm(g[0], t(c.input(1)));
  if (c.needs_input_grad(1)) out[1] = mm(t(c.input(0)), g[0]);
  return out;
}

DTensorList bmm_backward(const BackwardContext& c, Grads g) {
  DTensorList out(2);
  if (c.needs_input_grad(0)) out[0] = bmm(g[0], transpose(c.input(1), 1, 2));
  if (c.needs_input_grad(1)) out[1] = bmm(transpose(c.input(0), 1, 2), g[0]);
  return out;
}

// torch.matmul's rules: a 1-d left operand is a row [1, k], a 1-d right one a column [k, 1]
// (the size-1 dim removed from the result), batch dims broadcast. The gradient restores the
// removed dims, multiplies, and sums the broadcast batch dims back (reduce_to).
DTensorList matmul_backward(const BackwardContext& c, Grads g) {
  const DTensor& a = c.input(0);
  const DTensor& b = c.input(1);
  const DTensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  const DTensor b2 = b.dim() == 1 ? unsqueeze(b, -1) : b;
  DTensor g2 = g[0];
  if (a.dim() == 1) g2 = unsqueeze(g2, g2.dim() - (b.dim() == 1 ? 0 : 1));
  if (b.dim() == 1) g2 = unsqueeze(g2, -1);
  DTensorList out(2);
  if (c.needs_input_grad(0)) {
    DTensor ga = matmul(g2, transpose(b2, -1, -2));
    if (a.dim() == 1) ga = squeeze(reduce_to(ga, a2.spec()), 0);
    out[0] = reduce_to(ga, c.input_spec(0));
  }
  if (c.needs_input_grad(1)) {
    DTensor gb = matmul(transpose(a2, -1, -2), g2);
    if (b.dim() == 1) gb = squeeze(reduce_to(gb, b2.spec()), -1);
    out[1] = reduce_to(gb, c.input_spec(1));
  }
  return out;
}

// beta * bias + alpha * mat1 @ mat2.
namespace {
// beta * self + alpha * product(a, b), product = mm or bmm over the last two dims.
DTensorList add_product_backward(const BackwardContext& c, Grads g,
                                 DTensor (*product)(const DTensor&, const DTensor&)) {
  const Scalar beta = c.scalar(0), alpha = c.scalar(1);
  const auto tr = [](const DTensor& x) { return transpose(x, -2, -1); };
  DTensorList out(3);
  if (c.needs_input_grad(0)) out[0] = reduce_to(g[0] * beta, c.input_spec(0));
  if (c.needs_input_grad(1)) out[1] = product(g[0], tr(c.input(2))) * alpha;
  if (c.needs_input_grad(2)) out[2] = product(tr(c.input(1)), g[0]) * alpha;
  return out;
}
}  // namespace

DTensorList addmm_backward(const BackwardContext& c, Grads g) {
  return add_product_backward(c, g, &mm);
}

DTensorList baddbmm_backward(const BackwardContext& c, Grads g) {
  return add_product_backward(c, g, &bmm);
}

// x[..., in] @ weight[out, in]^T (+ bias[out]): the weight's gradient contracts every leading
// dim at once (g and x flattened to 2-d), the bias's sums them.
DTensorList linear_backward(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor& w = c.input(1);
  DTensorList out(c.num_inputs());
  if (c.needs_input_grad(0)) out[0] = matmul(g[0], w);
  if (c.needs_input_grad(1)) {
    // Rows (x's leading dims) counted, not inferred with -1: ambiguous for 0 features.
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
    const int64_t g_rows[] = {rows, w.size(0)}, x_rows[] = {rows, w.size(1)};
    out[1] = mm(t(reshape(g[0], g_rows)), reshape(x, x_rows));
  }
  if (c.num_inputs() == 3 && c.needs_input_grad(2)) out[2] = reduce_to(g[0], c.input_spec(2));
  return out;
}

// d/da = g b, d/db = g a (g is 0-d).
DTensorList dot_backward(const BackwardContext& c, Grads g) {
  return DTensorList{c.needs_input_grad(0) ? g[0] * c.input(1) : DTensor(),
                     c.needs_input_grad(1) ? g[0] * c.input(0) : DTensor()};
}

// d/da = g @ b, d/db = a @ g.
DTensorList outer_backward(const BackwardContext& c, Grads g) {
  return DTensorList{c.needs_input_grad(0) ? dtensor::matmul(g[0], c.input(1)) : DTensor(),
                     c.needs_input_grad(1) ? dtensor::matmul(c.input(0), g[0]) : DTensor()};
}

}  // namespace dtensor::detail
