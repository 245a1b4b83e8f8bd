// A dry run on the fake backend agrees with the real run (issue 46 item 4). Run by
// test_dry_run_agreement.sh for one layout (the last argument): first under mpirun at the
// layout's world size (--write DIR: each rank writes its report), then once per rank on the fake
// backend (DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=N DTENSOR_FAKE_RANK=r, --compare DIR): the
// collectives, sends and receives and their bytes per mesh dim must be the same, and the
// allocator bytes per category too (the fake backend allocates what MPI's CPU path does: the
// callers' outputs; both count 64-byte rounded blocks). Then once per rank on meta tensors
// (--compare-meta DIR): the same figures but activation_bytes (a meta step's peak is what its
// tensors would hold; the real one also holds kernels' temporaries), and the real allocator must
// not grow. Exits 1 on a difference, printing both reports.
//
// Layouts (the tiny checkpoint's shape, sequence parallel):
//   dp2_tp2         4 ranks: FSDP's all-gathers and reduce-scatters on dp, TP's on tp
//   pp2_dp2_tp2     8 ranks: 1F1B over 4 microbatches, the stages' sends and receives on pp (a
//                   header and the sequence-sharded hidden states per transfer)
//   dp2_cp2_tp2     8 ranks: ring attention's k/v (and dk/dv) blocks on cp, FSDP over dp x cp
//   pp2_cp2_tp2     8 ranks: both kinds of transfers, the stages' chunks [1, seq / cp, hidden]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "dtensor/collectives/runtime.h"
#include "dtensor/models/dry_run.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"

namespace dt = dtensor;
namespace models = dtensor::models;

namespace {

// The tiny checkpoint's shape (tests/data/tiny_llama) on `layout` (see the top), or nullopt.
std::optional<models::DryRunOptions> options(const std::string& layout) {
  models::DryRunOptions o;
  o.config.vocab_size = 256;
  o.config.hidden_size = 64;
  o.config.intermediate_size = 160;
  o.config.num_hidden_layers = 2;
  o.config.num_attention_heads = 4;
  o.config.num_key_value_heads = 2;
  o.config.head_dim = 16;
  o.config.max_position_embeddings = 128;
  o.batch = 2;
  o.seq = 16;
  o.sequence_parallel = true;
  if (layout == "dp2_tp2") {
    o.mesh_shape = {2, 2};
    o.mesh_dim_names = {"dp", "tp"};
  } else if (layout == "pp2_dp2_tp2") {
    o.mesh_shape = {2, 2, 2};
    o.mesh_dim_names = {"pp", "dp", "tp"};
    o.batch = 4;  // one row per microbatch (2 x pp of them)
  } else if (layout == "dp2_cp2_tp2") {
    o.mesh_shape = {2, 2, 2};
    o.mesh_dim_names = {"dp", "cp", "tp"};
  } else if (layout == "pp2_cp2_tp2") {
    o.mesh_shape = {2, 2, 2};
    o.mesh_dim_names = {"pp", "cp", "tp"};
    o.batch = 4;
  } else {
    return std::nullopt;
  }
  return o;
}

// The figures that must agree, one per line.
std::string canonical(const models::DryRunReport& r) {
  std::ostringstream s;
  for (const auto& [dim, kinds] : r.per_dim) {
    for (const auto& [kind, t] : kinds) {
      s << dim << " | " << kind << " | " << t.count << " | " << t.bytes << "\n";
    }
  }
  s << "parameter_bytes " << r.parameter_bytes << "\n";
  s << "gradient_bytes " << r.gradient_bytes << "\n";
  s << "optimizer_bytes " << r.optimizer_bytes << "\n";
  s << "activation_bytes " << r.activation_bytes << "\n";
  s << "propagation_misses " << r.propagation_misses << "\n";
  s << "plan_misses " << r.plan_misses << "\n";
  return s.str();
}

// `s` without its activation_bytes line.
std::string without_activations(std::string s) {
  const size_t at = s.find("activation_bytes ");
  if (at != std::string::npos) s.erase(at, s.find('\n', at) + 1 - at);
  return s;
}

// Whether the report has sends and receives on the dim named `name` (the pp transfers, the cp
// ring): the layouts that have one must show them, or the agreement would prove nothing.
bool has_point_to_point(const models::DryRunReport& r, const std::string& name) {
  for (const auto& [dim, kinds] : r.per_dim) {
    if (dim.ends_with("(" + name + ")") && kinds.contains("send") && kinds.contains("recv")) {
      return true;
    }
  }
  return false;
}

int run(int argc, char** argv) {
  const bool meta = argc == 4 && std::strcmp(argv[1], "--compare-meta") == 0;
  const std::optional<models::DryRunOptions> layout = argc == 4 ? options(argv[3]) : std::nullopt;
  if (argc != 4 || !layout ||
      (std::strcmp(argv[1], "--write") != 0 && std::strcmp(argv[1], "--compare") != 0 && !meta)) {
    std::fprintf(stderr,
                 "usage: %s --write DIR | --compare DIR | --compare-meta DIR, then a layout: "
                 "dp2_tp2, pp2_dp2_tp2, dp2_cp2_tp2 or pp2_cp2_tp2\n",
                 argv[0]);
    return 2;
  }
  models::DryRunOptions o = *layout;
  o.meta = meta;
  const models::DryRunReport r = models::dry_run_llama_step(o);
  // A meta run allocates nothing that outlives it: measured on a second run, after the first
  // filled the per-process caches (the first pipeline stage's first run leaves 4 KiB there,
  // with data or on meta alike; the second leaves none, so it is no leak).
  const int64_t held_before = dt::memory_stats().current_bytes;
  if (meta) models::dry_run_llama_step(o);
  const int64_t held_after = dt::memory_stats().current_bytes;
  const std::string path = std::string(argv[2]) + "/rank" + std::to_string(r.rank) + ".txt";
  const std::string mine = meta ? without_activations(canonical(r)) : canonical(r);
  if (std::strcmp(argv[1], "--write") == 0) {
    std::ofstream(path) << mine;
    return 0;
  }
  std::ifstream in(path);
  std::stringstream real;
  real << in.rdbuf();
  const std::string expected = meta ? without_activations(real.str()) : real.str();
  if (meta && held_after != held_before) {
    std::fprintf(stderr, "rank %d: the meta dry run left %lld bytes allocated (expected none)\n",
                 r.rank, static_cast<long long>(held_after - held_before));
    return 1;
  }
  bool transfers = true;
  for (const std::string dim : {"pp", "cp"}) {
    const auto& names = o.mesh_dim_names;
    if (std::find(names.begin(), names.end(), dim) != names.end()) {
      transfers = transfers && has_point_to_point(r, dim);
    }
  }
  if (!r.fake || r.per_dim.empty() || !transfers || expected != mine) {
    std::fprintf(stderr,
                 "dry run (rank %d, %s backend) differs from the real run:\n--- real (%s)\n%s"
                 "--- dry run\n%s%s",
                 r.rank, r.fake ? "fake" : "NOT fake", path.c_str(), real.str().c_str(),
                 mine.c_str(), r.table().c_str());
    return 1;
  }
  std::printf("rank %d: the %sdry run agrees with the real run\n%s", r.rank, meta ? "meta " : "",
              r.table().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  try {
    return run(argc, argv);
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
