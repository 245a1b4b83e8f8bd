// Local CPU kernels, one thread unless --threads: softmax / log_softmax [64, 4096], layer_norm /
// rms_norm [256, 1024] (with weight, and bias for layer_norm), gelu (erf and tanh forms), silu
// and exp on [256, 4096], and the backward kernels of softmax and layer_norm (grad_x,
// grad_weight and grad_bias); float32. GEMMs (mm_*) at tensor-parallel shard shapes in float32,
// float64 and bfloat16, in GFLOP/s and as a fraction of the FMA peak measured first
// (fma_peak.h). The same shapes run
// under PyTorch in scripts/bench_kernels_vs_pytorch.sh, which prints both side by side.
//
//   bench_kernels [--min-seconds 0.3] [--batch 10] [--only NAME] [--json FILE] [--threads N]
//   bench_kernels --list          (the case names, one per line)
//   bench_kernels --gemm-info     (the GEMM library, kernel and threads:
//   dtensor/ops/matmul/blas_info.h)
//
// Per call: median / p10 / p90 over batches of --batch calls (after one warm-up batch), each
// call allocating its output as the PyTorch call does. Every case checks its result against a
// float64 computation of a few rows and exits non-zero when it is wrong. The vectorised
// kernels dispatch at run time; the target used is printed and recorded ("simd"). --threads N
// runs them with N intra-op threads (dtensor::set_num_threads; default 1, the PyTorch side's
// setting), recorded as "threads".
#include <absl/strings/str_format.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/kernels/fma_peak.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/common/detail/simd_dispatch.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/blas_info.h"
#include "dtensor/ops/matmul/detail/onednn.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/threads.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

// Deterministic values in [lo, hi) (an LCG; no dependence on the RNG layer).
dt::Tensor values(dt::IntSpan shape, uint64_t seed, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(dt::shape_numel(shape)));
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>(lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0);
  }
  return dt::from_vector<float>(v, shape);
}

// One benchmark row: what it computes, how to run it once, and a check of the last result
// (empty string when right, else what is wrong).
struct KernelCase {
  std::string name;
  dt::Shape shape;
  std::function<dt::Tensor()> run;
  std::function<std::string(const dt::Tensor&)> check;
  double flops = 0;   // floating-point operations per call (GEMMs: 2 M K N), 0 = not reported
  int64_t batch = 0;  // calls per timed batch (0 = --batch)
};

// Largest relative difference of `got` rows [0, rows) from `want(row, col)`, scaled by
// max(1, |want|).
template <typename F>
double max_rel_err(const dt::Tensor& got, int64_t rows, F&& want) {
  const int64_t n = got.size(-1);
  const float* p = got.data<float>();
  double err = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const double w = want(r, c);
      err = std::max(err, std::fabs(p[r * n + c] - w) / std::max(1.0, std::fabs(w)));
    }
  }
  return err;
}

std::string verdict(double err, double tol) {
  return err <= tol ? ""
                    : "max relative error " + std::to_string(err) + " > " + std::to_string(tol);
}

