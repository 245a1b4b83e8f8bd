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

}  // namespace dtensor
