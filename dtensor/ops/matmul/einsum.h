// torch.einsum on local tensors and DTensors (einsum.cc: parsing and the local form;
// einsum_strategy.cc: the generated sharding rows, registration and backward).
//
// Equation grammar, as torch.einsum: one term per operand, separated by ',', each a run of
// letters [a-zA-Z] with at most one ellipsis '...'; then optionally '->' and the output term.
// Spaces are ignored; any other character (a tab, a newline) is refused, as torch does.
//   explicit  "ij,jk->ik"   the output holds exactly the letters given, in that order
//   implicit  "ij,jk"       the output is the ellipsis dims, then the letters that appear once in
//                           the whole equation, sorted (upper case before lower case, as torch)
// A letter missing from the output is summed over. A letter repeated within one operand takes
// that operand's diagonal ("ii->i", "ii->" is the trace); its sizes there must be equal. A
// letter shared by several operands must have equal sizes or size 1 there (size 1 broadcasts,
// as torch). The ellipsis covers the dims of an operand that its letters do not name, aligned
// from the right and broadcast across operands like NumPy batch dims; in an explicit output
// without '...' the ellipsis dims are summed over. Output letters must be distinct and appear
// in some operand. One operand or more; more than two are contracted left to right (torch's
// default order without opt_einsum), each step keeping the letters that later operands or the
// output still need.
//
// Local form: each pairwise step is permute / reshape / bmm (the matmul family's OpenBLAS and
// cuBLAS kernels, so CUDA tensors run on the GPU), with sum for letters of one operand only; a
// step already laid out as "mk,kn->mn" or "bmk,bkn->bmn" (equal sizes, no broadcast) is one mm /
// bmm call. Operands share one dtype (not bool) and device; the result has that dtype (int32
// included: a letter summed inside one operand is accumulated in int64 and cast back, so int32
// results wrap mod 2^32 like the int32 GEMM; torch.einsum instead returns int64 when it sums a
// letter of one operand only, e.g. "ij->j", and fails when such a sum meets a contraction) and
// is a fresh contiguous tensor, never sharing the operands' storage ("ij->ij" copies).
// Errors name the op, the argument and what was expected, e.g. "[einsum] operand 1 has 3 dims
// but the equation gives it 2 letters ('jk')".
#pragma once

#include <absl/types/span.h>

#include <string>
#include <string_view>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

Tensor einsum(std::string_view equation, absl::Span<const Tensor> operands);

// The DTensor form: the result equals einsum of the full tensors. One registered op "einsum"
// (one or two operands; more are chained left to right) whose strategy rows are generated from
// the equation for one mesh dim (PyTorch's _einsum_strategy.py): for every letter not repeated
// within an operand, every operand holding it at full size is sharded along it (an operand
// holding it with size 1 broadcasts and stays Replicate, as do operands without it) and the
// output is sharded along it when the output has it, Partial(sum) when it is summed over
// (contraction). Einsum is multilinear, so a Partial operand with the others replicated gives a
// Partial output; the all-Replicate row always exists. The equation is a static arg (in the
// propagation cache key). Differentiable: the gradient of each operand is another einsum (the
// output's gradient with the other operand), letters summed away inside one operand restored
// by expansion, size-1 broadcasts summed back, diagonals rebuilt with an identity.
DTensor einsum(std::string_view equation, absl::Span<const DTensor> operands);

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
