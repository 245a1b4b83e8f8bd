// GEMM on CUDA (cuBLAS) against a float64 CPU reference of the same inputs: mm, bmm, matmul
// (1-d, batched, broadcast batches), addmm, linear; transposed and non-BLAS-layout operands;
// float32/float64/float16/bfloat16; k = 0 and empty results.
//
// Tolerance: |cuda - ref| <= 2 * k * 9 * eps_acc + |ref| * eps_out, where inputs lie in [-3, 3)
// (products <= 9), eps_acc is the accumulation precision (float64: 2^-52; float32 and the
// 16-bit types, which accumulate in float: 2^-23; TF32: 2^-10) and eps_out the rounding of the
// output dtype (2^-23, 2^-52, 2^-10, 2^-7).
#include <cmath>

#include "dtensor/ops/matmul/detail/matmul_cuda.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

namespace {

double eps_of(DType d) {
  switch (d) {
    case DType::kFloat64:
      return std::ldexp(1.0, -52);
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    default:
      return std::ldexp(1.0, -23);
  }
}

// g (CUDA, dtype d) against ref (CPU float64) for a contraction of length k.
void check_gemm(const Tensor& g, const Tensor& ref, DType d, int64_t k, bool tf32 = false) {
  REQUIRE(g.device().is_cuda());
  REQUIRE(g.dtype() == d);
  REQUIRE(g.sizes() == ref.sizes());
  const double eps_acc =
      d == kFloat64 ? eps_of(kFloat64) : (tf32 ? std::ldexp(1.0, -10) : eps_of(kFloat32));
  const auto gv = g.to_vector<double>();
  const auto rv = ref.to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    const double tol = 2.0 * static_cast<double>(k) * 9.0 * eps_acc + std::fabs(rv[i]) * eps_of(d);
    if (!(std::fabs(gv[i] - rv[i]) <= tol) && bad++ < 5) {
      UNSCOPED_INFO("element " << i << ": cuda " << gv[i] << " vs ref " << rv[i]);
    }
  }
  CHECK(bad == 0);
}

Tensor f64(const Tensor& t) {
  return t.to(kFloat64);
}

}  // namespace

TEST_CASE("cuda matmul: mm, bmm and matmul over dtypes and layouts", "[gpu][matmul]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor a = make_input({13, 37}, d, 91), b = make_input({37, 9}, d, 92);
    check_gemm(mm(a.to(kGpu), b.to(kGpu)), mm(f64(a), f64(b)), d, 37);
    // Transposed views (no copy) and a layout BLAS cannot read (copied first).
    const Tensor at = make_input({37, 13}, d, 93).transpose(0, 1);
    const Tensor bs = make_input({74, 18}, d, 94).slice(0, 0, 74, 2).slice(1, 0, 18, 2);
    check_gemm(mm(at.to(kGpu).transpose(0, 1).transpose(0, 1), bs.to(kGpu)), mm(f64(at), f64(bs)),
               d, 37);
    check_gemm(mm(a.to(kGpu), b.to(kGpu).transpose(0, 1).contiguous().transpose(0, 1)),
               mm(f64(a), f64(b)), d, 37);
    // Batched.
    const Tensor x = make_input({5, 7, 33}, d, 95), y = make_input({5, 33, 6}, d, 96);
    check_gemm(bmm(x.to(kGpu), y.to(kGpu)), bmm(f64(x), f64(y)), d, 33);
    check_gemm(bmm(x.to(kGpu), y.to(kGpu).transpose(1, 2).contiguous().transpose(1, 2)),
               bmm(f64(x), f64(y)), d, 33);
    // matmul: broadcast batches over two batch dims, 1-d operands, batched @ 2-d.
    const Tensor p = make_input({3, 1, 4, 21}, d, 97), q = make_input({2, 21, 5}, d, 98);
    check_gemm(matmul(p.to(kGpu), q.to(kGpu)), matmul(f64(p), f64(q)), d, 21);
    const Tensor v = make_input({21}, d, 99);
    check_gemm(matmul(v.to(kGpu), q.to(kGpu)), matmul(f64(v), f64(q)), d, 21);
    check_gemm(matmul(p.to(kGpu), v.to(kGpu)), matmul(f64(p), f64(v)), d, 21);
    check_gemm(matmul(v.to(kGpu), v.to(kGpu)), matmul(f64(v), f64(v)), d, 21);
    check_gemm(matmul(p.to(kGpu), b.narrow(0, 0, 21).to(kGpu)),
               matmul(f64(p), f64(b.narrow(0, 0, 21))), d, 21);
  }
}

TEST_CASE("cuda matmul: addmm and linear", "[gpu][matmul]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor a = make_input({6, 19}, d, 101), b = make_input({19, 7}, d, 102);
    const Tensor bias_row = make_input({7}, d, 103), bias_full = make_input({6, 7}, d, 104);
    check_gemm(addmm(bias_row.to(kGpu), a.to(kGpu), b.to(kGpu)),
               addmm(f64(bias_row), f64(a), f64(b)), d, 19);
    check_gemm(addmm(bias_full.to(kGpu), a.to(kGpu), b.to(kGpu), Scalar(0.5), Scalar(2)),
               addmm(f64(bias_full), f64(a), f64(b), Scalar(0.5), Scalar(2)), d, 19);
    check_gemm(addmm(bias_full.to(kGpu), a.to(kGpu), b.to(kGpu), Scalar(0), Scalar(-1)),
               addmm(f64(bias_full), f64(a), f64(b), Scalar(0), Scalar(-1)), d, 19);
    const Tensor x = make_input({2, 3, 19}, d, 105), w = make_input({11, 19}, d, 106);
    const Tensor bias = make_input({11}, d, 107);
    check_gemm(linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu)), linear(f64(x), f64(w), f64(bias)), d,
               19);
    check_gemm(linear(x.to(kGpu), w.to(kGpu)), linear(f64(x), f64(w)), d, 19);
  }
}

