#include "dtensor/models/llama_context_parallel.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::models::detail {

namespace {
// A local DTensor's tensor, or the full value of one on a mesh.
Tensor whole(const DTensor& x) {
  return is_local(x) ? x.to_local() : x.full_tensor();
}

// x (a local DTensor or on the tp mesh) as the same rank's piece on the ring mesh: Shard(2)
// (the sequence) on cp, x's own placement on tp. Differentiable (to_local_dtensor /
// from_local carry the gradient back piece by piece).
DTensor lift(const DTensor& x, const LlamaContextParallel& cp) {
  const std::vector<std::string>& names = cp.ring_mesh.dim_names();
  Placements p;
  for (const std::string& name : names) {
    if (name == cp.cp_dim) {
      p.push_back(Shard(2));
    } else {
      p.push_back(is_local(x) ? Placement(Replicate()) : x.placements()[0]);
    }
  }
  return DTensor::from_local(x.to_local_dtensor(), cp.ring_mesh, p);
}
}  // namespace

LlamaContextParallel make_context_parallel(const DeviceMesh& mesh, int64_t cp_at, int64_t tp_at,
                                           const std::string& cp_dim) {
  std::vector<int64_t> ring_dims = {cp_at};
  if (tp_at >= 0) ring_dims.push_back(tp_at);
  std::sort(ring_dims.begin(), ring_dims.end());
  return {.ring_mesh = mesh.submesh(ring_dims),
          .cp_dim = cp_dim,
          .cp = mesh.size(cp_at),
          .rank = mesh.get_local_rank(cp_at)};
}

void check_cp_length(const LlamaContextParallel& cp, int64_t seq_len) {
  DT_CHECK(seq_len % (2 * cp.cp) == 0,
           "[Llama] sequence length %d cannot be sharded over cp = %d ranks: context parallelism "
           "cuts it into 2 * cp = %d equal chunks (head-tail order), so it must be a multiple of "
           "%d (pad it, with the padded labels set to the ignore index)",
           seq_len, cp.cp, 2 * cp.cp, 2 * cp.cp);
}

Tensor cp_chunk(const Tensor& x, const LlamaContextParallel& cp) {
  check_cp_length(cp, x.size(1));
  const int64_t mine = x.size(1) / cp.cp;
  return head_tail_order(x, 1, cp.cp).narrow(1, cp.rank * mine, mine).contiguous();
}

Tensor cp_position_ids(int64_t batch, int64_t seq_len, const LlamaContextParallel& cp) {
  check_cp_length(cp, seq_len);
  const int64_t c = seq_len / (2 * cp.cp);
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(batch * 2 * c));
  for (int64_t b = 0; b < batch; ++b) {
    for (const int64_t chunk : {cp.rank, 2 * cp.cp - 1 - cp.rank}) {
      for (int64_t i = 0; i < c; ++i) pos.push_back(chunk * c + i);
    }
  }
  const int64_t shape[] = {batch, 2 * c};
  return from_vector(pos, shape);
}

DTensor cp_input_ids(const DTensor& input_ids, const LlamaContextParallel& cp) {
  for (const Placement& p : input_ids.placements()) {
    DT_CHECK(p.is_replicate(),
             "[Llama] under context parallelism input_ids must be the whole rows (a local "
             "DTensor or Replicate), got placements %s",
             placements_str(input_ids.placements()));
  }
  return DTensor::from_local(cp_chunk(input_ids.to_local(), cp), input_ids.device_mesh(),
                             input_ids.placements());
}

DTensor cp_attention(const DTensor& q, const DTensor& k, const DTensor& v, bool enable_gqa,
                     const LlamaContextParallel& cp) {
  const DTensor o = ring_attention(
      lift(q, cp), lift(k, cp), lift(v, cp), cp.cp_dim,
      {.is_causal = true, .scale = std::nullopt, .load_balance = true, .enable_gqa = enable_gqa});
  return DTensor::from_local(o.to_local_dtensor(), q.device_mesh(), q.placements());
}

