// The halo exchange (detail/halo.h), shared by the height-sharded convolution (conv_dtensor.cc)
// and the height-sharded pools (pool_dtensor.cc).
#include <algorithm>
#include <memory>
#include <vector>

#include "dtensor/autograd/function.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

// Zero rows [.., rows, ..] along `dim`, otherwise shaped like the local DTensor xl (no gradient).
DTensor zero_rows(const DTensor& xl, int64_t dim, int64_t rows) {
  Shape s = xl.shape();
  s[dim] = rows;
  return local_dtensor(zeros(s, TensorOptions(xl.dtype(), xl.device())));
}

}  // namespace

int64_t halo_mesh_dim(const DTensor& x, int64_t dim) {
  int64_t m = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(x.placements().size()); ++i) {
    const Placement& p = x.placements()[i];
    if (p.is_shard() && p.dim() == dim && m < 0) {
      m = i;
    } else if (!p.is_replicate()) {
      return -1;
    }
  }
  return m;
}

ChunkLayout chunk_layout(int64_t size, int64_t world) {
  ChunkLayout c;
  const int64_t chunk = (size + world - 1) / world;
  for (int64_t q = 0; q < world; ++q) {
    c.start.push_back(std::min(q * chunk, size));
    c.rows.push_back(std::clamp<int64_t>(size - q * chunk, 0, chunk));
  }
  return c;
}

