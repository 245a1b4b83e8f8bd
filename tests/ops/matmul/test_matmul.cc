#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "dtensor/ops/common/detail/gemm.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

// Reference torch.matmul in double, written from the rules (not from the library): returns the
// expected shape, values and per-element error scale sum_p |a * b|.
struct Ref {
  Shape shape;
  std::vector<double> values;
  std::vector<double> scales;
};

Ref ref_matmul(const Tensor& a, const Tensor& b) {
  const int64_t k = a.size(-1);
  const Shape sa = a.dim() == 1 ? Shape{1, k} : a.sizes();
  const Shape sb = b.dim() == 1 ? Shape{k, 1} : b.sizes();
  const int64_t n = sa[sa.size() - 2], m = sb[sb.size() - 1];
  const size_t ba = sa.size() - 2, bb = sb.size() - 2, nb = std::max(ba, bb);
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t x = i + ba >= nb ? sa[i + ba - nb] : 1;
    const int64_t y = i + bb >= nb ? sb[i + bb - nb] : 1;
    REQUIRE((x == y || x == 1 || y == 1));
    batch[i] = x == 1 ? y : x;
  }
  Ref r;
  r.shape = batch;
  if (a.dim() > 1) r.shape.push_back(n);
  if (b.dim() > 1) r.shape.push_back(m);
  int64_t nbatch = 1;
  for (auto s : batch) nbatch *= s;
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    Shape idx(nb);
    int64_t rem = bi;
    for (int64_t d = static_cast<int64_t>(nb) - 1; d >= 0; --d) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          Shape ia, ib;
          for (size_t d = 0; d < ba; ++d) ia.push_back(sa[d] == 1 ? 0 : idx[d + nb - ba]);
          for (size_t d = 0; d < bb; ++d) ib.push_back(sb[d] == 1 ? 0 : idx[d + nb - bb]);
          if (a.dim() > 1) ia.push_back(i);
          ia.push_back(p);
          ib.push_back(p);
          if (b.dim() > 1) ib.push_back(j);
          const double x = a.at<double>(ia), y = b.at<double>(ib);
          acc += x * y;
          mag += std::fabs(x * y);
        }
        r.values.push_back(acc);
        r.scales.push_back(mag);
      }
    }
  }
  return r;
}

void check_matmul(const Tensor& got, const Tensor& a, const Tensor& b) {
  const Ref r = ref_matmul(a, b);
  REQUIRE(got.dtype() == a.dtype());
  REQUIRE(got.is_contiguous());
  check_close(got, r.shape, r.values, rtol_for(a.dtype()) * 2, 1e-12, r.scales);
}

const DType kAllDtypes[] = {dt::kFloat32,  dt::kFloat64, dt::kFloat16,
                            dt::kBFloat16, dt::kInt32,   dt::kInt64};

}  // namespace

TEST_CASE("mm matches a reference for every dtype and shape, including empty dims") {
  const auto [n, k, m] =
      GENERATE(std::make_tuple(1, 1, 1), std::make_tuple(7, 5, 3), std::make_tuple(33, 17, 9),
               std::make_tuple(0, 3, 4), std::make_tuple(3, 0, 4), std::make_tuple(3, 4, 0),
               std::make_tuple(0, 0, 0));
  for (DType d : kAllDtypes) {
    INFO(dt::dtype_name(d) << " n=" << n << " k=" << k << " m=" << m);
    const Tensor a = rand_tensor({n, k}, d, 1, -4, 4);
    const Tensor b = rand_tensor({k, m}, d, 2, -4, 4);
    const Tensor c = dt::mm(a, b);
    check_matmul(c, a, b);
    if (k == 0 && n * m > 0) CHECK(c.to_vector<double>() == std::vector<double>(n * m, 0.0));
  }
}

TEST_CASE("mm takes transposed views without a copy and stays correct") {
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kInt64}) {
    INFO(dt::dtype_name(d));
    const Tensor at = rand_tensor({6, 5}, d, 3);  // a = at^T: [5, 6]
    const Tensor bt = rand_tensor({4, 6}, d, 4);  // b = bt^T: [6, 4]
    const Tensor a = at.transpose(0, 1), b = bt.transpose(0, 1);
    REQUIRE_FALSE(a.is_contiguous());
    CHECK(dt::detail::gemm_operand_is_direct(a));
    CHECK(dt::detail::gemm_operand_is_direct(b));
    check_matmul(dt::mm(a, b), a, b);
    check_matmul(dt::mm(a, bt.transpose(0, 1).contiguous()), a, b);
  }
}

