// The DTensor math the nn modules are written with (forward only).
//
// Each function takes DTensors on one mesh, works out per mesh dim which placement its inputs
// must have and which placement the output gets (a small sharding rule, listed per function),
// redistributes an input only when its placement does not fit, runs the local kernel of ops/
// on the local shards and wraps the result. They issue no other communication, so a
// tensor-parallel module issues exactly the collectives its layouts require.
//
// Parameters on a self mesh (nn::local) combined with inputs on another mesh are treated as
// Replicate on the input's mesh (every rank holds the same full value), like PyTorch's
// implicit replication. Activations must share one mesh ("[op] ... different meshes").
// Partial inputs of nonlinear functions are reduced (all-reduce) first.
#pragma once

#include <cstdint>
#include <optional>

#include "dtensor/distributed_tensor.h"

namespace dtensor::nn::functional {

// y = x @ weight^T + bias with x[..., in], weight[out, in], bias[out] (optional). Per mesh dim:
//   weight R:    x R -> R, x S(d) (d not last) -> S(d), x P -> P; x S(last) is gathered.
//   weight S(0): x R (redistributed to R otherwise) -> S(last), bias S(0).
//   weight S(1): x S(last) (R is chunked locally, P reduce-scattered) -> P(sum); the bias is
//                added on coordinate 0 of that mesh dim only.
DTensor linear(const DTensor& x, const DTensor& weight, const DTensor& bias = DTensor());

// Rows of weight[num, dim] picked by integer `indices` -> [indices.shape..., dim]. Per mesh dim:
//   weight R:    indices R or S(d) -> same placement.
//   weight S(0): indices R -> P(sum) (masked lookup: rows of other shards give zeros).
//   weight S(1): indices R -> S(last).
DTensor embedding(const DTensor& indices, const DTensor& weight);

// Layer norm / RMS norm over the last dim with optional weight and bias of shape [dim].
// x must be R or S(d) with d not the last dim on every mesh dim (others are redistributed to
// R); the output keeps x's placements. eps as in ops/norm/norm.h.
DTensor layer_norm(const DTensor& x, const DTensor& weight = DTensor(),
                   const DTensor& bias = DTensor(), double eps = 1e-5);
DTensor rms_norm(const DTensor& x, const DTensor& weight = DTensor(),
                 std::optional<double> eps = std::nullopt);

// Pointwise activations: placements pass through (Partial is reduced first).
DTensor gelu(const DTensor& x);
DTensor silu(const DTensor& x);

// a + b and a * b for DTensors of the same global shape on one mesh. b is redistributed to
// a's placements when they differ; for mul a Partial operand is reduced first.
DTensor add(const DTensor& a, const DTensor& b);
DTensor mul(const DTensor& a, const DTensor& b);

// Multi-head scaled dot-product attention on fused layouts: q, k, v are [B, S, H * head_dim]
// with the heads laid out contiguously along the last dim. Each rank attends over the heads
// of its local shard (local width / head_dim of them), so q/k/v sharded S(last) on a mesh
// dim keep that placement (heads split across ranks) and need no communication; S(0) (batch)
// also passes through; any other placement is redistributed to R. k and v are moved to q's
// placements. Throws "[scaled_dot_product_attention] local width 12 is not a multiple of
// head_dim 8 ..." when a shard would split a head. `causal` masks keys after the query.
// Output: q's shape and placements.
DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     int64_t head_dim, bool causal);

namespace detail {
// Wraps a local shard with an explicitly given global shape (no checks, no communication).
DTensor wrap(Tensor local, const DeviceMesh& mesh, Placements placements, IntSpan global_shape,
             DType dtype);
// `p` when it is on `mesh`; a self-mesh `p` re-wrapped as Replicate on `mesh`; otherwise
// throws "[op] <what> is on mesh ... but the input is on mesh ...".
DTensor on_mesh(const DTensor& p, const DeviceMesh& mesh, std::string_view op,
                std::string_view what);
// x redistributed to `placements` (x itself when they already match). Mesh dims of size 1
// are relabelled without a collective.
DTensor to_placements(const DTensor& x, const Placements& placements);
}  // namespace detail

}  // namespace dtensor::nn::functional
