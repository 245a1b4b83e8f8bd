// The registry the DTensor ops dispatch through: the process-wide op_registry() with every op
// family registered (once, on first use, thread-safe).
#pragma once

#include <string_view>

#include "dtensor/propagation/registry.h"

namespace dtensor {

// op_registry() after register_all() has run on it.
const Registry& ops_registry();
// The registered op `name` (e.g. "add", "sum", "mm"); throws "[Registry] unknown op 'x'".
// DTensor functions look their op up once and keep the reference (a function-local static).
const OpInfo& ops_op(std::string_view name);

}  // namespace dtensor
