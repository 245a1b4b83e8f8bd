// einsum's resolved equations, plans and rows (einsum.cc), shared by einsum's and matmul's
// registration: internal to the matmul family, not installed.
#pragma once

#include "dtensor/ops/matmul/einsum.h"

namespace dtensor {

namespace detail {

// An equation resolved against its operands' ranks: one term per operand and the output, as
// letters only (each ellipsis dim named by a letter the equation does not use), explicit.
struct EinsumEquation {
  std::vector<std::string> inputs;
  std::string output;
  std::string ellipsis;  // the letters naming the ellipsis dims (error messages)
  // "ij,jk->ik": the canonical text of the resolved equation.
  std::string str() const;
};

// Parses `equation` for operands of `shapes` and checks it against them (term count, letters
// per operand, repeated letters' sizes, shared letters' sizes equal or 1, output letters).
// Throws "[op] ..." naming the operand and what was expected.
EinsumEquation parse_einsum(std::string_view op, std::string_view equation,
                            absl::Span<const Shape> shapes);

// A resolved equation as cached by resolve_einsum: its canonical text (eq.str()) and, for more
// than two operands, the pairwise steps (einsum_steps) with theirs. Plans are never freed, so
// `text` and `step_texts` may be op string args (the propagation cache keeps them).
struct EinsumPlan {
  EinsumEquation eq;
  std::string text;
  std::vector<EinsumEquation> steps;
  std::vector<std::string> step_texts;
};

// The plan of `equation` for operands of `ranks`: everything parse_einsum resolves and checks
// except the sizes (check_einsum_sizes). Cached by (equation text, ranks): a thread-local table
// (no lock) in front of a process-wide one (under a mutex); only valid equations are cached, so
// a hit never throws. Throws as parse_einsum.
const EinsumPlan& resolve_einsum(std::string_view op, std::string_view equation,
                                 absl::Span<const int64_t> ranks);

// parse_einsum's size checks (repeated letters' sizes equal, shared letters' sizes equal or 1)
// of a resolved equation against its operands; allocation-free.
void check_einsum_sizes(std::string_view op, const EinsumEquation& eq,
                        absl::Span<const Tensor> operands);
void check_einsum_sizes(std::string_view op, const EinsumEquation& eq,
                        absl::Span<const DTensor> operands);

// The size of every letter of `eq` over operands of `shapes` (sizes equal, or 1 broadcast to
// the other size), indexed by the letter's char (-1 for letters not used). Throws "[op] letter
// 'j' has size 3 in operand 0 and 4 in operand 1 (sizes must be equal or 1)".
std::vector<int64_t> einsum_letter_sizes(const EinsumEquation& eq, absl::Span<const Shape> shapes,
                                         std::string_view op = "einsum");

// The pairwise steps of a resolved equation with more than two operands, left to right: step k
// multiplies the result so far (step 0: operand 0) by operand k + 1, keeping the letters that
// later operands or the output need. One or two operands: the equation itself.
std::vector<EinsumEquation> einsum_steps(const EinsumEquation& eq);

// The local form of a resolved equation (no argument checks beyond the shapes'). Always a fresh
// tensor of the operands' dtype.
Tensor einsum_local(const EinsumEquation& eq, absl::Span<const Tensor> operands);
// The same on a cached plan (its steps computed once).
Tensor einsum_local(const EinsumPlan& plan, absl::Span<const Tensor> operands);

// Strategy rows for one mesh dim generated from a resolved equation with one or two operands of
// `shapes` (see the DTensor einsum above): the output letters in output order, then the summed
// letters in order of first appearance. mm's rows are those of "mk,kn->mn", bmm's those of
// "bmk,bkn->bmn".
StrategyRows einsum_strategy_rows(const EinsumEquation& eq, absl::Span<const Shape> shapes);
StrategyRows einsum_strategy_rows(std::string_view equation, absl::Span<const Shape> shapes);

}  // namespace detail

}  // namespace dtensor
