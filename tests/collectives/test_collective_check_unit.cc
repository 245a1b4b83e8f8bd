// Single-process parts of the collective consistency check
// (dtensor/collectives/collective_check.h): fingerprint text, the mismatch report, the inline
// reductions' numerics, the environment parsers (DTENSOR_CHECK_COLLECTIVES,
// DTENSOR_COLLECTIVE_TIMEOUT).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/deadline.h"
#include "dtensor/tensor/error.h"

namespace dtensor::test {

namespace {

using Catch::Contains;
using detail::SlotHeader;

SlotHeader header(CollectiveKind kind, DType dtype, int op, int root, int64_t count, uint64_t seq,
                  const char* label = "") {
  SlotHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.dtype = static_cast<uint8_t>(dtype);
  h.op = op < 0 ? detail::kNoReduceOp : static_cast<uint8_t>(op);
  h.root = root;
  h.count = count;
  h.seq = seq;
  std::strncpy(h.label, label, detail::kLabelBytes - 1);
  return h;
}

// A communicator of `n` ranks that never communicates: compare_slots only reads its ranks and
// description.
class NamesOnly final : public Communicator {
 public:
  explicit NamesOnly(int n) : Communicator(0, n, world(n)) { set_description("mesh dim 0 (x)"); }
  std::string_view backend() const override { return "fake"; }
  bool supports(Device) const override { return true; }

