// Ring attention (context_parallel.h): the checks, the forward and backward rings on local
// blocks, and the autograd function joining them.
//
// Forward on cp rank r, step t = 0 .. cp - 1: the k/v block of rank s = r - t (mod cp) is here;
// the block of s - 1 is received from r - 1 (and the current one sent to r + 1), moved by the
// progress thread (p2p_progress.h) while ring_calls' local attention_forward calls run on it. Each
// call gives its rows' output o and log-sum-exp l, merged into the running (O, L) as the blocked
// kernel merges its key blocks: L' = log(e^L + e^l), O' = O e^(L - L') + o e^(l - L').
// Backward: with the final O and L, every (q rows, key block) pair's gradient is exactly what
// attention_backward gives for that pair alone (p = exp(s - L), D = rowsum(dO * O)), so the
// ring runs again: dq adds up locally, the contribution to block s's dk/dv is added to the
// accumulator that arrives with it from r - 1 (the ranks that processed s before) and sent on
// to r + 1; after cp steps the accumulator has passed every rank and lands with the owner.
// Under create_graph the backward instead differentiates a recomputation made of recorded
// DTensor ops (differentiable_backward), so the gradients can be differentiated again.
#include <absl/strings/str_format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/saved_versions.h"
#include "dtensor/collectives/p2p_progress.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/common/detail/attention_checks.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/parallel/context/detail/ring_exchange.h"
#include "dtensor/parallel/context/ring_plan.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

constexpr const char* kOp = "ring_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();
// Message tags on the cp communicator (k, v; dk, dv): apart from other point-to-point users.
constexpr int kKvTag = 4500;
constexpr int kGradTag = 4510;

// What every rank of one cp group agrees on for one call.
struct Ring {
  CommunicatorPtr comm;
  int64_t cp_dim = 0, cp = 1, rank = 0, seq_len = 0;
  bool causal = false, load_balance = true;
  double scale = 1.0;
  int64_t group = 1;     // q heads per k/v head (grouped-query attention)
  DType acc = kFloat32;  // the merge's dtype: float64 for float64, float32 otherwise

  std::vector<detail::CpSegment> segments(int64_t r) const {
    return detail::cp_segments(seq_len, cp, r, load_balance);
  }
  // The cp rank whose block is here at step t.
  int64_t source(int64_t t) const { return (rank - t + cp) % cp; }
  // `like`'s shape with rank r's sequence length, in `dtype`, on `like`'s device (a receive
  // buffer).
  Tensor block(const Tensor& like, int64_t r, DType dtype) const {
    Shape s = like.sizes();
    s[2] = detail::cp_local_length(seq_len, cp, r, load_balance);
    return empty(s, TensorOptions(dtype, like.device()));
  }
};

// A k/v block with each head repeated for the q heads it serves (grouped-query attention), and
// the sum of a gradient over those repeats.
Tensor expand_heads(const Ring& ring, const Tensor& x) {
  return ring.group == 1 ? x : repeat_interleave(x, ring.group, 1);
}
Tensor sum_heads(const Ring& ring, const Tensor& g) {
  if (ring.group == 1) return g;
  const Shape s = g.sizes();
  return sum(g.reshape({s[0], s[1] / ring.group, ring.group, s[2], s[3]}), {2});
}

// One hop of the ring (detail::ring_shift): the sends and receives are posted on the caller's
// thread and tested by the progress thread (dtensor/collectives/p2p_progress.h) while the caller
// computes the current block; wait() stops that and completes them. Before, a task on the
// communication thread (comm_worker.h) posted them and waited for them, spinning on MPI_Test
// with sched_yield: a second progress mechanism beside the pipeline's. Both hide the hops at
// cp 2 (docs/guides/context_parallel.md has the figures).
class RingShift final : public Work {
 public:
  RingShift(const CommunicatorPtr& comm, std::vector<Tensor> out, std::vector<Tensor> in, int tag) {
    const int r = comm->rank(), n = comm->size();
    const auto sends = [&] {
      for (size_t i = 0; i < out.size(); ++i) {
        works_.push_back(comm->send(out[i], (r + 1) % n, tag + static_cast<int>(i)));
        progress_.add(works_.back(), *comm, out[i].device());
      }
    };
    const auto recvs = [&] {
      for (size_t i = 0; i < in.size(); ++i) {
        works_.push_back(comm->recv(in[i], (r + n - 1) % n, tag + static_cast<int>(i)));
        progress_.add(works_.back(), *comm, in[i].device());
      }
    };
    // Even ranks send first and odd ranks receive first, so a backend whose point-to-point calls
    // wait for their match in issue order (NCCL on one stream) pairs them up.
    if (r % 2 == 0) {
      sends(), recvs();
    } else {
      recvs(), sends();
    }
  }
  // Drops the progress thread's tests before the Works go (their destructors wait).
  ~RingShift() override { (void)progress_.stop(); }

