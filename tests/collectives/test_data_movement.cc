// all_gather, all_to_all, broadcast, scatter and send/recv: pure data movement, so results must be
// bit-exact copies of what the closed-form fill put on the source rank.
#include <cstdint>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

// Distinct per (rank, index); bool alternates with a rank-dependent phase.
template <typename T>
double pattern(int r, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return (r + i) % 2 == 0;
  } else {
    return static_cast<double>(r * 100 + i) - 37.0;
  }
}

#define DT_TYPES float, double, Half, BFloat16, int32_t, int64_t, bool

}  // namespace

TEMPLATE_TEST_CASE("all_gather concatenates the ranks' inputs in rank order",
                   "[collectives][all_gather]", DT_TYPES) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t numel = GENERATE(int64_t{0}, int64_t{1}, int64_t{7}, int64_t{25});
  INFO("numel " << numel << ", world " << n);
  Tensor in = make_tensor<T>(numel, [&](int64_t i) { return pattern<T>(r, i); });
  Tensor out = make_tensor<T>(n * numel, [](int64_t) { return 0.0; });
  comm->all_gather(out, in)->wait();
  for (int src = 0; src < n; ++src) {
    for (int64_t i = 0; i < numel; ++i) {
      CHECK(element<T>(out, src * numel + i) == representable<T>(pattern<T>(src, i)));
    }
  }
}

TEST_CASE("all_gather in place: the input is this rank's block of the output",
          "[collectives][all_gather]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t numel = 6;
  Tensor out = make_tensor<int64_t>(n * numel, [&](int64_t k) { return k / numel == r ? k : -1; });
  Tensor in = out.narrow(0, r * numel, numel);
  comm->all_gather(out, in)->wait();
  for (int64_t k = 0; k < n * numel; ++k) CHECK(element<int64_t>(out, k) == k);
}

TEST_CASE("all_gather into a 2-d output", "[collectives][all_gather]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  Tensor in = make_tensor<float>(6, [&](int64_t i) { return r * 10 + i; }).view({2, 3});
  Tensor out = empty({2 * n, 3}, TensorOptions(kFloat32));
  comm->all_gather(out, in)->wait();
  for (int src = 0; src < n; ++src) {
    for (int64_t i = 0; i < 6; ++i) CHECK(out.at<float>({2 * src + i / 3, i % 3}) == src * 10 + i);
  }
}

TEMPLATE_TEST_CASE("all_to_all sends block j of rank i to block i of rank j",
                   "[collectives][all_to_all]", DT_TYPES) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t block = GENERATE(int64_t{0}, int64_t{1}, int64_t{3});
  INFO("block " << block << ", world " << n);
  // Rank r's element k (block k / block, offset k % block) encodes (sender r, k).
  Tensor in = make_tensor<T>(n * block, [&](int64_t k) { return pattern<T>(r, k); });
  Tensor out = make_tensor<T>(n * block, [](int64_t) { return 0.0; });
  comm->all_to_all(out, in)->wait();
  for (int src = 0; src < n; ++src) {
    for (int64_t j = 0; j < block; ++j) {
      // Block src of my output = block r of src's input.
      CHECK(element<T>(out, src * block + j) == representable<T>(pattern<T>(src, r * block + j)));
    }
  }
}

TEST_CASE("all_to_all with the output aliasing the input", "[collectives][all_to_all]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  Tensor t = make_tensor<int32_t>(2 * n, [&](int64_t k) { return r * 1000 + k; });
  comm->all_to_all(t, t)->wait();
  for (int src = 0; src < n; ++src) {
    for (int64_t j = 0; j < 2; ++j) {
      CHECK(element<int32_t>(t, src * 2 + j) == src * 1000 + r * 2 + j);
    }
  }
}

TEMPLATE_TEST_CASE("broadcast copies the root's tensor to every rank", "[collectives][broadcast]",
                   DT_TYPES) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t numel = GENERATE(int64_t{0}, int64_t{1}, int64_t{13});
  for (int root = 0; root < n; ++root) {
    INFO("root " << root << ", numel " << numel);
    Tensor t = make_tensor<T>(numel, [&](int64_t i) { return pattern<T>(r, i); });
    comm->broadcast(t, root)->wait();
    for (int64_t i = 0; i < numel; ++i) {
      CHECK(element<T>(t, i) == representable<T>(pattern<T>(root, i)));
    }
  }
}

