// The blocked attention passes (attention.h), written with the op library's tensor ops so they
// run on the CPU and on CUDA alike.
//
// Forward, per block of kBlock query rows: for each block of kBlock keys, the scores
// s = q_i k_j^T * scale (masked entries -inf), then the online softmax update
//   m' = max(m, rowmax(s)),  p = exp(s - m'),  l = l e^(m - m') + rowsum(p),
//   acc = acc e^(m - m') + p v_j,
// and out_i = acc / l, lse_i = m + log(l). p is taken from the block's own softmax (the
// library's vectorised row kernel, which also gives the row's max and sum) rescaled per row, so
// the big [rows, keys] block is read by the GEMMs and the softmax's two passes only (a
// broadcast subtraction over it costs several times more). Backward, with
// D = rowsum(dO * O) - dlse: per block, p = exp(s - lse), dv_j += p^T dO_i,
// ds = p * (dO_i v_j^T - D_i), dq_i += ds k_j * scale, dk_j += ds^T q_i * scale, each GEMM
// accumulating in place into its C (-lse and -D as the C of s and dp; the gradients'
// blocks), with the scale as its alpha. A max of
// -inf (a row that has seen no key yet) shifts by 0, so masked entries give exp(-inf) = 0 and
// never NaN.
#include <absl/strings/str_format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/common/detail/attention_checks.h"
#include "dtensor/ops/common/detail/gemm.h"
#include "dtensor/ops/common/detail/softmax_stats.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr int64_t kBlock = 128;
// The backward's block under causality: finer blocks skip more of the hidden triangle (at
// [4, 8, 128, 32], 64 takes the backward from 2.6 to 2.1 ms; at [2, 8, 512, 64], 24.5 to
// 21.6 ms). Without causality 128 is faster (more work per GEMM, fewer ops per block), and
// the forward keeps 128 either way: its running softmax pays per-block costs the backward,
// which shifts by the saved lse, does not.
constexpr int64_t kCausalBackwardBlock = 64;
constexpr double kInf = std::numeric_limits<double>::infinity();

DType accumulation_dtype(DType d) {
  return d == kFloat64 ? kFloat64 : kFloat32;
}

// The checked operands, flattened to [B * H, rows, cols] in the accumulation dtype, and the
// mask as an additive bias in the accumulation dtype: [1 or B * H, L, S], or [B or 1, H or 1,
// L, S] when it broadcasts over the batch or the heads (mask_per_head false: added to the
// scores viewed as [B, H, rows, cols], never expanded; a [B, 1, L, S] padding mask).
struct Operands {
  int64_t B = 0, H = 0, L = 0, S = 0, E = 0, Ev = 0;
  DType acc;
  Tensor q, k, v, mask;
  bool mask_per_head = true;
  AttentionParams p;
};

Operands prepare(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 const AttentionParams& p) {
  DT_CHECK(q.defined() && k.defined() && v.defined(), "[%s] q, k and v must be defined", kOp);
  detail::check_attention_operands(kOp, q.sizes(), k.sizes(), v.sizes(), q.dtype(), k.dtype(),
                                   v.dtype());
  Operands o;
  o.B = q.size(0), o.H = q.size(1), o.L = q.size(2), o.E = q.size(3);
  o.S = k.size(2), o.Ev = v.size(3);
  o.acc = accumulation_dtype(q.dtype());
  o.p = p;
  const int64_t bh = o.B * o.H;
  o.q = q.to(o.acc).contiguous().reshape({bh, o.L, o.E});
  o.k = k.to(o.acc).contiguous().reshape({bh, o.S, o.E});
  o.v = v.to(o.acc).contiguous().reshape({bh, o.S, o.Ev});
  if (mask.defined()) {
    detail::check_attention_mask(kOp, mask.sizes(), mask.dtype(), q.sizes(), k.sizes(), q.dtype());
    const bool two_d = mask.dim() == 2;
    // A mask broadcast over the heads ([B, 1, L, S], a padding mask) or the batch stays as it
    // is: one copy per batch row, not one per head.
    o.mask_per_head = two_d || (mask.size(1) == o.H && mask.size(0) == o.B);
    // Taken as an additive bias (0 or -inf for a bool mask): adding a bias broadcast over the
    // leading dim is the elementwise library's fast path, a masked fill is not.
    const Tensor m = mask.dtype() == kBool
                         ? masked_fill(zeros(mask.sizes(), TensorOptions(o.acc, mask.device())),
                                       logical_not(mask), Scalar(-kInf))
                         : mask.to(o.acc);
    o.mask = o.mask_per_head ? m.contiguous().reshape({two_d ? 1 : bh, o.L, o.S}) : m.contiguous();
  }
  return o;
}

