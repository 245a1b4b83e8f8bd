// A dry run of a Llama training layout (issue 46): one process plays one rank of a large job on
// the fake backend and prints, per mesh dim, the collectives and bytes of one training step, the
// memory per rank by category and the propagation + planning cost, before a cluster is booked.
//
//   ./dry_run --world 1024 --rank 0 --mesh 32x32 --dims dp,tp --hidden 1024 --layers 4 \
//             --heads 32 --kv-heads 8 --intermediate 2816 --vocab 32000 --batch 1 --seq 256
//   ./dry_run --world 64 --mesh 8x8 --dims dp,tp --hf-config tests/data/tiny_llama --sp
//   ./dry_run --world 1024 --mesh 128x8 --dims dp,tp --meta --hidden 8192 --layers 80 \
//             --heads 64 --kv-heads 8 --intermediate 28672 --vocab 128256 --batch 1 --seq 128
//   ./dry_run --world 1024 --mesh 4x8x4x8 --dims pp,dp,cp,tp --meta --hidden 8192 --layers 80 \
//             --heads 64 --kv-heads 8 --intermediate 28672 --vocab 128256 --seq 1024
//
// --world N (with --rank R, default 0) turns the fake backend on (as DTENSOR_BACKEND=fake
// DTENSOR_FAKE_WORLD_SIZE=N DTENSOR_FAKE_RANK=R would); without it the run is real (mpirun) and
// reports this rank's real figures. The model: --hf-config DIR (a config.json), else the shape
// flags (defaults: the tiny checkpoint's shape). The mesh: --mesh AxB[xCxD] with --dims naming
// each dim pp, dp, cp or tp, in torchtitan's order pp, dp, cp, tp (TP plan on tp, ring attention
// on cp, fully_shard over dp x cp, pipeline_llama's stages on pp); --sp for sequence
// parallelism. With pp: --schedule GPipe|1F1B|Interleaved1F1B (default 1F1B) and --microbatches
// M (default 2 x pp). --batch is the rows per dp rank (default 1; with pp, M: microbatches of
// one row, torchtitan's default); --seq the tokens per row (with cp a multiple of 2 x cp).
// --meta (with --world) builds the model and runs the step on meta tensors (no data, no
// kernels): a 70B-class model at 1,024 ranks in seconds.
//
// Limits: without --meta tensors have storage and kernels run on this rank's shards, and the
// model is built whole on the process before it is sharded, so the full model must fit in this
// process's memory and one rank's compute must be quick here. With --meta the memory figures are
// what the allocator would hold for the step's tensors (kernels' internal temporaries unseen).
#include <dtensor/dtensor.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace models = dtensor::models;

namespace {

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: dry_run [--world N [--rank R] [--meta]] [--mesh AxB...] [--dims pp,dp,cp,tp] [--sp]\n"
      "               [--schedule GPipe|1F1B|Interleaved1F1B] [--microbatches M]\n"
      "               [--hf-config DIR | --hidden H --layers L --heads A --kv-heads K\n"
      "                --intermediate I --vocab V [--head-dim D]] [--batch B] [--seq S]\n");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t next; (next = s.find(sep, at)) != std::string::npos; at = next + 1) {
    out.push_back(s.substr(at, next - at));
  }
  out.push_back(s.substr(at));
  return out;
}

struct Args {
  int world = 0;  // 0: a real run
  int rank = 0;
  models::DryRunOptions run;
  std::string hf_config;
};

// `text` as a whole number >= `min` (all of it: "12x" and "" are refused).
bool whole_number(const std::string& text, int64_t min, int64_t& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty() && out >= min;
}