 protected:
  static std::vector<int> world(int n) {
    std::vector<int> w;
    for (int i = 0; i < n; ++i) w.push_back(10 + i);  // world ranks differ from comm ranks
    return w;
  }
  WorkPtr none() { return completed_work(); }
  WorkPtr do_all_reduce(const Tensor&, ReduceOp) override { return none(); }
  WorkPtr do_all_gather(const Tensor&, const Tensor&) override { return none(); }
  WorkPtr do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override { return none(); }
  WorkPtr do_all_to_all(const Tensor&, const Tensor&) override { return none(); }
  WorkPtr do_broadcast(const Tensor&, int) override { return none(); }
  WorkPtr do_scatter(const Tensor&, const Tensor&, int) override { return none(); }
  WorkPtr do_send(const Tensor&, int, int) override { return none(); }
  WorkPtr do_recv(const Tensor&, int, int) override { return none(); }
  WorkPtr do_barrier() override { return none(); }
  std::shared_ptr<Communicator> do_split(int, int) override { return nullptr; }
  WorkPtr do_exchange_slots(const void*, void*, std::string_view, const Tensor*) override {
    return none();
  }
};

// Slots of `n` ranks: rank r gets headers[r] and payload bytes from `payloads[r]`.
std::vector<char> make_slots(const std::vector<SlotHeader>& headers,
                             const std::vector<std::vector<char>>& payloads = {}) {
  std::vector<char> slots(headers.size() * detail::kSlotBytes, 0);
  for (size_t r = 0; r < headers.size(); ++r) {
    std::memcpy(slots.data() + r * detail::kSlotBytes, &headers[r], sizeof(SlotHeader));
    if (r < payloads.size()) {
      std::memcpy(slots.data() + r * detail::kSlotBytes + detail::kSlotHeaderBytes,
                  payloads[r].data(), payloads[r].size());
    }
  }
  return slots;
}

template <typename T>
std::vector<char> bytes_of(const std::vector<T>& v) {
  std::vector<char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T>
std::vector<T> reduce(const std::vector<std::vector<T>>& per_rank, ReduceOp op) {
  std::vector<SlotHeader> headers(per_rank.size());
  std::vector<std::vector<char>> payloads;
  for (const auto& v : per_rank) payloads.push_back(bytes_of(v));
  const std::vector<char> slots = make_slots(headers, payloads);
  std::vector<T> out(per_rank[0].size());
  detail::reduce_payloads(slots.data(), static_cast<int>(per_rank.size()), dtype_of_v<T>, op, 0,
                          static_cast<int64_t>(out.size()), out.data());
  return out;
}

// bool has no std::vector<bool>::data(): one element per rank, as bytes.
bool reduce_bool(const std::vector<bool>& per_rank, ReduceOp op) {
  std::vector<SlotHeader> headers(per_rank.size());
  std::vector<std::vector<char>> payloads;
  for (bool b : per_rank) payloads.push_back({static_cast<char>(b ? 1 : 0)});
  const std::vector<char> slots = make_slots(headers, payloads);
  bool out = false;
  detail::reduce_payloads(slots.data(), static_cast<int>(per_rank.size()), kBool, op, 0, 1, &out);
  return out;
}

}  // namespace

TEST_CASE("fingerprints describe the collective", "[collectives][check]") {
  using K = CollectiveKind;
  CHECK(detail::describe_fingerprint(header(K::kAllReduce, kFloat32, 0, -1, 16, 12)) ==
        "all_reduce(sum, float32, 16 elements) #12");
  CHECK(detail::describe_fingerprint(header(K::kAllGather, kInt64, -1, -1, 1, 3, "DeviceMesh")) ==
        "all_gather(int64, 1 element) #3 (DeviceMesh)");
  CHECK(detail::describe_fingerprint(header(K::kBroadcast, kBFloat16, -1, 2, 7, 4)) ==
        "broadcast(bfloat16, 7 elements, root 2) #4");
  CHECK(detail::describe_fingerprint(header(K::kReduceScatter, kFloat16, 3, -1, 8, 1)) ==
        "reduce_scatter(min, float16, 8 elements) #1");
  SlotHeader barrier;
  barrier.kind = static_cast<uint8_t>(K::kBarrier);
  barrier.seq = 9;
  CHECK(detail::describe_fingerprint(barrier) == "barrier() #9");
  SlotHeader split;
  split.kind = detail::kKindSplit;
  split.seq = 1;
  CHECK(detail::describe_fingerprint(split) == "split() #1");
  SlotHeader garbage;
  garbage.magic = 0;
  CHECK_THAT(detail::describe_fingerprint(garbage),
             Contains("not a dtensor collective") || Contains("other than a dtensor"));
}

TEST_CASE("inline payload sizes follow the collective", "[collectives][check]") {
  using K = CollectiveKind;
  CHECK(detail::inline_payload_bytes(header(K::kAllReduce, kFloat32, 0, -1, 48, 1), 4) == 192);
  CHECK(detail::inline_payload_bytes(header(K::kAllReduce, kFloat32, 0, -1, 49, 1), 4) == 196);
  CHECK(detail::inline_payload_bytes(header(K::kScatter, kFloat64, -1, 0, 3, 1), 4) == 96);
  CHECK(detail::inline_payload_bytes(header(K::kAllGather, kInt32, -1, -1, 1 << 30, 1), 2) >
        static_cast<int64_t>(detail::kInlineBytes));
  SlotHeader barrier;
  barrier.kind = static_cast<uint8_t>(K::kBarrier);
  CHECK(detail::inline_payload_bytes(barrier, 8) == 0);
}

TEST_CASE("compare_slots names each group of ranks and what it issued", "[collectives][check]") {
  using K = CollectiveKind;
  NamesOnly comm(4);
  const SlotHeader ar = header(K::kAllReduce, kFloat32, 0, -1, 16, 12);
  const SlotHeader ag = header(K::kAllGather, kFloat32, -1, -1, 16, 12);
  const SlotHeader late = header(K::kAllReduce, kFloat32, 0, -1, 16, 13);
  CHECK(detail::compare_slots(make_slots({ar, ar, ar, ar}).data(), comm).empty());
  const std::string two = detail::compare_slots(make_slots({ar, ag, ar, ag}).data(), comm);
  CHECK_THAT(two, Contains("collective mismatch on mesh dim 0 (x) (fake, rank 0 of 4, world "
                           "ranks [10, 11, 12, 13])") &&
                      Contains("ranks 11, 13 issued all_gather(float32, 16 elements) #12 where "
                               "ranks 10, 12 issued all_reduce(sum, float32, 16 elements) #12"));
  const std::string three = detail::compare_slots(make_slots({ar, ag, late, ar}).data(), comm);
  CHECK_THAT(three, Contains("rank 11 issued all_gather(float32, 16 elements) #12; rank 12 issued "
                             "all_reduce(sum, float32, 16 elements) #13 where ranks 10, 13 issued "
                             "all_reduce(sum, float32, 16 elements) #12"));
  // A block that is not a fingerprint at all (a raw MPI call, another check mode).
  SlotHeader raw;
  raw.magic = 0;
  CHECK_THAT(detail::compare_slots(make_slots({ar, raw, ar, ar}).data(), comm),
             Contains("rank 11 issued something other than a dtensor collective"));
}

TEST_CASE("peer sums cancel exactly when every pair of ranks agrees on its piece sizes",
          "[collectives][check]") {
  // 16 ranks: more than a slot's table holds, so the verdict rests on the sums alone. Rank r
  // sends (r + k + 1) * 4 bytes to rank k.
  const int n = 16;
  REQUIRE(n > detail::kMaxPeerTable);
  NamesOnly comm(n);
  auto slots_for = [&](int liar, int64_t extra) {
    std::vector<SlotHeader> headers;
    for (int r = 0; r < n; ++r) {
      detail::PeerBytes p;
      for (int k = 0; k < n; ++k) {
        p.send.push_back((r + k + 1) * 4);
        p.recv.push_back((k + r + 1) * 4 + (r == liar && k == 0 ? extra : 0));
      }
      SlotHeader h = header(CollectiveKind::kAllToAll, kFloat32, -1, -1, -1, 5);
      detail::set_peer_sum(h, p, r);
      CHECK((h.flags & detail::kFlagPeers) != 0);
      headers.push_back(h);
    }
    return make_slots(headers);
  };
  const std::vector<char> agree = slots_for(-1, 0);
  // The sums differ by rank, yet the fingerprints agree (peer_sum is not compared).
  CHECK(detail::slot_header(agree.data(), 0).peer_sum !=
        detail::slot_header(agree.data(), 1).peer_sum);
  CHECK(detail::compare_slots(agree.data(), comm).empty());
  CHECK(detail::compare_peer_bytes(agree.data(), comm, false).empty());
  for (int64_t extra : {int64_t{4}, int64_t{-4}, int64_t{1} << 40}) {
    const std::vector<char> one_off = slots_for(7, extra);
    CHECK(detail::compare_slots(one_off.data(), comm).empty());
    CHECK_THAT(detail::compare_peer_bytes(one_off.data(), comm, false),
               Contains("ranks disagree on the sizes of the pieces they exchange on mesh dim 0 "
                        "(x)"));
  }
}

TEST_CASE("the peer tables name the pairs that disagree, at most four", "[collectives][check]") {
  NamesOnly comm(4);
  // Every rank expects one byte more than each peer sends it: 16 pairs disagree.
  std::vector<SlotHeader> headers;
  std::vector<std::vector<char>> payloads;
  for (int r = 0; r < 4; ++r) {
    detail::PeerBytes p{std::vector<int64_t>(4, 8), std::vector<int64_t>(4, 9)};
    SlotHeader h = header(CollectiveKind::kAllToAll, kFloat32, -1, -1, -1, 3);
    detail::set_peer_sum(h, p, r);
    headers.push_back(h);
    std::vector<char> slot(detail::kSlotBytes, 0);
    detail::write_peer_table(slot.data(), p);
    payloads.emplace_back(slot.begin() + detail::kSlotHeaderBytes, slot.end());
  }
  const std::vector<char> slots = make_slots(headers, payloads);
  CHECK_THAT(detail::compare_peer_bytes(slots.data(), comm, true),
             Contains("rank 10 sends 8 bytes to rank 10, which expects 9 from it; rank 10 sends "
                      "8 bytes to rank 11, which expects 9 from it;") &&
                 Contains("; 12 more pairs"));
  // Without the tables: the verdict alone.
  CHECK_THAT(detail::compare_peer_bytes(slots.data(), comm, false),
             Contains("pieces they exchange on mesh dim 0 (x)") && !Contains("sends"));
}

TEST_CASE("inline reductions: NaN-propagating max/min, 16-bit sums in float, integers wrap",
          "[collectives][check]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int nan_rank = 0; nan_rank < 3; ++nan_rank) {
    std::vector<std::vector<float>> v = {{1, 5}, {2, 6}, {3, 4}};
    v[nan_rank][0] = nan;
    const auto mx = reduce(v, ReduceOp::kMax);
    const auto mn = reduce(v, ReduceOp::kMin);
    CHECK(std::isnan(mx[0]));
    CHECK(std::isnan(mn[0]));
    CHECK(mx[1] == 6);
    CHECK(mn[1] == 4);
  }
  // float16: 4 x 30000 averages to 30000 although the float16 sum (120000) overflows.
  const auto h = reduce<Half>({{Half(30000.f)}, {Half(30000.f)}, {Half(30000.f)}, {Half(30000.f)}},
                              ReduceOp::kAvg);
  CHECK(static_cast<float>(h[0]) == 30000.f);
  // bfloat16 sums round once: 256 + 1 + 1 + 1 = 259 -> bf16(259), where pairwise rounding gives
  // 256 (each 256 + 1 rounds back to 256).
  const auto b = reduce<BFloat16>(
      {{BFloat16(256.f)}, {BFloat16(1.f)}, {BFloat16(1.f)}, {BFloat16(1.f)}}, ReduceOp::kSum);
  CHECK(static_cast<float>(b[0]) == static_cast<float>(BFloat16(259.f)));
  CHECK(static_cast<float>(b[0]) != 256.f);
  // int32 wraps like MPI's sum (no undefined behaviour); avg truncates toward zero.
  const auto i = reduce<int32_t>({{INT32_MAX, -7}, {1, 2}}, ReduceOp::kSum);
  CHECK(i[0] == INT32_MIN);
  CHECK(reduce<int32_t>({{-7}, {2}}, ReduceOp::kAvg)[0] == -2);
  CHECK(reduce<int64_t>({{3}, {-9}, {4}}, ReduceOp::kMin)[0] == -9);
  // bool: sum/max are or, min/product are and.
  CHECK(reduce_bool({true, false}, ReduceOp::kSum));
  CHECK(reduce_bool({false, true}, ReduceOp::kMax));
  CHECK_FALSE(reduce_bool({true, false}, ReduceOp::kMin));
  CHECK_FALSE(reduce_bool({false, false}, ReduceOp::kSum));
}

TEST_CASE("DTENSOR_CHECK_COLLECTIVES values", "[collectives][check]") {
  CHECK(detail::parse_check_mode(nullptr) == CollectiveCheckMode::kOn);
  CHECK(detail::parse_check_mode("") == CollectiveCheckMode::kOn);
  CHECK(detail::parse_check_mode("0") == CollectiveCheckMode::kOff);
  CHECK(detail::parse_check_mode("1") == CollectiveCheckMode::kOn);
  for (const char* bad : {"2", "yes", "full", " 1", "1 "}) {
    REQUIRE_THROWS_WITH(
        detail::parse_check_mode(bad),
        Contains("[collective check] DTENSOR_CHECK_COLLECTIVES='" + std::string(bad) + "'"));
  }
}

TEST_CASE("DTENSOR_COLLECTIVE_TIMEOUT refuses non-finite values and garbage",
          "[collectives][deadline]") {
  CHECK(detail::parse_collective_timeout(nullptr) == 300.0);
  CHECK(detail::parse_collective_timeout("") == 300.0);
  CHECK(detail::parse_collective_timeout("2.5") == 2.5);
  CHECK(detail::parse_collective_timeout("1e3") == 1000.0);
  for (const char* bad : {"inf", "INF", "infinity", "nan", "-1", "0", "5s", "abc", "1e999"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(detail::parse_collective_timeout(bad),
                        Contains("[collective_timeout] DTENSOR_COLLECTIVE_TIMEOUT='" +
                                 std::string(bad) + "' is not a positive, finite number"));
  }
  const double before = collective_timeout();
  REQUIRE_THROWS_WITH(set_collective_timeout(std::numeric_limits<double>::infinity()),
                      Contains("[set_collective_timeout]") && Contains("finite"));
  REQUIRE_THROWS_WITH(set_collective_timeout(std::nan("")), Contains("[set_collective_timeout]"));
  CHECK(collective_timeout() == before);
}

}  // namespace dtensor::test