TEST_CASE("cuda matmul: empty shapes, TF32 switch and errors", "[gpu][matmul]") {
  for (DType d : floating_dtypes()) {
    const Tensor a0 = make_input({4, 0}, d, 111), b0 = make_input({0, 3}, d, 112);
    check_gemm(mm(a0.to(kGpu), b0.to(kGpu)), mm(f64(a0), f64(b0)), d, 0);  // zeros
    const Tensor bias = make_input({4, 3}, d, 113);
    check_gemm(addmm(bias.to(kGpu), a0.to(kGpu), b0.to(kGpu), Scalar(2)),
               addmm(f64(bias), f64(a0), f64(b0), Scalar(2)), d, 0);
    const Tensor e = make_input({0, 5}, d, 114), f = make_input({5, 3}, d, 115);
    check_gemm(mm(e.to(kGpu), f.to(kGpu)), mm(f64(e), f64(f)), d, 5);
  }
  CHECK_FALSE(allow_tf32());
  set_allow_tf32(true);
  CHECK(allow_tf32());
  const Tensor a = make_input({16, 64}, kFloat32, 116), b = make_input({64, 16}, kFloat32, 117);
  check_gemm(mm(a.to(kGpu), b.to(kGpu)), mm(f64(a), f64(b)), kFloat32, 64, /*tf32=*/true);
  set_allow_tf32(false);
  check_gemm(mm(a.to(kGpu), b.to(kGpu)), mm(f64(a), f64(b)), kFloat32, 64);

  const Tensor i = make_input({2, 2}, kInt32, 118);
  REQUIRE_THROWS_WITH(mm(i.to(kGpu), i.to(kGpu)), Catch::Contains("CUDA matmul supports"));
  REQUIRE_THROWS_WITH(mm(a.to(kGpu), a.to(kGpu)), Catch::Contains("[mm] shapes"));
  REQUIRE_THROWS_WITH(mm(a.to(kGpu), b), Catch::Contains("[mm]"));
}

TEST_CASE("cuda matmul: long contractions keep float accumulation", "[gpu][matmul]") {
  // Small outputs with a long k are where cuBLAS picks split-K; the partial sums of 16-bit
  // GEMMs must stay in float (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION).
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor a = make_input({8, 8192}, d, 121), b = make_input({8192, 4}, d, 122);
    check_gemm(mm(a.to(kGpu), b.to(kGpu)), mm(f64(a), f64(b)), d, 8192);
    // Batched with a broadcast (stride 0) batch operand.
    const Tensor x = make_input({3, 2, 4096}, d, 123), y = make_input({4096, 5}, d, 124);
    check_gemm(matmul(x.to(kGpu), y.to(kGpu)), matmul(f64(x), f64(y)), d, 4096);
  }
}

TEST_CASE("cuda einsum: the bmm path, sums, diagonals, broadcasts and chains", "[gpu][matmul]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    // eq on the GPU against the float64 CPU result; k bounds the terms summed per element.
    auto run = [&](const char* eq, std::vector<Tensor> in, int64_t k) {
      INFO(eq);
      std::vector<Tensor> g, c;
      for (const Tensor& t : in) {
        g.push_back(t.to(kGpu));
        c.push_back(f64(t));
      }
      check_gemm(einsum(eq, g), einsum(eq, c), d, k);
    };
    run("bij,bjk->bik", {make_input({5, 7, 33}, d, 131), make_input({5, 33, 6}, d, 132)}, 33);
    run("ikl,lkj->ji", {make_input({6, 4, 9}, d, 133), make_input({9, 4, 5}, d, 134)}, 36);
    run("...ij,jk->...ik", {make_input({3, 2, 4, 21}, d, 135), make_input({21, 5}, d, 136)}, 21);
    run("bij,bjk->bik", {make_input({1, 4, 8}, d, 137), make_input({3, 8, 2}, d, 138)}, 8);
    run("i,j->ij", {make_input({7}, d, 139), make_input({5}, d, 140)}, 1);
    run("ij->j", {make_input({40, 7}, d, 141)}, 40);
    run("ii->i", {make_input({9, 9}, d, 142)}, 1);
    run("ii", {make_input({9, 9}, d, 143)}, 9);
    run("ij,jk->ik", {make_input({0, 3}, d, 144), make_input({3, 2}, d, 145)}, 3);
    run("ij,jk->ik", {make_input({2, 0}, d, 146), make_input({0, 3}, d, 147)}, 0);
    if (d == kFloat32 || d == kFloat64) {  // 16-bit chains round the intermediate product
      run("ij,jk,kl->il",
          {make_input({4, 16}, d, 148), make_input({16, 8}, d, 149), make_input({8, 3}, d, 150)},
          16 * 8 * 3);
    }
  }
  const Tensor a = make_input({2, 3}, kFloat32, 151);
  REQUIRE_THROWS_WITH(einsum("ij,jk->ik", {a.to(kGpu), a}),
                      Catch::Contains("[einsum] operand 1 is on"));
}
