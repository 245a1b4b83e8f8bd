// Intra-op threads (dtensor/ops/threads.h): every op that splits across threads gives the bits of
// one thread, on shapes whose split is uneven, strided, broadcast, transposed (tiled) and in place;
// ops whose order of writes shows keep one thread; the count and DTENSOR_NUM_THREADS are
// checked; parallel_for covers its range once and passes exceptions on.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "dtensor/ops/common/detail/elementwise_iter.h"
#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/threads.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::Tensor;

namespace {

// Sets the thread count for a scope.
class Threads {
 public:
  explicit Threads(int n) : old_(dt::get_num_threads()) { dt::set_num_threads(n); }
  ~Threads() { dt::set_num_threads(old_); }

 private:
  int old_;
};

Tensor random(dt::IntSpan shape, dt::DType dtype, uint32_t seed) {
  return dt::ewtest::make(dt::ewtest::random_values(dt::shape_numel(shape), dtype, seed), shape,
                          dtype);
}

// Same dtype, shape and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.itemsize()) == 0;
}

// Runs `op` on one thread, then on 2 and 3: the results must be the same bits, and with `split`
// the op must have used the pool (so the comparison is not of one thread twice).
void check_threads(const std::function<std::vector<Tensor>()>& op, bool split = true) {
  std::vector<Tensor> one;
  {
    const Threads t(1);
    one = op();
  }
  for (int n : {2, 3}) {
    INFO(n << " threads");
    const Threads t(n);
    const int64_t before = dt::detail::parallel_regions_started();
    const std::vector<Tensor> many = op();
    CHECK((dt::detail::parallel_regions_started() > before) == split);
    REQUIRE(many.size() == one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("result " << i);
      CHECK(same_bits(many[i], one[i]));
    }
  }
}

}  // namespace

TEST_CASE("threads: set_num_threads, get_num_threads and DTENSOR_NUM_THREADS", "[threads]") {
  const int old = dt::get_num_threads();
  dt::set_num_threads(3);
  CHECK(dt::get_num_threads() == 3);
  dt::set_num_threads(old);
  CHECK(dt::get_num_threads() == old);
  CHECK_THROWS_WITH(dt::set_num_threads(0),
                    Catch::Contains("[set_num_threads]") && Catch::Contains(">= 1, got 0"));
  CHECK(dt::get_num_threads() == old);
  CHECK_FALSE(dt::detail::parse_num_threads(nullptr).has_value());
  CHECK_FALSE(dt::detail::parse_num_threads("").has_value());
  CHECK(dt::detail::parse_num_threads("4") == 4);
  for (const char* bad : {"0", "-2", "two", "3x", "99999999999"}) {
    INFO(bad);
    CHECK_THROWS_WITH(dt::detail::parse_num_threads(bad),
                      Catch::Contains("[DTENSOR_NUM_THREADS]") && Catch::Contains(bad));
  }
}

