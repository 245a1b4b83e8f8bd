// Test-only stand-in for ops/ops_registry.cc, linked into this folder's suites only while the
// ops library does not build ops_registry.cc yet (see tests.cmake): registers just the families
// these suites exercise.
#include "ops/ops_registry.h"

namespace dtensor {

void register_view_ops(Registry& registry);
void register_softmax_ops(Registry& registry);
void register_norm_ops(Registry& registry);
void register_embedding_ops(Registry& registry);

const Registry& ops_registry() {
  static const bool registered = [] {
    Registry& r = op_registry();
    register_view_ops(r);
    register_softmax_ops(r);
    register_norm_ops(r);
    register_embedding_ops(r);
    return true;
  }();
  (void)registered;
  return op_registry();
}

const OpInfo& ops_op(std::string_view name) {
  return ops_registry().get(name);
}

}  // namespace dtensor