TEST_CASE("a one-row product (the matrix-vector path) in every operand layout") {
  // x [1, K] @ W^T as a decode step's projections run it, W stored [M, K] or [K, M], x a row or
  // a column of a transposed view; addmm accumulates (beta) on the same path.
  for (DType d : {dt::kFloat32, dt::kFloat64}) {
    for (const auto& [k, m] :
         {std::make_pair(64, 96), std::make_pair(1, 5), std::make_pair(7, 2)}) {
      INFO(dt::dtype_name(d) << " k=" << k << " m=" << m);
      const Tensor x = rand_tensor({1, k}, d, 31);
      const Tensor xt = rand_tensor({k, 3}, d, 32).narrow(1, 1, 1).transpose(0, 1);  // strided
      const Tensor w = rand_tensor({m, k}, d, 33);                                   // W [M, K]
      const Tensor wk = rand_tensor({k, m}, d, 34);                                  // [K, M]
      for (const Tensor& row : {x, xt}) {
        check_matmul(dt::mm(row, w.transpose(0, 1)), row, w.transpose(0, 1));
        check_matmul(dt::mm(row, wk), row, wk);
      }
      const Tensor bias = rand_tensor({1, m}, d, 35);
      const Tensor c = dt::addmm(bias, x, wk, 0.5, -2.0);
      const Ref r = ref_matmul(x, wk);
      std::vector<double> expect(static_cast<size_t>(m));
      for (int64_t j = 0; j < m; ++j) expect[j] = 0.5 * bias.at<double>({0, j}) - 2.0 * r.values[j];
      check_close(c, {1, m}, expect, rtol_for(d) * k, rtol_for(d) * k);
    }
  }
}

TEST_CASE("mm handles strided, sliced and broadcast operands through a copy") {
  const Tensor big = rand_tensor({8, 10}, dt::kFloat32, 5);
  const Tensor stepped = big.slice(1, 0, 10, 2);  // [8, 5], column stride 2
  CHECK_FALSE(dt::detail::gemm_operand_is_direct(stepped));
  const Tensor b = rand_tensor({5, 3}, dt::kFloat32, 6);
  check_matmul(dt::mm(stepped, b), stepped, b);
  // A narrowed block: row-major with a leading dim larger than the row length (no copy).
  const Tensor block = big.narrow(1, 2, 5);
  CHECK(dt::detail::gemm_operand_is_direct(block));
  check_matmul(dt::mm(block, b), block, b);
  // Stride-0 (expanded) operands.
  const Tensor row = rand_tensor({1, 5}, dt::kFloat32, 7).expand({4, 5});
  CHECK_FALSE(dt::detail::gemm_operand_is_direct(row));
  check_matmul(dt::mm(row, b), row, b);
}

TEST_CASE("bmm matches a reference, with permuted batches and empty batches") {
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kInt32}) {
    INFO(dt::dtype_name(d));
    const Tensor a = rand_tensor({3, 4, 5}, d, 8);
    const Tensor b = rand_tensor({3, 5, 2}, d, 9);
    check_matmul(dt::bmm(a, b), a, b);
    // Batch dim not outermost in memory, and a transposed matrix per batch.
    const Tensor ap = rand_tensor({4, 3, 5}, d, 10).permute({1, 0, 2});
    const Tensor bp = rand_tensor({3, 2, 5}, d, 11).transpose(1, 2);
    check_matmul(dt::bmm(ap, bp), ap, bp);
    const Tensor e1 = rand_tensor({0, 4, 5}, d, 12), e2 = rand_tensor({0, 5, 2}, d, 13);
    check_matmul(dt::bmm(e1, e2), e1, e2);
  }
}

