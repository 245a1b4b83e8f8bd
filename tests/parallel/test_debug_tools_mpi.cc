// Debug tools under mpirun (1, 2 and 4 ranks): CommDebugMode's per-module / per-op attribution
// of a tensor-parallel MLP's forward and backward collectives, its table and JSON dump, and the
// DTENSOR_LOG topics (dispatch, propagation, redistribute, collectives) captured through a log
// sink. The "[env]" case is run by a separate ctest entry with DTENSOR_LOG set.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using Catch::Contains;
using dt::CollectiveKind;

namespace {

// Captures log lines for its lifetime; restores the previous sink and turns logging off after.
struct LogCapture {
  std::vector<std::string> lines;
  dt::LogSink previous;
  explicit LogCapture(std::string_view topics) {
    previous = dt::set_log_sink([this](std::string_view l) { lines.emplace_back(l); });
    dt::set_log(topics);
  }
  ~LogCapture() {
    dt::set_log("");
    dt::set_log_sink(std::move(previous));
  }
  int64_t count(std::string_view needle) const {
    int64_t n = 0;
    for (const std::string& l : lines) n += l.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
};

int64_t sum_counts(const dt::CommDebugMode& comm, bool backward) {
  int64_t n = 0;
  for (const auto& r : comm.records()) n += r.backward == backward ? r.count : 0;
  return n;
}

}  // namespace

TEST_CASE("CommDebugMode attributes a TP MLP's collectives to modules, ops and phases", "[debug]") {
  const int64_t W = dt::world_size();
  const int64_t one = W > 1 ? 1 : 0;
  dt::manual_seed(40);
  nn::MLP mlp(8, W * 3 + 1, nn::Activation::kGelu);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  dt::parallelize_module(mlp, mesh,
                         {{"fc1", dt::ColwiseParallel()}, {"fc2", dt::RowwiseParallel()}});
  dt::Generator g(7);
  dt::DTensor x = nn::local_dtensor(dt::randn({2, 3, 8}, {}, &g));
  x.requires_grad_();
  dt::CommDebugMode comm;
  dt::DTensor loss = dt::sum(mlp(x));
  // Forward: the rowwise layer's Partial output is reduced by its output hook, inside fc2.
  CHECK(comm.module_count("MLP.fc2", false, CollectiveKind::kAllReduce) == one);
  CHECK(comm.module_count("MLP", false, CollectiveKind::kAllReduce) == one);
  CHECK(comm.module_count("MLP.fc1", false, CollectiveKind::kAllReduce) == 0);
  CHECK(sum_counts(comm, false) == one);
  for (const auto& r : comm.records()) {
    CHECK(r.module == "MLP.fc2");
    CHECK(r.op == "redistribute");
  }
  loss.backward();
  // Backward: one all-reduce (the colwise layer's input gradient), attributed to a backward
  // node recorded inside the MLP.
  CHECK(sum_counts(comm, true) == one);
  CHECK(comm.module_count("MLP", true, CollectiveKind::kAllReduce) == one);
  for (const auto& r : comm.records()) {
    if (!r.backward) continue;
    CHECK(r.op.find("Backward") != std::string::npos);
  }
  CHECK(comm.total_count() == 2 * one);

  // The table lists every record and the totals.
  const std::string table = comm.table();
  CHECK_THAT(table, Contains("module") && Contains("collective") && Contains("total: "));
  if (W > 1) {
    CHECK_THAT(table, Contains("MLP.fc2") && Contains("forward") && Contains("backward") &&
                          Contains("all_reduce"));
  }
  // The JSON dump parses and agrees with the counters.
  const nlohmann::json j = nlohmann::json::parse(comm.json());
  int64_t total = 0;
  for (const auto& r : j.at("records")) total += r.at("count").get<int64_t>();
  CHECK(total == comm.total_count());
  CHECK(j.at("records").size() == comm.records().size());
  if (W > 1) {
    CHECK(j.at("totals").at("all_reduce").at("count").get<int64_t>() == 2);
    CHECK(j.at("records")[0].at("module") == "MLP.fc2");
    CHECK(j.at("records")[0].at("phase") == "forward");
  }
}

TEST_CASE("CommDebugMode: collectives outside any label are Global; labels cost nothing when off",
          "[debug]") {
  const int64_t W = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  const dt::Tensor x = dt::arange(0, 4 * W + 1, 1, dt::kFloat32);
  const dt::DTensor d = dt::distribute_tensor(x, mesh, {dt::Shard(0)});
  {
    // No CommDebugMode alive: labels push nothing.
    const dt::CommDebugMode::ModuleScope m("outer");
    CHECK(dt::CommDebugMode::current_module().empty());
  }
  dt::CommDebugMode comm;
  {
    const dt::CommDebugMode::ModuleScope m("outer");
    const dt::CommDebugMode::ModuleScope n("inner");
    CHECK(dt::CommDebugMode::current_module() == "outer.inner");
    CHECK(dt::equal(d.redistribute({dt::Replicate()}).to_local(), x));
  }
  CHECK(dt::CommDebugMode::current_module().empty());
  CHECK(dt::equal(d.full_tensor(), x));
  if (W > 1) {
    REQUIRE(comm.records().size() == 2);
    CHECK(comm.records()[0].module == "outer.inner");
    CHECK(comm.records()[0].kind == CollectiveKind::kAllGather);
    CHECK(comm.records()[1].module == "Global");
    CHECK(comm.module_count("outer", false, CollectiveKind::kAllGather) == 1);
    CHECK(comm.module_count("out", false, CollectiveKind::kAllGather) == 0);  // whole segments
  } else {
    CHECK(comm.records().empty());
  }
}

TEST_CASE("DTENSOR_LOG topics: dispatch, propagation, redistribute and collectives lines",
          "[debug][log]") {
  const int64_t W = dt::world_size();
  const int me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  // A shape no other case uses, so the first add misses the propagation cache.
  const dt::Tensor x = dt::arange(0, (5 * W + 3) * 7, 1, dt::kFloat32).view({5 * W + 3, 7});
  const dt::DTensor a = dt::distribute_tensor(x, mesh, {dt::Shard(0)});
  const std::string rank_tag = "[dtensor rank " + std::to_string(me) + " ";
  {
    LogCapture cap("dispatch,propagation,redistribute,collectives");
    CHECK(dt::log_setting() == "dispatch,propagation,redistribute,collectives");
    const dt::DTensor b = dt::add(a, a);
    const dt::DTensor c = dt::add(a, a);
    CHECK(dt::equal(b.redistribute({dt::Replicate()}).to_local(), dt::add(x, x)));
    CHECK(cap.count(rank_tag + "dispatch] add: inputs [S(0)], [S(0)] -> outputs [S(0)]") == 2);
    CHECK(cap.count(rank_tag + "propagation] add(") == 2);
    CHECK(cap.count("cache miss") == 1);
    CHECK(cap.count("cache hit") == 1);
    if (W > 1) {
      CHECK(cap.count(rank_tag + "redistribute] [S(0)] -> [R] on mesh [" + std::to_string(W) +
                      "], global [" + std::to_string(5 * W + 3) + ", 7] float32: 1 step") == 1);
      CHECK(cap.count(rank_tag + "collectives] all_gather ") == 1);
      CHECK(cap.count(" us") >= 2);
    } else {
      CHECK(cap.count("collectives]") == 0);  // a 1-rank mesh issues none
    }
    for (const std::string& l : cap.lines) CHECK(l.rfind(rank_tag, 0) == 0);
  }
  {
    // Off: nothing is emitted.
    LogCapture cap("");
    CHECK(dt::log_setting().empty());
    CHECK_FALSE(dt::log_enabled(dt::LogTopic::kDispatch));
    (void)dt::add(a, a).redistribute({dt::Replicate()});
    CHECK(cap.lines.empty());
  }
  {
    // rank0: only world rank 0 prints; one topic only.
    LogCapture cap("redistribute, rank0");
    CHECK(dt::log_setting() == "redistribute,rank0");
    (void)a.redistribute({dt::Replicate()});
    CHECK(cap.count("dispatch]") == 0);
    CHECK(static_cast<int64_t>(cap.lines.size()) == (me == 0 ? 1 : 0));  // 0 steps on 1 rank
  }
  REQUIRE_THROWS_WITH(dt::set_log("dispatch,bogus"),
                      Contains("[set_log] unknown log topic 'bogus'") && Contains("collectives"));
  CHECK(dt::log_setting().empty());
}

// Run by the ctest entry debug_log_env.np2 with DTENSOR_LOG=redistribute,collectives,rank0: the
// setting is read at startup and lines go to stderr (the entry matches them).
TEST_CASE("DTENSOR_LOG from the environment", "[.][env]") {
  const char* env = std::getenv("DTENSOR_LOG");
  REQUIRE(env != nullptr);
  CHECK(dt::log_setting() == "redistribute,collectives,rank0");
  const int64_t W = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  const dt::Tensor x = dt::arange(0, 3 * W, 1, dt::kFloat32);
  CHECK(dt::equal(dt::distribute_tensor(x, mesh, {dt::Shard(0)}).full_tensor(), x));
}