// Returns 0 to run, 1 after --help, 2 on a bad flag.
int parse(int argc, char** argv, Args& a) {
  models::LlamaConfig& c = a.run.config;
  // The tiny checkpoint's shape (tests/data/tiny_llama).
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 160;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 128;
  a.run.mesh_shape = {2, 2};
  a.run.mesh_dim_names = {"dp", "tp"};
  a.run.seq = 16;
  bool head_dim_given = false;
  bool batch_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help") {
      usage(stdout);
      return 1;
    }
    if (f == "--sp") {
      a.run.sequence_parallel = true;
      continue;
    }
    if (f == "--meta") {
      a.run.meta = true;
      continue;
    }
    if (i + 1 >= argc) {
      usage(stderr);
      return 2;
    }
    const std::string v = argv[++i];
    // Numbers are whole and positive (--rank: from 0); a malformed one is refused, not read as 0.
    int64_t n = 0;
    const bool text_flag =
        f == "--mesh" || f == "--dims" || f == "--hf-config" || f == "--schedule";
    if (!text_flag && !whole_number(v, f == "--rank" ? 0 : 1, n)) {
      std::fprintf(stderr, "dry_run: %s expects a whole number >= %d, got '%s'\n", f.c_str(),
                   f == "--rank" ? 0 : 1, v.c_str());
      return 2;
    }
    if (f == "--world") {
      a.world = static_cast<int>(n);
    } else if (f == "--rank") {
      a.rank = static_cast<int>(n);
    } else if (f == "--mesh") {
      a.run.mesh_shape.clear();
      for (const std::string& d : split(v, 'x')) {
        int64_t size = 0;
        if (!whole_number(d, 1, size)) {
          std::fprintf(stderr, "dry_run: --mesh expects sizes >= 1 joined by 'x', got '%s'\n",
                       v.c_str());
          return 2;
        }
        a.run.mesh_shape.push_back(size);
      }
    } else if (f == "--dims") {
      a.run.mesh_dim_names = split(v, ',');
    } else if (f == "--hf-config") {
      a.hf_config = v;
    } else if (f == "--schedule") {
      a.run.schedule = v;
    } else if (f == "--microbatches") {
      a.run.microbatches = n;
    } else if (f == "--hidden") {
      c.hidden_size = n;
    } else if (f == "--layers") {
      c.num_hidden_layers = n;
    } else if (f == "--heads") {
      c.num_attention_heads = n;
    } else if (f == "--kv-heads") {
      c.num_key_value_heads = n;
    } else if (f == "--intermediate") {
      c.intermediate_size = n;
    } else if (f == "--vocab") {
      c.vocab_size = n;
    } else if (f == "--head-dim") {
      c.head_dim = n;
      head_dim_given = true;
    } else if (f == "--batch") {
      a.run.batch = n;
      batch_given = true;
    } else if (f == "--seq") {
      a.run.seq = n;
    } else {
      std::fprintf(stderr, "dry_run: unknown flag %s\n", f.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!head_dim_given) c.head_dim = c.hidden_size / c.num_attention_heads;
  // With pp, one row per microbatch unless --batch says otherwise (torchtitan's microbatch size).
  for (size_t d = 0; d < a.run.mesh_dim_names.size() && !batch_given; ++d) {
    if (a.run.mesh_dim_names[d] != "pp" || d >= a.run.mesh_shape.size()) continue;
    a.run.batch = a.run.microbatches > 0 ? a.run.microbatches : 2 * a.run.mesh_shape[d];
  }
  c.max_position_embeddings = std::max<int64_t>(c.max_position_embeddings, a.run.seq);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const int parsed = parse(argc, argv, a);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  try {
    // The fake world comes before the Runtime.
    if (a.world > 0) dt::init_fake_backend(a.world, a.rank);
    dt::Runtime runtime(&argc, &argv);
    if (!a.hf_config.empty()) {
      const int64_t seq = a.run.seq;
      a.run.config = models::LlamaConfig::from_hf_dir(a.hf_config);
      a.run.config.max_position_embeddings =
          std::max<int64_t>(a.run.config.max_position_embeddings, seq);
    }
    const models::DryRunReport r = models::dry_run_llama_step(a.run);
    if (r.fake || r.rank == 0) {
      const models::LlamaConfig& c = a.run.config;
      std::printf(
          "Llama: hidden %lld, %lld layers, %lld heads (%lld kv, head dim %lld), intermediate "
          "%lld, vocab %lld; mesh %s (%s)%s; %lld rows x %lld tokens per dp rank\n",
          static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
          static_cast<long long>(c.num_attention_heads),
          static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim),
          static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size),
          dt::shape_str(a.run.mesh_shape).c_str(),
          [&] {
            std::string s;
            for (const std::string& n : a.run.mesh_dim_names) s += (s.empty() ? "" : ", ") + n;
            return s;
          }()
              .c_str(),
          a.run.sequence_parallel ? ", sequence parallel" : "", static_cast<long long>(a.run.batch),
          static_cast<long long>(a.run.seq));
      std::printf("%s", r.table().c_str());
    }
    return r.per_dim.empty() && r.world_size > 1 ? 1 : 0;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "dry_run: %s\n", e.what());
    return 1;
  }
}