TEST_CASE("matmul follows the PyTorch rules for 1-d, 2-d and batched operands") {
  using S = std::vector<int64_t>;
  const auto [sa, sb] =
      GENERATE(std::make_pair(S{4}, S{4}), std::make_pair(S{4}, S{4, 3}),
               std::make_pair(S{3, 4}, S{4}), std::make_pair(S{3, 4}, S{4, 5}),
               std::make_pair(S{2, 3, 4}, S{4}), std::make_pair(S{4}, S{2, 4, 3}),
               std::make_pair(S{2, 3, 4}, S{4, 5}), std::make_pair(S{3, 4}, S{2, 4, 5}),
               std::make_pair(S{2, 1, 3, 4}, S{5, 4, 2}), std::make_pair(S{1, 3, 4}, S{6, 4, 2}),
               std::make_pair(S{0, 3, 4}, S{4, 2}), std::make_pair(S{2, 3, 0}, S{2, 0, 5}),
               std::make_pair(S{0}, S{0}), std::make_pair(S{2, 0, 4}, S{1, 4, 3}));
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kInt64}) {
    INFO(dt::dtype_name(d) << " " << dt::shape_str(sa) << " @ " << dt::shape_str(sb));
    const Tensor a = rand_tensor(sa, d, 14);
    const Tensor b = rand_tensor(sb, d, 15);
    check_matmul(dt::matmul(a, b), a, b);
  }
}

TEST_CASE("matmul of a batched transposed view and of a broadcast operand") {
  const Tensor a = rand_tensor({2, 5, 3}, dt::kFloat32, 16).transpose(1, 2);  // [2, 3, 5]
  const Tensor w = rand_tensor({4, 5}, dt::kFloat32, 17).transpose(0, 1);     // [5, 4]
  check_matmul(dt::matmul(a, w), a, w);
  const Tensor b = rand_tensor({5, 4}, dt::kFloat32, 18).expand({2, 5, 4});  // batch stride 0
  check_matmul(dt::matmul(a, b), a, b);
  const Tensor c = rand_tensor({3, 1, 2, 5}, dt::kFloat64, 19);
  const Tensor e = rand_tensor({4, 5, 3}, dt::kFloat64, 20);
  check_matmul(dt::matmul(c, e), c, e);  // [3, 4, 2, 3]
}

TEST_CASE("addmm computes beta * bias + alpha * a @ b with broadcast bias") {
  const Tensor a = rand_tensor({4, 3}, dt::kFloat64, 21);
  const Tensor b = rand_tensor({3, 5}, dt::kFloat64, 22);
  const Ref r = ref_matmul(a, b);
  using S = std::vector<int64_t>;
  for (const S& bs : {S{5}, S{4, 5}, S{1, 5}, S{4, 1}, S{}}) {
    for (const auto& [beta, alpha] : {std::make_pair(1.0, 1.0), std::make_pair(0.5, -2.0)}) {
      INFO("bias " << dt::shape_str(bs) << " beta " << beta << " alpha " << alpha);
      const Tensor bias = rand_tensor(bs, dt::kFloat64, 23);
      const Tensor c = dt::addmm(bias, a, b, beta, alpha);
      std::vector<double> expect(20);
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 5; ++j) {
          Shape bi;
          if (bs.size() == 2) bi = {bs[0] == 1 ? 0 : i, bs[1] == 1 ? 0 : j};
          if (bs.size() == 1) bi = {j};
          expect[i * 5 + j] = beta * bias.at<double>(bi) + alpha * r.values[i * 5 + j];
        }
      }
      check_close(c, {4, 5}, expect, 1e-12, 1e-12);
    }
  }
  // beta = 0 ignores the bias values, NaN included.
  const Tensor nan_bias = dt::full({4, 5}, std::numeric_limits<double>::quiet_NaN(), dt::kFloat64);
  check_close(dt::addmm(nan_bias, a, b, 0.0, 1.0), {4, 5}, r.values, 1e-12, 1e-12);
  // Integers and 16-bit floats.
  const Tensor ia = rand_tensor({3, 2}, dt::kInt32, 24, -5, 5);
  const Tensor ib = rand_tensor({2, 2}, dt::kInt32, 25, -5, 5);
  const Tensor ibias = rand_tensor({2}, dt::kInt32, 26, -5, 5);
  const Ref ri = ref_matmul(ia, ib);
  std::vector<double> ie(6);
  for (int i = 0; i < 6; ++i) ie[i] = 2 * ibias.at<double>({i % 2}) + 3 * ri.values[i];
  check_close(dt::addmm(ibias, ia, ib, 2, 3), {3, 2}, ie, 0.0, 0.0);
  const Tensor ha = a.to(dt::kFloat16), hb = b.to(dt::kFloat16);
  const Tensor hbias = rand_tensor({5}, dt::kFloat16, 27);
  const Ref rh = ref_matmul(ha, hb);
  std::vector<double> he(20), hs(20);
  for (int i = 0; i < 20; ++i) {
    he[i] = hbias.at<double>({i % 5}) + rh.values[i];
    hs[i] = std::fabs(hbias.at<double>({i % 5})) + rh.scales[i];
  }
  check_close(dt::addmm(hbias, ha, hb), {4, 5}, he, 2 * rtol_for(dt::kFloat16), 1e-6, hs);
  // k = 0: only the scaled bias remains.
  const Tensor z = dt::addmm(rand_tensor({2, 3}, dt::kFloat32, 28), dt::zeros({2, 0}),
                             dt::zeros({0, 3}), 2.0, 1.0);
  const auto zb = rand_tensor({2, 3}, dt::kFloat32, 28).to_vector<double>();
  std::vector<double> ze;
  for (double v : zb) ze.push_back(2 * v);
  check_close(z, {2, 3}, ze, 1e-7);
}

