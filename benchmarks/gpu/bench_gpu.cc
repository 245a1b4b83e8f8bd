// GPU figures (CUDA builds only; run on a machine with a GPU): how close the library's CUDA
// kernels come to the device's limits.
//
//   bench_gpu [--mb 256] [--gemm 8192] [--iters 20] [--json FILE]
//       one rank: the device's copy bandwidth (cudaMemcpy device to device, bytes read +
//       written), then elementwise ops, the RNG, softmax and layer_norm as a fraction of it, and
//       GEMM TFLOP/s against cuBLAS called directly with the same types and math mode.
//   DTENSOR_CUDA_BACKEND=mpi mpirun -np 2 bench_gpu --redistribute [--mb 64]
//       ranks sharing one GPU: S(0)->R and P->R on a CUDA mesh (MPI with pinned-memory staging)
//       against one device-to-device copy of the output's bytes.
//
// Kernel times: CUDA events around each call on the library's stream (median of --iters after
// warm-up), each call allocating its output as a PyTorch call does. Redistribute times: wall
// clock after a barrier, the max over ranks, with a device synchronize inside. Every case checks
// its result (a sample against the CPU, GEMM against cuBLAS's own output) and exits non-zero
// when it is wrong. scripts/bench_gpu.sh runs both and writes the GPU section of
// docs/PERFORMANCE.md.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/matmul_cuda.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/cuda_check.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

