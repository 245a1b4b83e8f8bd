// Cross-rank agreement of a compiled step (graph.h: check_ranks_agree, check_scalars_agree).
//
// Ranks that captured different op sequences are detected right after the capture (a review
// finding: "ranks that diverge are detected, not paired"). A step whose host control flow
// depends on rank-local data (one rank takes another branch) still runs eagerly while it is
// captured: each rank's collectives pair with whatever the others issue, and mismatched ones are
// caught by the communicators' fingerprints, but a branch that issues no collective (or the same
// ones) is not. Its graphs would then differ between ranks, and replay would silently compute
// something else on each. So each pair of ranks of each mesh of the step's inputs compares a hash
// of the recorded nodes both take part in (sub-mesh ops included): one all-gather per mesh and
// capture, none per replay. When two ranks' hashes differ (only then), the mesh's ranks gather
// the two ranks' per-node hashes and then the text of the first node that differs, so that every
// rank of the mesh names both ops ("rank 0 ... ran op 'sum' (...); rank 1 ran op 'exp' ...").
//
// Host scalars are compared on every call that passes them, before the guard decides: a rank
// whose scalars changed would re-capture (running the step eagerly, then the check above) while
// the others replay, and the two paths' collectives would pair wrongly or wait for each other.
//
// Every comparison runs on the meshes of the step's DTensor inputs only, in one order: those are
// the same on every rank (each rank's inputs match its capture's specs), whereas the outputs come
// from the step's own control flow — a rank returning an output on another mesh would all-gather
// on a communicator the others never join, and wait there until the deadline. The smaller meshes
// go first and no rank raises before it has joined every comparison: each word carries whether
// an earlier mesh disagreed, so the ranks of a larger mesh (the world) learn of a sub-mesh's
// disagreement and raise too, instead of waiting for ranks that left.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/compile/detail/cuda_graph.h"
#include "dtensor/compile/graph.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::compiler {
namespace {

void mix(uint64_t& h, std::string_view s) {
  const uint64_t n = s.size();
  h = stable_hash(&n, sizeof n, h);
  h = stable_hash(s.data(), s.size(), h);
}

// The distinct meshes of the inputs that contain this rank, smaller first, then by their ranks
// and their text, with one input on each (its local tensor's device is where the mesh's
// collectives run).
std::vector<const DTensor*> input_meshes(const DTensorList& inputs) {
  std::vector<const DTensor*> seen;
  for (const DTensor& t : inputs) {
    if (!t.defined() || !t.device_mesh().contains_me()) continue;
    bool known = false;
    for (const DTensor* s : seen) known = known || s->device_mesh() == t.device_mesh();
    if (!known) seen.push_back(&t);
  }
  std::sort(seen.begin(), seen.end(), [](const DTensor* a, const DTensor* b) {
    const DeviceMesh &ma = a->device_mesh(), &mb = b->device_mesh();
    if (ma.size() != mb.size()) return ma.size() < mb.size();
    if (ma.ranks() != mb.ranks()) return ma.ranks() < mb.ranks();
    return ma.str() < mb.str();
  });
  return seen;
}

// The words of every rank of the mesh `on` lives on, gathered in mesh order (the flattened
// communicator orders the mesh's ranks row-major, as mesh.ranks() does); empty when the mesh has
// one rank.
std::vector<int64_t> gather_words(const DTensor& on, std::vector<int64_t> words) {
  const DeviceMesh& mesh = on.device_mesh();
  std::vector<int64_t> dims(static_cast<size_t>(mesh.ndim()));
  for (int64_t d = 0; d < mesh.ndim(); ++d) dims[static_cast<size_t>(d)] = d;
  const CommunicatorPtr comm = mesh.flattened_communicator(dims);
  if (comm == nullptr || comm->size() <= 1) return {};
  const auto n = static_cast<int64_t>(words.size());
  const Device device = on.to_local().device();
  const Tensor out = zeros({n * comm->size()}, TensorOptions(DType::kInt64, device));
  comm->all_gather(out, from_blob(words.data(), {&n, 1}, DType::kInt64).to(device))->wait();
  const Tensor all = out.to(Device());
  const auto* w = static_cast<const int64_t*>(all.data_ptr());
  return std::vector<int64_t>(w, w + n * comm->size());
}

// `text` in `n` words (up to 8 n - 1 characters, zero-padded), and back.
std::vector<int64_t> text_words(const std::string& text, size_t n) {
  std::vector<int64_t> words(n, 0);
  std::memcpy(words.data(), text.data(), std::min(text.size(), n * 8 - 1));
  return words;
}
std::string words_text(const int64_t* words, size_t n) {
  const char* c = reinterpret_cast<const char*>(words);
  return std::string(c, strnlen(c, n * 8));
}

// A node's hash for the comparison: its kind, name, placements and the kinds of the collectives
// it issued (not their bytes, nor shapes: uneven shards differ between ranks), and its arity.
uint64_t node_hash(const Node& n) {
  uint64_t h = kStableHashSeed;
  mix(h, n.kind);
  mix(h, n.name);
  mix(h, n.detail);
  for (const Collective& c : n.collectives) mix(h, c.kind);
  const uint64_t arity[2] = {n.inputs.size(), n.outputs.size()};
  return stable_hash(arity, sizeof arity, h);
}

// Whether the world rank `peer` records node n too: a node whose mesh lacks it is not recorded
// by it (dispatch skips an op whose mesh does not contain the rank), so it is left out of the
// pair's comparison, on both ranks alike.
bool shares(const Node& n, int peer) {
  return n.ranks.empty() || std::binary_search(n.ranks.begin(), n.ranks.end(), peer);
}

// What must be equal between this rank and each peer q of `mesh` (in mesh order): per node this
// rank recorded whose ranks include q (so both ranks take part in it, a sub-mesh op included),
// its node_hash; then the step's outputs (count and specs).
// Returns, per peer, (hash, nodes hashed): two ranks compare exactly the part of the sequence
// they both take part in (issue 42).
std::vector<std::pair<uint64_t, int64_t>> pair_hashes(const Graph& g, const DeviceMesh& mesh,
                                                      const DTensorList& outputs) {
  const std::vector<int> peers = mesh.ranks();
  std::vector<std::pair<uint64_t, int64_t>> out(peers.size(), {kStableHashSeed, 0});
  for (const Node& n : g.nodes()) {
    const uint64_t h = node_hash(n);
    for (size_t q = 0; q < peers.size(); ++q) {
      if (!shares(n, peers[q])) continue;
      out[q].first = stable_hash(&h, sizeof h, out[q].first);
      ++out[q].second;
    }
  }
  // Every rank returns every output (a rank outside an output's mesh an empty placeholder of the
  // same spec), so their number and specs are the same on every rank of a correct step; an
  // output's mesh (its ranks) only where it holds both ranks: a per-rank sub-mesh, as mesh["tp"]
  // of a 2-D mesh, has other ranks on each rank.
  const uint64_t outs = outputs.size();
  const int me = dtensor::world_rank();
  for (size_t q = 0; q < peers.size(); ++q) {
    uint64_t& h = out[q].first;
    h = stable_hash(&outs, sizeof outs, h);
    for (const DTensor& t : outputs) {
      if (!t.defined()) {
        mix(h, "-");
      } else if (const std::vector<int> r = t.device_mesh().ranks();
                 std::find(r.begin(), r.end(), peers[q]) != r.end() &&
                 std::find(r.begin(), r.end(), me) != r.end()) {
        mix(h, absl::StrCat(t.spec().str(), " on ", t.device_mesh().str()));
      } else {
        mix(h, t.spec().str());
      }
    }
  }
  return out;
}

// Where ranks p and q of on's mesh (in mesh order), whose hashes of the nodes they share differ,
// first differ: only then, the mesh's ranks gather (each joins; the others send zeros) the two
// ranks' hashes of those nodes, then the text of the two nodes at the first differing position.
// `count_p` / `count_q`: how many nodes each shares with the other. Returns " They first differ
// at node i of those they share: rank p of the mesh ran op 'mul' (...) (its node 5); rank q ran
// ...", the same on every rank of the mesh, or "" when the nodes agree (the outputs differ).
std::string first_difference(const Graph& g, const DTensor& on, size_t p, size_t q, int64_t count_p,
                             int64_t count_q) {
  const std::vector<int> ranks = on.device_mesh().ranks();
  const auto me = static_cast<size_t>(std::find(ranks.begin(), ranks.end(), dtensor::world_rank()) -
                                      ranks.begin());
  const int other = me == p ? ranks[q] : me == q ? ranks[p] : -1;
  std::vector<size_t> shared;  // this rank's nodes the other of the pair records too
  for (size_t k = 0; other >= 0 && k < g.nodes().size(); ++k) {
    if (shares(g.nodes()[k], other)) shared.push_back(k);
  }
  const int64_t most = std::max(count_p, count_q);
  if (most == 0) return "";
  std::vector<int64_t> hashes(static_cast<size_t>(most), 0);
  for (size_t i = 0; i < shared.size() && i < hashes.size(); ++i) {
    hashes[i] = static_cast<int64_t>(node_hash(g.nodes()[shared[i]]));
  }
  const std::vector<int64_t> w = gather_words(on, std::move(hashes));
  const auto m = static_cast<size_t>(most);
  size_t at = 0;
  while (at < static_cast<size_t>(std::min(count_p, count_q)) && w[p * m + at] == w[q * m + at]) {
    ++at;
  }
  if (at == static_cast<size_t>(count_p) && at == static_cast<size_t>(count_q)) return "";
  std::string text;
  if (other >= 0 && at < shared.size()) {
    const Node& n = g.nodes()[shared[at]];
    text = absl::StrCat(n.kind, " '", n.name, "'", n.detail.empty() ? "" : " (", n.detail,
                        n.detail.empty() ? "" : ")", " (its node ", shared[at], ")");
  } else if (other >= 0) {
    text = absl::StrCat("nothing: its sequence ends there (", shared.size(), " nodes)");
  }
  constexpr size_t kTextWords = 48;  // up to 383 characters of each node's text
  const std::vector<int64_t> t = gather_words(on, text_words(text, kTextWords));
  auto text_of = [&](size_t r) { return words_text(&t[r * kTextWords], kTextWords); };
  return absl::StrFormat(
      " They first differ at node %d of those they share: rank %d of the mesh ran %s; rank %d "
      "ran %s.",
      at, p, text_of(p), q, text_of(q));
}

// Each rank's n words are w[r * n, +n), the last one set when that rank found an earlier mesh
// disagreeing. Returns the first rank that reports so (`earlier` set), else the first whose other
// words differ from rank 0's, else -1. The same on every rank of the mesh, which hold the same w.
int first_disagreeing(const std::vector<int64_t>& w, size_t n, bool& earlier) {
  earlier = false;
  for (size_t r = 0; r * n < w.size(); ++r) {
    if (w[r * n + n - 1] != 0) {
      earlier = true;
      return static_cast<int>(r);
    }
  }
  const auto same = static_cast<std::ptrdiff_t>(n - 1);
  for (size_t r = 1; r * n < w.size(); ++r) {
    const auto at = w.begin() + static_cast<std::ptrdiff_t>(r * n);
    if (!std::equal(w.begin(), w.begin() + same, at)) return static_cast<int>(r);
  }
  return -1;
}

// Raised when another mesh's ranks disagreed: this rank learns it from a rank of that mesh,
// with `found` (what that mesh's ranks found, when it came along: the ops that differ).
std::string disagreed_elsewhere(const DeviceMesh& mesh, int r, std::string_view what,
                                std::string_view found = "") {
  return absl::StrFormat(
      "[compile] %s: rank %d of %s (world rank %d) found that the ranks of a smaller mesh of the "
      "step's inputs disagree (%s)",
      what, r, mesh.str(), mesh.ranks()[static_cast<size_t>(r)],
      found.empty() ? std::string("its own error names them")
                    : absl::StrCat("there: ", std::string(found)));
}

}  // namespace