TEST_CASE("linear equals x @ weight^T + bias for any leading dims") {
  using S = std::vector<int64_t>;
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kFloat16}) {
    for (const S& xs : {S{6}, S{3, 6}, S{2, 3, 6}, S{0, 6}, S{2, 0, 6}}) {
      for (bool with_bias : {false, true}) {
        INFO(dt::dtype_name(d) << " x " << dt::shape_str(xs) << " bias " << with_bias);
        const Tensor x = rand_tensor(xs, d, 29);
        const Tensor w = rand_tensor({4, 6}, d, 30);
        const Tensor bias = with_bias ? rand_tensor({4}, d, 31) : Tensor();
        const Tensor y = dt::linear(x, w, bias);
        Ref r = ref_matmul(x, w.transpose(0, 1));
        for (size_t i = 0; i < r.values.size(); ++i) {
          if (with_bias) {
            const double bv = bias.at<double>({static_cast<int64_t>(i % 4)});
            r.values[i] += bv;
            r.scales[i] += std::fabs(bv);
          }
        }
        check_close(y, r.shape, r.values, 2 * rtol_for(d), 1e-12, r.scales);
      }
    }
  }
  // in_features = 0: x @ W^T is zeros, plus the bias.
  const Tensor y0 = dt::linear(dt::zeros({2, 0}), dt::zeros({3, 0}), dt::ones({3}));
  check_close(y0, {2, 3}, std::vector<double>(6, 1.0), 0.0);
}

TEST_CASE("matmul-family errors name the op and the shapes") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(dt::mm(dt::zeros({2, 3}), dt::zeros({4, 5})),
                      Contains("[mm] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"));
  REQUIRE_THROWS_AS(dt::mm(dt::zeros({2, 3}), dt::zeros({4, 5})), dt::Error);
  REQUIRE_THROWS_WITH(dt::mm(dt::zeros({2, 3, 1}), dt::zeros({3, 5})),
                      Contains("[mm] expected 2-d operands"));
  REQUIRE_THROWS_WITH(
      dt::mm(dt::zeros({2, 3}), dt::zeros({3, 5}, dt::kFloat64)),
      Contains("[mm] expected operands of the same dtype, got float32 and float64"));
  REQUIRE_THROWS_WITH(dt::mm(dt::zeros({2, 3}, dt::kBool), dt::zeros({3, 5}, dt::kBool)),
                      Contains("[mm] expected a numeric dtype, got bool"));
  REQUIRE_THROWS_WITH(dt::bmm(dt::zeros({2, 3, 4}), dt::zeros({3, 4, 5})),
                      Contains("[bmm] batch sizes of shapes [2, 3, 4] and [3, 4, 5] differ"));
  REQUIRE_THROWS_WITH(dt::bmm(dt::zeros({2, 3, 4}), dt::zeros({2, 5, 5})),
                      Contains("[bmm] shapes [2, 3, 4] and [2, 5, 5] cannot be multiplied"));
  REQUIRE_THROWS_WITH(dt::matmul(dt::zeros({2, 3, 4}), dt::zeros({5})),
                      Contains("[matmul] shapes [2, 3, 4] and [5] cannot be multiplied (4 != 5)"));
  REQUIRE_THROWS_WITH(dt::matmul(dt::zeros({}), dt::zeros({3})),
                      Contains("[matmul] expected operands with at least 1 dim"));
  REQUIRE_THROWS_WITH(dt::matmul(dt::zeros({2, 3, 4}), dt::zeros({3, 4, 5})), Contains("[matmul]"));
  REQUIRE_THROWS_WITH(dt::addmm(dt::zeros({3}), dt::zeros({2, 3}), dt::zeros({3, 4})),
                      Contains("[addmm] bias of shape [3] cannot be broadcast to the output "
                               "shape [2, 4]"));
  REQUIRE_THROWS_WITH(dt::linear(dt::zeros({2, 5}), dt::zeros({4, 6})),
                      Contains("[linear] input of shape [2, 5] and weight of shape [4, 6] do not "
                               "match (in_features 5 != 6)"));
  REQUIRE_THROWS_WITH(dt::linear(dt::zeros({2, 6}), dt::zeros({4, 6}), dt::zeros({5})),
                      Contains("[linear] bias of shape [5] does not match out_features 4"));
}

