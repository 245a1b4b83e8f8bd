// The halo exchange (detail/halo.h), shared by the height-sharded convolution (conv_dtensor.cc)
// and the height-sharded pools (pool_dtensor.cc).
#include <algorithm>
#include <vector>

#include "dtensor/core/factories.h"
#include "dtensor/ops/conv/detail/halo.h"
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

DTensor halo_rows(const DTensor& x, int64_t dim, int64_t m, const std::vector<RowRange>& range) {
  const DeviceMesh& mesh = x.device_mesh();
  const int64_t world = mesh.size(m), r = mesh.get_coordinate()[m], size = x.size(dim);
  DT_CHECK(static_cast<int64_t>(range.size()) == world,
           "[halo_rows] expected one row range per rank of mesh dim %d (%d), got %d", m, world,
           static_cast<int64_t>(range.size()));
  const ChunkLayout c = chunk_layout(size, world);
  const auto end_of = [&](int64_t q) { return c.start[q] + c.rows[q]; };
  // The prefix of each shard that a preceding rank's range reaches (head) and the suffix a
  // following rank's range reaches (tail); the exchange carries the longest of each.
  std::vector<int64_t> head(static_cast<size_t>(world), 0), tail(head);
  int64_t head_max = 0, tail_max = 0;
  for (int64_t q = 0; q < world; ++q) {
    for (int64_t p = 0; p < world; ++p) {
      const int64_t lo = std::max(range[p].begin, c.start[q]);
      const int64_t hi = std::min(range[p].end, end_of(q));
      if (lo >= hi) continue;
      if (p < q) head[q] = std::max(head[q], hi - c.start[q]);
      if (p > q) tail[q] = std::max(tail[q], end_of(q) - lo);
    }
    head_max = std::max(head_max, head[q]);
    tail_max = std::max(tail_max, tail[q]);
  }
  Placements partial_grad = x.placements();
  partial_grad[m] = Partial();
  const DTensor xl = x.to_local_dtensor();
  const int64_t edge = head_max + tail_max;
  DTensor gathered;
  if (edge > 0) {
    // This rank's edges: [head rows | zeros | tail rows | zeros], head_max + tail_max rows.
    const int64_t n = c.rows[r];
    const DTensor edges =
        cat({narrow(xl, dim, 0, head[r]), zero_rows(xl, dim, head_max - head[r]),
             narrow(xl, dim, n - tail[r], tail[r]), zero_rows(xl, dim, tail_max - tail[r])},
            dim);
    Shape gshape = edges.shape();
    gshape[dim] = edge * world;
    gathered = DTensor::from_local(edges, mesh, x.placements(), false, gshape)
                   .redistribute(mesh, Placements(x.placements().size(), Replicate()))
                   .to_local_dtensor(partial_grad);
  }
  // This rank's range, piece by piece: zeros before row 0, each shard's rows in order (its own
  // from xl, a neighbour's from the gathered edges), zeros after the last row.
  const RowRange want = range[r];
  std::vector<DTensor> pieces;
  // An empty piece of the gathered edges keeps the exchange in every rank's graph, also where
  // no neighbour row is read (a short or empty range): its gradient's reduce-scatter runs on all
  // ranks.
  if (gathered.defined()) pieces.push_back(narrow(gathered, dim, 0, 0));
  // Likewise an empty piece of the own shard where the range holds none of its rows: x's
  // gradient then comes through its to_local on every rank (with x's placements).
  if (std::max(want.begin, c.start[r]) >= std::min(want.end, end_of(r))) {
    pieces.push_back(narrow(xl, dim, 0, 0));
  }
  if (want.begin < 0) {
    pieces.push_back(zero_rows(xl, dim, std::min<int64_t>(0, want.end) - want.begin));
  }
  for (int64_t q = 0; q < world; ++q) {
    const int64_t lo = std::max(want.begin, c.start[q]), hi = std::min(want.end, end_of(q));
    if (lo >= hi) continue;
    if (q == r) {
      pieces.push_back(narrow(xl, dim, lo - c.start[q], hi - lo));
    } else if (q < r) {  // from q's tail: rows [end - tail[q], end) at q * edge + head_max
      const int64_t at = q * edge + head_max + (lo - (end_of(q) - tail[q]));
      pieces.push_back(narrow(gathered, dim, at, hi - lo));
    } else {  // from q's head: rows [start, start + head[q]) at q * edge
      pieces.push_back(narrow(gathered, dim, q * edge + (lo - c.start[q]), hi - lo));
    }
  }
  if (want.end > size) {
    pieces.push_back(zero_rows(xl, dim, want.end - std::max(want.begin, size)));
  }
  return pieces.size() == 1 ? pieces[0] : cat(pieces, dim);
}

}  // namespace dtensor::detail