  bool is_completed() override {
    return std::all_of(works_.begin(), works_.end(),
                       [](const WorkPtr& w) { return w->is_completed(); });
  }
  // Every transfer is waited for, also after one failed; the first error is rethrown.
  void wait() override {
    std::exception_ptr error = progress_.stop();
    for (const WorkPtr& w : works_) {
      try {
        w->wait();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  std::vector<WorkPtr> works_;
  detail::P2PProgress progress_;
};

thread_local double waited_seconds = 0;

// Waits for a transfer, counting the time (the communication the compute did not hide).
void wait_for(const WorkPtr& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work->wait();
  waited_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Tensor finite(const Tensor& x) {
  return masked_fill(x, eq(x, Scalar(-kInf)), Scalar(0.0));
}

// Merges one call's (o, l) for rows [start, start + n) into the running (out, lse); rows no
// call has written yet hold lse -inf and weigh nothing.
void merge_rows(const Tensor& out, const Tensor& lse, std::vector<char>& seen, int64_t start,
                int64_t n, const AttentionResult& part) {
  Tensor o = out.narrow(2, start, n), l = lse.narrow(2, start, n);
  const Tensor po = part.out.to(out.dtype()), pl = part.lse.to(out.dtype());
  bool first = true;
  for (int64_t i = start; i < start + n; ++i) {
    first = first && seen[static_cast<size_t>(i)] == 0;
    seen[static_cast<size_t>(i)] = 1;
  }
  if (first) {
    o.copy_(po);
    l.copy_(pl);
    return;
  }
  const Tensor shift = finite(maximum(l, pl));
  const Tensor w_old = exp(sub(l, shift)), w_new = exp(sub(pl, shift));
  const Tensor total = add(w_old, w_new);  // 0 only where neither has seen a key
  const Tensor safe = masked_fill(total, eq(total, Scalar(0.0)), Scalar(1.0));
  o.copy_(add(mul(o, div(w_old, safe).unsqueeze(-1)), mul(po, div(w_new, safe).unsqueeze(-1))));
  l.copy_(add(shift, log(total)));
}

struct Forward {
  Tensor out;  // q's dtype
  Tensor lse;  // ring.acc
};

Forward ring_forward(const Ring& ring, const Tensor& q, const Tensor& k, const Tensor& v) {
  const std::vector<detail::CpSegment> mine = ring.segments(ring.rank);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), Ev = v.size(3);
  const TensorOptions acc(ring.acc, q.device());
  const bool meta = q.device().is_meta();
  const Tensor out = zeros({B, H, L, Ev}, acc);
  const Tensor lse = full({B, H, L}, Scalar(-kInf), acc);
  std::vector<char> seen(static_cast<size_t>(L), 0);
  Tensor cur_k = k.contiguous(), cur_v = v.contiguous();
  for (int64_t t = 0; t < ring.cp; ++t) {
    const int64_t src = ring.source(t);
    WorkPtr shift;
    Tensor next_k, next_v;
    if (t + 1 < ring.cp) {  // the next block travels while this one is computed
      next_k = ring.block(k, ring.source(t + 1), k.dtype());
      next_v = ring.block(v, ring.source(t + 1), v.dtype());
      shift = detail::ring_shift(ring.comm, {cur_k, cur_v}, {next_k, next_v}, kKvTag);
    }
    // Meta blocks (a dry run, dtensor/collectives/fake_communicator.h): the ring's messages are
    // issued and counted, but no block is computed (kernels have no data to read).
    for (const detail::RingCall& c :
         meta ? std::vector<detail::RingCall>()
              : detail::ring_calls(mine, ring.segments(src), ring.causal)) {
      const AttentionResult part = attention_forward(
          q.narrow(2, c.q_start, c.q_len), expand_heads(ring, cur_k.narrow(2, c.k_start, c.k_len)),
          expand_heads(ring, cur_v.narrow(2, c.k_start, c.k_len)), Tensor(),
          {ring.scale, c.causal, c.q_offset});
      merge_rows(out, lse, seen, c.q_start, c.q_len, part);
    }
    if (shift != nullptr) {
      wait_for(shift);
      cur_k = next_k, cur_v = next_v;
    }
  }
  return {out.to(q.dtype()), lse};
}

AttentionGrads ring_backward(const Ring& ring, const Tensor& dout, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse) {
  const std::vector<detail::CpSegment> mine = ring.segments(ring.rank);
  const TensorOptions acc(ring.acc, q.device());
  const bool meta = q.device().is_meta();  // messages only, as in ring_forward
  const Tensor dq = zeros(q.sizes(), acc);
  const Tensor no_grad_lse = zeros(lse.sizes(), acc);  // the lse is internal: no gradient
  const Tensor d = dout.contiguous();
  Tensor cur_k = k.contiguous(), cur_v = v.contiguous();
  Tensor in_k, in_v;  // the accumulators arriving from the previous rank
  WorkPtr grads_shift;
  for (int64_t t = 0; t < ring.cp; ++t) {
    const int64_t src = ring.source(t);
    WorkPtr shift;
    Tensor next_k, next_v;
    if (t + 1 < ring.cp) {
      next_k = ring.block(k, ring.source(t + 1), k.dtype());
      next_v = ring.block(v, ring.source(t + 1), v.dtype());
      shift = detail::ring_shift(ring.comm, {cur_k, cur_v}, {next_k, next_v}, kKvTag);
    }
    const Tensor dk = zeros(cur_k.sizes(), acc), dv = zeros(cur_v.sizes(), acc);
    for (const detail::RingCall& c :
         meta ? std::vector<detail::RingCall>()
              : detail::ring_calls(mine, ring.segments(src), ring.causal)) {
      const auto rows = [&](const Tensor& x) { return x.narrow(2, c.q_start, c.q_len); };
      const auto keys = [&](const Tensor& x) { return x.narrow(2, c.k_start, c.k_len); };
      const auto heads = [&](const Tensor& x) { return expand_heads(ring, keys(x)); };
      const AttentionGrads g =
          attention_backward(rows(d), no_grad_lse.narrow(2, c.q_start, c.q_len), rows(q),
                             heads(cur_k), heads(cur_v), Tensor(), rows(out),
                             lse.narrow(2, c.q_start, c.q_len), {ring.scale, c.causal, c.q_offset});
      add_(rows(dq), g.q.to(ring.acc));
      add_(keys(dk), sum_heads(ring, g.k.to(ring.acc)));
      add_(keys(dv), sum_heads(ring, g.v.to(ring.acc)));
    }
    // This block's accumulator: what the ranks before us added, plus our part. Waited on only
    // now, so the previous step's transfer overlapped this step's computation.
    Tensor sum_k = dk, sum_v = dv;
    if (grads_shift != nullptr) {
      wait_for(grads_shift);
      if (!meta) sum_k = add(in_k, dk), sum_v = add(in_v, dv);
    }
    // Receive the accumulator of the block processed next (after the last step: our own).
    const int64_t next = (src + ring.cp - 1) % ring.cp;
    in_k = ring.block(dk, next, ring.acc), in_v = ring.block(dv, next, ring.acc);
    grads_shift = detail::ring_shift(ring.comm, {sum_k, sum_v}, {in_k, in_v}, kGradTag);
    if (shift != nullptr) {
      wait_for(shift);
      cur_k = next_k, cur_v = next_v;
    }
  }
  // Our own accumulator's last hop: nothing is left to compute behind it (not counted by
  // ring_wait_seconds, which would take the slowest peer's lateness for communication).
  grads_shift->wait();
  return {dq.to(q.dtype()), in_k.to(k.dtype()), in_v.to(v.dtype())};
}

// The causal mask of this rank's q rows against every key ([S, S] bool, Shard(0) where q is
// Shard(2), Replicate elsewhere): key j is visible to row i when j's global position is at or
// before i's. The sequence is laid out on the ranks in their order (each rank's segments), so in
// the head-tail order a rank's rows and the gathered keys are not in position order.
DTensor causal_mask(const Ring& ring, const DTensorSpec& q_spec, Device device) {
  std::vector<int64_t> keys, rows;
  for (int64_t r = 0; r < ring.cp; ++r) {
    for (const detail::CpSegment& seg : ring.segments(r)) {
      for (int64_t i = 0; i < seg.length; ++i) keys.push_back(seg.global_start + i);
    }
  }
  Placements placements(static_cast<size_t>(q_spec.mesh().ndim()), Replicate());
  const bool sharded = q_spec.placements()[static_cast<size_t>(ring.cp_dim)].is_shard(2);
  if (sharded) {
    placements[static_cast<size_t>(ring.cp_dim)] = Shard(0);
    for (const detail::CpSegment& seg : ring.segments(ring.rank)) {
      for (int64_t i = 0; i < seg.length; ++i) rows.push_back(seg.global_start + i);
    }
  } else {
    rows = keys;  // one cp rank: every row
  }
  const int64_t S = ring.seq_len, L = static_cast<int64_t>(rows.size());
  const Tensor mask = le(from_vector(keys, {1, S}, device), from_vector(rows, {L, 1}, device));
  return DTensor(mask, std::make_shared<const DTensorSpec>(q_spec.mesh(), std::move(placements),
                                                           TensorMeta({S, S}, kBool), kOp));
}

// The backward under create_graph (create_graph.h): the ring's output recomputed from the saved
// q, k and v with their history (autograd::saved_input_with_history) by recorded DTensor ops, and
// differentiated with autograd::grad(create_graph), so the gradients carry history and second
// and higher orders are exact (activation checkpointing does the same). k and v are gathered
// along the cp dim (all_gather; its gradient, a reduce_scatter, returns each rank's keys' share),
// and each rank's q rows attend to every key by scaled_dot_product_attention's query-sharded row
// (no communication), causality as a mask of global positions; scaled_dot_product_attention has
// a double backward of any order. Every rank of the mesh runs the same ops, also one with no
// rows. It holds what single-device attention's double backward holds for the rank's rows
// ([B, H, L, S] probabilities) plus the gathered k and v: under create_graph only; the
// first-order backward keeps the ring. The first-order values equal the ring's to rounding.
DTensorList differentiable_backward(const Ring& ring, const DTensor& grad, const DTensor& q_saved,
                                    const DTensor& k_saved, const DTensor& v_saved) {
  const DTensor in[] = {autograd::saved_input_with_history(q_saved, 0),
                        autograd::saved_input_with_history(k_saved, 1),
                        autograd::saved_input_with_history(v_saved, 2)};
  Placements gathered = in[1].placements();
  gathered[static_cast<size_t>(ring.cp_dim)] = Replicate();
  const DTensor out = scaled_dot_product_attention(
      in[0], in[1].redistribute(gathered), in[2].redistribute(gathered),
      ring.causal ? causal_mask(ring, in[0].spec(), in[0].device()) : DTensor(), 0.0, false,
      ring.scale, ring.group != 1);
  std::vector<DTensor> wrt;
  std::vector<size_t> slot;
  for (size_t i = 0; i < 3; ++i) {
    if (!in[i].requires_grad()) continue;  // needs no gradient: no history was given
    wrt.push_back(in[i]);
    slot.push_back(i);
  }
  DTensorList result(3);
  if (wrt.empty()) return result;
  const DTensor roots[] = {out};
  const DTensor seeds[] = {
      grad.placements() == out.placements() ? grad : grad.redistribute(out.placements())};
  std::vector<DTensor> g = autograd::grad(roots, wrt, seeds, /*retain_graph=*/true,
                                          /*create_graph=*/true, /*allow_unused=*/true);
  for (size_t j = 0; j < slot.size(); ++j) result[slot[j]] = std::move(g[j]);
  return result;
}

// The checks (from the specs alone, so every rank raises the same error) and the ring's setup.
Ring setup(const DTensor& q, const DTensor& k, const DTensor& v, int64_t cp_dim,
           const RingAttentionOptions& options) {
  DT_CHECK(q.defined() && k.defined() && v.defined(), "[%s] q, k and v must be defined", kOp);
  const DeviceMesh& mesh = q.device_mesh();
  DT_CHECK(k.device_mesh() == mesh && v.device_mesh() == mesh,
           "[%s] q, k and v must be on one mesh, got %s, %s and %s", kOp, mesh.str(),
           k.device_mesh().str(), v.device_mesh().str());
  DT_CHECK(cp_dim >= 0 && cp_dim < mesh.ndim(), "[%s] cp mesh dim %d out of range for %s", kOp,
           cp_dim, mesh.str());
  DT_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
           "[%s] q, k and v must be 4-d [batch, heads, seq, head_dim], got %s, %s and %s", kOp,
           shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  const int64_t heads = q.size(1), kv_heads = k.size(1);
  const bool gqa = options.enable_gqa && kv_heads != heads;
  DT_CHECK(!gqa || (kv_heads > 0 && heads % kv_heads == 0 && v.size(1) == kv_heads),
           "[%s] enable_gqa: k and v must have one number of heads dividing q's %d, got %d and %d",
           kOp, heads, kv_heads, v.size(1));
  // The operands as grouped-query attention sees them (k/v heads repeated to q's).
  Shape k_seen = k.sizes(), v_seen = v.sizes();
  if (gqa) k_seen[1] = v_seen[1] = heads;
  detail::check_attention_operands(kOp, q.sizes(), k_seen, v_seen, q.dtype(), k.dtype(), v.dtype());
  DT_CHECK(q.size(2) == k.size(2),
           "[%s] q has %d positions and k %d: ring attention is self-attention over one sharded "
           "sequence",
           kOp, q.size(2), k.size(2));
  // A mesh dim of one rank holds the whole tensor whatever its placement (ops pick any there):
  // only the dims of several ranks must agree and fit.
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    const size_t i = static_cast<size_t>(d);
    const Placement& p = q.placements()[i];
    DT_CHECK(!p.is_partial() && !k.placements()[i].is_partial() && !v.placements()[i].is_partial(),
             "[%s] q, k and v may not be Partial (placements %s, %s and %s)", kOp,
             placements_str(q.placements()), placements_str(k.placements()),
             placements_str(v.placements()));
    if (mesh.size(d) == 1) continue;
    DT_CHECK(k.placements()[i] == p && v.placements()[i] == p,
             "[%s] q, k and v must share one placement list, got %s, %s and %s", kOp,
             placements_str(q.placements()), placements_str(k.placements()),
             placements_str(v.placements()));
    if (d == cp_dim) {
      DT_CHECK(p.is_shard(2),
               "[%s] q, k and v must be Shard(2) (the sequence) on the cp mesh dim %d, got "
               "placements %s",
               kOp, cp_dim, placements_str(q.placements()));
    } else {
      DT_CHECK(p.is_replicate() || p.is_shard(0) || p.is_shard(1),
               "[%s] mesh dim %d has %s: outside the cp dim %d q, k and v may only be Shard(0) "
               "(batch), Shard(1) (heads) or Replicate (placements %s)",
               kOp, d, p.str(), cp_dim, placements_str(q.placements()));
    }
  }
  // Each rank's q heads must be served by its own k/v heads: the head shards divide both counts.
  int64_t head_shards = 1;
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    if (q.placements()[static_cast<size_t>(d)].is_shard(1)) head_shards *= mesh.size(d);
  }
  DT_CHECK(!gqa || (heads % head_shards == 0 && kv_heads % head_shards == 0),
           "[%s] enable_gqa with heads sharded over %d ranks: %d q heads and %d k/v heads must "
           "both divide evenly, so each rank's k/v heads serve its q heads",
           kOp, head_shards, heads, kv_heads);
  Ring ring;
  ring.cp_dim = cp_dim;
  ring.group = gqa ? heads / kv_heads : 1;
  ring.cp = mesh.size(cp_dim);
  ring.seq_len = q.size(2);
  ring.causal = options.is_causal;
  // Without causality the order of the rows changes nothing but which rows a rank holds, and the
  // blocks are Shard's (uneven allowed): the natural segments, whatever load_balance says (the
  // head-tail segments of an uneven length would not match the shards: truncated receives, a
  // hang, or wrong rows).
  ring.load_balance = options.load_balance && options.is_causal;
  ring.scale = options.scale.value_or(default_attention_scale(q.size(3)));
  ring.acc = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
  DT_CHECK(!(ring.causal && ring.load_balance) || ring.seq_len % (2 * ring.cp) == 0,
           "[%s] sequence length %d cannot be load-balanced over cp = %d ranks: it must be a "
           "multiple of 2 * cp = %d (pad it, or pass load_balance = false)",
           kOp, ring.seq_len, ring.cp, 2 * ring.cp);
  if (mesh.contains_me()) {
    ring.comm = mesh.communicator(cp_dim);
    ring.rank = ring.comm->rank();
  }
  return ring;
}

}  // namespace

