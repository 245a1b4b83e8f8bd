// The public matmul functions: mm, bmm, dot, outer, matmul, addmm, baddbmm and linear (argument
// checks, the operands prepared, the CPU / CUDA switch of gemm_driver) and the TF32 switch
// (public API in every build, harmless without CUDA).
#include "dtensor/ops/matmul/matmul.h"

#include <atomic>
#include <utility>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/matmul_cpu.h"
#include "dtensor/ops/matmul/detail/matmul_cuda.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

namespace {
std::atomic<bool> g_allow_tf32{false};

using detail::prepare_gemm_operand;

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  DT_CHECK(a.defined() && b.defined(), "[%s] expected defined tensors as operands", op);
  DT_CHECK(a.dtype() == b.dtype(), "[%s] expected operands of the same dtype, got %s and %s", op,
           dtype_name(a.dtype()), dtype_name(b.dtype()));
  DT_CHECK(a.device() == b.device(), "[%s] expected operands on the same device, got %s and %s", op,
           a.device().str(), b.device().str());
  DT_CHECK(a.dtype() != kBool, "[%s] expected a numeric dtype, got bool", op);
}

// Whether a tensor of shape `from` broadcasts to `to` without `to` growing (a bias or self into
// a GEMM's output).
bool broadcasts_to(IntSpan from, IntSpan to) {
  if (from.size() > to.size()) return false;
  for (size_t d = 1; d <= from.size(); ++d) {
    const int64_t f = from[from.size() - d];
    if (f != 1 && f != to[to.size() - d]) return false;
  }
  return true;
}

// Integer operands take integer beta and alpha (as PyTorch): the GEMM would truncate 0.5 to 0.
void check_integral_scalars(DType dtype, const Scalar& beta, const Scalar& alpha, const char* op) {
  if (is_floating(dtype)) return;
  for (const auto& [name, v] : {std::pair{"beta", &beta}, std::pair{"alpha", &alpha}}) {
    DT_CHECK(v->kind() != Scalar::Kind::kDouble,
             "[%s] for integral input tensors, argument %s must not be a floating point number "
             "(got %g)",
             op, name, v->to_double());
  }
}

// Runs the product of prepared operands (detail::prepare_gemm_operand) into a new [out_shape]
// tensor of dtype `dtype`. `bias`, when given and beta != 0, is broadcast into the output first.
Tensor gemm_driver(const Tensor& a, const Tensor& b, DType dtype, IntSpan out_shape,
                   const Tensor* bias, const Scalar& alpha, const Scalar& beta) {
  if (a.device().is_cuda()) return detail::gemm_cuda(a, b, dtype, out_shape, bias, alpha, beta);
  return detail::gemm_cpu(a, b, dtype, out_shape, bias, alpha, beta);
}

}  // namespace

namespace detail {

// bmm's operands: a [B, n, k] and b [B, k, m].
void check_batched_matmul_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_operands(a, b, op);
  DT_CHECK(a.dim() == 3 && b.dim() == 3, "[%s] expected 3-d operands, got shapes %s and %s", op,
           shape_str(a.sizes()), shape_str(b.sizes()));
  DT_CHECK(a.size(0) == b.size(0), "[%s] batch sizes of shapes %s and %s differ (%d != %d)", op,
           shape_str(a.sizes()), shape_str(b.sizes()), a.size(0), b.size(0));
  DT_CHECK(a.size(2) == b.size(1), "[%s] shapes %s and %s cannot be multiplied (%d != %d)", op,
           shape_str(a.sizes()), shape_str(b.sizes()), a.size(2), b.size(1));
}

}  // namespace detail

