#include "dtensor/ops/ops_registry.h"

#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

const Registry& registered_ops() {
  static const bool registered = [] {
    register_all(op_registry());
    return true;
  }();
  (void)registered;
  return op_registry();
}

const OpInfo& ops_op(std::string_view name) {
  return registered_ops().get(name);
}

const OpInfo& register_op(OpInfo info) {
  registered_ops();  // the library's ops first: their names are taken
  DT_CHECK(!info.name.empty(), "[register_op] the op has no name");
  DT_CHECK(static_cast<bool>(info.meta), "[register_op] op '%s' has no meta function", info.name);
  DT_CHECK(static_cast<bool>(info.strategy), "[register_op] op '%s' has no strategy function",
           info.name);
  DT_CHECK(static_cast<bool>(info.kernel), "[register_op] op '%s' has no kernel", info.name);
  return op_registry().add(std::move(info));
}

}  // namespace dtensor
