// Ops along one dim that need the whole dim on a rank: the cumulative scans (cumsum, cumprod,
// logcumsumexp) and sorting / selection (sort, argsort, topk, kthvalue, median, mode), as
// PyTorch defines them.
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Running sum / product along dim (torch.cumsum / torch.cumprod). Integer and bool inputs give
// int64 (as PyTorch), floating inputs keep their dtype; floating sums and products run in
// float64 and are rounded once per element. A 0-d input is returned as it is (dim 0 or -1).
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);

// torch.cummax / torch.cummin: the running max / min along dim and the index it came from; an
// equal later element takes over the index, and NaN, once seen, stays the extreme (PyTorch).
ValuesIndices cummax(const Tensor& x, int64_t dim);
ValuesIndices cummin(const Tensor& x, int64_t dim);

// torch.logcumsumexp: log(cumsum(exp(x))) along dim, computed stably in float64 (PyTorch's
// log_add_exp recurrence) and rounded once per element. Floating inputs only (as PyTorch).
Tensor logcumsumexp(const Tensor& x, int64_t dim);

// Product of all elements (a 0-d tensor) or along dim (torch.prod): the dtype rule of cumprod;
// a product over zero elements is 1.
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);

// torch.sort(x, dim, descending, stable=True): the values along dim in order and their int64
// indices. Always stable (equal values keep their order, so the indices are deterministic and
// the same on every device); NaN sorts above every number (last ascending, first descending),
// as in PyTorch.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The indices of sort (torch.argsort, stable).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// torch.topk: the k largest (or smallest) values along dim, in sorted order, and their indices;
// ties go to the lower index. 0 <= k <= x.size(dim).
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// torch.kthvalue: the k-th smallest value along dim (k from 1) and its index (the lowest index
// among equal values); dim removed unless keepdim. 1 <= k <= x.size(dim).
ValuesIndices kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);

// torch.median: the lower median (the element of rank (n - 1) / 2 in sorted order; NaN when the
// input holds one, or is empty). Along dim: values and the index of that element in PyTorch's
// (value, index) order, i.e. among equal values the one of that rank; a row holding a NaN gives
// its first NaN. The dim must not be empty.
Tensor median(const Tensor& x);
ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim = false);
// torch.mode(x, dim=-1, keepdim=False): the most frequent value along dim (the smallest on a
// tie; NaNs never equal each other) and the last index it occurs at, as PyTorch 2.15's CPU.
ValuesIndices mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);

// ---- DTensor forms (scan_strategy.cc) ------------------------------------------------------
// Every dim but `dim` keeps its sharding (values and indices alike); a sharded `dim` is
// gathered first, except for cumsum and cumprod: there the blocks of `dim` form a pipeline in
// global order (point to point on the flattened communicator of the mesh dims sharding it):
// each receives the single-device scan's accumulator after the previous block (float64, or
// int64 wrapping), passes its own final accumulator on, then scans its block from the received
// one, so the results equal the single-device scan bit for bit for every dtype (inf / NaN,
// overflow, integer wrap, uneven and empty blocks included) and the output stays sharded. Cost:
// k-1 sequential messages of one accumulator per row and a serial totals pass; no data
// gathered. cumsum is linear, so Partial(sum) inputs pass through it.
// Indices are global positions along dim. Differentiable: cumsum (the reversed cumsum of the
// gradient), cumprod (cumprod_backward: a fused kernel, zeros handled exactly, which gathers a
// sharded `dim`), and the values of sort, topk, kthvalue, cummax and cummin (the gradient put
// back at the indices).
DTensor cumsum(const DTensor& x, int64_t dim);
DTensor cumprod(const DTensor& x, int64_t dim);
// prod gathers a sharded reduced dim (there is no Partial(prod)); kept dims keep their shards.
// Its gradient is cumprod's with the output gradient at the last position (exact with zeros).
DTensor prod(const DTensor& x);
DTensor prod(const DTensor& x, int64_t dim, bool keepdim = false);
DTensorValuesIndices cummax(const DTensor& x, int64_t dim);
DTensorValuesIndices cummin(const DTensor& x, int64_t dim);
DTensorValuesIndices sort(const DTensor& x, int64_t dim = -1, bool descending = false);
DTensor argsort(const DTensor& x, int64_t dim = -1, bool descending = false);
DTensorValuesIndices topk(const DTensor& x, int64_t k, int64_t dim = -1, bool largest = true);
DTensorValuesIndices kthvalue(const DTensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
// logcumsumexp scans a sharded dim in place like cumsum (the block pipeline carries the float64
// log-sum-exp accumulator: results bit-identical to one device); its gradient is PyTorch's
// (two reversed logcumsumexps of log|grad|, split by sign). median / mode along dim keep every
// other dim sharded and gather a sharded dim; median of the whole tensor gathers it (its
// gradient is shared evenly among the elements equal to the median, as PyTorch).
DTensor logcumsumexp(const DTensor& x, int64_t dim);
DTensor median(const DTensor& x);
DTensorValuesIndices median(const DTensor& x, int64_t dim, bool keepdim = false);
DTensorValuesIndices mode(const DTensor& x, int64_t dim = -1, bool keepdim = false);

}  // namespace dtensor
