// Attention's operand checks (attention_kernels.cc), shared by its registration and by
// dtensor/nn/functional.cc: a cross-family helper, not installed.
#pragma once

#include "dtensor/ops/attention/attention.h"

namespace dtensor {

namespace detail {
// The operand checks the kernels and the DTensor ops share (errors name `op`): q, k, v 4-d of
// one floating dtype with fitting shapes; the mask (when mask_shape is given) bool or of q's
// dtype, [L, S] or [B or 1, H or 1, L, S].
void check_attention_operands(std::string_view op, IntSpan q, IntSpan k, IntSpan v, DType q_dtype,
                              DType k_dtype, DType v_dtype);
void check_attention_mask(std::string_view op, IntSpan mask, DType mask_dtype, IntSpan q, IntSpan k,
                          DType q_dtype);
}  // namespace detail

}  // namespace dtensor
