// CUDA tensors through the collectives (label gpu): the CUDA world communicator (NCCL when
// compiled in) and the MPI backend staging CUDA tensors through pinned host memory.
// Reports skipped (exit 77) when CUDA is not compiled in or no device is visible.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/storage.h"

namespace dtensor::test {
namespace {

Device my_gpu() {
  return Device(kCUDA, local_rank() % cuda_device_count());
}

// NCCL needs one GPU per rank; with fewer GPUs than ranks only the staging path is tested.
bool one_gpu_per_rank() {
  return cuda_device_count() >= world_size();
}

void check_backend_all_reduce(const CommunicatorPtr& comm) {
  const int n = comm->size(), r = comm->rank();
  std::vector<float> v(7);
  for (int i = 0; i < 7; ++i) v[static_cast<size_t>(i)] = static_cast<float>(r + i);
  Tensor t = from_vector<float>(v, {7}, my_gpu());
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  std::vector<float> got = t.to_vector<float>();
  for (int i = 0; i < 7; ++i) CHECK(got[static_cast<size_t>(i)] == n * i + n * (n - 1) / 2.0f);

  Tensor m =
      from_vector<int64_t>({static_cast<int64_t>(r), static_cast<int64_t>(-r)}, {2}, my_gpu());
  comm->all_reduce(m, ReduceOp::kMax)->wait();
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{n - 1, 0});

  std::vector<BFloat16> b(3, BFloat16(static_cast<float>(r + 1)));
  Tensor bt = from_vector<BFloat16>(b, {3}, my_gpu());
  comm->all_reduce(bt, ReduceOp::kAvg)->wait();
  for (float x : bt.to_vector<float>()) CHECK(x == (n + 1) / 2.0f);

  // Integer avg truncates toward zero: rank r holds -r and r + 1, sums -n(n-1)/2 and n(n+1)/2.
  Tensor ia = from_vector<int32_t>({-r, r + 1}, {2}, my_gpu());
  comm->all_reduce(ia, ReduceOp::kAvg)->wait();
  CHECK(ia.to_vector<int32_t>() ==
        std::vector<int32_t>{(-(n * (n - 1) / 2)) / n, (n * (n + 1) / 2) / n});

  // Floating max / min propagate a NaN from any one rank (NCCL's own fmax would drop it; the
  // backend reduces integer keys, nan_minmax.h), in place, out of place and by reduce_scatter,
  // in every floating dtype; the other entries keep the true max / min, -inf and +inf too.
  const double nan = std::nan("");
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
      const bool is_max = op == ReduceOp::kMax;
      // Entry 0: NaN on the last rank only; entry 1: r; entry 2: -inf on rank 0 else r.
      const std::vector<double> mine = {r == n - 1 ? nan : 1.0, double(r),
                                        r == 0 ? -INFINITY : double(r)};
      const std::vector<double> want = {nan, is_max ? n - 1.0 : 0.0,
                                        is_max ? (n > 1 ? n - 1.0 : -INFINITY) : -INFINITY};
      const auto check_values = [&](const Tensor& t) {
        const std::vector<double> got = t.to(kFloat64).to_vector<double>();
        CHECK(std::isnan(got[0]));
        CHECK(got[1] == want[1]);
        CHECK(got[2] == want[2]);
      };
      Tensor t = from_vector<double>(mine, {3}, my_gpu()).to(d);
      Tensor in = t.clone();
      comm->all_reduce(t, op)->wait();
      check_values(t);
      Tensor out = zeros({3}, TensorOptions(d, my_gpu()));
      comm->all_reduce(out, in, op)->wait();
      check_values(out);
      std::vector<double> rows;
      for (int k = 0; k < n; ++k) rows.insert(rows.end(), mine.begin(), mine.end());
      Tensor rs = zeros({3}, TensorOptions(d, my_gpu()));
      comm->reduce_scatter(rs, from_vector<double>(rows, {3 * n}, my_gpu()).to(d), op)->wait();
      check_values(rs);
    }
  }
}

