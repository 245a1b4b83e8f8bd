// The DTensor form of einsum (registered in einsum_strategy.cc).
#include <absl/container/inlined_vector.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/matmul/detail/einsum.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

DTensor einsum(std::string_view equation, absl::Span<const DTensor> operands) {
  static const OpInfo& info = ops_op("einsum");
  absl::InlinedVector<int64_t, 4> ranks;
  for (size_t i = 0; i < operands.size(); ++i) {
    DT_CHECK(operands[i].defined(), "[einsum] operand %d is an undefined DTensor", i);
    ranks.push_back(operands[i].dim());
  }
  // The plan's canonical texts live as long as the process: valid op string args.
  const detail::EinsumPlan& plan = detail::resolve_einsum("einsum", equation, ranks);
  detail::check_einsum_sizes("einsum", plan.eq, operands);
  if (operands.size() <= 2) {
    const ArgValue args[] = {std::string_view(plan.text)};
    return operands.size() == 1 ? dispatch(info, {&operands[0]}, args)
                                : dispatch(info, {&operands[0], &operands[1]}, args);
  }
  DTensor cur = operands[0];
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const ArgValue args[] = {std::string_view(plan.step_texts[k])};
    cur = dispatch(info, {&cur, &operands[k + 1]}, args);
  }
  return cur;
}

}  // namespace dtensor