void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow);
}
bool allow_tf32() {
  return g_allow_tf32.load();
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "mm");
  DT_CHECK(a.dim() == 2 && b.dim() == 2, "[mm] expected 2-d operands, got shapes %s and %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  DT_CHECK(a.size(1) == b.size(0), "[mm] shapes %s and %s cannot be multiplied (%d != %d)",
           shape_str(a.sizes()), shape_str(b.sizes()), a.size(1), b.size(0));
  const int64_t out_shape[] = {a.size(0), b.size(1)};
  return gemm_driver(prepare_gemm_operand(a), prepare_gemm_operand(b), a.dtype(), out_shape,
                     nullptr, 1, 0);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::check_batched_matmul_operands(a, b, "bmm");
  const int64_t out_shape[] = {a.size(0), a.size(1), b.size(2)};
  return gemm_driver(prepare_gemm_operand(a), prepare_gemm_operand(b), a.dtype(), out_shape,
                     nullptr, 1, 0);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "dot");
  DT_CHECK(a.dim() == 1 && b.dim() == 1 && a.size(0) == b.size(0),
           "[dot] expected two 1-d tensors of one size, got shapes %s and %s", shape_str(a.sizes()),
           shape_str(b.sizes()));
  return matmul(a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "outer");
  DT_CHECK(a.dim() == 1 && b.dim() == 1, "[outer] expected two 1-d tensors, got shapes %s and %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "matmul");
  DT_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "[matmul] expected operands with at least 1 dim, got shapes %s and %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t n = a2.size(-2), k = a2.size(-1), m = b2.size(-1);
  DT_CHECK(k == b2.size(-2), "[matmul] shapes %s and %s cannot be multiplied (%d != %d)",
           shape_str(a.sizes()), shape_str(b.sizes()), k, b2.size(-2));
  Tensor result;
  if (b2.dim() == 2) {
    // [..., n, k] @ [k, m]: fold the batch dims of a into the rows of one GEMM.
    Shape out_shape(a2.sizes().begin(), a2.sizes().end() - 2);
    const int64_t rows = shape_numel(out_shape) * n;
    const int64_t flat_a[] = {rows, k};
    const int64_t flat_out[] = {rows, m};
    const Tensor af = a2.dim() == 2 ? a2 : a2.reshape(flat_a);
    result = gemm_driver(prepare_gemm_operand(af), prepare_gemm_operand(b2), a.dtype(), flat_out,
                         nullptr, 1, 0);
    out_shape.push_back(n);
    out_shape.push_back(m);
    result = result.view(out_shape);
  } else {
    const IntSpan batch_a(a2.sizes().data(), a2.sizes().size() - 2);
    const IntSpan batch_b(b2.sizes().data(), b2.sizes().size() - 2);
    const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
    Shape shape_a = batch, shape_b = batch, shape_out = batch;
    shape_a.insert(shape_a.end(), {n, k});
    shape_b.insert(shape_b.end(), {k, m});
    shape_out.insert(shape_out.end(), {n, m});
    const Tensor ae = prepare_gemm_operand(a2).expand(shape_a);
    const Tensor be = prepare_gemm_operand(b2).expand(shape_b);
    result = gemm_driver(ae, be, a.dtype(), shape_out, nullptr, 1, 0);
  }
  if (b.dim() == 1) result = result.squeeze(-1);
  if (a.dim() == 1) result = result.squeeze(b.dim() == 1 ? -1 : -2);
  return result;
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta,
             const Scalar& alpha) {
  check_operands(a, b, "addmm");
  DT_CHECK(bias.defined(), "[addmm] expected a defined bias tensor");
  DT_CHECK(bias.dtype() == a.dtype() && bias.device() == a.device(),
           "[addmm] bias must have the operands' dtype and device, got %s on %s (expected %s on "
           "%s)",
           dtype_name(bias.dtype()), bias.device().str(), dtype_name(a.dtype()), a.device().str());
  DT_CHECK(a.dim() == 2 && b.dim() == 2, "[addmm] expected 2-d operands, got shapes %s and %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  DT_CHECK(a.size(1) == b.size(0), "[addmm] shapes %s and %s cannot be multiplied (%d != %d)",
           shape_str(a.sizes()), shape_str(b.sizes()), a.size(1), b.size(0));
  const int64_t out_shape[] = {a.size(0), b.size(1)};
  DT_CHECK(broadcasts_to(bias.sizes(), out_shape),
           "[addmm] bias of shape %s cannot be broadcast to the output shape %s",
           shape_str(bias.sizes()), shape_str(out_shape));
  check_integral_scalars(a.dtype(), beta, alpha, "addmm");
  return gemm_driver(prepare_gemm_operand(a), prepare_gemm_operand(b), a.dtype(), out_shape, &bias,
                     alpha, beta);
}

Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha) {
  detail::check_batched_matmul_operands(a, b, "baddbmm");
  DT_CHECK(self.defined() && self.dtype() == a.dtype() && self.device() == a.device(),
           "[baddbmm] self must be defined with the operands' dtype and device");
  const int64_t out_shape[] = {a.size(0), a.size(1), b.size(2)};
  DT_CHECK(broadcasts_to(self.sizes(), out_shape),
           "[baddbmm] self of shape %s cannot be broadcast to %s", shape_str(self.sizes()),
           shape_str(out_shape));
  check_integral_scalars(a.dtype(), beta, alpha, "baddbmm");
  // One GEMM with BLAS's alpha and beta (self broadcast into the output first), as addmm: no
  // separate passes to scale the product and add self.
  return gemm_driver(prepare_gemm_operand(a), prepare_gemm_operand(b), a.dtype(), out_shape, &self,
                     alpha, beta);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands(x, weight, "linear");
  DT_CHECK(weight.dim() == 2, "[linear] expected a 2-d weight [out, in], got shape %s",
           shape_str(weight.sizes()));
  DT_CHECK(x.dim() >= 1, "[linear] expected an input with at least 1 dim, got shape %s",
           shape_str(x.sizes()));
  const int64_t in = weight.size(1), out = weight.size(0);
  DT_CHECK(x.size(-1) == in,
           "[linear] input of shape %s and weight of shape %s do not match (in_features %d != "
           "%d)",
           shape_str(x.sizes()), shape_str(weight.sizes()), x.size(-1), in);
  if (bias.defined()) {
    DT_CHECK(bias.dtype() == x.dtype() && bias.device() == x.device(),
             "[linear] bias must have the input's dtype and device, got %s on %s (expected %s on "
             "%s)",
             dtype_name(bias.dtype()), bias.device().str(), dtype_name(x.dtype()),
             x.device().str());
    DT_CHECK(bias.dim() == 1 && bias.size(0) == out,
             "[linear] bias of shape %s does not match out_features %d (expected [%d])",
             shape_str(bias.sizes()), out, out);
  }
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t rows = shape_numel(out_shape);
  const int64_t flat_x[] = {rows, in};
  const int64_t flat_out[] = {rows, out};
  const Tensor xf = x.dim() == 2 ? x : x.reshape(flat_x);
  Tensor result =
      gemm_driver(prepare_gemm_operand(xf), prepare_gemm_operand(weight.transpose(0, 1)), x.dtype(),
                  flat_out, bias.defined() ? &bias : nullptr, 1, 1);
  out_shape.push_back(out);
  return result.view(out_shape);
}

}  // namespace dtensor