// The key blocks query rows [i0, i0 + bq) can see: all, or under `causal` those starting at or
// before the last row's global index.
int64_t visible_keys(const Operands& o, int64_t i0, int64_t bq) {
  if (!o.p.causal) return o.S;
  return std::clamp<int64_t>(o.p.q_offset + i0 + bq, 0, o.S);
}

// Sets the entries (r, c) of the contiguous block `s` ([B * H, bq, bk]) with c - r > d to -inf
// in place (d: the block's first row's global index minus its first key's). A masked fill (a
// `where`: a new block, a pass reading a bool mask) took the causal forward at [4, 8, 128, 32]
// from 0.55 to 0.80 ms on one thread; these fills write the hidden entries only, in about
// 2 sqrt(bq) strided fills: the rows in groups of g, each group one rectangle (the keys past
// its last row's diagonal), and the g - 1 diagonals d + 1 .. d + g - 1 across all rows (the
// staircase left inside each group); 0.58 ms (bench_kernels medians).
void hide_future_keys(const Tensor& s, int64_t d) {
  const int64_t bq = s.size(1), bk = s.size(2);
  const int64_t g = std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(bq))));
  const Tensor flat = s.view({s.size(0), bq * bk});  // the diagonals as strided slices
  for (int64_t k = d + 1; k < d + g && k < bk; ++k) {
    const int64_t r0 = std::max<int64_t>(0, -k);  // the first row with key r + k >= 0
    const int64_t n = std::min(bq, bk - k) - r0;
    if (n <= 0) continue;
    const int64_t start = r0 * (bk + 1) + k;
    flat.slice(1, start, start + (n - 1) * (bk + 1) + 1, bk + 1).fill_(Scalar(-kInf));
  }
  for (int64_t r0 = 0; r0 < bq; r0 += g) {
    const int64_t c0 = std::clamp<int64_t>(r0 + g + d, 0, bk);
    if (c0 < bk) s.narrow(1, r0, std::min(g, bq - r0)).narrow(2, c0, bk - c0).fill_(Scalar(-kInf));
  }
}

// Scores of query rows [i0, i0 + bq) against keys [j0, j0 + bk), plus `row_term` ([B * H, bq, 1]
// per-row values, or undefined): [B * H, bq, bk], -inf where the mask or causality hides the
// key. One GEMM with the scale as its alpha and the biases (when there are any) as its C, so
// the block is not read again to scale or shift it. The biases are written into the block in
// place, the row term first (a broadcast copy), then the mask added (contiguous along the keys,
// the elementwise library's fast path); causality is set after the GEMM (diagonal blocks).
Tensor scores(const Operands& o, const Tensor& qi, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
              const Tensor& row_term = Tensor()) {
  Tensor s = empty({qi.size(0), bq, bk}, TensorOptions(o.acc, qi.device()));
  bool biased = false;
  const auto put_into = [&](Tensor block, const Tensor& bias) {
    if (biased) {
      add_(block, bias);
    } else {
      block.copy_(bias);
    }
    biased = true;
  };
  const auto put = [&](const Tensor& bias) { put_into(s, bias); };
  if (row_term.defined()) put(row_term);
  if (o.mask.defined() && o.mask_per_head) put(o.mask.narrow(1, i0, bq).narrow(2, j0, bk));
  if (o.mask.defined() && !o.mask_per_head) {
    // The block viewed as [B, H, bq, bk] takes the [B or 1, H or 1, bq, bk] mask broadcast.
    put_into(s.view({o.B, o.H, bq, bk}), o.mask.narrow(2, i0, bq).narrow(3, j0, bk));
  }
  detail::baddbmm_into(s, qi, o.k.narrow(1, j0, bk).transpose(1, 2), biased ? 1 : 0,
                       Scalar(o.p.scale));
  const int64_t first_row = o.p.q_offset + i0;
  if (o.p.causal && j0 + bk - 1 > first_row) {  // the block reaches past the diagonal
    // Hidden keys are set to -inf, not shifted by it: a NaN or +inf score (from q, k or the
    // mask) behind the diagonal would stay NaN and poison the row, where PyTorch's causal
    // attention and the composite backward (attention_backward.cc) ignore it.
    hide_future_keys(s, first_row - j0);
  }
  return s;
}

