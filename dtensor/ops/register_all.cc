#include "dtensor/ops/register_all.h"

namespace dtensor {

void register_all(Registry& registry) {
  register_elementwise_ops(registry);
  register_reduction_ops(registry);
  register_matmul_ops(registry);
  register_einsum_ops(registry);
  register_view_ops(registry);
  register_copy_ops(registry);
  register_softmax_ops(registry);
  register_norm_ops(registry);
  register_embedding_ops(registry);
  register_index_ops(registry);
  register_advanced_index_ops(registry);
  register_masked_select_ops(registry);
  register_loss_ops(registry);
  register_scan_ops(registry);
  register_attention_ops(registry);
}

}  // namespace dtensor