TEST_CASE("threads: parallel_for covers the range once, in chunks of at least the grain",
          "[threads]") {
  const Threads t(3);
  for (int64_t n : {0, 1, 99, 100, 199, 200, 1001}) {
    INFO("range " << n);
    std::vector<int> hits(static_cast<size_t>(n), 0);
    std::mutex m;
    std::set<std::thread::id> ids;
    int64_t shortest = n;
    dt::detail::parallel_for(0, n, 100, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++hits[static_cast<size_t>(i)];
      const std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
      shortest = std::min(shortest, hi - lo);
    });
    CHECK(std::count(hits.begin(), hits.end(), 1) == n);
    if (n > 0) CHECK(shortest >= std::min<int64_t>(n, 100));
    // Two grains or more: split (a team of min(3, n / 100) threads).
    CHECK(ids.size() == static_cast<size_t>(n >= 200 ? std::min<int64_t>(3, n / 100) : n > 0));
  }
  // Inside a chunk, a nested parallel_for runs on its caller's thread.
  std::atomic<int> nested_teams{0};
  dt::detail::parallel_for(0, 1000, 100, [&](int64_t, int64_t) {
    const std::thread::id me = std::this_thread::get_id();
    bool same = true;
    dt::detail::parallel_for(
        0, 1000, 100, [&](int64_t, int64_t) { same = same && std::this_thread::get_id() == me; });
    if (!same) ++nested_teams;
  });
  CHECK(nested_teams == 0);
  // Two callers at once: one job holds the pool, the other caller runs its range itself; both
  // ranges are covered once.
  for (int round = 0; round < 20; ++round) {
    std::vector<int> mine(5000, 0), theirs(5000, 0);
    const auto fill = [](std::vector<int>& hits) {
      dt::detail::parallel_for(0, 5000, 100, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) ++hits[static_cast<size_t>(i)];
      });
    };
    std::thread other([&] { fill(theirs); });
    fill(mine);
    other.join();
    CHECK(std::count(mine.begin(), mine.end(), 1) == 5000);
    CHECK(std::count(theirs.begin(), theirs.end(), 1) == 5000);
  }
  // A forked child (which has none of the parent's workers) splits with a pool of its own.
  const pid_t child = fork();
  if (child == 0) {
    std::vector<int> hits(1000, 0);
    dt::detail::parallel_for(0, 1000, 100, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++hits[static_cast<size_t>(i)];
    });
    _exit(std::count(hits.begin(), hits.end(), 1) == 1000 ? 0 : 1);
  }
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // An exception in one chunk reaches the caller after the others finish.
  std::atomic<int> done{0};
  CHECK_THROWS_WITH(dt::detail::parallel_for(0, 300, 100,
                                             [&](int64_t lo, int64_t) {
                                               if (lo == 0) throw dt::Error("[test] chunk 0");
                                               ++done;
                                             }),
                    Catch::Contains("[test] chunk 0"));
  CHECK(done == 2);
}

TEST_CASE("threads: elementwise ops give one thread's bits", "[threads]") {
  // 3 * 32768 + 7 elements: over two grains, split unevenly.
  const int64_t big = 3 * 32768 + 7;
  for (dt::DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kInt64}) {
    INFO(dt::dtype_name(d));
    const Tensor a = random({big}, d, 1), b = random({big}, d, 2);
    check_threads([&] { return std::vector<Tensor>{dt::add(a, b), dt::mul(a, b)}; });
  }
  const Tensor x = random({389, 517}, dt::kFloat32, 3), y = random({389, 517}, dt::kFloat32, 4);
  const Tensor col = random({389, 1}, dt::kFloat32, 5), row = random({517}, dt::kFloat32, 6);
  const Tensor xt = random({517, 389}, dt::kFloat32, 7);
  const Tensor cond = random({389, 517}, dt::kBool, 8);
  const Tensor x3 = random({3, 130, 200}, dt::kFloat32, 13);
  const Tensor x3t = random({3, 200, 130}, dt::kFloat32, 14);
  // Each op on its own, so that each must split.
  const std::vector<std::function<Tensor()>> ops = {
      [&] { return dt::mul(x, col); },                   // a repeated input per row
      [&] { return dt::add(row, x); },                   // a broadcast row
      [&] { return dt::add(x, xt.transpose(0, 1)); },    // tiled: a transposed input
      [&] { return dt::add(x3, x3t.transpose(1, 2)); },  // tiled, chunks starting mid-step
      [&] { return dt::sub(x.slice(1, 0, 516, 2), y.slice(1, 1, 517, 2)); },  // strided inputs
      [&] { return dt::exp(x); },               // the vectorised unary path
      [&] { return dt::gelu_backward(y, x); },  // the activation-backward path
      [&] { return dt::where(cond, x, y); },    // the data-movement loop
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    INFO("op " << i);
    check_threads([&] { return std::vector<Tensor>{ops[i]()}; });
  }
  // In place into a strided output view, on 3 dims that do not merge, with a zero-stride input.
  check_threads([&] {
    Tensor z = random({7, 130, 300}, dt::kFloat64, 9);
    dt::add_(z.slice(2, 0, 300, 3), random({130, 1}, dt::kFloat64, 10));
    return std::vector<Tensor>{z};
  });
  // Under two grains: one thread (also for rows that add up to more than one grain).
  const Tensor small = random({65535}, dt::kFloat32, 11);
  const Tensor rows2 = random({2, 20000}, dt::kFloat32, 15);
  check_threads([&] { return std::vector<Tensor>{dt::exp(small)}; }, /*split=*/false);
  check_threads([&] { return std::vector<Tensor>{dt::add(rows2, rows2)}; }, /*split=*/false);
}