namespace {

// The tag of the exchange's messages: each pair of ranks exchanges at most one message each
// way per call, and calls follow one another in program order on every rank.
constexpr int kHaloTag = 18497;

// Global rows [lo, hi) that move between this rank and `peer` (the peer's group rank on the
// mesh dim).
struct Transfer {
  int64_t peer, lo, hi;
};

// Sends pieces[i] to sends[i].peer and receives, from each of `recvs`, its hi - lo rows along
// `dim` (otherwise shaped like `like`; returned in the order of `recvs`), everything posted before
// anything is waited for, in p2p_post_order's order (NCCL's in-order sends and receives); MPI's
// non-blocking calls would not mind any order.
std::vector<Tensor> exchange(Communicator& comm, const std::vector<Transfer>& sends,
                             const std::vector<Tensor>& pieces, const std::vector<Transfer>& recvs,
                             const Tensor& like, int64_t dim) {
  std::vector<int64_t> send_peers, recv_peers;
  for (const Transfer& t : sends) send_peers.push_back(t.peer);
  for (const Transfer& t : recvs) recv_peers.push_back(t.peer);
  std::vector<Tensor> got(recvs.size());
  std::vector<WorkPtr> works;
  for (const PostStep& step : p2p_post_order(comm.rank(), send_peers, recv_peers)) {
    const size_t i = step.index;
    if (step.send) {
      works.push_back(comm.send(pieces[i], static_cast<int>(sends[i].peer), kHaloTag));
      continue;
    }
    Shape shape = like.sizes();
    shape[dim] = recvs[i].hi - recvs[i].lo;
    got[i] = empty(shape, TensorOptions(like.dtype(), like.device()));
    works.push_back(comm.recv(got[i], static_cast<int>(recvs[i].peer), kHaloTag));
  }
  for (const WorkPtr& w : works) w->wait();
  return got;
}

// One exchange of halo_rows: this rank sends the rows `out` of its shard and receives the rows
// `in` of the others'. It is linear; its adjoint is the reverse exchange (each received piece's
// gradient back to its owner, which adds the pieces it gets into its shard's gradient), whose
// adjoint is the exchange again. Each is recorded with the other as its backward, so gradients of
// any order go through (create_graph); without grad mode neither records anything.
struct HaloExchange {
  std::shared_ptr<Communicator> comm;
  std::vector<Transfer> in, out;
  int64_t start = 0, dim = 0;  // the shard's first global row, the exchanged dim
  DTensor shard;               // this rank's shard as a local DTensor, without history
};
using HaloPtr = std::shared_ptr<const HaloExchange>;

DTensor return_rows(const HaloPtr& h, const DTensor& g);

// The received rows (in the order of `in`: increasing peer) of the exchange of x (shaped like
// the shard), as one local DTensor.
DTensor send_rows(const HaloPtr& h, const DTensor& x) {
  const Tensor local = x.to_local();
  std::vector<Tensor> edges;
  for (const Transfer& t : h->out) {
    edges.push_back(local.narrow(h->dim, t.lo - h->start, t.hi - t.lo).contiguous());
  }
  const std::vector<Tensor> got = exchange(*h->comm, h->out, edges, h->in, local, h->dim);
  Shape shape = local.sizes();
  shape[h->dim] = 0;
  const Tensor joined = got.empty() ? empty(shape, TensorOptions(local.dtype(), local.device()))
                                    : (got.size() == 1 ? got[0] : cat(got, h->dim));
  const DTensor& sh = h->shard;
  const DTensor rl = DTensor::from_local(joined, sh.device_mesh(), sh.placements(), false);
  return autograd::record_linear_function(
      "halo_exchange", {&x}, rl,
      [h](absl::Span<const DTensor> g) { return DTensorList{return_rows(h, g[0])}; });
}

// The shard's gradient from g, the gradient of the received rows (undefined: zeros; every rank
// still takes part in the exchange).
DTensor return_rows(const HaloPtr& h, const DTensor& g) {
  const Tensor like = h->shard.to_local();
  const TensorOptions opts(like.dtype(), like.device());
  // The gradient of the received rows, split per sender (zeros where none arrived).
  std::vector<Tensor> back;
  int64_t at = 0;
  for (const Transfer& t : h->in) {
    const int64_t n = t.hi - t.lo;
    Shape shape = like.sizes();
    shape[h->dim] = n;
    back.push_back(g.defined() ? g.to_local().narrow(h->dim, at, n).contiguous()
                               : zeros(shape, opts));
    at += n;
  }
  // Roles swap: the pieces go back to their owners, this rank gets the gradients of the rows it
  // sent.
  const std::vector<Tensor> got = exchange(*h->comm, h->in, back, h->out, like, h->dim);
  Tensor gx = zeros(like.sizes(), opts);
  for (size_t i = 0; i < h->out.size(); ++i) {
    add_(gx.narrow(h->dim, h->out[i].lo - h->start, h->out[i].hi - h->out[i].lo), got[i]);
  }
  const DTensor& sh = h->shard;
  const DTensor gl = DTensor::from_local(gx, sh.device_mesh(), sh.placements(), false);
  if (!g.defined()) return gl;
  return autograd::record_linear_function(
      "halo_exchange_backward", {&g}, gl, [h](absl::Span<const DTensor> gg) {
        if (gg[0].defined()) return DTensorList{send_rows(h, gg[0])};
        const DTensor zero = DTensor::from_local(
            zeros_like(h->shard.to_local()), h->shard.device_mesh(), h->shard.placements(), false);
        return DTensorList{send_rows(h, zero)};
      });
}

// halo_rows' result for another padding than zeros: the rows `want` reads (halo_source_row),
// taken from this rank's shard xl and the received spans (`in`, in order), as runs of
// consecutive rows (a reflected edge: one row at a time).
DTensor assemble_padded(const DTensor& xl, const DTensor& received, const std::vector<Transfer>& in,
                        const ChunkLayout& c, int64_t r, int64_t dim, RowRange want, HaloPad pad) {
  const int64_t size = c.start.back() + c.rows.back();
  // The pool: the own shard's rows, then the received spans; each source row's place in it.
  const DTensor pool = received.defined() ? cat({xl, received}, dim) : xl;
  std::vector<int64_t> at;
  for (int64_t i = want.begin; i < want.end; ++i) {
    const int64_t src = halo_source_row(i, size, pad);
    if (src >= c.start[r] && src < c.start[r] + c.rows[r]) {
      at.push_back(src - c.start[r]);
      continue;
    }
    int64_t off = c.rows[r];
    for (const Transfer& t : in) {
      if (src >= t.lo && src < t.hi) {
        at.push_back(off + src - t.lo);
        break;
      }
      off += t.hi - t.lo;
    }
  }
  // An empty piece keeps the pool (the own shard, the exchange) in every rank's graph.
  std::vector<DTensor> pieces{narrow(pool, dim, 0, 0)};
  for (size_t k = 0; k < at.size();) {
    size_t e = k + 1;
    while (e < at.size() && at[e] == at[e - 1] + 1) ++e;
    pieces.push_back(narrow(pool, dim, at[k], static_cast<int64_t>(e - k)));
    k = e;
  }
  return pieces.size() == 1 ? pieces[0] : cat(pieces, dim);
}

}  // namespace

int64_t halo_source_row(int64_t i, int64_t size, HaloPad pad) {
  if (i >= 0 && i < size) return i;
  switch (pad) {
    case HaloPad::kReflect: {
      const int64_t period = 2 * (size - 1);  // ... 1 0 1 2 ... size-1 size-2 ...
      if (period == 0) return 0;
      const int64_t j = (i % period + period) % period;
      return j < size ? j : period - j;
    }
    case HaloPad::kReplicate:
      return std::clamp<int64_t>(i, 0, size - 1);
    case HaloPad::kCircular:
      return (i % size + size) % size;
    default:
      return -1;
  }
}

std::vector<PostStep> p2p_post_order(int64_t rank, const std::vector<int64_t>& send_peers,
                                     const std::vector<int64_t>& recv_peers) {
  std::vector<int64_t> peers = send_peers;
  peers.insert(peers.end(), recv_peers.begin(), recv_peers.end());
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::vector<PostStep> order;
  for (const int64_t peer : peers) {
    for (const bool send : {rank<peer, rank> peer}) {
      const std::vector<int64_t>& list = send ? send_peers : recv_peers;
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i] == peer) order.push_back({send, i});
      }
    }
  }
  return order;
}