// Median seconds of `iters` calls of fn, each between two events on the default stream (the
// library's stream), after `warmup` calls.
bench::Stats event_time(const std::function<void()>& fn, int64_t warmup, int64_t iters) {
  for (int64_t i = 0; i < warmup; ++i) fn();
  DT_CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  DT_CHECK_CUDA(cudaEventCreate(&a));
  DT_CHECK_CUDA(cudaEventCreate(&b));
  std::vector<double> s;
  for (int64_t i = 0; i < iters; ++i) {
    DT_CHECK_CUDA(cudaEventRecord(a));
    fn();
    DT_CHECK_CUDA(cudaEventRecord(b));
    DT_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    DT_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    s.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return bench::stats_of(s);
}

// The first `n` values of t (any device) as doubles.
std::vector<double> head(const dt::Tensor& t, int64_t n) {
  return t.reshape({-1})
      .narrow(0, 0, std::min<int64_t>(n, t.numel()))
      .to(dt::Device())
      .to_vector<double>();
}

// Fails unless the first 4096 values of the CUDA result equal the CPU op's within rtol.
void check_sample(const char* what, const dt::Tensor& gpu_out,
                  const std::function<dt::Tensor(const dt::Tensor&)>& op, const dt::Tensor& gpu_in,
                  double rtol) {
  // The CPU op sees the same leading rows (whole rows for the row ops: 4096 is one row there).
  const dt::Tensor in = gpu_in.narrow(0, 0, 1).to(dt::Device());
  const std::vector<double> want = head(op(in), 4096), got = head(gpu_out, 4096);
  for (size_t i = 0; i < want.size(); ++i) {
    DT_CHECK(std::fabs(got[i] - want[i]) <= rtol * (1e-3 + std::fabs(want[i])),
             "[bench_gpu] %s: element %d is %g on the GPU, %g on the CPU", what,
             static_cast<int64_t>(i), got[i], want[i]);
  }
}

struct Row {
  std::string name;
  double bytes;  // moved per call (read + written)
  std::function<dt::Tensor()> fn;
  std::function<dt::Tensor(const dt::Tensor&)> cpu;  // for the check; null: none
  dt::Tensor input;
  double rtol;
};

int kernels(const bench::Flags& flags, bench::JsonLines& json) {
  const int64_t iters = flags.i64("iters", 20);
  const int64_t mb = flags.i64("mb", 256);
  const int64_t cols = 4096, rows = mb * (1 << 20) / 4 / cols, n = rows * cols;
  const dt::Device gpu(dt::kCUDA, dt::local_cuda_device());
  cudaDeviceProp prop{};
  DT_CHECK_CUDA(cudaGetDeviceProperties(&prop, gpu.index));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  bench::print0("device: %s, %d SMs, %.0f GiB; driver CUDA %d.%d, runtime %d.%d\n", prop.name,
                prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, driver / 1000,
                driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  json.write(json.record("device")
                 .add("gpu", prop.name)
                 .add("sms", prop.multiProcessorCount)
                 .add("driver", driver)
                 .add("runtime", runtime));

  dt::Generator gen(7);
  const dt::TensorOptions fopt(dt::kFloat32, gpu);
  const dt::Tensor x = dt::mul(dt::sub(dt::rand({rows, cols}, fopt, &gen), 0.5), 4.0);
  const dt::Tensor y = dt::rand({rows, cols}, fopt, &gen);
  const dt::Tensor w = dt::rand({cols}, fopt, &gen), b = dt::rand({cols}, fopt, &gen);
  dt::Tensor dst = dt::empty({rows, cols}, fopt);
  const double nb = static_cast<double>(n) * 4;

  // The reference: one device-to-device copy of the same bytes.
  const bench::Stats copy = event_time(
      [&] {
        DT_CHECK_CUDA(cudaMemcpyAsync(dst.data_ptr(), x.data_ptr(), nb, cudaMemcpyDeviceToDevice));
      },
      3, iters);
  const double copy_bw = 2 * nb / copy.median;
  bench::print0("\n%-22s %10s %10s %12s\n", "case", "median us", "GB/s", "of copy");
  bench::print0("%-22s %10.1f %10.0f %12s\n", "cudaMemcpy D2D", copy.median * 1e6, copy_bw / 1e9,
                "1.00");
  json.write(
      json.record("copy").add_stats("", copy).add("bytes", 2 * nb).add("gbps", copy_bw / 1e9));

  std::vector<Row> rowsv = {
      {"clone", 2 * nb, [&] { return x.clone(); }, [](const dt::Tensor& t) { return t.clone(); }, x,
       0},
      {"add", 3 * nb, [&] { return dt::add(x, y); }, nullptr, x, 0},
      {"exp", 2 * nb, [&] { return dt::exp(x); }, [](const dt::Tensor& t) { return dt::exp(t); }, x,
       1e-5},
      {"gelu", 2 * nb, [&] { return dt::gelu(x); }, [](const dt::Tensor& t) { return dt::gelu(t); },
       x, 1e-5},
      {"uniform_", nb, [&] { return dt::uniform_(dst, 0.0, 1.0, &gen); }, nullptr, x, 0},
      {"normal_", nb, [&] { return dt::normal_(dst, 0.0, 1.0, &gen); }, nullptr, x, 0},
      {"softmax [R,4096]", 2 * nb, [&] { return dt::softmax(x, -1); },
       [](const dt::Tensor& t) { return dt::softmax(t, -1); }, x, 1e-5},
      {"softmax_backward [R,4096]", 3 * nb, [&] { return dt::softmax_backward(y, x, -1); }, nullptr,
       x, 0},
      {"layer_norm [R,4096]", 2 * nb, [&] { return dt::layer_norm(x, {cols}, w, b); },
       [&](const dt::Tensor& t) {
         return dt::layer_norm(t, {cols}, w.to(dt::Device()), b.to(dt::Device()));
       },
       x, 1e-4},
  };
  for (const Row& r : rowsv) {
    dt::Tensor out;
    const bench::Stats s = event_time([&] { out = r.fn(); }, 3, iters);
    if (r.cpu) check_sample(r.name.c_str(), out, r.cpu, r.input, r.rtol);
    const double bw = r.bytes / s.median;
    bench::print0("%-22s %10.1f %10.0f %12.2f\n", r.name.c_str(), s.median * 1e6, bw / 1e9,
                  bw / copy_bw);
    json.write(json.record(r.name)
                   .add_stats("", s)
                   .add("bytes", r.bytes)
                   .add("gbps", bw / 1e9)
                   .add("of_copy", bw / copy_bw));
  }
  // add and the RNG have no CPU twin above: add by hand; the fills against the same generator
  // state on the CPU (the offset-based RNG gives the same bits on both devices).
  {
    const std::vector<double> s = head(dt::add(x, y), 64), xs = head(x, 64), ys = head(y, 64);
    for (size_t i = 0; i < s.size(); ++i) {
      DT_CHECK(s[i] == static_cast<double>(static_cast<float>(xs[i] + ys[i])),
               "[bench_gpu] add: element %d wrong", static_cast<int64_t>(i));
    }
    for (const bool normal : {false, true}) {
      dt::Generator g_gpu(11), g_cpu(11);
      const dt::Tensor on_cpu = dt::empty({4096}, dt::TensorOptions(dt::kFloat32));
      const dt::Tensor on_gpu = dt::empty({4096}, fopt);
      if (normal) {
        dt::normal_(on_cpu, 0.0, 1.0, &g_cpu);
        dt::normal_(on_gpu, 0.0, 1.0, &g_gpu);
      } else {
        dt::uniform_(on_cpu, 0.0, 1.0, &g_cpu);
        dt::uniform_(on_gpu, 0.0, 1.0, &g_gpu);
      }
      DT_CHECK(bench::same_bits(on_gpu.to(dt::Device()), on_cpu),
               "[bench_gpu] %s: the CUDA values differ from the CPU's",
               normal ? "normal_" : "uniform_");
    }
  }

  // GEMM: ours (dt::mm) and cublasGemmEx on the same operands, square [g, g] x [g, g].
  const int64_t g = flags.i64("gemm", 8192);
  cublasHandle_t h;
  DT_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "[bench_gpu] cublasCreate failed");
  bench::print0("\n%-28s %12s %12s %8s\n", ("GEMM " + std::to_string(g) + "^3").c_str(),
                "ours TFLOP/s", "cuBLAS", "ratio");
  struct Gemm {
    const char* name;
    dt::DType dtype;
    cudaDataType_t ctype;
    bool tf32;
  };
  for (const Gemm& c : {Gemm{"float32", dt::kFloat32, CUDA_R_32F, false},
                        Gemm{"float32 (tf32)", dt::kFloat32, CUDA_R_32F, true},
                        Gemm{"bfloat16", dt::kBFloat16, CUDA_R_16BF, false},
                        Gemm{"float16", dt::kFloat16, CUDA_R_16F, false}}) {
    dt::set_allow_tf32(c.tf32);
    const dt::Tensor a = dt::rand({g, g}, fopt, &gen).to(c.dtype);
    const dt::Tensor bb = dt::rand({g, g}, fopt, &gen).to(c.dtype);
    dt::Tensor ours;
    dt::Tensor raw = dt::empty({g, g}, dt::TensorOptions(c.dtype, gpu));
    const float one = 1.f, zero = 0.f;
    const cublasComputeType_t compute = c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    DT_CHECK(cublasSetMathMode(
                 h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
                 CUBLAS_STATUS_SUCCESS,
             "[bench_gpu] cublasSetMathMode failed");
    const int gi = static_cast<int>(g);
    auto direct = [&] {
      // Row-major C = A B is column-major C^T = B^T A^T.
      DT_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, gi, gi, gi, &one, bb.data_ptr(), c.ctype,
                            gi, a.data_ptr(), c.ctype, gi, &zero, raw.data_ptr(), c.ctype, gi,
                            compute, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
               "[bench_gpu] cublasGemmEx failed");
    };
    const std::vector<bench::Stats> s = {
        event_time([&] { ours = dt::mm(a, bb); }, 2, iters / 2 + 1),
        event_time(direct, 2, iters / 2 + 1)};
    const double flop = 2.0 * static_cast<double>(g) * g * g;
    const std::vector<double> d1 = head(ours, 4096), d2 = head(raw, 4096);
    for (size_t i = 0; i < d1.size(); ++i) {
      DT_CHECK(d1[i] == d2[i], "[bench_gpu] GEMM %s: element %d is %g, cuBLAS gives %g", c.name,
               static_cast<int64_t>(i), d1[i], d2[i]);
    }
    const double t_ours = flop / s[0].median / 1e12, t_raw = flop / s[1].median / 1e12;
    bench::print0("%-28s %12.1f %12.1f %8.3f\n", c.name, t_ours, t_raw, t_ours / t_raw);
    json.write(json.record(std::string("gemm ") + c.name)
                   .add("g", g)
                   .add_stats("", s[0])
                   .add_stats("cublas", s[1])
                   .add("tflops", t_ours)
                   .add("cublas_tflops", t_raw)
                   .add("ratio", t_ours / t_raw));
  }
  dt::set_allow_tf32(false);
  cublasDestroy(h);
  return 0;
}

// Ranks sharing one GPU: redistribute on a 1-D CUDA mesh vs one D2D copy of the output's bytes.
int redistribute(const bench::Flags& flags, bench::JsonLines& json) {
  const int64_t iters = flags.i64("iters", 20);
  const int world = dt::world_size();
  const dt::Device gpu(dt::kCUDA, dt::local_cuda_device());
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCUDA, {world});
  bench::print0("\nredistribute on a %d-rank CUDA mesh (%s backend), float32\n", world,
                std::string(mesh.communicator(0)->backend()).c_str());
  bench::print0("%-10s %8s %12s %12s %8s\n", "move", "MB out", "ours us", "D2D copy us", "ratio");
  for (int64_t mb : {flags.i64("mb", 64) / 4, flags.i64("mb", 64)}) {
    const int64_t cols = 1024, rows = mb * (1 << 20) / 4 / cols;
    const dt::Tensor full =
        dt::arange(rows * cols, dt::TensorOptions(dt::kFloat32)).reshape({rows, cols});
    const dt::Tensor full_gpu = full.to(gpu);
    dt::Tensor dst = dt::empty({rows, cols}, dt::TensorOptions(dt::kFloat32, gpu));
    const double nb = static_cast<double>(rows * cols) * 4;
    struct Move {
      const char* name;
      dt::Placements src;
    };
    for (const Move& m : {Move{"S(0)->R", {dt::Shard(0)}}, Move{"P->R", {dt::Partial()}}}) {
      dt::DTensor src;
      if (m.src[0].is_partial()) {
        src = dt::DTensor::from_local(full_gpu, mesh, m.src, false, full.shape());
      } else {
        src = dt::distribute_tensor(full_gpu, mesh, m.src, std::nullopt);
      }
      dt::Tensor out;
      auto ours = [&] {
        out = src.redistribute(mesh, {dt::Replicate()}).to_local();
        DT_CHECK_CUDA(cudaDeviceSynchronize());
      };
      auto copy = [&] {
        DT_CHECK_CUDA(
            cudaMemcpy(dst.data_ptr(), full_gpu.data_ptr(), nb, cudaMemcpyDeviceToDevice));
      };
      const std::vector<bench::Stats> s = bench::time_interleaved({ours, copy}, 2, iters, true);
      const dt::Tensor want =
          m.src[0].is_partial() ? dt::mul(full, static_cast<double>(world)) : full;
      DT_CHECK(bench::same_bits(out.to(dt::Device()), want), "[bench_gpu] %s: wrong result",
               m.name);
      bench::print0("%-10s %8lld %12.1f %12.1f %8.2f\n", m.name, static_cast<long long>(mb),
                    s[0].median * 1e6, s[1].median * 1e6, s[0].median / s[1].median);
      json.write(json.record(std::string("redistribute ") + m.name)
                     .add("ranks", world)
                     .add("mb", mb)
                     .add_stats("", s[0])
                     .add_stats("copy", s[1])
                     .add("ratio", s[0].median / s[1].median));
    }
  }
  return 0;
}

int run(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  DT_CHECK(dt::cuda_available(), "[bench_gpu] no CUDA device visible");
  bench::JsonLines json("gpu", flags.str("json", ""));
  return flags.has("redistribute") ? redistribute(flags, json) : kernels(flags, json);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
