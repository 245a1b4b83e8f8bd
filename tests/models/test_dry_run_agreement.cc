// A dry run on the fake backend agrees with the real run (issue 46 item 4). Run by
// test_dry_run_agreement.sh: first under mpirun at 4 ranks (--write DIR: each rank writes its
// report), then once per rank on the fake backend (DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=4
// DTENSOR_FAKE_RANK=r, --compare DIR): the collectives and bytes per mesh dim must be the same,
// and the allocator bytes per category too (the fake backend allocates what MPI's CPU path
// does: the callers' outputs; both count 64-byte rounded blocks). Then once per rank on meta
// tensors (--compare-meta DIR): the same figures but activation_bytes (a meta step's peak is
// what its tensors would hold; the real one also holds kernels' temporaries), and the real
// allocator must not grow. Exits 1 on a difference, printing both reports.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "dtensor/collectives/runtime.h"
#include "dtensor/models/dry_run.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"

namespace dt = dtensor;
namespace models = dtensor::models;

namespace {

// The tiny checkpoint's shape (tests/data/tiny_llama), on a dp 2 x tp 2 mesh with sequence
// parallelism: FSDP's all-gathers and reduce-scatters on dp, TP's on tp.
models::DryRunOptions options() {
  models::DryRunOptions o;
  o.config.vocab_size = 256;
  o.config.hidden_size = 64;
  o.config.intermediate_size = 160;
  o.config.num_hidden_layers = 2;
  o.config.num_attention_heads = 4;
  o.config.num_key_value_heads = 2;
  o.config.head_dim = 16;
  o.config.max_position_embeddings = 128;
  o.mesh_shape = {2, 2};
  o.mesh_dim_names = {"dp", "tp"};
  o.batch = 2;
  o.seq = 16;
  o.sequence_parallel = true;
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

int run(int argc, char** argv) {
  const bool meta = argc == 3 && std::strcmp(argv[1], "--compare-meta") == 0;
  if (argc != 3 ||
      (std::strcmp(argv[1], "--write") != 0 && std::strcmp(argv[1], "--compare") != 0 && !meta)) {
    std::fprintf(stderr, "usage: %s --write DIR | --compare DIR | --compare-meta DIR\n", argv[0]);
    return 2;
  }
  models::DryRunOptions o = options();
  o.meta = meta;
  const int64_t held_before = dt::memory_stats().current_bytes;
  const models::DryRunReport r = models::dry_run_llama_step(o);
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
  if (!r.fake || r.per_dim.empty() || expected != mine) {
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