DTensor cp_causal_lm_loss(const DTensor& logits, const DTensor& labels, int64_t ignore_index,
                          const LlamaContextParallel& cp) {
  DT_CHECK(logits.defined() && labels.defined() && logits.dim() == 3 && labels.dim() == 2 &&
               labels.size(0) == logits.size(0) && labels.size(1) == logits.size(1) * cp.cp,
           "[causal_lm_loss] under context parallelism (cp = %d) logits %s are this rank's "
           "chunks [B, S / cp, V] and labels %s the whole rows [B, S]",
           cp.cp, logits.defined() ? shape_str(logits.shape()) : std::string("undefined"),
           labels.defined() ? shape_str(labels.shape()) : std::string("undefined"));
  const int64_t B = labels.size(0), S = labels.size(1), V = logits.size(2);
  // Shifted on the whole rows, where position t's target (token t + 1) is known.
  const std::vector<int64_t> all = whole(labels).contiguous().to_vector<int64_t>();
  std::vector<int64_t> shifted(all.size(), ignore_index);
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t + 1 < S; ++t) {
      const int64_t y = all[static_cast<size_t>(b * S + t + 1)];
      shifted[static_cast<size_t>(b * S + t)] = y;
      counted += y != ignore_index ? 1 : 0;
    }
  }
  const int64_t shape[] = {B, S};
  const Tensor mine = cp_chunk(from_vector(shifted, shape), cp);
  const int64_t flat_logits[] = {B * (S / cp.cp), V};
  const int64_t flat_labels[] = {B * (S / cp.cp)};
  const DTensor target = DTensor::from_local(mine.reshape(flat_labels), logits.device_mesh(),
                                             Placements(logits.placements().size(), Replicate()));
  const DTensor sum =
      cross_entropy(reshape(logits, flat_logits), target, Reduction::kSum, ignore_index);
  // cp times this rank's share: data parallelism averages the gradients over dp x cp. Rows
  // whose every label is ignored (counted is 0, on every cp rank alike: it counts the whole
  // rows) give zero gradients and the value NaN, PyTorch's mean over no element; a scale of
  // cp / 0 would make the gradients NaN too.
  const double scale =
      counted > 0 ? static_cast<double>(cp.cp) / static_cast<double>(counted) : 0.0;
  const DTensor share = mul(sum, Scalar(scale));
  // The value reported is the whole rows' mean (the shares' mean over cp), added as a
  // constant so the gradient stays the share's.
  // A meta share (a dry run, meta tensors) has no value: the same calls are made, the mean's
  // all-reduce over cp included (counted), without the arithmetic (no kernel runs on meta).
  const bool meta = share.to_local().device().is_meta();
  const Tensor own = meta ? whole(share).to(kFloat64)
                          : div(whole(share).to(kFloat64), Scalar(static_cast<double>(cp.cp)));
  Tensor mean = DTensor::from_local(own, cp.ring_mesh[cp.cp_dim], {Partial()}).full_tensor();
  if (counted == 0) {
    mean = full(mean.sizes(), std::numeric_limits<double>::quiet_NaN(),
                TensorOptions(mean.dtype(), mean.device()));
  }
  const Tensor offset =
      meta ? mean.to(share.dtype()) : sub(mean, whole(share).to(kFloat64)).to(share.dtype());
  return add(share, DTensor::from_local(offset, share.device_mesh(), share.placements()));
}

DeviceMesh flatten_dp_cp(const DeviceMesh& mesh, const LlamaMeshDims& dims, const std::string& flat,
                         const std::string& tp_name) {
  std::vector<int64_t> strides(static_cast<size_t>(mesh.ndim()), 1);
  for (int64_t d = mesh.ndim() - 2; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d + 1)] * mesh.size(d + 1);
  }
  auto stride = [&](int64_t d) { return d >= 0 ? strides[static_cast<size_t>(d)] : 0; };
  const int64_t tp = dims.tp >= 0 ? mesh.size(dims.tp) : 1;
  const int64_t base = dims.pp_index * stride(dims.pp);
  std::vector<int> ranks;
  for (int64_t i = 0; i < mesh.size(dims.dp); ++i) {
    for (int64_t j = 0; j < mesh.size(dims.cp); ++j) {
      for (int64_t t = 0; t < tp; ++t) {
        const int64_t at = base + i * stride(dims.dp) + j * stride(dims.cp) + t * stride(dims.tp);
        ranks.push_back(mesh.ranks()[static_cast<size_t>(at)]);
      }
    }
  }
  const int64_t dpcp = mesh.size(dims.dp) * mesh.size(dims.cp);
  if (dims.tp < 0) return DeviceMesh(mesh.device_type(), {dpcp}, ranks, {flat});
  return DeviceMesh(mesh.device_type(), {dpcp, tp}, ranks, {flat, tp_name});
}

}  // namespace dtensor::models::detail