// Whether some query row of [i0, i0 + bq) may see no key of the block starting at j0: under a
// mask, or under causality when the block starts past the first row's diagonal.
bool may_have_dead_rows(const Operands& o, int64_t i0, int64_t j0) {
  return o.mask.defined() || (o.p.causal && o.p.q_offset + i0 < j0);
}

// x with -inf replaced by 0 (the shift of a row that has seen no key).
Tensor finite_shift(const Tensor& x) {
  return masked_fill(x, eq(x, Scalar(-kInf)), Scalar(0.0));
}

// Rows [0, n) of dim 1 of `block` (the block itself when it has n rows: contiguous, so a GEMM
// accumulates into it in place).
Tensor first_rows(const Tensor& block, int64_t n) {
  return n == block.size(1) ? block : block.narrow(1, 0, n);
}

// Writes `value` into rows [i0, i0 + n) of dim 1 of `dst`.
void write_rows(const Tensor& dst, int64_t i0, const Tensor& value) {
  dst.narrow(1, i0, value.size(1)).copy_(value);
}

}  // namespace

namespace detail {

void check_attention_operands(std::string_view op, IntSpan q, IntSpan k, IntSpan v, DType q_dtype,
                              DType k_dtype, DType v_dtype) {
  DT_CHECK(q.size() == 4 && k.size() == 4 && v.size() == 4,
           "[%s] q, k and v must be 4-d [batch, heads, seq, head_dim], got %s, %s and %s", op,
           shape_str(q), shape_str(k), shape_str(v));
  DT_CHECK(is_floating(q_dtype) && k_dtype == q_dtype && v_dtype == q_dtype,
           "[%s] q, k and v must share one floating dtype, got %s, %s and %s", op,
           dtype_name(q_dtype), dtype_name(k_dtype), dtype_name(v_dtype));
  DT_CHECK(
      k[0] == q[0] && k[1] == q[1] && k[3] == q[3] && v[0] == q[0] && v[1] == q[1] && v[2] == k[2],
      "[%s] shapes q %s, k %s, v %s do not fit (expected q [B, H, L, E], k [B, H, S, E], "
      "v [B, H, S, Ev])",
      op, shape_str(q), shape_str(k), shape_str(v));
}

void check_attention_mask(std::string_view op, IntSpan mask, DType mask_dtype, IntSpan q, IntSpan k,
                          DType q_dtype) {
  DT_CHECK(mask_dtype == kBool || mask_dtype == q_dtype,
           "[%s] the mask has dtype %s, expected bool or q's dtype %s", op, dtype_name(mask_dtype),
           dtype_name(q_dtype));
  const Shape two = {q[2], k[2]};
  const Shape four = {q[0], q[1], q[2], k[2]};
  // 4-d: PyTorch's broadcast over the batch and the heads (size 1 there) is accepted.
  const bool fits_four = mask.size() == 4 && (mask[0] == q[0] || mask[0] == 1) &&
                         (mask[1] == q[1] || mask[1] == 1) && mask[2] == q[2] && mask[3] == k[2];
  DT_CHECK(IntSpan(two) == mask || fits_four,
           "[%s] the mask has shape %s, expected %s or %s (a size 1 broadcast in dim 0 or 1)", op,
           shape_str(mask), shape_str(two), shape_str(four));
}

}  // namespace detail

