// The sequence layouts of context parallelism (context_parallel.h): the head-tail order and
// its inverse on local tensors and DTensors, and rotary tables in that order.
#include <absl/strings/str_format.h>

#include <vector>

#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {
namespace {

constexpr const char* kShard = "context_parallel_shard";

// The chunk length of a dim of `len` positions cut into 2 * cp chunks (throws when it does not
// divide).
int64_t chunk_length(const char* op, int64_t len, int64_t cp) {
  DT_CHECK(cp >= 1, "[%s] cp must be >= 1, got %d", op, cp);
  DT_CHECK(len % (2 * cp) == 0,
           "[%s] sequence length %d cannot be load-balanced over cp = %d ranks: it must be a "
           "multiple of 2 * cp = %d (pad it, or pass load_balance = false)",
           op, len, cp, 2 * cp);
  return len / (2 * cp);
}

// Chunk indices in head-tail order: 0, 2cp-1, 1, 2cp-2, ... (rank r's chunks r, 2cp-1-r).
std::vector<int64_t> head_tail_chunks(int64_t cp) {
  std::vector<int64_t> order;
  for (int64_t r = 0; r < cp; ++r) order.insert(order.end(), {r, 2 * cp - 1 - r});
  return order;
}

// Where natural chunk j sits in the head-tail order (the inverse permutation).
std::vector<int64_t> natural_chunks(int64_t cp) {
  const std::vector<int64_t> ht = head_tail_chunks(cp);
  std::vector<int64_t> inv(ht.size());
  for (size_t slot = 0; slot < ht.size(); ++slot) inv[static_cast<size_t>(ht[slot])] = slot;
  return inv;
}

// x's chunks of `chunk` positions along `dim`, taken in `order` (Tensor or DTensor: narrow and
// cat of either kind).
template <typename T>
T take_chunks(const T& x, int64_t dim, int64_t chunk, const std::vector<int64_t>& order) {
  std::vector<T> pieces;
  for (int64_t j : order) pieces.push_back(narrow(x, dim, j * chunk, chunk));
  return cat(pieces, dim);
}

int64_t seq_dim_of(const char* op, int64_t dim, int64_t ndim) {
  const int64_t d = dim < 0 ? dim + ndim : dim;
  DT_CHECK(d >= 0 && d < ndim, "[%s] sequence dim %d out of range for a %d-d tensor", op, dim,
           ndim);
  return d;
}

// x's placements with `cp_dim` set to `p`, after checking that cp_dim holds `expected` and
// that no other mesh dim shards `seq_dim` or is Partial.
Placements with_cp(const char* op, const DTensor& x, int64_t cp_dim, int64_t seq_dim,
                   const Placement& expected, const Placement& p) {
  DT_CHECK(x.defined(), "[%s] the input must be defined", op);
  const DeviceMesh& mesh = x.device_mesh();
  DT_CHECK(cp_dim >= 0 && cp_dim < mesh.ndim(), "[%s] cp mesh dim %d out of range for %s", op,
           cp_dim, mesh.str());
  Placements out = x.placements();
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    const Placement& have = out[static_cast<size_t>(d)];
    if (d == cp_dim) {
      // (One rank holds the whole tensor whatever its placement.)
      DT_CHECK(have == expected || (mesh.size(d) == 1 && !have.is_partial()),
               "[%s] expected %s on the cp mesh dim %d, got placements %s", op, expected.str(),
               cp_dim, placements_str(x.placements()));
    } else {
      DT_CHECK(!have.is_shard(seq_dim) && !have.is_partial(),
               "[%s] mesh dim %d has %s: the sequence dim %d may be sharded on the cp dim only, "
               "and the input may not be Partial (placements %s)",
               op, d, have.str(), seq_dim, placements_str(x.placements()));
    }
  }
  out[static_cast<size_t>(cp_dim)] = p;
  return out;
}

}  // namespace

Tensor head_tail_order(const Tensor& x, int64_t dim, int64_t cp) {
  const int64_t d = seq_dim_of(kShard, dim, x.dim());
  return take_chunks(x, d, chunk_length(kShard, x.size(d), cp), head_tail_chunks(cp));
}

Tensor natural_order(const Tensor& x, int64_t dim, int64_t cp) {
  const int64_t d = seq_dim_of("context_parallel_unshard", dim, x.dim());
  return take_chunks(x, d, chunk_length("context_parallel_unshard", x.size(d), cp),
                     natural_chunks(cp));
}

DTensor context_parallel_shard(const DTensor& x, int64_t cp_dim, int64_t seq_dim,
                               bool load_balance) {
  DT_CHECK(x.defined(), "[%s] the input must be defined", kShard);
  const int64_t d = seq_dim_of(kShard, seq_dim, x.dim());
  const Placements dst = with_cp(kShard, x, cp_dim, d, Replicate(), Shard(d));
  DTensor y = x;
  if (load_balance) {
    const int64_t cp = x.device_mesh().size(cp_dim);
    y = take_chunks(x, d, chunk_length(kShard, x.size(d), cp), head_tail_chunks(cp));
  }
  return y.redistribute(dst);  // Replicate -> Shard: each rank keeps its piece
}

DTensor context_parallel_unshard(const DTensor& x, int64_t cp_dim, int64_t seq_dim,
                                 bool load_balance) {
  constexpr const char* kOp = "context_parallel_unshard";
  DT_CHECK(x.defined(), "[%s] the input must be defined", kOp);
  const int64_t d = seq_dim_of(kOp, seq_dim, x.dim());
  const DTensor whole = x.redistribute(with_cp(kOp, x, cp_dim, d, Shard(d), Replicate()));
  if (!load_balance) return whole;
  const int64_t cp = x.device_mesh().size(cp_dim);
  return take_chunks(whole, d, chunk_length(kOp, x.size(d), cp), natural_chunks(cp));
}

DTensor context_parallel_shard(const DTensor& x, std::string_view cp_dim, int64_t seq_dim,
                               bool load_balance) {
  DT_CHECK(x.defined(), "[%s] the input must be defined", kShard);
  return context_parallel_shard(x, x.device_mesh().dim_index(cp_dim), seq_dim, load_balance);
}

DTensor context_parallel_unshard(const DTensor& x, std::string_view cp_dim, int64_t seq_dim,
                                 bool load_balance) {
  DT_CHECK(x.defined(), "[context_parallel_unshard] the input must be defined");
  return context_parallel_unshard(x, x.device_mesh().dim_index(cp_dim), seq_dim, load_balance);
}

nn::functional::RotaryTables context_parallel_rotary_tables(
    const nn::functional::RotaryTables& tables, int64_t seq_len, int64_t cp, bool load_balance) {
  DT_CHECK(tables.cos.defined() && tables.sin.defined() && tables.cos.dim() >= 1 && seq_len >= 0 &&
               seq_len <= tables.cos.size(0) && seq_len <= tables.sin.size(0),
           "[context_parallel_rotary_tables] tables of %s positions cannot cover %d",
           tables.cos.defined() ? std::to_string(tables.cos.size(0)) : "no", seq_len);
  nn::functional::RotaryTables out{tables.cos.narrow(0, 0, seq_len),
                                   tables.sin.narrow(0, 0, seq_len)};
  if (!load_balance) return out;
  return {head_tail_order(out.cos, 0, cp), head_tail_order(out.sin, 0, cp)};
}

}  // namespace dtensor