DTensor halo_rows(const DTensor& x, int64_t dim, int64_t m, const std::vector<RowRange>& range,
                  HaloPad pad) {
  const DeviceMesh& mesh = x.device_mesh();
  const int64_t world = mesh.size(m), r = mesh.get_coordinate()[m], size = x.size(dim);
  DT_CHECK(static_cast<int64_t>(range.size()) == world,
           "[halo_rows] expected one row range per rank of mesh dim %d (%d), got %d", m, world,
           static_cast<int64_t>(range.size()));
  const ChunkLayout c = chunk_layout(size, world);
  const auto end_of = [&](int64_t q) { return c.start[q] + c.rows[q]; };
  // The rows of each other rank's shard this rank's range reaches (in), and the rows of this
  // rank's shard each other rank's range reaches (out): point-to-point, with the neighbours
  // only when every shard is at least as thick as the halo, further along when shards are
  // thinner (every rank's range is known to all, so both sides agree on every transfer).
  // Another padding than zeros reads rows of x for those outside it: each rank's span of rows
  // of each shard is the hull of the source rows its range reads there (one message per pair).
  std::vector<std::vector<RowRange>> reads;  // [p][q], other modes only
  if (pad != HaloPad::kZeros) {
    DT_CHECK(size > 0, "[halo_rows] a padding mode other than zeros needs rows (dim %d is empty)",
             dim);
    reads.assign(world, std::vector<RowRange>(world, RowRange{size, 0}));
    for (int64_t p = 0; p < world; ++p) {
      for (int64_t i = range[p].begin; i < range[p].end; ++i) {
        const int64_t src = halo_source_row(i, size, pad);
        const int64_t q =
            std::upper_bound(c.start.begin(), c.start.end(), src) - c.start.begin() - 1;
        RowRange& h = reads[p][std::max<int64_t>(q, 0)];
        h = {std::min(h.begin, src), std::max(h.end, src + 1)};
      }
    }
  }
  std::vector<Transfer> in, out;
  bool any = false;  // whether any pair of ranks exchanges rows
  for (int64_t q = 0; q < world; ++q) {
    for (int64_t p = 0; p < world; ++p) {
      if (p == q) continue;
      const RowRange span = pad == HaloPad::kZeros ? range[p] : reads[p][q];
      const int64_t lo = std::max(span.begin, c.start[q]);
      const int64_t hi = std::min(span.end, end_of(q));
      if (lo >= hi) continue;
      any = true;
      if (p == r) in.push_back({q, lo, hi});
      if (q == r) out.push_back({p, lo, hi});
    }
  }
  const DTensor xl = x.to_local_dtensor();
  // The received rows, in the order of `in` (increasing peer), as one local DTensor whose
  // gradient goes back the way the rows came: each piece's gradient to its owner, which adds
  // the pieces it gets into its shard's gradient.
  DTensor received;
  if (any) {
    const Tensor local = xl.to_local();
    auto h = std::make_shared<HaloExchange>();
    h->comm = mesh.communicator(m);
    h->in = in;
    h->out = out;
    h->start = c.start[r];
    h->dim = dim;
    h->shard = DTensor::from_local(local, xl.device_mesh(), xl.placements(), false);
    received = send_rows(h, xl);
  }
  const RowRange want = range[r];
  if (pad != HaloPad::kZeros) return assemble_padded(xl, received, in, c, r, dim, want, pad);
  // This rank's range, piece by piece: zeros before row 0, each shard's rows in order (its own
  // from xl, another rank's from the received rows), zeros after the last row.
  std::vector<DTensor> pieces;
  // An empty piece of the received rows keeps the exchange in every rank's graph, also where
  // this rank reads none (it may have sent rows, whose gradients must come back).
  if (received.defined()) pieces.push_back(narrow(received, dim, 0, 0));
  // Likewise an empty piece of the own shard where the range holds none of its rows: x's
  // gradient then comes through its to_local on every rank (with x's placements).
  if (std::max(want.begin, c.start[r]) >= std::min(want.end, end_of(r))) {
    pieces.push_back(narrow(xl, dim, 0, 0));
  }
  if (want.begin < 0) {
    pieces.push_back(zero_rows(xl, dim, std::min<int64_t>(0, want.end) - want.begin));
  }
  int64_t at = 0;  // the next received row
  for (int64_t q = 0; q < world; ++q) {
    const int64_t lo = std::max(want.begin, c.start[q]), hi = std::min(want.end, end_of(q));
    if (lo >= hi) continue;
    if (q == r) {
      pieces.push_back(narrow(xl, dim, lo - c.start[q], hi - lo));
    } else {
      pieces.push_back(narrow(received, dim, at, hi - lo));
      at += hi - lo;
    }
  }
  if (want.end > size) {
    pieces.push_back(zero_rows(xl, dim, want.end - std::max(want.begin, size)));
  }
  return pieces.size() == 1 ? pieces[0] : cat(pieces, dim);
}

}  // namespace dtensor::detail
