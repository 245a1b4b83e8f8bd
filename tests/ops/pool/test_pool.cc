// The pool family's ops (pad, max / avg / adaptive pools, interpolate) against PyTorch 2.15's
// values, indices and gradients (torch_pool_references.h), their lower-precision dtypes, and
// their errors. Every row and the finite-difference gradients are checked by registration
// (test_strategy_validation, test_gradcheck, the sharded-gradient suite).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/pool/torch_pool_references.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Tensor;
using dt::test::check_close;

namespace {

// The generator's inputs: element i = 2 sin(0.7 i + 0.3).
Tensor ref_input(int k) {
  const dt::Shape shapes[] = {{}, {1, 2, 9}, {2, 1, 7, 6}, {1, 1, 5, 4, 6}};
  const dt::Shape& s = shapes[k];
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 2 * std::sin(0.7 * static_cast<double>(i) + 0.3);
  return dt::from_vector<double>(v, s);
}

Tensor upstream(const dt::Shape& shape) {
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3 * static_cast<double>(i) + 0.1);
  return dt::from_vector<double>(v, shape);
}

dt::Shape shape_of(const std::vector<long>& s) {
  return dt::Shape(s.begin(), s.end());
}

}  // namespace

TEST_CASE("pad, pools and interpolate match PyTorch 2.15: values, indices and gradients") {
  for (const pool_refs::PoolRef& ref : pool_refs::refs()) {
    INFO(ref.call);
    const Tensor x = ref_input(ref.input);
    const dt::Shape shape = shape_of(ref.shape);
    // The Tensor function.
    check_close(ref.local(x), shape, ref.value, 1e-12);
    if (ref.local_indices != nullptr) {
      const Tensor idx = ref.local_indices(x);
      CHECK(idx.dtype() == dt::kInt64);
      check_close(idx, shape, ref.indices, 0.0, 0.0);
    }
    // The DTensor function on a local DTensor, through autograd.
    DTensor dx = dt::local_dtensor(x.clone());
    dx.requires_grad_();
    const DTensor out = ref.dist(dx);
    check_close(out.to_local(), shape, ref.value, 1e-12);
    out.backward(dt::local_dtensor(upstream(shape)));
    check_close(dx.grad().to_local(), x.sizes(), ref.grad, 1e-12);
  }
}

// nearest-exact picks PyTorch's source pixel at every size: its index is floorf of the product
// rounded to float (floor in double picked another pixel for 184 of the 2,301 sizes 1..39 ->
// 1..59; the table holds those outputs). The forward reads the source index off an arange input;
// the backward of a sum gives each source its count of readers.
TEST_CASE("nearest-exact: PyTorch's source index at every size 1..39 -> 1..59") {
  const auto& sweep = pool_refs::nearest_exact_sources();
  REQUIRE(sweep.size() > 100);
  int64_t last_in = -1, last_out = -1;
  std::vector<double> y;
  std::vector<double> grad;
  for (const auto& [in, out, o, src] : sweep) {
    INFO("input " << in << ", output " << out << ", element " << o);
    if (in != last_in || out != last_out) {
      std::vector<double> v(static_cast<size_t>(in));
      for (int i = 0; i < in; ++i) v[static_cast<size_t>(i)] = i;
      DTensor dx = dt::local_dtensor(dt::from_vector<double>(v, {1, 1, in}));
      dx.requires_grad_();
      const DTensor dy = dt::interpolate(dx, {out}, {}, "nearest-exact");
      dt::sum(dy).backward();
      y = dy.to_local().contiguous().to_vector<double>();
      grad = dx.grad().to_local().contiguous().to_vector<double>();
      last_in = in;
      last_out = out;
    }
    CHECK(y[static_cast<size_t>(o)] == src);
    // The backward reads the same taps: each source's gradient counts the outputs that read it.
    double readers = 0;
    for (double s : y) readers += s == src ? 1 : 0;
    CHECK(grad[static_cast<size_t>(src)] == readers);
  }
}

