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
  register_batch_norm_ops(registry);
  register_group_norm_ops(registry);
  register_embedding_ops(registry);
  register_index_ops(registry);
  register_advanced_index_ops(registry);
  register_masked_select_ops(registry);
  register_loss_ops(registry);
  register_scan_ops(registry);
  register_attention_ops(registry);
  register_distance_ops(registry);
  register_conv_ops(registry);
  register_pool_ops(registry);
}

namespace detail {

// The umbrella's anchor (dtensor/dtensor.h): referencing it makes a program need this library,
// whose loading installs the view hooks (view/view_dtensor.cc) and loads autograd, which
// installs the autograd hooks.
bool anchor_ops_and_autograd() {
  return true;
}

}  // namespace detail

}  // namespace dtensor
