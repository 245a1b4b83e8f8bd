// einsum as a registered op: strategy rows generated from the equation (PyTorch's
// _einsum_strategy.py, written for one mesh dim), meta, kernel, backward (another einsum per
// operand); the DTensor form is in einsum_dtensor.cc. For "bmk,bkn->bmn" the generator gives
//   b: [S(0) | S(0), S(0)]   batch letter (both operands and the output)
//   m: [S(1) | S(1), R]      left letter (first operand and the output)
//   n: [S(2) | R, S(2)]      right letter (second operand and the output)
//   k: [P    | S(2), S(1)]   contracted letter: each rank holds a partial sum
// and the engine adds [P | P, R], [P | R, P] (multilinear) and the all-Replicate row.
#include <absl/container/inlined_vector.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/matmul/detail/einsum.h"
#include "dtensor/ops/matmul/detail/einsum_backward.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {

StrategyRows einsum_strategy_rows(const EinsumEquation& e, absl::Span<const Shape> shapes) {
  const std::vector<int64_t> size = einsum_letter_sizes(e, shapes);
  // Output letters in output order, then summed letters in order of first appearance.
  std::string letters = e.output;
  for (const std::string& in : e.inputs) {
    for (char c : in) {
      if (letters.find(c) == std::string::npos) letters += c;
    }
  }
  StrategyRows rows;
  for (char c : letters) {
    // A letter repeated within an operand names a diagonal: a shard of one of its dims is not
    // a shard of the diagonal, so the letter gets no row.
    bool diagonal = false;
    for (const std::string& in : e.inputs) {
      diagonal |= std::count(in.begin(), in.end(), c) > 1;
    }
    if (diagonal) continue;
    const size_t o = e.output.find(c);
    Placements row = {o == std::string::npos ? Partial() : Shard(static_cast<int64_t>(o))};
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const size_t d = e.inputs[i].find(c);
      // An operand holding the letter with size 1 (broadcast) keeps it whole.
      const bool shard =
          d != std::string::npos && shapes[i][d] == size[static_cast<unsigned char>(c)];
      row.push_back(shard ? Shard(static_cast<int64_t>(d)) : Replicate());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

StrategyRows einsum_strategy_rows(std::string_view equation, absl::Span<const Shape> shapes) {
  return einsum_strategy_rows(parse_einsum("einsum", equation, shapes), shapes);
}

}  // namespace detail

namespace {

using detail::einsum_backward;

using detail::EinsumEquation;

std::vector<Shape> input_shapes(const OpSchema& s) {
  std::vector<Shape> shapes;
  for (int64_t i = 0; i < s.num_inputs(); ++i) shapes.push_back(s.input(i).shape());
  return shapes;
}

void check_operand_count(int64_t n) {
  DT_CHECK(n == 1 || n == 2,
           "[einsum] the registered op takes one or two operands, got %d (the einsum function "
           "chains more)",
           n);
}

EinsumEquation schema_equation(const OpSchema& s) {
  check_operand_count(s.num_inputs());
  return detail::parse_einsum("einsum", s.arg<std::string_view>(0), input_shapes(s));
}

}  // namespace

void register_einsum_ops(Registry& reg) {
  OpInfo op = detail::make_op("einsum", {"operand 0", "operand 1"}, Linearity::kMultilinear);
  op.meta = [](const OpSchema& s) {
    for (int64_t i = 1; i < s.num_inputs(); ++i) {
      DT_CHECK(s.input(i).dtype() == s.input(0).dtype(),
               "[einsum] operand %d has dtype %s, expected %s (operands share one dtype)", i,
               dtype_name(s.input(i).dtype()), dtype_name(s.input(0).dtype()));
    }
    DT_CHECK(s.input(0).dtype() != kBool,
             "[einsum] operand 0 has dtype bool, expected a numeric dtype");
    const std::vector<Shape> shapes = input_shapes(s);
    const EinsumEquation e = schema_equation(s);
    const std::vector<int64_t> size = detail::einsum_letter_sizes(e, shapes);
    Shape out;
    for (char c : e.output) out.push_back(size[static_cast<unsigned char>(c)]);
    return OutputMetas{TensorMeta(out, s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    return detail::einsum_strategy_rows(schema_equation(s), input_shapes(s));
  };
  // The arg is a canonical text the meta has checked against the global shapes; the local
  // shapes have the same ranks, so the cached plan (no parsing) is the local equation too.
  op.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    check_operand_count(static_cast<int64_t>(l.size()));
    absl::InlinedVector<int64_t, 2> ranks;
    for (const Tensor& t : l) ranks.push_back(t.dim());
    return detail::einsum_local(detail::resolve_einsum("einsum", c.arg<std::string_view>(0), ranks),
                                l);
  });
  op.backward = einsum_backward;
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        // mm, bmm, outer product, a two-letter contraction.
        {{sample({3 * w + 1, 2 * w}), sample({2 * w, 5})}, {std::string_view("mk,kn->mn")}},
        {{sample({w + 1, 3, 2 * w}), sample({w + 1, 2 * w, 4})},
         {std::string_view("bmk,bkn->bmn")}},
        {{sample({3 * w + 1}), sample({w + 2})}, {std::string_view("i,j->ij")}},
        {{sample({3, w + 1, 2 * w}), sample({2 * w, w + 1, 2})}, {std::string_view("ikl,lkj->ji")}},
        // Transpose only, a sum over one letter, a trace and a diagonal (repeated letters).
        {{sample({3 * w + 1, 2})}, {std::string_view("ij->ji")}},
        {{sample({3 * w + 1, w + 2})}, {std::string_view("ij->j")}},
        {{sample({w + 2, w + 2})}, {std::string_view("ii")}},
        {{sample({w + 1, 3, w + 1})}, {std::string_view("iji->ji")}},
        // A letter of one operand only (summed inside it), implicit output, a size-1 broadcast
        // of a batch letter and of a contracted letter, an ellipsis.
        {{sample({2 * w + 1, 3}), sample({3, w + 2})}, {std::string_view("ij,jk->k")}},
        {{sample({1, 3, w + 1}), sample({2 * w + 1, w + 1, 2})},
         {std::string_view("bij,bjk->bik")}},
        {{sample({2, 1}), sample({3 * w + 1, 2})}, {std::string_view("ik,jk")}},
        {{sample({2, w + 1, 3}), sample({3, 2 * w})}, {std::string_view("...ij,jk->...ik")}},
        // Rows that leave the last rank none.
        {{sample({detail::short_size(w), 3}), sample({3, 4})}, {std::string_view("mk,kn->mn")}},
    };
  };
  reg.add(std::move(op));
}

}  // namespace dtensor