// Plain nearest takes PyTorch's backward's source pixel (float scale, floor(float(o) * scale)) in
// every dtype and rank: so do PyTorch's float32 forwards and its 2-d float64 forward; its 1-d and
// 3-d float64 forwards take a double scale and leave their own backward at the 7 outputs of the
// table (e.g. 14 -> 46 output 23: backward 6, forward 7). The input, arange along the last dim,
// gives the source index as the value; the backward of a sum counts each source's readers.
TEST_CASE("nearest: the backward's source pixel where PyTorch's float64 forward leaves it") {
  const auto& table = pool_refs::nearest_f64_forward_differs();
  REQUIRE(table.size() == 7);
  for (const auto& [in, out, o, src, f64_src] : table) {
    for (int nd = 1; nd <= 3; ++nd) {
      for (dt::DType dtype : {dt::kFloat64, dt::kFloat32}) {
        INFO("input " << in << ", output " << out << ", element " << o << ", " << nd << "-d, "
                      << dt::dtype_name(dtype));
        std::vector<double> v(static_cast<size_t>(in));
        for (int i = 0; i < in; ++i) v[static_cast<size_t>(i)] = i;
        dt::Shape shape(static_cast<size_t>(nd + 2), 1), size(static_cast<size_t>(nd), 1);
        shape.back() = in;
        size.back() = out;
        DTensor dx = dt::local_dtensor(dt::from_vector<double>(v, shape).to(dtype));
        dx.requires_grad_();
        const DTensor dy = dt::interpolate(dx, size, {}, "nearest");
        dt::sum(dy).backward();
        const auto y = dy.to_local().to(dt::kFloat64).contiguous().to_vector<double>();
        const auto grad = dx.grad().to_local().to(dt::kFloat64).contiguous().to_vector<double>();
        CHECK(y[static_cast<size_t>(o)] == src);
        CHECK(y[static_cast<size_t>(o)] != f64_src);
        double readers = 0;
        for (double s : y) readers += s == src ? 1 : 0;
        CHECK(grad[static_cast<size_t>(src)] == readers);
      }
    }
  }
}

TEST_CASE("circular padding with a negative pad wraps around what the crop leaves (PyTorch's)") {
  // Values: tests/ops/torch_grad_conventions.py (upstream 1..n). pad (-1, 2) was [2, 3, 4, 1, 2]:
  // the wrap read the cropped element 1.
  const Tensor x = dt::from_vector<double>({1, 2, 3, 4}, {1, 1, 4});
  struct Case {
    std::vector<int64_t> pads;
    std::vector<double> value, grad;
  };
  for (const Case& c :
       {Case{{-1, 2}, {2, 3, 4, 2, 3}, {0, 5, 7, 3}}, Case{{1, -2}, {2, 1, 2}, {2, 4, 0, 0}},
        Case{{3, -1}, {1, 2, 3, 1, 2, 3}, {5, 7, 9, 0}}}) {
    INFO(c.pads[0] << ", " << c.pads[1]);
    const int64_t n = static_cast<int64_t>(c.value.size());
    check_close(dt::pad(x, c.pads, "circular"), {1, 1, n}, c.value, 0.0);
    DTensor dx = dt::local_dtensor(x.clone());
    dx.requires_grad_();
    const DTensor out = dt::pad(dx, c.pads, "circular");
    std::vector<double> up(n);
    for (int64_t i = 0; i < n; ++i) up[i] = static_cast<double>(i + 1);
    out.backward(dt::local_dtensor(dt::from_vector<double>(up, {1, 1, n})));
    check_close(dx.grad().to_local(), {1, 1, 4}, c.grad, 0.0);
  }
  // Cropping the whole dim leaves nothing to wrap around (PyTorch reads uninitialised memory).
  CHECK_THROWS_WITH(dt::pad(x, {-4, 1}, "circular"), Catch::Contains("nothing left to wrap"));
  // A side's padding larger than what the crop leaves wraps more than once: PyTorch 2.15 raises
  // for (-2, 3) and (-3, 3) on 4 elements, and pads (-1, 3) and (-3, 1) (review finding).
  CHECK_THROWS_WITH(dt::pad(x, {-2, 3}, "circular"), Catch::Contains("more than once"));
  CHECK_THROWS_WITH(dt::pad(x, {-3, 3}, "circular"), Catch::Contains("more than once"));
  check_close(dt::pad(x, {-1, 3}, "circular"), {1, 1, 6}, {2, 3, 4, 2, 3, 4}, 0.0);
  check_close(dt::pad(x, {-3, 1}, "circular"), {1, 1, 2}, {4, 4}, 0.0);
}

TEST_CASE("pool ops in float32 and bfloat16 follow float64, and read non-contiguous inputs") {
  for (const pool_refs::PoolRef& ref : pool_refs::refs()) {
    INFO(ref.call);
    const Tensor x = ref_input(ref.input);
    const dt::Shape shape = shape_of(ref.shape);
    const Tensor f = ref.local(x.to(dt::kFloat32));
    CHECK(f.dtype() == dt::kFloat32);
    check_close(f, shape, ref.value, 1e-6, 1e-6);
    const Tensor b = ref.local(x.to(dt::kBFloat16));
    CHECK(b.dtype() == dt::kBFloat16);
    check_close(b, shape, ref.value, 1e-2, 2e-2);
    // The same values read through a transposed view.
    const int64_t n = x.dim();
    const Tensor t = x.transpose(n - 1, n - 2).contiguous().transpose(n - 1, n - 2);
    REQUIRE(!t.is_contiguous());
    check_close(ref.local(t), shape, ref.value, 1e-12);
  }
}