TEST_CASE("dot and outer of 1-d tensors") {
  const Tensor a = dt::from_vector<double>({1, -2, 3, 0.5}, {4});
  const Tensor b = dt::from_vector<double>({4, 1, -1, 2}, {4});
  const Tensor d = dt::dot(a, b);
  REQUIRE(d.dim() == 0);
  CHECK(d.item<double>() == 1 * 4 - 2 * 1 - 3 * 1 + 0.5 * 2);
  const Tensor o = dt::outer(a, b.narrow(0, 0, 3));
  REQUIRE(o.sizes() == dt::IntSpan(Shape{4, 3}));
  const std::vector<double> v = o.to_vector<double>();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      CHECK(v[i * 3 + j] == a.to_vector<double>()[i] * b.to_vector<double>()[j]);
    }
  }
  CHECK(dt::dot(a.narrow(0, 0, 0), b.narrow(0, 0, 0)).item<double>() == 0);
  CHECK_THROWS_WITH(dt::dot(a, b.narrow(0, 0, 3)),
                    Catch::Contains("[dot] expected two 1-d tensors of one size"));
  CHECK_THROWS_WITH(dt::outer(a.view({2, 2}), b),
                    Catch::Contains("[outer] expected two 1-d tensors"));
}

TEST_CASE("baddbmm is beta * self + alpha * bmm, beta 0 ignoring self") {
  const Tensor a = rand_tensor({2, 3, 4}, DType::kFloat64, 31);
  const Tensor b = rand_tensor({2, 4, 5}, DType::kFloat64, 32);
  const Tensor self = rand_tensor({3, 5}, DType::kFloat64, 33);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  const std::vector<double> sv = self.to_vector<double>();
  std::vector<double> want(30), prod(30);
  for (int q = 0; q < 2; ++q) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += av[(q * 3 + i) * 4 + k] * bv[(q * 4 + k) * 5 + j];
        prod[(q * 3 + i) * 5 + j] = acc;
        want[(q * 3 + i) * 5 + j] = 0.5 * sv[i * 5 + j] + 2.0 * acc;
      }
    }
  }
  check_close(dt::baddbmm(self, a, b, 0.5, 2.0), {2, 3, 5}, want, 1e-12);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor nans = dt::full({2, 3, 5}, dt::Scalar(nan), dt::TensorOptions(DType::kFloat64));
  check_close(dt::baddbmm(nans, a, b, 0.0, 1.0), {2, 3, 5}, prod, 1e-12);
  CHECK_THROWS_WITH(dt::baddbmm(rand_tensor({4, 5}, DType::kFloat64, 34), a, b),
                    Catch::Contains("[baddbmm] self of shape [4, 5] cannot be broadcast"));
}

