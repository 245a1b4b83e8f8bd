#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "benchmarks/common/bench_common.h"

using dtensor::bench::Flags;
using dtensor::bench::JsonLines;
using dtensor::bench::Stats;
using dtensor::bench::stats_of;

TEST_CASE("stats_of: nearest-rank median and percentiles of an unsorted sample") {
  // 1..11 shuffled: median 6, p10 = element at round(0.1 * 10) = index 1 -> 2, p90 -> 10.
  const Stats s = stats_of({7, 3, 11, 1, 9, 5, 2, 10, 4, 8, 6});
  CHECK(s.n == 11);
  CHECK(s.median == 6);
  CHECK(s.p10 == 2);
  CHECK(s.p90 == 10);
}

TEST_CASE("stats_of: uneven, single and empty samples") {
  const Stats two = stats_of({4, 2});  // index round(0.5) = 1 (round half away from zero)
  CHECK(two.median == 4);
  CHECK(two.p10 == 2);
  const Stats one = stats_of({3.5});
  CHECK((one.median == 3.5 && one.p10 == 3.5 && one.p90 == 3.5));
  const Stats none = stats_of({});
  CHECK((none.n == 0 && none.median == 0));
}

TEST_CASE("Flags: --key value, --key=value, bare flags and defaults") {
  const char* argv[] = {"prog",    "--max-bytes", "1024", "--json=/tmp/x.jsonl",
                        "--local", "--calls",     "7",    "positional"};
  Flags f(8, const_cast<char**>(argv));
  CHECK(f.i64("max-bytes", 0) == 1024);
  CHECK(f.str("json", "") == "/tmp/x.jsonl");
  CHECK(f.has("local"));
  CHECK(f.i64("calls", 0) == 7);
  CHECK(f.i64("missing", -3) == -3);
  CHECK(f.f64("missing", 0.25) == 0.25);
  CHECK_FALSE(f.has("positional"));
}

TEST_CASE("JsonLines: one escaped object per line, stats in microseconds") {
  const std::string path = "test_bench_common_out.jsonl";
  {
    JsonLines j("bench_x", path);
    auto r = j.record("S(0)->R \"q\"");
    Stats s;
    s.median = 2e-6;
    s.p10 = 1e-6;
    s.p90 = 3e-6;
    r.add("bytes", int64_t{4096}).add("ok", true).add_stats("", s).add("nan", std::nan(""));
    j.write(r);
    j.write(j.record("second"));
  }
  std::ifstream in(path);
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  CHECK_FALSE(std::getline(in, l3));
  CHECK(l1 ==
        "{\"bench\": \"bench_x\", \"name\": \"S(0)->R \\\"q\\\"\", \"bytes\": 4096, \"ok\": true, "
        "\"median_us\": 2, \"p10_us\": 1, \"p90_us\": 3, \"nan\": null}");
  CHECK(l2 == "{\"bench\": \"bench_x\", \"name\": \"second\"}");
  std::remove(path.c_str());
}

TEST_CASE("time_interleaved: one Stats per function, warm-up and iterations counted") {
  int a = 0, b = 0;
  const auto st =
      dtensor::bench::time_interleaved({[&] { ++a; },
                                        [&] {
                                          ++b;
                                          std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                        }},
                                       /*warmup=*/1, /*iters=*/5, /*comm_world=*/false);
  REQUIRE(st.size() == 2);
  CHECK((a == 6 && b == 6));
  CHECK((st[0].n == 5 && st[1].n == 5));
  CHECK(st[1].p10 >= 0.002);
  CHECK(st[0].median < st[1].median);
  CHECK(dtensor::bench::time_interleaved({}, 1, 3, false).empty());
}