double default_attention_scale(int64_t head_dim) {
  return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
}

AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, const AttentionParams& p) {
  const Operands o = prepare(q, k, v, mask, p);
  const int64_t bh = o.B * o.H;
  const TensorOptions acc(o.acc, q.device());
  Tensor out = zeros({bh, o.L, o.Ev}, acc);
  Tensor lse = full({bh, o.L, 1}, Scalar(-kInf), acc);
  if (bh > 0) {
    for (int64_t i0 = 0; i0 < o.L; i0 += kBlock) {
      const int64_t bq = std::min(kBlock, o.L - i0);
      const Tensor qi = o.q.narrow(1, i0, bq);
      // Running state of the rows: max m, sum l (of exp(s - m)) and the normalised output a
      // (the l-weighted average of the blocks' outputs).
      Tensor m, l, a;
      const int64_t keys = visible_keys(o, i0, bq);
      for (int64_t j0 = 0; j0 < keys; j0 += kBlock) {
        const int64_t bk = std::min(kBlock, keys - j0);
        const Tensor s = scores(o, qi, i0, bq, j0, bk);
        // The block's own softmax (the vectorised row kernel: two passes) with its row max m_b
        // and row sum l_b, from the same passes on the CPU. A mask, or causality in a key block
        // past a row's diagonal, can leave a row of the block without keys: such rows (m_b =
        // -inf, probabilities NaN) contribute nothing. Without either, every row sees every
        // key, and the masking passes are skipped.
        const detail::SoftmaxStats st = detail::softmax_with_stats(s);
        const Tensor& m_b = st.row_max;
        Tensor l_b = st.row_sum;
        Tensor part = bmm(st.out, o.v.narrow(1, j0, bk));
        if (may_have_dead_rows(o, i0, j0)) {
          const Tensor dead = eq(m_b, Scalar(-kInf));
          l_b = masked_fill(l_b, dead, Scalar(0.0));
          part = masked_fill(part, dead.expand({bh, bq, o.Ev}), Scalar(0.0));
        }
        if (j0 == 0) {  // the first block is the whole state so far
          m = m_b, l = l_b, a = part;
          continue;
        }
        const Tensor m_new = maximum(m, m_b);
        const Tensor shift = finite_shift(m_new);
        const Tensor kept = mul(l, exp(sub(m, shift)));
        const Tensor l_new = add(kept, mul(l_b, exp(sub(m_b, shift))));
        // a' = part + (a - part) * kept / l' (rows with l' = 0 keep a = 0).
        const Tensor alpha = masked_fill(div(kept, l_new), eq(l_new, Scalar(0.0)), Scalar(1.0));
        a = add(part, mul(sub(a, part), alpha));
        m = m_new, l = l_new;
      }
      if (keys == 0) continue;  // no key at all: out 0, lse -inf as initialised
      write_rows(out, i0, a);
      write_rows(lse, i0, add(finite_shift(m), log(l)));
    }
  }
  return {out.reshape({o.B, o.H, o.L, o.Ev}).to(q.dtype()), lse.reshape({o.B, o.H, o.L})};
}

AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& grad_lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& p) {
  const Operands o = prepare(q, k, v, mask, p);
  const int64_t bh = o.B * o.H;
  DT_CHECK(grad_out.defined() && grad_out.sizes() == out.sizes() && out.dim() == 4 &&
               out.size(0) == o.B && out.size(1) == o.H && out.size(2) == o.L &&
               out.size(3) == o.Ev && lse.defined() && lse.numel() == bh * o.L &&
               grad_lse.defined() && grad_lse.numel() == bh * o.L,
           "[%s_backward] grad %s, out %s and lse %s do not fit q %s and v %s", kOp,
           shape_str(grad_out.sizes()), shape_str(out.sizes()), shape_str(lse.sizes()),
           shape_str(q.sizes()), shape_str(v.sizes()));
  const TensorOptions acc(o.acc, q.device());
  const Tensor dout = grad_out.to(o.acc).contiguous().reshape({bh, o.L, o.Ev});
  // ds = p * (dp - D) with D = rowsum(dO * O) - grad_lse (the lse's own gradient is p * g).
  // The row terms enter the GEMMs as their C: -D, and -lse for p = exp(s - lse) (lse as the
  // forward's shift, 0 for a row without keys).
  const Tensor neg_d = sub(grad_lse.to(o.acc).contiguous().reshape({bh, o.L, 1}),
                           sum(mul(dout, out.to(o.acc).contiguous().reshape({bh, o.L, o.Ev})), {2},
                               /*keepdim=*/true));
  const Tensor neg_shift = neg(finite_shift(lse.to(o.acc).contiguous().reshape({bh, o.L, 1})));
  // Gradients accumulate in place, one contiguous block per query or key block (the GEMMs'
  // C), joined at the end; the scale of ds enters dq and dk as the GEMMs' alpha.
  const int64_t block = p.causal ? kCausalBackwardBlock : kBlock;
  const int64_t key_blocks = (o.S + block - 1) / block;
  std::vector<Tensor> dq_blocks, dk_blocks, dv_blocks;
  for (int64_t jb = 0; jb < key_blocks; ++jb) {
    const int64_t bk = std::min(block, o.S - jb * block);
    dk_blocks.push_back(zeros({bh, bk, o.E}, acc));
    dv_blocks.push_back(zeros({bh, bk, o.Ev}, acc));
  }
  const Scalar scale(p.scale);
  for (int64_t i0 = 0; i0 < o.L; i0 += block) {
    const int64_t bq = std::min(block, o.L - i0);
    const Tensor qi = o.q.narrow(1, i0, bq);
    const Tensor doi = dout.narrow(1, i0, bq);
    const Tensor neg_di = neg_d.narrow(1, i0, bq);
    const Tensor neg_li = neg_shift.narrow(1, i0, bq);
    Tensor dqi = zeros({bh, bq, o.E}, acc);
    const int64_t keys = bh > 0 ? visible_keys(o, i0, bq) : 0;
    for (int64_t j0 = 0; j0 < keys; j0 += block) {
      const int64_t bk = std::min(block, keys - j0);
      const size_t jb = static_cast<size_t>(j0 / block);
      const Tensor kj = o.k.narrow(1, j0, bk), vj = o.v.narrow(1, j0, bk);
      const Tensor pr = exp(scores(o, qi, i0, bq, j0, bk, neg_li));
      detail::baddbmm_into(first_rows(dv_blocks[jb], bk), pr.transpose(1, 2), doi, 1, 1);
      // ds = p * (dp - D), dp - D from one GEMM with -D as its C.
      Tensor ds = empty({bh, bq, bk}, acc);
      ds.copy_(neg_di);
      detail::baddbmm_into(ds, doi, vj.transpose(1, 2), 1, 1);
      mul_(ds, pr);
      detail::baddbmm_into(dqi, ds, kj, 1, scale);
      detail::baddbmm_into(first_rows(dk_blocks[jb], bk), ds.transpose(1, 2), qi, 1, scale);
    }
    dq_blocks.push_back(dqi);
  }
  const auto joined = [&](const std::vector<Tensor>& blocks, int64_t rows, int64_t cols) {
    if (blocks.empty()) return zeros({bh, rows, cols}, acc);
    return blocks.size() == 1 ? blocks[0] : cat(blocks, 1);
  };
  return {joined(dq_blocks, o.L, o.E).reshape({o.B, o.H, o.L, o.E}).to(q.dtype()),
          joined(dk_blocks, o.S, o.E).reshape({o.B, o.H, o.S, o.E}).to(q.dtype()),
          joined(dv_blocks, o.S, o.Ev).reshape({o.B, o.H, o.S, o.Ev}).to(q.dtype())};
}

}  // namespace dtensor
