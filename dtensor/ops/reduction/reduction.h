// Reductions on local tensors (PyTorch semantics).
//
// `dims` lists the dims to reduce (negative dims count from the end; an empty list reduces all
// dims, giving a 0-d tensor or, with keepdim, all size-1 dims). Reduced dims are removed from
// the result, or kept with size 1 when keepdim is true.
//
// Accumulation: floating inputs (float32, float64, float16, bfloat16) accumulate in double and
// round once to the output dtype (contiguous runs on the CPU in several double vector
// accumulators, so the additions are not in sequential order); integer and bool sums
// accumulate in int64 (wrapping on overflow). Reductions over zero elements: sum gives 0, mean
// and var give NaN, and max, min, amax, amin, argmax and argmin raise. NaN propagates through
// max/min/amax/amin, and argmax/argmin return the index of the first NaN; ties go to the first
// index.
#pragma once

#include <optional>
#include <utility>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Sum over dims. Integer and bool inputs give int64, floating inputs keep their dtype.
Tensor sum(const Tensor& x, IntSpan dims = {}, bool keepdim = false);
// Arithmetic mean over dims; floating inputs only (integer inputs raise, as in PyTorch).
Tensor mean(const Tensor& x, IntSpan dims = {}, bool keepdim = false);
// Variance sum((x - mean)^2) / max(0, N - correction) over dims (N = elements reduced;
// correction 1 is Bessel's correction). Floating inputs only. N - correction <= 0 gives
// inf or NaN, as in PyTorch.
Tensor var(const Tensor& x, IntSpan dims = {}, int64_t correction = 1, bool keepdim = false);
// Largest / smallest element over dims, same dtype (any dtype).
Tensor amax(const Tensor& x, IntSpan dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntSpan dims = {}, bool keepdim = false);

// Largest / smallest element of the whole tensor, as a 0-d tensor of x's dtype.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// max/min along one dim: the values and their int64 indices along dim (torch.max(x, dim)).
struct ValuesIndices {
  Tensor values;   // the max / min values
  Tensor indices;  // their indices along dim (int64)
};
// torch.max(x, dim) / torch.min(x, dim): values and indices along dim.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);

// Index (int64) of the largest / smallest element along dim; without a dim, the index into the
// flattened tensor (a 0-d result, or all size-1 dims with keepdim).
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// prod (all elements or along a dim) is declared with the scans it is computed by:
// dtensor/ops/scan/scan.h.

// ---- composite reductions (reduction_math.cc) ---------------------------------------------------
// sqrt(var(x, dims, correction)), the root taken in double before the rounding (a float32
// variance may overflow where the std does not); floating inputs only.
Tensor std(const Tensor& x, IntSpan dims = {}, int64_t correction = 1, bool keepdim = false);
// torch.var_mean / torch.std_mean: (var, mean) / (std, mean) over dims, the arguments of var.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, IntSpan dims = {}, int64_t correction = 1,
                                   bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, IntSpan dims = {}, int64_t correction = 1,
                                   bool keepdim = false);
// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m the max (an infinite
// max is not subtracted); integer and bool inputs give float32. Zero elements give -inf.
Tensor logsumexp(const Tensor& x, IntSpan dims, bool keepdim = false);
// The ord-norm over dims (all dims when empty): ord inf / -inf the largest / smallest |x|, 0 the
// count of nonzeros, otherwise (sum |x|^ord)^(1/ord) (ord 1 and 2 computed directly). Floating
// inputs only (as PyTorch).
Tensor vector_norm(const Tensor& x, double ord = 2.0, IntSpan dims = {}, bool keepdim = false);
// vector_norm(a - b, p) over all elements (broadcasting a and b).
Tensor dist(const Tensor& a, const Tensor& b, double p = 2.0);
// Whether any / all elements over dims are nonzero (bool result; any of zero elements is false,
// all of zero elements true).
Tensor any(const Tensor& x, IntSpan dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, IntSpan dims = {}, bool keepdim = false);

// ---- DTensor forms ---------------------------------------------------------------------------
// The same reductions on DTensors (reduction_strategy.cc); the result equals the reduction of
// the full tensor. Kept dims keep their sharding. Reducing a sharded dim leaves a Partial
// result without communicating: sum and mean give Partial(sum) (mean divides by the global
// element count, exact for uneven shards), amax/max give Partial(max), amin/min Partial(min).
// var, argmax/argmin and max/min along a dim need the reduced dim whole, so a sharded one is
// gathered first. Ranks whose shard is empty along a reduced dim contribute the identity
// (0 for sums, the lowest value for max, the highest for min).
DTensor sum(const DTensor& x, IntSpan dims = {}, bool keepdim = false);
DTensor mean(const DTensor& x, IntSpan dims = {}, bool keepdim = false);
DTensor var(const DTensor& x, IntSpan dims = {}, int64_t correction = 1, bool keepdim = false);
DTensor amax(const DTensor& x, IntSpan dims = {}, bool keepdim = false);
DTensor amin(const DTensor& x, IntSpan dims = {}, bool keepdim = false);
DTensor max(const DTensor& x);
DTensor min(const DTensor& x);
// max/min along one dim: values and int64 indices (global indices along dim).
struct DTensorValuesIndices {
  DTensor values;   // the max / min values
  DTensor indices;  // their indices along dim (int64)
};
// DTensor forms of max/min along dim, argmax and argmin (same semantics; indices are global).
DTensorValuesIndices max(const DTensor& x, int64_t dim, bool keepdim = false);
DTensorValuesIndices min(const DTensor& x, int64_t dim, bool keepdim = false);
DTensor argmax(const DTensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
DTensor argmin(const DTensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// DTensor forms of the composite reductions (same semantics). Reduced dims that are sharded:
// vector_norm with ord 1 gives Partial(sum), with ord +-inf or on any/all Partial(max) /
// Partial(min) (no communication); std, logsumexp and the other norms need the reduced dims
// whole and gather a sharded one first. dist is vector_norm(a - b, p).
DTensor std(const DTensor& x, IntSpan dims = {}, int64_t correction = 1, bool keepdim = false);
// var_mean / std_mean: one registered op each (both outputs from one pass over the gathered
// reduced dims, as var); kept dims keep their shards.
std::pair<DTensor, DTensor> var_mean(const DTensor& x, IntSpan dims = {}, int64_t correction = 1,
                                     bool keepdim = false);
std::pair<DTensor, DTensor> std_mean(const DTensor& x, IntSpan dims = {}, int64_t correction = 1,
                                     bool keepdim = false);
DTensor logsumexp(const DTensor& x, IntSpan dims, bool keepdim = false);
DTensor vector_norm(const DTensor& x, double ord = 2.0, IntSpan dims = {}, bool keepdim = false);
DTensor dist(const DTensor& a, const DTensor& b, double p = 2.0);
DTensor any(const DTensor& x, IntSpan dims = {}, bool keepdim = false);
DTensor all(const DTensor& x, IntSpan dims = {}, bool keepdim = false);

}  // namespace dtensor