TEST_CASE("max pools: ties take the first largest in window order, NaN wins") {
  // [1, 1, 4]: windows of 2 at stride 1: (1, 1) -> index 0, (1, NaN) -> NaN at 2, (NaN, 3) -> 2
  // (PyTorch 2.15 gives the same).
  const double nan = std::nan("");
  const Tensor x = dt::from_vector<double>({1.0, 1.0, nan, 3.0}, {1, 1, 4});
  const dt::ValuesIndices r = dt::max_pool1d_with_indices(x, {2}, {1});
  check_close(r.indices, {1, 1, 3}, {0, 2, 2}, 0.0, 0.0);
  check_close(r.values, {1, 1, 3}, {1.0, nan, nan}, 0.0, 0.0);
  // The gradient of a tied window goes to the index the forward chose.
  DTensor dx = dt::local_dtensor(dt::from_vector<double>({2.0, 2.0, 0.0, 2.0}, {1, 1, 4}));
  dx.requires_grad_();
  dt::sum(dt::max_pool1d(dx, {2}, {1})).backward();
  check_close(dx.grad().to_local(), {1, 1, 4}, {1.0, 1.0, 0.0, 1.0}, 0.0, 0.0);
}

TEST_CASE("pool ops: empty batches, constant padding of any dtype") {
  const Tensor e = dt::zeros({0, 3, 5, 4});
  CHECK(dt::max_pool2d(e, {2}).sizes() == dt::Shape{0, 3, 2, 2});
  CHECK(dt::avg_pool2d(e, {2}).sizes() == dt::Shape{0, 3, 2, 2});
  CHECK(dt::interpolate(e, {7, 3}, {}, "bilinear").sizes() == dt::Shape{0, 3, 7, 3});
  CHECK(dt::pad(e, {1, 1, 1, 1}, "reflect").sizes() == dt::Shape{0, 3, 7, 6});
  const Tensor i = dt::from_vector<int64_t>({1, 2, 3}, {3});
  check_close(dt::pad(i, {1, 2}, "constant", 7), {6}, {7, 1, 2, 3, 7, 7}, 0.0, 0.0);
}

TEST_CASE("pool errors name the op and what was expected") {
  using Catch::Contains;
  const Tensor x = dt::zeros({2, 3, 5, 4});
  REQUIRE_THROWS_WITH(dt::pad(dt::zeros({3, 5, 4}), {4, 0}, "reflect"),
                      Contains("[pad] padding size should be less than the corresponding input "
                               "dimension, but got padding (4, 0) at dimension 2"));
  REQUIRE_THROWS_WITH(dt::pad(x, {1, 1}, "reflect"),
                      Contains("[pad] reflect padding of 1 dims expects a 2D or 3D input, got 4D"));
  REQUIRE_THROWS_WITH(dt::pad(x, {1, 0}, "wrap"), Contains("[pad] unknown padding mode 'wrap'"));
  REQUIRE_THROWS_WITH(dt::pad(x, {1, 0}, 0), Contains("[pad] mode is null"));
  REQUIRE_THROWS_WITH(dt::pad(dt::zeros({5}), {1, 1}, "replicate"),
                      Contains("[pad] replicate padding of 1 dims expects a 2D or 3D input"));
  REQUIRE_THROWS_WITH(dt::max_pool2d(x, {2}, {}, {2}),
                      Contains("[max_pool2d_with_indices] pad should be at most half of effective "
                               "kernel size"));
  REQUIRE_THROWS_WITH(dt::avg_pool2d(x, {6}),
                      Contains("[avg_pool2d] given input [2, 3, 5, 4], the calculated output size "
                               "is too small"));
  REQUIRE_THROWS_WITH(dt::avg_pool2d(x, {2, 2, 2}),
                      Contains("[avg_pool2d] kernel_size must be a single int or 2 ints, got 3"));
  REQUIRE_THROWS_WITH(dt::max_pool1d(x, {2}), Contains("[max_pool1d_with_indices] expected a 2D "
                                                       "or 3D input, got [2, 3, 5, 4]"));
  REQUIRE_THROWS_WITH(dt::interpolate(x, {3, 3}, {2.0}),
                      Contains("[interpolate] exactly one of size or scale_factor"));
  REQUIRE_THROWS_WITH(dt::interpolate(x, {3, 3}, {}, "nearest", true),
                      Contains("[interpolate] align_corners option can only be set"));
  REQUIRE_THROWS_WITH(dt::interpolate(x, {3, 3}, {}, "linear"),
                      Contains("[interpolate] mode 'linear' is not supported for a 4D input"));
  REQUIRE_THROWS_WITH(dt::interpolate(dt::zeros({1, 1, 4}), {3}, {}, "bicubic"),
                      Contains("[interpolate] mode 'bicubic' is not supported for a 3D input"));
  REQUIRE_THROWS_WITH(dt::interpolate(x, {3, 3}, {}, "nearest-exact", false),
                      Contains("[interpolate] align_corners option can only be set"));
  REQUIRE_THROWS_WITH(dt::max_pool2d(dt::zeros({2, 3, 5, 4}, dt::kInt64), {2}),
                      Contains("[max_pool2d_with_indices] expected a floating input, got int64"));
}