void check_ranks_agree(const Graph& g, const DTensorList& inputs, const DTensorList& outputs) {
  std::string error;
  // What the first disagreeing mesh's ranks found (its mesh and the ops that differ), carried to
  // the larger meshes' ranks that are not on it, so their error names the ops too.
  std::string found;
  constexpr size_t kFoundWords = 96;  // up to 767 characters
  for (const DTensor* t : input_meshes(inputs)) {
    const DeviceMesh& mesh = t->device_mesh();
    // Words per rank: (hash, count) per peer of the mesh, whether an earlier mesh disagreed and
    // what its ranks found. One all-gather of n * (2n + 1 + kFoundWords) words per mesh and
    // capture, none per replay.
    const auto hashes = pair_hashes(g, mesh, outputs);
    const size_t n = hashes.size(), per = 2 * n + 1 + kFoundWords;
    std::vector<int64_t> words;
    words.reserve(per);
    for (const auto& [h, count] : hashes) {
      words.push_back(static_cast<int64_t>(h));
      words.push_back(count);
    }
    words.push_back(error.empty() ? 0 : 1);
    const std::vector<int64_t> text = text_words(found, kFoundWords);
    words.insert(words.end(), text.begin(), text.end());
    const std::vector<int64_t> w = gather_words(*t, std::move(words));
    if (w.empty() || !error.empty()) continue;
    int earlier = -1;
    for (size_t r = 0; r < n && earlier < 0; ++r) {
      if (w[r * per + 2 * n] != 0) earlier = static_cast<int>(r);
    }
    if (earlier >= 0) {
      found = words_text(&w[static_cast<size_t>(earlier) * per + 2 * n + 1], kFoundWords);
      error =
          disagreed_elsewhere(mesh, earlier, "the ranks captured different op sequences", found);
      continue;
    }
    // Rank p's words for peer q against q's for p: every rank holds every word, so every rank of
    // the mesh finds the same first pair and makes the same message.
    for (size_t p = 0; p < n && error.empty(); ++p) {
      for (size_t q = p + 1; q < n && error.empty(); ++q) {
        const int64_t *a = &w[p * per + 2 * q], *b = &w[q * per + 2 * p];
        if (a[0] == b[0] && a[1] == b[1]) continue;
        const std::string differ = first_difference(g, *t, p, q, a[1], b[1]);
        found = absl::StrCat(mesh.str(), ", rank ", q, " of ", n, " against rank ", p,
                             differ.empty() ? ": the outputs differ" : absl::StrCat(":", differ));
        error = absl::StrFormat(
            "[compile] the ranks of %s captured different op sequences: rank %d of the mesh "
            "(world rank %d) recorded %d nodes with hash %x (outputs included) of those it "
            "shares with rank %d of the mesh (world rank %d), which recorded %d with hash %x.%s "
            "The step takes another branch on some rank (host control flow on rank-local "
            "values), or returns other outputs; replaying it would compute something different "
            "on each rank. "
            "Make the step's control flow the same on every rank, or run it eagerly",
            mesh.str(), q, mesh.ranks()[q], b[1], static_cast<uint64_t>(b[0]), p, mesh.ranks()[p],
            a[1], static_cast<uint64_t>(a[0]), differ);
      }
    }
  }
  DT_CHECK(error.empty(), "%s", error);
}

