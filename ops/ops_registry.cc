#include "ops/ops_registry.h"

#include "ops/register_all.h"

namespace dtensor {

const Registry& ops_registry() {
  static const bool registered = [] {
    register_all(op_registry());
    return true;
  }();
  (void)registered;
  return op_registry();
}

const OpInfo& ops_op(std::string_view name) {
  return ops_registry().get(name);
}

}  // namespace dtensor