TEST_CASE("baddbmm broadcasts self of every shape into one fused GEMM, like bmm then add") {
  // The fused form (self copied into the output, BLAS's beta and alpha) against bmm, mul and
  // add, for each way self broadcasts, in float32 and float64, with a transposed operand.
  for (DType d : {DType::kFloat32, DType::kFloat64}) {
    const Tensor a = rand_tensor({2, 3, 4}, d, 41);
    const Tensor b = rand_tensor({2, 5, 4}, d, 42).transpose(1, 2);  // [2, 4, 5], strided
    const Tensor prod = dt::bmm(a, b);
    for (const Shape& shape :
         std::vector<Shape>{{2, 3, 5}, {1, 3, 5}, {2, 1, 5}, {2, 3, 1}, {5}, {3, 1}, {}}) {
      const Tensor self = rand_tensor(shape, d, 43);
      for (const auto& [beta, alpha] : std::vector<std::pair<double, double>>{
               {1.0, 1.0}, {0.5, 2.0}, {1.0, 0.125}, {0.0, 3.0}}) {
        INFO(dt::dtype_name(d) << " self " << dt::shape_str(shape) << " beta " << beta << " alpha "
                               << alpha);
        // beta * self (broadcast by hand: a size-1 or missing dim repeats) + alpha * prod.
        Shape s3(3 - shape.size(), 1);
        s3.insert(s3.end(), shape.begin(), shape.end());
        const std::vector<double> sv = self.to_vector<double>(), pv = prod.to_vector<double>();
        std::vector<double> want(30);
        for (int64_t q = 0; q < 2; ++q) {
          for (int64_t i = 0; i < 3; ++i) {
            for (int64_t j = 0; j < 5; ++j) {
              const int64_t at = ((s3[0] == 1 ? 0 : q) * s3[1] + (s3[1] == 1 ? 0 : i)) * s3[2] +
                                 (s3[2] == 1 ? 0 : j);
              const double p = pv[static_cast<size_t>((q * 3 + i) * 5 + j)];
              want[static_cast<size_t>((q * 3 + i) * 5 + j)] =
                  (beta == 0.0 ? 0.0 : beta * sv[static_cast<size_t>(at)]) + alpha * p;
            }
          }
        }
        check_close(dt::baddbmm(self, a, b, beta, alpha), {2, 3, 5}, want, rtol_for(d),
                    rtol_for(d));
      }
    }
  }
  // Empty contraction and empty batch.
  const Tensor self = dt::full({2, 3, 5}, dt::Scalar(2.0), dt::TensorOptions(DType::kFloat32));
  const Tensor ek = dt::zeros({2, 3, 0}, dt::TensorOptions(DType::kFloat32));
  const Tensor ekb = dt::zeros({2, 0, 5}, dt::TensorOptions(DType::kFloat32));
  check_close(dt::baddbmm(self, ek, ekb, 0.5, 1.0), {2, 3, 5}, std::vector<double>(30, 1.0), 0.0);
  CHECK(dt::baddbmm(dt::zeros({0, 3, 5}), dt::zeros({0, 3, 4}), dt::zeros({0, 4, 5})).numel() == 0);
  // Integer operands take integer beta and alpha, as PyTorch (a GEMM would truncate 0.5 to 0).
  const Tensor ia = dt::ones({1, 2, 2}, dt::TensorOptions(DType::kInt64));
  CHECK(dt::baddbmm(ia, ia, ia, 2, 3).to_vector<int64_t>() == std::vector<int64_t>(4, 8));
  CHECK_THROWS_WITH(dt::baddbmm(ia, ia, ia, 0.5, 1),
                    Catch::Contains("[baddbmm] for integral input tensors, argument beta must "
                                    "not be a floating point number"));
  CHECK_THROWS_WITH(dt::addmm(ia.select(0, 0), ia.select(0, 0), ia.select(0, 0), 1, 0.5),
                    Catch::Contains("[addmm] for integral input tensors, argument alpha"));
}