void check_scalars_agree(const DTensorList& inputs, const std::vector<double>& scalars) {
  uint64_t h = kStableHashSeed;
  for (double s : scalars) {
    const auto bits = std::bit_cast<uint64_t>(s);
    h = stable_hash(&bits, sizeof bits, h);
  }
  std::string error;
  for (const DTensor* t : input_meshes(inputs)) {
    const DeviceMesh& mesh = t->device_mesh();
    const std::vector<int64_t> w = gather_words(
        *t, {static_cast<int64_t>(scalars.size()), static_cast<int64_t>(h), error.empty() ? 0 : 1});
    bool earlier = false;
    const int r = first_disagreeing(w, 3, earlier);
    if (r < 0 || !error.empty()) continue;
    if (earlier) {
      error = disagreed_elsewhere(mesh, r, "the step's host scalars differ between ranks");
      continue;
    }
    const auto q = static_cast<size_t>(r);
    std::string what;
    if (w[3 * q] != w[0]) {
      what = absl::StrCat("passes ", w[3 * q], " scalars, rank 0 of the mesh (world rank ",
                          mesh.ranks()[0], ") ", w[0]);
    } else {
      // The same count on every rank of the mesh, which all see this mismatch: they gather the
      // values too, only to name the one that differs.
      std::vector<int64_t> bits(scalars.size());
      for (size_t i = 0; i < scalars.size(); ++i) bits[i] = std::bit_cast<int64_t>(scalars[i]);
      const std::vector<int64_t> v = gather_words(*t, bits);
      const size_t n = scalars.size();
      size_t i = 0;
      while (i + 1 < n && v[q * n + i] == v[i]) ++i;
      what = absl::StrCat("passes scalar ", i, " = ", std::bit_cast<double>(v[q * n + i]),
                          ", rank 0 of the mesh (world rank ", mesh.ranks()[0], ") ",
                          std::bit_cast<double>(v[i]));
    }
    error = absl::StrFormat(
        "[compile] the step's host scalars differ between ranks of %s: rank %d of the mesh "
        "(world rank %d) %s. Host scalars must be the same on every rank (bit for bit), as the "
        "step itself must be: a rank whose guard failed would re-capture while the others replay",
        mesh.str(), r, mesh.ranks()[q], what);
  }
  DT_CHECK(error.empty(), "%s", error);
}

CudaGraphOutcome agree_cuda_graph_outcome(const DTensorList& inputs, CudaGraphOutcome mine) {
  // Words per rank: the worst outcome it knows of (its own, or an earlier mesh's) and the world
  // rank it is from; the meshes smaller first, so a larger one carries a sub-mesh's outcome on.
  CudaGraphOutcome worst = mine;
  for (const DTensor* t : input_meshes(inputs)) {
    const std::vector<int64_t> w =
        gather_words(*t, {static_cast<int64_t>(worst.state), worst.rank});
    for (size_t r = 0; r + 1 < w.size(); r += 2) {
      if (w[r] > static_cast<int64_t>(worst.state)) {
        worst = {static_cast<CudaGraphOutcome::State>(w[r]), static_cast<int>(w[r + 1])};
      }
    }
  }
  return worst;
}

}  // namespace dtensor::compiler