TEST_CASE("linear / cubic interpolate: a weight of exactly 0 reads nothing, an inf stays put") {
  // A dim whose size does not change has weights (1, 0): the 0 * inf of the next element made
  // the neighbour NaN (PyTorch 2.15 multiplies the element itself by 0: its output there is NaN,
  // measured [0, -0, nan, nan, nan, 1e300, 1e-310] for the row below; its bicubic NaN at the
  // neighbours too); an identity resize now returns its input, its backward the upstream
  // gradient.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // Bit-equal values (inf included), NaN where NaN is expected.
  const auto same = [](const Tensor& got, const std::vector<double>& want) {
    const std::vector<double> g = got.to(dt::kFloat64).contiguous().to_vector<double>();
    REQUIRE(g.size() == want.size());
    for (size_t i = 0; i < g.size(); ++i) {
      INFO("element " << i << ": got " << g[i] << ", expected " << want[i]);
      CHECK((std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]));
    }
  };
  const std::vector<double> row = {0, -0.0, inf, -inf, nan, 1e300, 1e-310};
  std::vector<double> v = row;
  for (int i = 1; i <= 7; ++i) v.push_back(i);
  for (dt::DType dtype : {dt::kFloat64, dt::kFloat32, dt::kBFloat16}) {
    INFO(dt::dtype_name(dtype));
    const bool f64 = dtype == dt::kFloat64;
    std::vector<double> want = row;
    if (!f64) {  // 1e300 and 1e-310 rounded to the dtype
      want[5] = inf;
      want[6] = 0;
    }
    const Tensor x = dt::from_vector<double>(v, {1, 1, 2, 7}).to(dtype);
    // Identity; the height resized (row 0's outputs read row 0 only); 1-d and 3-d.
    for (const dt::Shape& size : {dt::Shape{2, 7}, dt::Shape{3, 7}, dt::Shape{5, 7}}) {
      INFO(size[0]);
      same(dt::interpolate(x, size, {}, "bilinear").select(2, 0), want);
    }
    same(dt::interpolate(x.reshape({2, 1, 7}), {7}, {}, "linear", true).select(0, 0), want);
    for (const bool corners : {false, true}) {
      same(dt::interpolate(x, {2, 7}, {}, "bicubic", corners).select(2, 0), want);
    }
    const Tensor y3 = dt::interpolate(x.reshape({1, 1, 1, 2, 7}), {1, 4, 7}, {}, "trilinear");
    same(y3.reshape({4, 7}).select(0, 0), want);
  }
  // The backward of an identity resize is the upstream gradient, inf and NaN included.
  DTensor dx =
      dt::local_dtensor(dt::from_vector<double>(std::vector<double>(14, 0.0), {1, 1, 2, 7}));
  dx.requires_grad_();
  const DTensor dy = dt::interpolate(dx, {2, 7}, {}, "bilinear");
  dy.backward(dt::local_dtensor(dt::from_vector<double>(v, {1, 1, 2, 7})));
  same(dx.grad().to_local(), v);
  DTensor dc =
      dt::local_dtensor(dt::from_vector<double>(std::vector<double>(14, 0.0), {1, 1, 2, 7}));
  dc.requires_grad_();
  dt::interpolate(dc, {2, 7}, {}, "bicubic")
      .backward(dt::local_dtensor(dt::from_vector<double>(v, {1, 1, 2, 7})));
  same(dc.grad().to_local(), v);
}