TEST_CASE("baddbmm_into accumulates into its output in place, as out = baddbmm(out, ...)") {
  // Against baddbmm with self = out's old values: a contiguous float32/float64 out is BLAS's C
  // (in place), any other out (a narrowed view, bfloat16, int64) takes the result by copy.
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt64}) {
    const bool ints = d == DType::kInt64;
    const Tensor a = ints ? dt::full({2, 3, 4}, dt::Scalar(2), dt::TensorOptions(d))
                          : rand_tensor({2, 3, 4}, d, 51);
    const Tensor b = ints ? dt::full({2, 4, 5}, dt::Scalar(3), dt::TensorOptions(d))
                          : rand_tensor({2, 5, 4}, d, 52).transpose(1, 2);
    const dt::Scalar beta = ints ? dt::Scalar(2) : dt::Scalar(0.5);
    const dt::Scalar alpha = ints ? dt::Scalar(3) : dt::Scalar(0.25);
    for (bool view : {false, true}) {
      INFO(dt::dtype_name(d) << (view ? " narrowed out" : " contiguous out"));
      const Tensor base = ints ? dt::full({2, 7, 5}, dt::Scalar(1), dt::TensorOptions(d))
                               : rand_tensor({2, 7, 5}, d, 53);
      const Tensor before = base.clone();
      const Tensor out = view ? base.narrow(1, 2, 3) : base.narrow(1, 0, 3).contiguous();
      const Tensor want = dt::baddbmm(out.clone(), a, b, beta, alpha);
      dt::detail::baddbmm_into(out, a, b, beta, alpha);
      check_close(out, {2, 3, 5}, want.to(DType::kFloat64).to_vector<double>(), rtol_for(d),
                  rtol_for(d));
      if (view) {  // the rows around the view are untouched
        for (const auto& [from, n] : {std::pair{0, 2}, std::pair{5, 2}}) {
          check_close(base.narrow(1, from, n), {2, n, 5},
                      before.narrow(1, from, n).to(DType::kFloat64).to_vector<double>(), 0.0);
        }
      }
    }
  }
  // A contiguous out that starts inside its storage (the fast path, at an offset), an empty
  // contraction (out scaled by beta) and an empty batch.
  {
    const Tensor a = rand_tensor({2, 3, 4}, DType::kFloat32, 56);
    const Tensor b = rand_tensor({2, 4, 5}, DType::kFloat32, 57);
    const Tensor base = rand_tensor({3, 2, 3, 5}, DType::kFloat32, 58);
    const Tensor out = base.select(0, 1);
    REQUIRE(out.is_contiguous());
    const Tensor want = dt::baddbmm(out.clone(), a, b, 0.5, 2.0);
    dt::detail::baddbmm_into(out, a, b, 0.5, 2.0);
    check_close(out, {2, 3, 5}, want.to(DType::kFloat64).to_vector<double>(), 1e-6, 1e-6);
    Tensor c = dt::full({2, 3, 5}, dt::Scalar(4.0));
    dt::detail::baddbmm_into(c, dt::zeros({2, 3, 0}), dt::zeros({2, 0, 5}), 0.5, 1.0);
    check_close(c, {2, 3, 5}, std::vector<double>(30, 2.0), 0.0);
    dt::detail::baddbmm_into(dt::zeros({0, 3, 5}), dt::zeros({0, 3, 4}), dt::zeros({0, 4, 5}), 1,
                             1);
  }
  // An out that is one of the operands goes through the copy (BLAS's C may not alias A or B).
  {
    const Tensor a = rand_tensor({2, 4, 4}, DType::kFloat64, 59);
    const Tensor b = rand_tensor({2, 4, 4}, DType::kFloat64, 60);
    const Tensor want = dt::baddbmm(a.clone(), a, b, 1.0, 1.0);
    dt::detail::baddbmm_into(a, a, b, 1.0, 1.0);
    check_close(a, {2, 4, 4}, want.to_vector<double>(), 1e-12, 1e-12);
  }
  // beta 0 ignores out's values (NaN here); a wrong shape is refused.
  const Tensor a = rand_tensor({2, 3, 4}, DType::kFloat32, 54);
  const Tensor b = rand_tensor({2, 4, 5}, DType::kFloat32, 55);
  Tensor out = dt::full({2, 3, 5}, dt::Scalar(std::numeric_limits<double>::quiet_NaN()));
  dt::detail::baddbmm_into(out, a, b, 0, 1);
  check_close(out, {2, 3, 5}, dt::bmm(a, b).to(DType::kFloat64).to_vector<double>(), 1e-6, 1e-6);
  CHECK_THROWS_WITH(dt::detail::baddbmm_into(dt::zeros({2, 3, 4}), a, b, 1, 1),
                    Catch::Contains("[baddbmm_into] out must be [2, 3, 5]"));
}
