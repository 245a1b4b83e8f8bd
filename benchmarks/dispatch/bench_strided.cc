// Local CPU kernels on strided inputs: a [1024, 1024] float32 add and sum with contiguous vs
// transposed operands (the elementwise iterator's dim ordering and the reduction plan), single
// process. Each case is checked bit for bit against the same op on contiguous copies.
//
//   bench_strided [--n 1024] [--batch 5] [--min-seconds 0.3] [--json FILE]
//
// Per call: median / p10 / p90 over batches of --batch calls; ratio = case / contiguous case.
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

struct Case {
  std::string name;
  std::string baseline;             // name of the case it is compared with ("" = itself)
  std::function<dt::Tensor()> run;  // the timed op
  std::function<dt::Tensor()> ref;  // the same op on contiguous copies (not timed)
};

}  // namespace

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t n = flags.i64("n", 1024);
  const int64_t batch = flags.i64("batch", 5);
  const double min_seconds = flags.f64("min-seconds", 0.3);

  dt::Generator gen(5);
  const dt::Tensor a = dt::randn({n, n}, {}, &gen), b = dt::randn({n, n}, {}, &gen);
  const dt::Tensor at = a.transpose(0, 1), bt = b.transpose(0, 1);
  const dt::Tensor atc = at.contiguous(), btc = bt.contiguous();
  dt::Tensor inplace = dt::randn({n, n}, {}, &gen).transpose(0, 1);
  const int64_t d0[] = {0}, d1[] = {1};

  const std::vector<Case> cases = {
      {"add(a, b)", "", [&] { return dt::add(a, b); }, [&] { return dt::add(a, b); }},
      {"add(a.T, b)", "add(a, b)", [&] { return dt::add(at, b); }, [&] { return dt::add(atc, b); }},
      {"add(a.T, b.T)", "add(a, b)", [&] { return dt::add(at, bt); },
       [&] { return dt::add(atc, btc); }},
      {"add_(x.T, b.T)", "add(a, b)", [&] { return dt::add_(inplace, bt); },
       [&] { return dt::Tensor(); }},
      {"sum(a, dim=0)", "", [&] { return dt::sum(a, d0); }, [&] { return dt::sum(a, d0); }},
      {"sum(a, dim=1)", "", [&] { return dt::sum(a, d1); }, [&] { return dt::sum(a, d1); }},
      {"sum(a.T, dim=0)", "sum(a, dim=0)", [&] { return dt::sum(at, d0); },
       [&] { return dt::sum(atc, d0); }},
      {"sum(a.T, dim=1)", "sum(a, dim=1)", [&] { return dt::sum(at, d1); },
       [&] { return dt::sum(atc, d1); }},
  };

  bench::JsonLines json("bench_strided", flags.str("json", ""));
  bench::print0(
      "# bench_strided: [%lld, %lld] float32, per-call median over batches of %lld. "
      "Results: %s\n",
      static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(batch),
      json.path().c_str());
  bench::print0("%-18s %10s %10s %10s %8s %5s\n", "case", "median_us", "p10_us", "p90_us", "ratio",
                "check");
  bool all_ok = true;
  std::vector<std::pair<std::string, double>> medians;
  for (const Case& c : cases) {
    // The in-place case has no separate reference: it must equal x.T + b.T computed contiguous.
    bool ok;
    if (c.name.rfind("add_", 0) == 0) {
      const dt::Tensor before = inplace.contiguous().clone();
      (void)c.run();
      ok = bench::same_bits(inplace, dt::add(before, btc));
    } else {
      ok = bench::same_bits(c.run(), c.ref());
    }
    all_ok = all_ok && ok;
    const bench::Stats s = bench::time_batched([&] { (void)c.run(); }, batch, min_seconds);
    double base = s.median;
    for (const auto& [name, med] : medians) {
      if (name == c.baseline) base = med;
    }
    medians.emplace_back(c.name, s.median);
    bench::print0("%-18s %10.1f %10.1f %10.1f %8.2f %5s\n", c.name.c_str(), s.median * 1e6,
                  s.p10 * 1e6, s.p90 * 1e6, s.median / base, ok ? "ok" : "FAIL");
    auto rec = json.record(c.name);
    rec.add("shape", "[" + std::to_string(n) + ", " + std::to_string(n) + "]")
        .add("batch", batch)
        .add_stats("", s)
        .add("baseline", c.baseline.empty() ? c.name : c.baseline)
        .add("ratio_vs_baseline", s.median / base)
        .add("correct", ok);
    json.write(rec);
  }
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
