// Cross-mesh redistribute: a DTensor moved to another device mesh (another shape, other ranks,
// another device type), as point-to-point transfers of the overlapping boxes. See redistribute.h
// (redistribute_local) for the contract; the steps:
//  1. Agreement. Every rank of either mesh sends a fingerprint of what it moves (both specs as
//     text, with an FNV hash of the whole) to the lowest rank of the two meshes, which compares
//     them and answers each with a verdict; a rank asking for something else raises the same
//     error on every rank, naming both sides, before any data moves. (There is no communicator
//     over the union of two arbitrary meshes, so this goes point to point on the world
//     communicator; each wait has the collective deadline, so a rank that never comes ends the
//     job there instead of hanging.)
//  2. Partial on the source is reduced on the source mesh (an ordinary redistribute to
//     Replicate on those mesh dims); Partial on the target is made at the end, locally
//     (Replicate -> Partial moves nothing). What crosses is Shard / Replicate only.
//  3. Every source rank holds one box of the global tensor (its local shard, offsets from the
//     one shard-math function); the ranks holding the same box are its holders. For every
//     target rank and every distinct source box overlapping the box it needs, ONE holder sends
//     the overlap: the target itself when it is a holder (a local copy, also CPU <-> CUDA),
//     otherwise holder (target index mod holders), spreading the sends over the replicas. So
//     each byte a target lacks crosses once, and a rank sends to / receives from a peer at
//     most one message per call.
// Data moves over the world MPI communicator (host memory; CUDA pieces are staged through it),
// not over NCCL: a cross-mesh move is a resharding step (pipeline stages, evaluation or
// checkpoint layouts), not a per-layer collective.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor {
namespace {

// Tags of the three kinds of message (matched by (peer, tag); MPI keeps the order of messages
// with the same peer and tag, so consecutive calls never cross).
constexpr int kFingerprintTag = 0x7d01;
constexpr int kVerdictTag = 0x7d02;
constexpr int kDataTag = 0x7d03;

// Fingerprint: the FNV hash of the whole text, then its first bytes (for the error message),
// carried as int64 words (the messages are raw bytes; there is no byte dtype).
constexpr int64_t kFingerprintBytes = 512;
constexpr int64_t kWord = sizeof(int64_t);
constexpr size_t kTextBytes = kFingerprintBytes - sizeof(uint64_t);

// The world ranks of both meshes, ascending, each once.
std::vector<int> member_ranks(const DeviceMesh& a, const DeviceMesh& b) {
  std::vector<int> ranks = a.ranks();
  ranks.insert(ranks.end(), b.ranks().begin(), b.ranks().end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::string describe_move(const DTensorSpec& src, const DTensorSpec& dst) {
  return absl::StrCat(src.str(), " on ", src.mesh().str(), " -> ", placements_str(dst.placements()),
                      " on ", dst.mesh().str());
}

Tensor fingerprint(const std::string& text) {
  Tensor f = zeros({kFingerprintBytes / kWord}, DType::kInt64);
  auto* p = static_cast<char*>(f.data_ptr());
  const uint64_t h = stable_hash(text.data(), text.size());
  std::memcpy(p, &h, sizeof h);
  std::memcpy(p + sizeof h, text.data(), std::min(text.size(), kTextBytes - 1));
  return f;
}

bool same_fingerprint(const Tensor& a, const Tensor& b) {
  return std::memcmp(a.data_ptr(), b.data_ptr(), kFingerprintBytes) == 0;
}

std::string fingerprint_text(const Tensor& f) {
  const char* p = static_cast<const char*>(f.data_ptr()) + sizeof(uint64_t);
  return std::string(p, strnlen(p, kTextBytes));
}

// Step 1: every member learns whether all of them move the same thing (and hold a local shard
// that fits: a rank's `local_error` makes its fingerprint differ); throws on every member when
// not. The verdict: [first disagreeing rank or -1][its fingerprint][the root's].
void agree(const DTensorSpec& src, const DTensorSpec& dst, const std::vector<int>& members,
           const std::string& local_error) {
  const CommDebugMode::OpScope label("redistribute (agreement)");
  const CommunicatorPtr& world = world_communicator();
  const int me = world_rank();
  const int root = members.front();
  const std::string move = describe_move(src, dst);
  const Tensor mine = fingerprint(local_error.empty() ? move : local_error + " (in " + move + ")");
  Tensor verdict = zeros({1 + 2 * kFingerprintBytes / kWord}, DType::kInt64);
  auto* v = static_cast<char*>(verdict.data_ptr());
  if (me == root) {
    std::vector<Tensor> theirs;
    std::vector<WorkPtr> works;
    for (size_t i = 1; i < members.size(); ++i) {
      theirs.push_back(zeros({kFingerprintBytes / kWord}, DType::kInt64));
      works.push_back(world->recv(theirs.back(), members[i], kFingerprintTag));
    }
    int64_t bad = -1;
    for (size_t i = 0; i < works.size(); ++i) {
      works[i]->wait();
      if (bad < 0 && !same_fingerprint(theirs[i], mine)) {
        bad = members[i + 1];
        std::memcpy(v + kWord, theirs[i].data_ptr(), kFingerprintBytes);
      }
    }
    std::memcpy(v, &bad, sizeof bad);
    std::memcpy(v + kWord + kFingerprintBytes, mine.data_ptr(), kFingerprintBytes);
    works.clear();
    for (size_t i = 1; i < members.size(); ++i) {
      works.push_back(world->send(verdict, members[i], kVerdictTag));
    }
    for (const WorkPtr& w : works) w->wait();
  } else {
    WorkPtr sent = world->send(mine, root, kFingerprintTag);
    WorkPtr got = world->recv(verdict, root, kVerdictTag);
    sent->wait();
    got->wait();
  }
  int64_t bad = -1;
  std::memcpy(&bad, v, sizeof bad);
  if (bad < 0) return;
  const Tensor theirs = verdict.narrow(0, 1, kFingerprintBytes / kWord).contiguous();
  const Tensor roots =
      verdict.narrow(0, 1 + kFingerprintBytes / kWord, kFingerprintBytes / kWord).contiguous();
  throw Error(absl::StrFormat(
      "[redistribute] the ranks of a cross-mesh redistribute disagree: rank %d moves %s where "
      "rank %d moves %s (expected every rank of both meshes to move the same tensor between "
      "the same meshes and placements; a submesh cut with mesh[\"name\"] holds different ranks "
      "on different ranks, so build the target over explicit ranks)",
      bad, fingerprint_text(theirs), root, fingerprint_text(roots)));
}

// A box of the global tensor: first index and extent per dim (dtensor/tensor/shape_ops.h).
struct Box {
  Shape offset;
  Shape shape;
};

// One message (or local copy): world rank `from` gives world rank `to` the box.
struct Transfer {
  int from;
  int to;
  Box box;
};

// Step 3's plan, the same on every rank (a pure function of the two specs, neither with
// Partial). Empty boxes move nothing.
std::vector<Transfer> plan_transfers(const DTensorSpec& src, const DTensorSpec& dst) {
  struct Source {
    LocalShard box;
    std::vector<int> holders;  // world ranks, in mesh order
  };
  std::vector<Source> sources;
  const DeviceMesh& sm = src.mesh();
  for (int64_t i = 0; i < sm.size(); ++i) {
    LocalShard box = src.local_shard(detail::unravel_index(i, sm.shape()));
    if (shape_numel(box.shape) == 0) continue;
    const int rank = sm.ranks()[static_cast<size_t>(i)];
    auto it = std::find_if(sources.begin(), sources.end(), [&](const Source& s) {
      return s.box.offset == box.offset && s.box.shape == box.shape;
    });
    if (it == sources.end()) {
      sources.push_back({std::move(box), {rank}});
    } else {
      it->holders.push_back(rank);
    }
  }
  std::vector<Transfer> plan;
  const DeviceMesh& dm = dst.mesh();
  for (int64_t j = 0; j < dm.size(); ++j) {
    const LocalShard need = dst.local_shard(detail::unravel_index(j, dm.shape()));
    const int to = dm.ranks()[static_cast<size_t>(j)];
    for (const Source& s : sources) {
      Box box;
      if (!box_intersection(s.box.offset, s.box.shape, need.offset, need.shape, box.offset,
                            box.shape)) {
        continue;
      }
      const bool holds = std::find(s.holders.begin(), s.holders.end(), to) != s.holders.end();
      const int from = holds ? to : s.holders[static_cast<size_t>(j) % s.holders.size()];
      plan.push_back({from, to, std::move(box)});
    }
  }
  return plan;
}

}  // namespace

Tensor redistribute_cross_mesh_local(const Tensor& local, const DTensorSpec& src,
                                     const DTensorSpec& dst) {
  DT_CHECK(src.meta() == dst.meta(),
           "[redistribute] source (%s, %s) and target (%s, %s) describe different tensors "
           "(expected the same global shape, stride and dtype)",
           shape_str(src.shape()), dtype_name(src.dtype()), shape_str(dst.shape()),
           dtype_name(dst.dtype()));
  const std::vector<int> members = member_ranks(src.mesh(), dst.mesh());
  const int me = world_rank();
  const Device out_device = detail::mesh_device(dst.mesh(), local);
  if (!std::binary_search(members.begin(), members.end(), me)) {
    return detail::empty_local(dst.ndim(), dst.dtype(), out_device);
  }
  // A local shard that does not fit is this rank's error alone: it goes into the agreement, so
  // every rank raises (naming this one) instead of the others waiting for it.
  std::string local_error;
  if (src.mesh().contains_me()) {
    const LocalShard expected = src.local_shard();
    if (!(local.shape() == expected.shape && local.dtype() == src.dtype())) {
      local_error = absl::StrFormat(
          "[redistribute] local shard is %s %s but %s implies %s %s on coordinate %s",
          shape_str(local.shape()), dtype_name(local.dtype()), src.str(), shape_str(expected.shape),
          dtype_name(src.dtype()), shape_str(src.mesh().get_coordinate()));
    }
  }
  if (members.size() > 1) agree(src, dst, members, local_error);
  DT_CHECK(local_error.empty(), "%s", local_error);

  // Step 2: Partial reduced on the source mesh (ranks outside it issue nothing).
  const DTensorSpec src_sr = src.with_placements(without_partial(src), "redistribute");
  const DTensorSpec dst_sr = dst.with_placements(without_partial(dst), "redistribute");
  const Tensor x = src.has_partial() ? redistribute_local(local, src, src_sr) : local;

  // Step 3: receives posted first, then sends, then local copies; received pieces land in
  // host buffers and are copied into place.
  const LocalShard have = src.mesh().contains_me() ? src_sr.local_shard() : LocalShard{};
  const LocalShard want = dst.mesh().contains_me() ? dst_sr.local_shard() : LocalShard{};
  Tensor out = dst.mesh().contains_me() ? empty(want.shape, TensorOptions(dst.dtype(), out_device))
                                        : detail::empty_local(dst.ndim(), dst.dtype(), out_device);
  const CommunicatorPtr& world = world_communicator();
  struct Incoming {
    Tensor buffer;
    Tensor into;
    WorkPtr work;
  };
  std::vector<Incoming> incoming;
  std::vector<WorkPtr> outgoing;
  std::vector<Tensor> outgoing_buffers;
  const std::vector<Transfer> plan = plan_transfers(src_sr, dst_sr);
  for (const Transfer& t : plan) {
    if (t.to != me || t.from == me) continue;
    Tensor buffer = empty(t.box.shape, TensorOptions(dst.dtype(), kCPU));
    WorkPtr work = world->recv(buffer, t.from, kDataTag);
    incoming.push_back({std::move(buffer), box_view(out, want.offset, t.box.offset, t.box.shape),
                        std::move(work)});
  }
  for (const Transfer& t : plan) {
    if (t.from != me || t.to == me) continue;
    Tensor buffer = empty(t.box.shape, TensorOptions(dst.dtype(), kCPU));
    buffer.copy_(box_view(x, have.offset, t.box.offset, t.box.shape));
    outgoing.push_back(world->send(buffer, t.to, kDataTag));
    outgoing_buffers.push_back(std::move(buffer));
  }
  for (const Transfer& t : plan) {
    if (t.from == me && t.to == me) {
      box_view(out, want.offset, t.box.offset, t.box.shape)
          .copy_(box_view(x, have.offset, t.box.offset, t.box.shape));
    }
  }
  for (Incoming& in : incoming) {
    in.work->wait();
    in.into.copy_(in.buffer);
  }
  for (const WorkPtr& w : outgoing) w->wait();

  // Partial on the target: local (Replicate -> Partial keeps or zeroes, nothing moves).
  if (dst.has_partial() && dst.mesh().contains_me()) out = redistribute_local(out, dst_sr, dst);
  return out;
}

}  // namespace dtensor
