// Ranks that captured different op sequences are detected right after the capture (a review
// finding: "ranks that diverge are detected, not paired"). A step whose host control flow
// depends on rank-local data (one rank takes another branch) still runs eagerly while it is
// captured: each rank's collectives pair with whatever the others issue, and mismatched ones are
// caught by the communicators' fingerprints, but a branch that issues no collective (or the same
// ones) is not. Its graphs would then differ between ranks, and replay would silently compute
// something else on each. So the ranks of each mesh the step's inputs and outputs live on compare
// a hash of their recorded sequence: one small all-gather per mesh and capture, none per replay.
#include <string>
#include <vector>

#include "dtensor/compile/graph.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::compiler {
namespace {

// What must be equal on every rank: per node its kind, name, placements and the kinds of the
// collectives it issued (not their bytes, nor shapes: uneven shards differ between ranks).
uint64_t sequence_hash(const Graph& g) {
  uint64_t h = kStableHashSeed;
  auto mix = [&h](std::string_view s) {
    const uint64_t n = s.size();
    h = stable_hash(&n, sizeof n, h);
    h = stable_hash(s.data(), s.size(), h);
  };
  for (const Node& n : g.nodes()) {
    mix(n.kind);
    mix(n.name);
    mix(n.detail);
    for (const Collective& c : n.collectives) mix(c.kind);
    const uint64_t arity[2] = {n.inputs.size(), n.outputs.size()};
    h = stable_hash(arity, sizeof arity, h);
  }
  return h;
}

}  // namespace

void check_ranks_agree(const Graph& g, const DTensorList& inputs, const DTensorList& outputs) {
  const uint64_t mine = sequence_hash(g);
  std::vector<const DTensor*> seen;  // one tensor per distinct mesh, in first-use order
  for (const DTensorList* list : {&inputs, &outputs}) {
    for (const DTensor& t : *list) {
      if (!t.defined() || !t.device_mesh().contains_me()) continue;
      bool known = false;
      for (const DTensor* s : seen) known = known || s->device_mesh() == t.device_mesh();
      if (!known) seen.push_back(&t);
    }
  }
  for (const DTensor* t : seen) {
    const DeviceMesh& mesh = t->device_mesh();
    std::vector<int64_t> dims(static_cast<size_t>(mesh.ndim()));
    for (int64_t d = 0; d < mesh.ndim(); ++d) dims[static_cast<size_t>(d)] = d;
    const CommunicatorPtr comm = mesh.flattened_communicator(dims);
    if (comm == nullptr || comm->size() <= 1) continue;
    // (hash, node count) per rank, on the device the mesh's collectives run on. The flattened
    // communicator orders the mesh's ranks row-major, as mesh.ranks() does.
    int64_t word[2] = {static_cast<int64_t>(mine), static_cast<int64_t>(g.nodes().size())};
    const int64_t two = 2, all_n = 2 * static_cast<int64_t>(comm->size());
    const Device device = t->to_local().device();
    const Tensor out = zeros({all_n}, TensorOptions(DType::kInt64, device));
    comm->all_gather(out, from_blob(word, {&two, 1}, DType::kInt64).to(device))->wait();
    const Tensor all = out.to(Device());
    const auto* w = static_cast<const int64_t*>(all.data_ptr());
    // Every rank holds every word, so every rank raises the same message.
    for (int r = 1; r < comm->size(); ++r) {
      if (w[2 * r] == w[0] && w[2 * r + 1] == w[1]) continue;
      DT_FAIL(
          "[compile] the ranks of %s captured different op sequences: rank %d of the mesh (world "
          "rank %d) recorded %d nodes with hash %x, rank 0 of the mesh (world rank %d) %d nodes "
          "with hash %x. The step takes another branch on some rank (host control flow on "
          "rank-local values); replaying it would compute something different on each rank. "
          "Make the step's control flow the same on every rank, or run it eagerly",
          mesh.str(), r, mesh.ranks()[static_cast<size_t>(r)], w[2 * r + 1],
          static_cast<uint64_t>(w[2 * r]), mesh.ranks()[0], w[1], static_cast<uint64_t>(w[0]));
    }
  }
}

}  // namespace dtensor::compiler