TEST_CASE("threads: an op whose writes overlap its input keeps one thread", "[threads]") {
  // out and the input share memory without being the same view: ElementwiseIter keeps the
  // row-major order (and one thread), whatever the thread count.
  const Threads t(2);
  Tensor buf = random({2 * 70000 + 1}, dt::kFloat32, 12);
  const Tensor out = buf.narrow(0, 1, 2 * 70000), in = buf.narrow(0, 0, 2 * 70000);
  const dt::detail::ElementwiseIter serial(out, {&in});
  CHECK(serial.serial());
  // Two dims: the output's rows against the same memory read with another stride.
  const Tensor out2 = buf.narrow(0, 0, 2 * 70000).view({2, 70000});
  const Tensor in2 = buf.narrow(0, 0, 2 * 70000).view({70000, 2}).transpose(0, 1);
  const dt::detail::ElementwiseIter serial2(out2, {&in2});
  CHECK(serial2.serial());
  const Tensor fresh = dt::empty({140000}, dt::TensorOptions(dt::kFloat32));
  const dt::detail::ElementwiseIter parallel(fresh, {&in});
  CHECK_FALSE(parallel.serial());
}

TEST_CASE("threads: softmax, norms and cross_entropy give one thread's bits", "[threads]") {
  for (dt::DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16}) {
    INFO(dt::dtype_name(d));
    const Tensor x = random({301, 517}, d, 21), g = random({301, 517}, d, 22);
    const Tensor x3 = random({5, 300, 77}, d, 23);  // softmax along dim 1: inner 77
    const Tensor w = random({517}, d, 24), bias = random({517}, d, 25);
    check_threads([&] {
      const Tensor s = dt::softmax(x, -1), ls = dt::log_softmax(x3, 1);
      const auto ln = dt::native_layer_norm(x, {517}, w, bias, 1e-5);
      const auto rn = dt::native_rms_norm(x, {517}, w, 1e-6);
      const auto lg = dt::layer_norm_backward(g, x, {517}, ln.mean, ln.rstd, w);
      const auto rg = dt::rms_norm_backward(g, x, {517}, rn.rstd, w);
      return std::vector<Tensor>{s,
                                 ls,
                                 dt::softmax_backward(g, s, -1),
                                 dt::log_softmax_backward(random({5, 300, 77}, d, 26), ls, 1),
                                 ln.output,
                                 ln.mean,
                                 ln.rstd,
                                 rn.output,
                                 rn.rstd,
                                 lg.grad_x,
                                 lg.grad_weight,
                                 lg.grad_bias,
                                 rg.grad_x,
                                 rg.grad_weight};
    });
  }
  // Norms over two dims with long rows (one row per block), and many short rows (blocks capped).
  for (const dt::Shape& shape : {dt::Shape{3, 40, 1000}, dt::Shape{20000, 8}}) {
    const dt::Shape ns(shape.begin() + 1, shape.end());
    const Tensor x = random(shape, dt::kFloat32, 27), g = random(shape, dt::kFloat32, 28);
    const Tensor w = random(ns, dt::kFloat32, 29);
    check_threads([&] {
      const auto ln = dt::native_layer_norm(x, ns, w, Tensor(), 1e-5);
      const auto lg = dt::layer_norm_backward(g, x, ns, ln.mean, ln.rstd, w, {false, true, true});
      return std::vector<Tensor>{ln.output, lg.grad_weight, lg.grad_bias};
    });
  }
  const Tensor logits = random({600, 257}, dt::kFloat32, 30);
  const Tensor target =
      dt::ewtest::make(dt::ewtest::random_values(600, dt::kInt64, 31, 0, 256), {600}, dt::kInt64);
  check_threads([&] {
    return std::vector<Tensor>{dt::cross_entropy(logits, target),
                               dt::cross_entropy(logits, target, dt::Reduction::kNone, -100, 0.1)};
  });
}