DTensor ring_attention(const DTensor& q, const DTensor& k, const DTensor& v, int64_t cp_dim,
                       const RingAttentionOptions& options) {
  const Ring ring = setup(q, k, v, cp_dim, options);
  // The output: q's batch, heads and sequence, v's head dim, q's placements and dtype.
  Shape out_shape = q.sizes();
  out_shape[3] = v.size(3);
  const auto out_spec = std::make_shared<const DTensorSpec>(q.device_mesh(), q.placements(),
                                                            TensorMeta(out_shape, q.dtype()), kOp);
  if (!q.device_mesh().contains_me()) return DTensor(q.to_local(), out_spec);
  const Tensor ql = q.to_local(), kl = k.to_local(), vl = v.to_local();
  Forward f = ring_forward(ring, ql, kl, vl);
  const DTensor* inputs[] = {&q, &k, &v};
  // The backward reads q, k, v and the output: an in-place write to any of them after this
  // forward makes it raise (as sdpa's saved tensors do in PyTorch), not read the written values.
  const autograd::SavedVersions saved{ql, kl, vl, f.out};
  DTensorList outs;
  outs.emplace_back(f.out, out_spec);
  // Differentiable: under create_graph the backward recomputes with recorded ops (above).
  return autograd::record_differentiable_function(
      "RingAttentionBackward", inputs, std::move(outs),
      [ring, ql, kl, vl, out = f.out, lse = f.lse, saved,
       specs = std::vector{q.spec_ptr(), k.spec_ptr(), v.spec_ptr(), out_spec}](
          absl::Span<const DTensor> g) -> DTensorList {
        saved.check("RingAttentionBackward");
        if (!g[0].defined()) return {DTensor(), DTensor(), DTensor()};
        if (autograd::in_create_graph()) {
          return differentiable_backward(ring, g[0], DTensor(ql, specs[0]), DTensor(kl, specs[1]),
                                         DTensor(vl, specs[2]));
        }
        // The gradient as the output is laid out (a no-op unless it arrived otherwise).
        const Tensor dout = detail::redistribute_no_grad(g[0], *specs[3]).to_local();
        const AttentionGrads grads = ring_backward(ring, dout, ql, kl, vl, out, lse);
        return {DTensor(grads.q, specs[0]), DTensor(grads.k, specs[1]), DTensor(grads.v, specs[2])};
      })[0];
}

DTensor ring_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                       std::string_view cp_dim, const RingAttentionOptions& options) {
  DT_CHECK(q.defined(), "[%s] q must be defined", kOp);
  return ring_attention(q, k, v, q.device_mesh().dim_index(cp_dim), options);
}

namespace detail {

double ring_wait_seconds() {
  return waited_seconds;
}

WorkPtr ring_shift(const CommunicatorPtr& comm, std::vector<Tensor> out, std::vector<Tensor> in,
                   int tag) {
  if (comm->size() == 1) {  // our own block comes back
    for (size_t i = 0; i < in.size(); ++i) in[i].copy_(out[i]);
    return completed_work();
  }
  return std::make_shared<RingShift>(comm, std::move(out), std::move(in), tag);
}

}  // namespace detail
}  // namespace dtensor