TEMPLATE_TEST_CASE("scatter sends block k of the root's input to rank k", "[collectives][scatter]",
                   DT_TYPES) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int64_t block = GENERATE(int64_t{0}, int64_t{1}, int64_t{7}, int64_t{13});
  for (int root = 0; root < n; ++root) {
    INFO("root " << root << ", block " << block << ", world " << n);
    // Only the root passes an input (element k encodes (root, k)); the others pass none.
    Tensor in;
    if (r == root) {
      in = make_tensor<T>(n * block, [&](int64_t k) {
             return pattern<T>(root, k);
           }).view({n, block});
    }
    Tensor out = make_tensor<T>(block, [&](int64_t i) { return pattern<T>(r + 1, i + 3); });
    CommDebugMode debug;
    comm->scatter(out, in, root)->wait();
    CHECK(debug.count(CollectiveKind::kScatter) == 1);
    CHECK(debug.bytes(CollectiveKind::kScatter) == block * static_cast<int64_t>(sizeof(T)));
    CHECK(debug.total_count() == 1);
    for (int64_t i = 0; i < block; ++i) {
      CHECK(element<T>(out, i) == representable<T>(pattern<T>(root, r * block + i)));
    }
    if (r == root) {  // the root's input is left unchanged
      for (int64_t k = 0; k < n * block; ++k) {
        CHECK(element<T>(in.view({n * block}), k) == representable<T>(pattern<T>(root, k)));
      }
    }
  }
}

TEST_CASE("scatter of 2-d blocks, non-root inputs ignored, output aliasing the root's block",
          "[collectives][scatter]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int root = n - 1;
  // A block of shape [3, 2]; element (k, i, j) of the root's input is 1000 k + 10 i + j.
  auto value = [](int64_t k, int64_t i, int64_t j) { return 1000.0 * k + 10.0 * i + j; };
  Tensor in = empty({n, 3, 2}, TensorOptions(kFloat64));
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 2; ++j) in.data<double>()[(k * 3 + i) * 2 + j] = value(k, i, j);
    }
  }
  // Non-roots pass a wrongly shaped input: it is ignored.
  Tensor junk = make_tensor<double>(5, [](int64_t) { return -1.0; });
  Tensor out = empty({3, 2}, TensorOptions(kFloat64));
  comm->scatter(out, r == root ? in : junk, root)->wait();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) CHECK(out.at<double>({i, j}) == value(r, i, j));
  }
  // The root's output is its own block of the input (the others receive into fresh tensors).
  Tensor fresh = zeros({3, 2}, TensorOptions(kFloat64));
  Tensor mine = r == root ? in.select(0, root) : fresh;
  comm->scatter(mine, r == root ? in : Tensor(), root)->wait();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) CHECK(mine.at<double>({i, j}) == value(r, i, j));
  }
}

TEMPLATE_TEST_CASE("send/recv around a ring", "[collectives][send_recv]", DT_TYPES) {
  using T = TestType;
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t numel = GENERATE(int64_t{0}, int64_t{1}, int64_t{9});
  // Sizes may differ by sender as long as the pair agrees: the message from rank s has
  // numel + s elements.
  Tensor out = make_tensor<T>(numel + r, [&](int64_t i) { return pattern<T>(r, i); });
  Tensor in = make_tensor<T>(numel + prev, [](int64_t) { return 0.0; });
  WorkPtr rw = comm->recv(in, prev, /*tag=*/5);
  WorkPtr sw = comm->send(out, next, /*tag=*/5);
  sw->wait();
  rw->wait();
  CHECK(rw->is_completed());
  CHECK(sw->is_completed());
  for (int64_t i = 0; i < numel + prev; ++i) {
    CHECK(element<T>(in, i) == representable<T>(pattern<T>(prev, i)));
  }
}

TEST_CASE("send/recv with tags matches messages by tag", "[collectives][send_recv]") {
  auto comm = world_communicator();
  const int n = comm->size(), r = comm->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor a = make_tensor<int64_t>(3, [&](int64_t i) { return r * 10 + i; });
  Tensor b = make_tensor<int64_t>(3, [&](int64_t i) { return -(r * 10 + i); });
  Tensor got_a = make_tensor<int64_t>(3, [](int64_t) { return 0; });
  Tensor got_b = make_tensor<int64_t>(3, [](int64_t) { return 0; });
  // Receives posted in the opposite order of the sends: tags route them.
  WorkPtr rb = comm->recv(got_b, prev, 2);
  WorkPtr ra = comm->recv(got_a, prev, 1);
  WorkPtr sa = comm->send(a, next, 1);
  WorkPtr sb = comm->send(b, next, 2);
  for (auto& w : {sa, sb, ra, rb}) w->wait();
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(element<int64_t>(got_a, i) == prev * 10 + i);
    CHECK(element<int64_t>(got_b, i) == -(prev * 10 + i));
  }
}

}  // namespace dtensor::test
