// The registry the DTensor ops dispatch through: the process-wide op_registry() with every op
// family registered (once, on first use, thread-safe).
#pragma once

#include <string_view>

#include "dtensor/core/propagation/registry.h"

namespace dtensor {

// The process-wide op_registry() (dtensor/core/propagation/registry.h, empty until something
// registers into it) after register_all() has run on it: every op of the library. Named apart
// from op_registry(): it was ops_registry() (issue 41).
const Registry& registered_ops();
// The registered op `name` (e.g. "add", "sum", "mm"); throws "[Registry] unknown op 'x'".
// DTensor functions look their op up once and keep the reference (a function-local static).
const OpInfo& ops_op(std::string_view name);

// Adds a user op to the registry the library's ops live in, after them, so it is used exactly
// as they are: `info` is what each op family registers (see dtensor/ops/*/..._strategy.cc and
// docs/SEMANTICS.md, "User-registered ops"):
//   name, input_names          "my_op", {"self", "other"} (error messages name them)
//   schema_info.static_argnum  args from this index on enter the propagation cache key
//   meta                       global output shapes and dtypes; checks the arguments
//   strategy                   rows for ONE mesh dim, [outputs | inputs]; the engine adds the
//                              all-Replicate row, the Partial rows of `linearity`, and expands
//                              the rows over every mesh dim
//   kernel                     the local computation on each rank's shard
//   backward, saved_*          optional: the gradient, written with DTensor ops
//   samples                    sample calls; the strategy-validation, finite-difference and
//                              sharded-gradient suites check every op that has them
// Call it once per process on every rank (each rank has its own registry) before the op's
// first use, then call the op with dispatch / dispatch_multi (dtensor/autograd/dispatch.h) on the
// returned OpInfo. Throws "[register_op] op 'x' has no meta function" (likewise strategy,
// kernel), and "[Registry] op 'x' is already registered" for a name taken.
const OpInfo& register_op(OpInfo info);

}  // namespace dtensor