void check_backend_data_movement(const CommunicatorPtr& comm) {
  const int n = comm->size(), r = comm->rank();
  Tensor in = from_vector<int32_t>({r * 10, r * 10 + 1}, {2}, my_gpu());
  Tensor out = zeros({2 * n}, TensorOptions(kInt32, my_gpu()));
  comm->all_gather(out, in)->wait();
  std::vector<int32_t> g = out.to_vector<int32_t>();
  for (int s = 0; s < n; ++s) {
    CHECK(g[static_cast<size_t>(2 * s)] == s * 10);
    CHECK(g[static_cast<size_t>(2 * s + 1)] == s * 10 + 1);
  }
  // In place: the input is this rank's block of the output (the usual all_gather pattern).
  Tensor out_ip = zeros({2 * n}, TensorOptions(kInt32, my_gpu()));
  out_ip.narrow(0, 2 * r, 2).copy_(in);
  comm->all_gather(out_ip, out_ip.narrow(0, 2 * r, 2))->wait();
  CHECK(out_ip.to_vector<int32_t>() == g);
  // reduce_scatter into this rank's block of the input.
  Tensor rs_ip = out.clone();
  comm->reduce_scatter(rs_ip.narrow(0, 2 * r, 2), rs_ip, ReduceOp::kMax)->wait();
  CHECK(rs_ip.narrow(0, 2 * r, 2).to_vector<int32_t>() == std::vector<int32_t>{r * 10, r * 10 + 1});

  Tensor rs_out = zeros({2}, TensorOptions(kInt32, my_gpu()));
  comm->reduce_scatter(rs_out, out, ReduceOp::kSum)->wait();
  std::vector<int32_t> rs = rs_out.to_vector<int32_t>();
  CHECK(rs[0] == n * (r * 10));
  CHECK(rs[1] == n * (r * 10 + 1));

  std::vector<double> a2a_v(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) a2a_v[static_cast<size_t>(j)] = r * 100 + j;
  Tensor a2a_in = from_vector<double>(a2a_v, {n}, my_gpu());
  Tensor a2a_out = zeros({n}, TensorOptions(kFloat64, my_gpu()));
  comm->all_to_all(a2a_out, a2a_in)->wait();
  std::vector<double> a2a = a2a_out.to_vector<double>();
  for (int s = 0; s < n; ++s) CHECK(a2a[static_cast<size_t>(s)] == s * 100 + r);

  Tensor bc = full({4}, r == 0 ? 3.5 : -1.0, TensorOptions(kFloat32, my_gpu()));
  comm->broadcast(bc, 0)->wait();
  for (float x : bc.to_vector<float>()) CHECK(x == 3.5f);

  // scatter from the last rank, bf16 (plain 16-bit elements): block k holds k + 0.5, k + 1.5.
  const int root = n - 1;
  Tensor sc_in;
  if (r == root) {
    std::vector<float> v(static_cast<size_t>(2 * n));
    for (int k = 0; k < 2 * n; ++k) v[static_cast<size_t>(k)] = k / 2 + (k % 2) + 0.5f;
    sc_in = from_vector<float>(v, {n, 2}, my_gpu()).to(kBFloat16);
  }
  Tensor sc_out = zeros({2}, TensorOptions(kBFloat16, my_gpu()));
  comm->scatter(sc_out, sc_in, root)->wait();
  CHECK(sc_out.to_vector<float>() == std::vector<float>{r + 0.5f, r + 1.5f});
  // The root's output aliasing its own block of the input.
  if (r == root) {
    comm->scatter(sc_in.select(0, root), sc_in, root)->wait();
    CHECK(sc_in.select(0, root).to_vector<float>() == std::vector<float>{r + 0.5f, r + 1.5f});
  } else {
    comm->scatter(sc_out, Tensor(), root)->wait();
  }

  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor snd = full({3}, static_cast<double>(r), TensorOptions(kFloat16, my_gpu()));
  Tensor rcv = zeros({3}, TensorOptions(kFloat16, my_gpu()));
  // A ring. NCCL enqueues each send / recv on its own (not grouped), so ranks alternate the
  // order (even ranks send first) where MPI would not mind; one rank (its own peer) posts the
  // recv first, which the NCCL backend pairs with the later send itself.
  WorkPtr rw, sw;
  if (n > 1 && r % 2 == 0) {
    sw = comm->send(snd, next);
    rw = comm->recv(rcv, prev);
  } else {
    rw = comm->recv(rcv, prev);
    sw = comm->send(snd, next);
  }
  sw->wait();
  rw->wait();
  for (float x : rcv.to_vector<float>()) CHECK(x == static_cast<float>(prev));
  comm->barrier()->wait();

  Tensor empty_t = zeros({0}, TensorOptions(kFloat32, my_gpu()));
  comm->all_reduce(empty_t, ReduceOp::kSum)->wait();
}

}  // namespace

TEST_CASE("MPI backend stages CUDA tensors through host memory", "[collectives][gpu]") {
  auto comm = world_communicator(kCPU);
  REQUIRE(comm->supports(my_gpu()));
  check_backend_all_reduce(comm);
  check_backend_data_movement(comm);
}

TEST_CASE("CUDA world communicator (NCCL when compiled in)", "[collectives][gpu]") {
  if (!one_gpu_per_rank()) {
    WARN("fewer GPUs than ranks: NCCL cases skipped");
    return;
  }
  auto comm = world_communicator(kCUDA);
  REQUIRE(comm->supports(my_gpu()));
  if (comm->backend() == "nccl") CHECK_FALSE(comm->supports(Device(kCPU)));
  CommDebugMode debug;
  check_backend_all_reduce(comm);
  check_backend_data_movement(comm);
  CHECK(debug.count(CollectiveKind::kAllReduce) == 5);
  auto sub = comm->split(comm->rank() % 2, comm->rank());
  REQUIRE(sub != nullptr);
  CHECK(sub->backend() == comm->backend());
  check_backend_all_reduce(sub);
}

}  // namespace dtensor::test

int main(int argc, char** argv) {
  dtensor::Runtime runtime(&argc, &argv);
  if (dtensor::cuda_device_count() == 0) {
    if (dtensor::world_rank() == 0)
      std::printf("no CUDA device (or CUDA not compiled in): skipped\n");
    return 77;
  }
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  int failed = rc != 0 ? 1 : (session.run() != 0 ? 1 : 0);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed ? 1 : 0;
}