std::vector<KernelCase> cases() {
  std::vector<KernelCase> out;
  const dt::Shape sm = {64, 4096}, nm = {256, 1024}, ew = {256, 4096};
  const dt::Tensor xs = values(sm, 1, -6, 6), gs = values(sm, 2, -1, 1);
  const dt::Tensor xn = values(nm, 3, -2, 3), gn = values(nm, 4, -1, 1);
  const dt::Tensor w = values({1024}, 5, 0.5, 1.5), b = values({1024}, 6, -0.5, 0.5);
  const dt::Tensor xe = values(ew, 7, -5, 5);
  const auto row = [](const dt::Tensor& t, int64_t r) {
    const int64_t n = t.size(-1);
    return std::vector<double>(t.data<float>() + r * n, t.data<float>() + (r + 1) * n);
  };
  // Softmax rows in double.
  const auto ref_softmax = [row](const dt::Tensor& x, int64_t r, bool log) {
    std::vector<double> v = row(x, r);
    double m = -INFINITY, s = 0;
    for (double e : v) m = std::max(m, e);
    for (double e : v) s += std::exp(e - m);
    for (double& e : v) e = log ? e - m - std::log(s) : std::exp(e - m) / s;
    return v;
  };
  out.push_back(
      {"softmax", sm, [=] { return dt::softmax(xs, -1); },
       [=](const dt::Tensor& y) {
         return verdict(
             max_rel_err(y, 2, [&](int64_t r, int64_t c) { return ref_softmax(xs, r, false)[c]; }),
             1e-6);
       }});
  out.push_back(
      {"log_softmax", sm, [=] { return dt::log_softmax(xs, -1); },
       [=](const dt::Tensor& y) {
         return verdict(
             max_rel_err(y, 2, [&](int64_t r, int64_t c) { return ref_softmax(xs, r, true)[c]; }),
             1e-6);
       }});
  const dt::Tensor ys = dt::softmax(xs, -1);
  out.push_back({"softmax_backward", sm, [=] { return dt::softmax_backward(gs, ys, -1); },
                 [=](const dt::Tensor& gx) {
                   return verdict(max_rel_err(gx, 2,
                                              [&](int64_t r, int64_t c) {
                                                const auto g = row(gs, r), y = row(ys, r);
                                                double dot = 0;
                                                for (size_t i = 0; i < g.size(); ++i)
                                                  dot += g[i] * y[i];
                                                return y[c] * (g[c] - dot);
                                              }),
                                  1e-6);
                 }});
  // Normalisation rows in double.
  const auto ref_norm = [row](const dt::Tensor& x, int64_t r, const dt::Tensor& wt,
                              const dt::Tensor& bs, bool rms) {
    std::vector<double> v = row(x, r);
    const double n = static_cast<double>(v.size());
    double mean = 0, var = 0;
    if (!rms) {
      for (double e : v) mean += e;
      mean /= n;
    }
    for (double e : v) var += (e - mean) * (e - mean);
    const double rstd = 1 / std::sqrt(var / n + (rms ? 1.1920928955078125e-07 : 1e-5));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = (v[i] - mean) * rstd * wt.data<float>()[i] + (bs.defined() ? bs.data<float>()[i] : 0);
    }
    return v;
  };
  out.push_back({"layer_norm", nm, [=] { return dt::layer_norm(xn, {1024}, w, b); },
                 [=](const dt::Tensor& y) {
                   return verdict(max_rel_err(y, 2,
                                              [&](int64_t r, int64_t c) {
                                                return ref_norm(xn, r, w, b, false)[c];
                                              }),
                                  1e-5);
                 }});
  out.push_back({"rms_norm", nm, [=] { return dt::rms_norm(xn, {1024}, w); },
                 [=](const dt::Tensor& y) {
                   return verdict(max_rel_err(y, 2,
                                              [&](int64_t r, int64_t c) {
                                                return ref_norm(xn, r, w, dt::Tensor(), true)[c];
                                              }),
                                  1e-5);
                 }});
  const dt::LayerNormResult st = dt::native_layer_norm(xn, {1024}, w, b);
  out.push_back(
      // All three gradients, as training needs them (the check covers grad_x's row math).
      {"layer_norm_backward", nm,
       [=] { return dt::layer_norm_backward(gn, xn, {1024}, st.mean, st.rstd, w).grad_x; },
       [=](const dt::Tensor& gx) {
         // Rows of grad_x sum to zero (the mean is subtracted): a cheap invariant.
         double s = 0, a = 0;
         for (int64_t c = 0; c < 1024; ++c) {
           s += gx.data<float>()[c];
           a += std::fabs(gx.data<float>()[c]);
         }
         return verdict(std::fabs(s) / std::max(a, 1e-30), 1e-5);
       }});
  const auto unary = [&](const std::string& name, std::function<dt::Tensor()> run,
                         double (*ref)(double)) {
    out.push_back({name, ew, std::move(run), [=](const dt::Tensor& y) {
                     return verdict(max_rel_err(y, 2,
                                                [&](int64_t r, int64_t c) {
                                                  return ref(xe.data<float>()[r * 4096 + c]);
                                                }),
                                    1e-5);
                   }});
  };
  unary(
      "gelu", [=] { return dt::gelu(xe); },
      [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
  unary(
      "gelu_tanh", [=] { return dt::gelu(xe, dt::GeluApproximate::kTanh); },
      [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      });
  unary(
      "silu", [=] { return dt::silu(xe); }, [](double x) { return x / (1 + std::exp(-x)); });
  unary(
      "exp", [=] { return dt::exp(xe); }, [](double x) { return std::exp(x); });
  // A plain binary op (the elementwise library's contiguous loop): exact in float32.
  const dt::Tensor ye = values(ew, 12, -5, 5);
  out.push_back({"add", ew, [=] { return dt::add(xe, ye); },
                 [=](const dt::Tensor& z) {
                   return verdict(max_rel_err(z, 2,
                                              [&](int64_t r, int64_t c) {
                                                return double(xe.data<float>()[r * 4096 + c] +
                                                              ye.data<float>()[r * 4096 + c]);
                                              }),
                                  0.0);
                 }});
  // Causal attention [B, H, L, E] = [4, 8, 128, 32] (one 128-key block), the fused op; the
  // check compares one query row with the math in double.
  const dt::Shape at = {4, 8, 128, 32};
  const dt::Tensor aq = values(at, 8, -1, 1), ak = values(at, 9, -1, 1), av = values(at, 10, -1, 1);
  const double scale = 1 / std::sqrt(32.0);
  out.push_back({"attention", at,
                 [=] {
                   return dt::attention_forward(aq, ak, av, dt::Tensor(), {scale, true, 0}).out;
                 },
                 [=](const dt::Tensor& o) {
                   const int64_t i = 77;  // query row 77 of batch 0, head 0: keys 0..77
                   std::vector<double> p(static_cast<size_t>(i + 1));
                   double m = -INFINITY, sum = 0;
                   for (int64_t j = 0; j <= i; ++j) {
                     double d = 0;
                     for (int64_t e = 0; e < 32; ++e) {
                       d += double(aq.data<float>()[i * 32 + e]) * ak.data<float>()[j * 32 + e];
                     }
                     p[static_cast<size_t>(j)] = d * scale;
                     m = std::max(m, d * scale);
                   }
                   for (double& x : p) sum += (x = std::exp(x - m));
                   double err = 0;
                   for (int64_t e = 0; e < 32; ++e) {
                     double want = 0;
                     for (int64_t j = 0; j <= i; ++j) {
                       want += p[static_cast<size_t>(j)] / sum * av.data<float>()[j * 32 + e];
                     }
                     const double got = o.data<float>()[i * 32 + e];
                     err = std::max(err, std::fabs(got - want) / std::max(1.0, std::fabs(want)));
                   }
                   return verdict(err, 1e-5);
                 }});
  // Its backward (all three gradients, as training needs them), from the forward's out and
  // lse; the check compares query row 77's grad_q with the math in double.
  const dt::Tensor ag = values(at, 11, -1, 1);
  const dt::AttentionResult af = dt::attention_forward(aq, ak, av, dt::Tensor(), {scale, true, 0});
  const dt::Tensor no_lse_grad = dt::zeros(af.lse.sizes());
  out.push_back({"attention_backward", at,
                 [=] {
                   return dt::attention_backward(ag, no_lse_grad, aq, ak, av, dt::Tensor(), af.out,
                                                 af.lse, {scale, true, 0})
                       .q;
                 },
                 [=](const dt::Tensor& gq) {
                   const int64_t i = 77;  // batch 0, head 0: keys 0..77
                   const auto at2 = [](const dt::Tensor& t, int64_t r, int64_t e) {
                     return double(t.data<float>()[r * 32 + e]);
                   };
                   std::vector<double> p(static_cast<size_t>(i + 1)), dp(p.size());
                   double m = -INFINITY, sum = 0;
                   for (int64_t j = 0; j <= i; ++j) {
                     double s = 0, g = 0;
                     for (int64_t e = 0; e < 32; ++e) {
                       s += at2(aq, i, e) * at2(ak, j, e);
                       g += at2(ag, i, e) * at2(av, j, e);
                     }
                     p[static_cast<size_t>(j)] = s * scale, dp[static_cast<size_t>(j)] = g;
                     m = std::max(m, s * scale);
                   }
                   for (double& x : p) sum += (x = std::exp(x - m));
                   double d = 0;  // rowsum(dO * O), with O from the same probabilities
                   for (size_t j = 0; j < p.size(); ++j) d += p[j] / sum * dp[j];
                   double err = 0;
                   for (int64_t e = 0; e < 32; ++e) {
                     double want = 0;
                     for (int64_t j = 0; j <= i; ++j) {
                       const size_t u = static_cast<size_t>(j);
                       want += p[u] / sum * (dp[u] - d) * at2(ak, j, e) * scale;
                     }
                     err = std::max(
                         err, std::fabs(at2(gq, i, e) - want) / std::max(1.0, std::fabs(want)));
                   }
                   return verdict(err, 1e-5);
                 }});
  // GEMMs at the shapes tensor-parallel shards produce: [M tokens, K] @ [K, N] with K, N the
  // model dims 1024-4096 and their 1/2 and 1/4 shards (colwise: N / tp, rowwise: K / tp). The
  // check recomputes two rows in double. bfloat16 runs as dtensor runs it on the CPU (oneDNN's
  // bf16 kernels where the CPU has AVX-512 BF16, else operands widened to float32, an sgemm, the
  // result rounded back; DTENSOR_BF16_GEMM forces either), as PyTorch's bf16 mm is measured.
  struct Gemm {
    int64_t m, k, n;
    dt::DType dtype;
  };
  const Gemm gemms[] = {
      {128, 4096, 4096, dt::kFloat32},   {512, 4096, 1024, dt::kFloat32},
      {512, 1024, 4096, dt::kFloat32},   {2048, 2048, 2048, dt::kFloat32},
      {4096, 1024, 1024, dt::kFloat32},  {1024, 4096, 512, dt::kFloat32},
      {2048, 256, 2048, dt::kFloat32},   {512, 1024, 1024, dt::kFloat64},
      {2048, 2048, 2048, dt::kFloat64},  {512, 4096, 1024, dt::kBFloat16},
      {2048, 2048, 2048, dt::kBFloat16},
  };
  for (const Gemm& g : gemms) {
    const dt::Tensor a = values({g.m, g.k}, 13 + g.k, -1, 1).to(g.dtype);
    const dt::Tensor bm = values({g.k, g.n}, 14 + g.n, -1, 1).to(g.dtype);
    // Compared in float32 (max_rel_err reads floats): float64 is held to float32's rounding.
    const double tol = g.dtype == dt::kFloat64 ? 1e-6 : g.dtype == dt::kFloat32 ? 1e-4 : 1e-2;
    const char* tag = g.dtype == dt::kFloat64 ? "f64" : g.dtype == dt::kFloat32 ? "f32" : "bf16";
    KernelCase c{absl::StrFormat("mm_%s_%dx%dx%d", tag, g.m, g.k, g.n),
                 {g.m, g.k, g.n},
                 [=] { return dt::matmul(a, bm); },
                 [=](const dt::Tensor& y) {
                   const dt::Tensor a64 = a.to(dt::kFloat64), b64 = bm.to(dt::kFloat64);
                   const dt::Tensor y32 = y.to(dt::kFloat32);
                   return verdict(max_rel_err(y32, 2,
                                              [&](int64_t r, int64_t col) {
                                                double acc = 0;
                                                for (int64_t i = 0; i < g.k; ++i) {
                                                  acc += a64.data<double>()[r * g.k + i] *
                                                         b64.data<double>()[i * g.n + col];
                                                }
                                                return acc;
                                              }),
                                  tol);
                 }};
    c.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.k) * static_cast<double>(g.n);
    c.batch = 1;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Flags flags(argc, argv);
  const double min_seconds = flags.f64("min-seconds", 0.3);
  const int64_t batch = flags.i64("batch", 10);
  const std::string only = flags.str("only", "");
  if (flags.has("gemm-info")) {  // the GEMM library and kernel, for the report's header
    std::printf("%s\n", dt::blas_info_str().c_str());
    return 0;
  }
  if (flags.has("list")) {
    for (const KernelCase& c : cases()) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  // Always set (also to 1): the PyTorch side runs torch.set_num_threads(N) likewise, whatever
  // DTENSOR_NUM_THREADS or OPENBLAS_NUM_THREADS say.
  const int threads = static_cast<int>(flags.i64("threads", 1));
  if (threads < 1) {
    std::fprintf(stderr, "bench_kernels: --threads must be >= 1, got %d\n", threads);
    return 2;
  }
  dt::set_num_threads(threads);
  bench::JsonLines json("bench_kernels", flags.str("json", ""));
  const std::string simd = dt::detail::simd_target_name();
  std::printf(
      "# bench_kernels: float32, %d intra-op thread(s), SIMD target %s; per call, median "
      "(p10-p90) over batches of %lld calls\n",
      threads, simd.c_str(), static_cast<long long>(batch));
  // The GEMM rows' ceiling: this thread's FMA peak (GEMMs run on `threads` threads).
  const double peak32 = bench::fma_peak_gflops(false) * threads;
  const double peak64 = bench::fma_peak_gflops(true) * threads;
  // bf16 rows: the dot-product peak where oneDNN's bf16 kernels run, else float32's (the operands
  // are widened and an sgemm runs).
  const double dot16 = dt::detail::bf16_gemm_backend() == dt::detail::Bf16Gemm::kOnednn
                           ? bench::bf16_dot_peak_gflops() * threads
                           : 0.0;
  const double peak16 = dot16 > 0 ? dot16 : peak32;
  std::printf(
      "# GEMM: %s\n# FMA peak (%s, %d thread(s)): %.1f GFLOP/s float32, %.1f float64, %.1f "
      "bfloat16 (%s)\n",
      dt::blas_info_str().c_str(), bench::fma_peak_isa(), threads, peak32, peak64, peak16,
      dot16 > 0 ? "AVX-512 BF16 dot products" : "float32 FMAs");
  std::printf("%-24s %-18s %12s %12s %12s %9s %6s\n", "kernel", "shape", "median_us", "p10_us",
              "p90_us", "GFLOP/s", "%peak");
  int failures = 0;
  for (const KernelCase& c : cases()) {
    if (!only.empty() && c.name != only) continue;
    const std::string wrong = c.check(c.run());
    if (!wrong.empty()) {
      std::fprintf(stderr, "bench_kernels: %s is wrong: %s\n", c.name.c_str(), wrong.c_str());
      ++failures;
    }
    const bench::Stats s =
        bench::time_batched([&] { (void)c.run(); }, c.batch > 0 ? c.batch : batch, min_seconds);
    const bool f64 = c.name.rfind("mm_f64", 0) == 0, bf16 = c.name.rfind("mm_bf16", 0) == 0;
    const double gflops = c.flops / s.median / 1e9, peak = f64 ? peak64 : bf16 ? peak16 : peak32;
    std::printf("%-24s %-18s %12.2f %12.2f %12.2f", c.name.c_str(), dt::shape_str(c.shape).c_str(),
                s.median * 1e6, s.p10 * 1e6, s.p90 * 1e6);
    if (c.flops > 0) std::printf(" %9.1f %5.0f%%", gflops, 100 * gflops / peak);
    std::printf("\n");
    auto record = json.record(c.name);
    record.add("shape", dt::shape_str(c.shape))
        .add("dtype", c.name.rfind("mm_", 0) == 0 ? c.name.substr(3, c.name.find('_', 3) - 3)
                                                  : std::string("float32"));
    if (c.flops > 0) record.add("gflops", gflops).add("peak_gflops", peak);
    json.write(record.add("threads", int64_t{threads})
                   .add("simd", simd)
                   .add("correct", wrong.empty())
                   .add_stats("", s));
  }
  return failures == 0 ? 0 : 1;
}
