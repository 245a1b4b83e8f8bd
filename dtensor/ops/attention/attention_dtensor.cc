// The DTensor form of scaled_dot_product_attention (registered in attention_strategy.cc).
#include <absl/strings/str_format.h>

#include <optional>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/common/detail/attention_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// The forward ops registered in attention_strategy.cc.
constexpr const char* kForward = "scaled_dot_product_attention";
constexpr const char* kForwardMask = "scaled_dot_product_attention.mask";

}  // namespace

DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     const DTensor& attn_mask, double dropout_p, bool is_causal,
                                     std::optional<double> scale, bool enable_gqa,
                                     CausalAlign causal_align) {
  static const OpInfo& op = ops_op(kForward);
  static const OpInfo& op_mask = ops_op(kForwardMask);
  DT_CHECK(dropout_p == 0.0,
           "[%s] dropout_p %g: dropout in attention is done by "
           "nn::functional::scaled_dot_product_attention, not supported at this level (expected "
           "0)",
           kForward, dropout_p);
  DT_CHECK(q.defined() && k.defined() && v.defined(), "[%s] q, k and v must be defined", kForward);
  const double s = scale ? *scale : default_attention_scale(q.dim() == 4 ? q.size(3) : 0);
  // The alignment only matters under causality: keyed as false otherwise, so both spellings of
  // a non-causal call share one cache entry.
  const bool lower_right = is_causal && causal_align == CausalAlign::kLowerRight;
  const ArgValue args[] = {s, is_causal, lower_right};
  if (enable_gqa && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.size(1) != q.size(1)) {
    const int64_t h = q.size(1), hk = k.size(1);
    DT_CHECK(hk > 0 && h % hk == 0 && v.size(1) == hk,
             "[%s] enable_gqa: q has %d heads, k %d and v %d (expected k and v to have one head "
             "count dividing q's)",
             kForward, h, hk, v.size(1));
    const DTensor kr = repeat_interleave(k, h / hk, 1), vr = repeat_interleave(v, h / hk, 1);
    return scaled_dot_product_attention(q, kr, vr, attn_mask, 0.0, is_causal, s, false,
                                        causal_align);
  }
  if (attn_mask.defined()) return dispatch_multi(op_mask, {&q, &k, &v, &attn_mask}, args)[0];
  return dispatch_multi(op, {&q, &k, &v}, args)[0];
}

}  // namespace dtensor
