// Elementwise ops on CUDA against the CPU: every dtype, broadcasting, non-contiguous operands,
// scalars on either side, in-place updates of strided views, zero-size operands; and the
// pointwise math, composite reductions, copying shape ops and index ops built on them.
#include <cmath>

#include "ops/elementwise/elementwise.h"
#include "ops/index/index.h"
#include "ops/matmul/matmul.h"
#include "ops/reduction/reduction.h"
#include "ops/scan/scan.h"
#include "ops/view/copy_ops.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

namespace {

// (a, b) pairs of broadcastable shapes; the second pair reads a transposed (non-contiguous) a.
struct Operands {
  Tensor a, b;
};
std::vector<Operands> operand_sets(DType d) {
  std::vector<Operands> r;
  r.push_back({make_input({7, 13}, d, 11), make_input({7, 13}, d, 12)});
  r.push_back({make_input({5, 4}, d, 13).transpose(0, 1), make_input({4, 1}, d, 14)});
  r.push_back({make_input({3, 1, 5}, d, 15), make_input({4, 5}, d, 16).slice(1, 0, 5, 1)});
  r.push_back({make_input({2, 6}, d, 17).slice(1, 0, 6, 2), make_input({}, d, 18)});
  r.push_back({make_input({0, 3}, d, 19), make_input({3}, d, 20)});
  return r;
}

}  // namespace

TEST_CASE("cuda elementwise: binary ops, comparisons and where", "[gpu][elementwise]") {
  for (DType d : all_dtypes()) {
    for (const Operands& o : operand_sets(d)) {
      INFO(dtype_name(d) << " " << shape_str(o.a.sizes()) << " with " << shape_str(o.b.sizes()));
      const Tensor ga = o.a.to(kGpu), gb = o.b.to(kGpu);
      check_matches(add(ga, gb), add(o.a, o.b));
      check_matches(mul(ga, gb), mul(o.a, o.b));
      check_matches(div(ga, gb), div(o.a, o.b));
      check_matches(maximum(ga, gb), maximum(o.a, o.b));
      check_matches(minimum(ga, gb), minimum(o.a, o.b));
      if (d != kBool) check_matches(sub(ga, gb), sub(o.a, o.b));
      check_matches(eq(ga, gb), eq(o.a, o.b));
      check_matches(ne(ga, gb), ne(o.a, o.b));
      check_matches(lt(ga, gb), lt(o.a, o.b));
      check_matches(le(ga, gb), le(o.a, o.b));
      check_matches(gt(ga, gb), gt(o.a, o.b));
      check_matches(ge(ga, gb), ge(o.a, o.b));
      const Tensor cond = gt(o.a, o.b);
      check_matches(where(cond.to(kGpu), ga, gb), where(cond, o.a, o.b));
      // Scalars on either side, with promotion (int tensor * 1.5 -> float32).
      check_matches(add(ga, Scalar(2)), add(o.a, Scalar(2)));
      check_matches(mul(ga, Scalar(1.5)), mul(o.a, Scalar(1.5)));
      check_matches(div(ga, Scalar(3)), div(o.a, Scalar(3)));
      check_matches(Scalar(4.0) / ga, Scalar(4.0) / o.a);
      if (d != kBool) check_matches(Scalar(1) - ga, Scalar(1) - o.a);
      check_matches(lt(ga, Scalar(0.5)), lt(o.a, Scalar(0.5)));
      check_matches(ge(ga, Scalar(-1)), ge(o.a, Scalar(-1)));
    }
  }
  // Mixed dtypes promote as on the CPU.
  const Tensor i = make_input({3, 4}, kInt32, 21), f = make_input({4}, kBFloat16, 22);
  check_matches(add(i.to(kGpu), f.to(kGpu)), add(i, f));
  check_matches(where(gt(i, Scalar(0)).to(kGpu), i.to(kGpu), f.to(kGpu)),
                where(gt(i, Scalar(0)), i, f));
}

TEST_CASE("cuda elementwise: unary math and activations", "[gpu][elementwise]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    for (const Tensor& x : {make_input({9, 11}, d, 31), make_input({6, 5}, d, 32).transpose(0, 1),
                            make_input({0, 2}, d, 33)}) {
      const Tensor g = x.to(kGpu);
      check_matches(neg(g), neg(x));
      check_matches(abs(g), abs(x));
      check_matches(exp(g), exp(x));
      check_matches(log(g), log(x));  // NaN for the negative half, on both devices
      check_matches(sqrt(g), sqrt(x));
      check_matches(rsqrt(abs(g)), rsqrt(abs(x)));
      check_matches(sigmoid(g), sigmoid(x));
      check_matches(tanh(g), tanh(x));
      check_matches(relu(g), relu(x));
    check_matches(dtensor::floor(g), dtensor::floor(x));
    check_matches(dtensor::sign(g), dtensor::sign(x));
      check_matches(gelu(g), gelu(x));
      check_matches(gelu(g, GeluApproximate::kTanh), gelu(x, GeluApproximate::kTanh));
      check_matches(silu(g), silu(x));
      check_matches(pow(g, Scalar(2)), pow(x, Scalar(2)));
      check_matches(pow(abs(g), Scalar(0.5)), pow(abs(x), Scalar(0.5)));
      using UnaryFn = Tensor (*)(const Tensor&);
      for (UnaryFn f : {UnaryFn(&dtensor::sin), UnaryFn(&dtensor::cos), UnaryFn(&dtensor::erf),
                        UnaryFn(&dtensor::exp2), UnaryFn(&dtensor::expm1),
                        UnaryFn(&dtensor::floor), UnaryFn(&dtensor::ceil),
                        UnaryFn(&dtensor::round), UnaryFn(&dtensor::trunc),
                        UnaryFn(&dtensor::frac), UnaryFn(&dtensor::sign),
                        UnaryFn(&dtensor::sinh), UnaryFn(&dtensor::cosh),
                        UnaryFn(&dtensor::atan), UnaryFn(&dtensor::asinh),
                        UnaryFn(&dtensor::erfc), UnaryFn(&dtensor::log_sigmoid),
                        UnaryFn(&dtensor::hardsigmoid), UnaryFn(&dtensor::hardswish),
                        UnaryFn(&dtensor::mish), UnaryFn(&dtensor::selu)}) {
        check_matches(f(g), f(x));
      }
      // On their domains: (-1, 1) and above 1.
      for (UnaryFn f : {UnaryFn(&dtensor::asin), UnaryFn(&dtensor::acos),
                        UnaryFn(&dtensor::atanh)}) {
        check_matches(f(tanh(g)), f(tanh(x)));
      }
      check_matches(dtensor::acosh(abs(g) + Scalar(1.1)), dtensor::acosh(abs(x) + Scalar(1.1)));
      check_matches(dtensor::tan(g * Scalar(0.5)), dtensor::tan(x * Scalar(0.5)));
      for (UnaryFn f : {UnaryFn(&dtensor::log1p), UnaryFn(&dtensor::log2),
                        UnaryFn(&dtensor::log10), UnaryFn(&dtensor::reciprocal)}) {
        check_matches(f(abs(g) + Scalar(0.1)), f(abs(x) + Scalar(0.1)));
      }
    }
  }
  for (DType d : {kInt32, kInt64}) {
    const Tensor x = make_input({4, 7}, d, 34, -20, 20);
    const Tensor g = x.to(kGpu);
    check_matches(neg(g), neg(x));
    check_matches(abs(g), abs(x));
    check_matches(relu(g), relu(x));
    check_matches(pow(g, Scalar(3)), pow(x, Scalar(3)));
    check_matches(exp(g), exp(x));  // integers compute in float32
  }
}

TEST_CASE("cuda elementwise: in-place ops on strided views", "[gpu][elementwise]") {
  for (DType d : {kFloat32, kFloat16, kInt64}) {
    Tensor c = make_input({6, 8}, d, 41);
    Tensor g = c.to(kGpu);
    const Tensor o = make_input({4}, d, 42);
    add_(g.slice(1, 0, 8, 2), o.to(kGpu));
    add_(c.slice(1, 0, 8, 2), o);
    mul_(g.transpose(0, 1), Scalar(3));
    mul_(c.transpose(0, 1), Scalar(3));
    sub_(g, g.narrow(0, 0, 1).clone());
    sub_(c, c.narrow(0, 0, 1).clone());
    check_matches(g, c);
  }
}

TEST_CASE("cuda elementwise: errors name the op and the argument", "[gpu][elementwise]") {
  const Tensor a = make_input({2, 3}, kFloat32, 51);
  REQUIRE_THROWS_AS(add(a.to(kGpu), a), Error);
  REQUIRE_THROWS_WITH(add(a.to(kGpu), a), Catch::Contains("[add]"));
  REQUIRE_THROWS_WITH(mul(a.to(kGpu), make_input({4}, kFloat32, 52).to(kGpu)),
                      Catch::Contains("[mul] cannot broadcast"));
  REQUIRE_THROWS_WITH(gelu(a.to(kInt32).to(kGpu)), Catch::Contains("[gelu]"));
}

TEST_CASE("cuda elementwise: many rows, broadcast rows and 0-d operands", "[gpu][elementwise]") {
  for (DType d : {kFloat32, kBFloat16, kInt64}) {
    INFO(dtype_name(d));
    const Tensor a = make_input({3, 70000}, d, 61).transpose(0, 1);  // [70000, 3], strided
    const Tensor row = make_input({3}, d, 62), s = make_input({}, d, 63);
    const Tensor ga = a.to(kGpu);
    check_matches(add(ga, row.to(kGpu)), add(a, row));
    check_matches(mul(s.to(kGpu), ga), mul(s, a));
    check_matches(maximum(ga, s.to(kGpu)), maximum(a, s));
    check_matches(where(gt(a, row).to(kGpu), ga, s.to(kGpu)), where(gt(a, row), a, s));
    check_matches(add(s.to(kGpu), s.to(kGpu)), add(s, s));  // 0-d result
  }
}

TEST_CASE("cuda elementwise: pointwise math, predicates, logical and bitwise ops",
          "[gpu][elementwise]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({7, 5}, d, 41), y = make_input({5}, d, 42);
    const Tensor gx = x.to(kGpu), gy = y.to(kGpu);
    check_matches(square(gx), square(x));
    check_matches(pow(abs(gx) + Scalar(0.5), gy), pow(abs(x) + Scalar(0.5), y));
    check_matches(fmod(gx, gy), fmod(x, y));
    check_matches(remainder(gx, gy), remainder(x, y));
    check_matches(remainder(gx, Scalar(0.75)), remainder(x, Scalar(0.75)));
    check_matches(atan2(gx, gy), atan2(x, y));
    check_matches(hypot(gx, gy), hypot(x, y));
    check_matches(clamp(gx, Scalar(-0.5), Scalar(0.5)), clamp(x, Scalar(-0.5), Scalar(0.5)));
    check_matches(clamp(gx, gy, gy + Scalar(1.0)), clamp(x, y, y + Scalar(1.0)));
    // NaN, +-inf and finite values.
    const Tensor special = where(gt(abs(x), Scalar(2.0)), x, log(x) / (x - x));
    check_matches(nan_to_num(special.to(kGpu)), nan_to_num(special));
    check_matches(nan_to_num(special.to(kGpu), 1, 2, -3), nan_to_num(special, 1, 2, -3));
    check_matches(isnan(special.to(kGpu)), isnan(special));
    check_matches(isinf(special.to(kGpu)), isinf(special));
    check_matches(isfinite(special.to(kGpu)), isfinite(special));
    check_matches(logical_xor(gx, gy), logical_xor(x, y));
    check_matches(lerp(gx, gy, Scalar(0.3)), lerp(x, y, Scalar(0.3)));
    check_matches(addcdiv(gx, gy, abs(gy) + Scalar(1.0), Scalar(0.5)),
                  addcdiv(x, y, abs(y) + Scalar(1.0), Scalar(0.5)));
    // Composite reductions run on the CUDA reduction kernels.
    check_matches(vector_norm(gx, 2.0, {1}), vector_norm(x, 2.0, {1}));
    check_matches(logsumexp(gx, {0}), logsumexp(x, {0}));
    check_matches(any(gt(gx, Scalar(1.0)), {1}), any(gt(x, Scalar(1.0)), {1}));
    check_matches(all(gt(gx, Scalar(-2.0)), {0}), all(gt(x, Scalar(-2.0)), {0}));
    check_matches(dtensor::std(gx, {1}), dtensor::std(x, {1}));
    check_matches(vector_norm(gx, 1.0, {0}), vector_norm(x, 1.0, {0}));
    check_matches(dist(gx, gy), dist(x, y));
  }
  for (DType d : {kInt32, kInt64}) {
    const Tensor x = make_input({4, 7}, d, 43, -20, 20), y = make_input({7}, d, 44, 1, 9);
    const Tensor gx = x.to(kGpu), gy = y.to(kGpu);
    check_matches(fmod(gx, gy), fmod(x, y));
    check_matches(remainder(gx, gy), remainder(x, y));
    check_matches(pow(gx, gy), pow(x, y));
    check_matches(bitwise_and(gx, gy), bitwise_and(x, y));
    check_matches(bitwise_or(gx, gy), bitwise_or(x, y));
    check_matches(bitwise_xor(gx, gy), bitwise_xor(x, y));
    check_matches(bitwise_not(gx), bitwise_not(x));
    REQUIRE_THROWS_WITH(fmod(gx, gy * Scalar(0)), Catch::Contains("[fmod] integer division"));
  }
}

TEST_CASE("cuda copy ops: flip, roll, repeat, tril, triu", "[gpu][view]") {
  for (DType d : {kFloat32, kInt64}) {
    const Tensor x = make_input({5, 6}, d, 51), g = x.to(kGpu);
    check_matches(flip(g, {0, 1}), flip(x, {0, 1}));
    check_matches(roll(g, {2, -1}, {0, 1}), roll(x, {2, -1}, {0, 1}));
    check_matches(roll(g, {7}), roll(x, {7}));
    check_matches(repeat(g, {2, 1, 3}), repeat(x, {2, 1, 3}));
    check_matches(tril(g, 1), tril(x, 1));
    check_matches(clone(g.transpose(0, 1)), clone(x.transpose(0, 1)));
    check_matches(triu(g.transpose(0, 1), -2), triu(x.transpose(0, 1), -2));
    check_matches(repeat_interleave(g, 3, 1), repeat_interleave(x, 3, 1));
    check_matches(diagonal(g, 1), diagonal(x, 1));
    check_matches(diagonal(g.transpose(0, 1), -2), diagonal(x.transpose(0, 1), -2));
    check_matches(diagonal_backward(diagonal(g, -1), {5, 6}, -1, 0, 1),
                  diagonal_backward(diagonal(x, -1), {5, 6}, -1, 0, 1));
  }
}

TEST_CASE("cuda index ops: index_select, take_along_dim, one_hot, masked_fill", "[gpu][index]") {
  const Tensor x = make_input({6, 5}, kFloat32, 61), g = x.to(kGpu);
  const Tensor idx = make_input({4}, kInt64, 62, 0, 5);
  check_matches(index_select(g, 0, idx.to(kGpu)), index_select(x, 0, idx));
  const Tensor cols = make_input({6, 3}, kInt64, 65, 0, 5);
  check_matches(gather(g, 1, cols.to(kGpu)), gather(x, 1, cols));
  const Tensor src = make_input({4, 5}, kFloat32, 66);
  check_matches(index_add(g, 0, idx.to(kGpu), src.to(kGpu), 0.5), index_add(x, 0, idx, src, 0.5));
  // scatter with repeated positions: the CUDA claim pass picks the same (last) entry as the CPU.
  const Tensor many = make_input({6, 40}, kInt64, 67, 0, 4);
  const Tensor vals = make_input({6, 40}, kFloat32, 68);
  check_matches(scatter(g, 1, many.to(kGpu), vals.to(kGpu)), scatter(x, 1, many, vals));
  check_matches(scatter(g, 1, many.to(kGpu), Scalar(3.0), 2), scatter(x, 1, many, Scalar(3.0), 2));
  // scatter_reduce: atomic adds for sum / mean, compare-and-swap loops for prod / amax / amin
  // (amax / amin and integers exact); repeated positions, include_self both ways, a block
  // offset, int64 (mean rounding down) and float16 (reduced in float32).
  const Tensor ints = make_input({6, 5}, kInt64, 69, -9, 9);
  const Tensor int_vals = make_input({6, 40}, kInt64, 70, -3, 3);
  const Tensor halves = x.to(kFloat16), half_vals = (vals * Scalar(0.5)).to(kFloat16);
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"}) {
    for (bool include_self : {true, false}) {
      INFO(reduce << " include_self " << include_self);
      check_matches(scatter_reduce(g, 1, many.to(kGpu), vals.to(kGpu), reduce, include_self),
                    scatter_reduce(x, 1, many, vals, reduce, include_self), 10.0);
      check_matches(scatter_reduce(g, 1, many.to(kGpu), vals.to(kGpu), reduce, include_self, 2),
                    scatter_reduce(x, 1, many, vals, reduce, include_self, 2), 10.0);
      check_matches(scatter_reduce(ints.to(kGpu), 1, many.to(kGpu), int_vals.to(kGpu), reduce,
                                   include_self),
                    scatter_reduce(ints, 1, many, int_vals, reduce, include_self));
      check_matches(scatter_reduce(halves.to(kGpu), 1, many.to(kGpu), half_vals.to(kGpu), reduce,
                                   include_self),
                    scatter_reduce(halves, 1, many, half_vals, reduce, include_self));
    }
  }
  const Tensor nan_vals = masked_fill(vals, gt(vals, Scalar(2.0)), Scalar(std::nan("")));
  check_matches(scatter_reduce(g, 1, many.to(kGpu), nan_vals.to(kGpu), "amax"),
                scatter_reduce(x, 1, many, nan_vals, "amax"));
  // Indices 2..5: the 5s are out of range.
  REQUIRE_THROWS_WITH(
      scatter_reduce(g, 1, (many + Scalar(int64_t{2})).to(kGpu), vals.to(kGpu), "amin"),
      Catch::Contains("[scatter_reduce] index 5 out of range for dim 1 of size 5"));
  const Tensor along = make_input({6, 2}, kInt64, 63, 0, 4);
  check_matches(take_along_dim(g, along.to(kGpu), 1), take_along_dim(x, along, 1));
  check_matches(one_hot(idx.to(kGpu), 6), one_hot(idx, 6));
  const Tensor mask = gt(make_input({5}, kFloat32, 64), Scalar(0.0));
  check_matches(masked_fill(g, mask.to(kGpu), Scalar(-2.0)), masked_fill(x, mask, Scalar(-2.0)));
}

// The scan family runs the CPU's own row code on the device: results are bit-identical.
TEST_CASE("cuda scan ops: cumsum, cumprod, cummax, cummin, sort, argsort, topk, kthvalue", "[gpu][scan]") {
  for (DType d : {kFloat32, kFloat16, kInt32, kInt64}) {
    Tensor x = make_input({7, 9}, d, 71, -3, 3);
    if (is_floating(d)) x = where(gt(x, Scalar(2.0)), full({}, Scalar(std::nan("")), d), x);
    const Tensor g = x.to(kGpu);
    for (int64_t dim : {0, 1}) {
      INFO(dtype_name(d) << " dim " << dim);
      check_exact(cumsum(g, dim), cumsum(x, dim));
      check_exact(cumprod(g, dim), cumprod(x, dim));
      for (bool desc : {false, true}) {
        const ValuesIndices a = sort(g, dim, desc), b = sort(x, dim, desc);
        check_exact(a.values, b.values);
        check_exact(a.indices, b.indices);
        check_exact(argsort(g.transpose(0, 1), dim, desc), argsort(x.transpose(0, 1), dim, desc));
      }
      const ValuesIndices t = topk(g, 3, dim), tc = topk(x, 3, dim);
      check_exact(t.values, tc.values);
      check_exact(t.indices, tc.indices);
      for (bool is_max : {true, false}) {
        const ValuesIndices e = is_max ? cummax(g, dim) : cummin(g, dim);
        const ValuesIndices ec = is_max ? cummax(x, dim) : cummin(x, dim);
        check_exact(e.values, ec.values);
        check_exact(e.indices, ec.indices);
      }
      const ValuesIndices k = kthvalue(g, 2, dim), kc = kthvalue(x, 2, dim);
      check_exact(k.values, kc.values);
      check_exact(k.indices, kc.indices);
    }
  }
  const Tensor x = make_input({5, 6}, kFloat64, 72, -2, 2), gr = make_input({5, 6}, kFloat64, 73);
  check_exact(detail::cumprod_backward(gr.to(kGpu), x.to(kGpu), 1),
              detail::cumprod_backward(gr, x, 1));
}

TEST_CASE("cuda erfinv and prod", "[gpu][scan]") {
  const Tensor x = mul(make_input({6, 7}, kFloat64, 74, -1, 1), Scalar(0.99));
  check_matches(erfinv(x.to(kGpu)), erfinv(x), 10.0);
  check_matches(erfinv(x.to(kFloat32).to(kGpu)), erfinv(x.to(kFloat32)), 10.0);
  for (DType d : {kFloat32, kInt64}) {
    const Tensor p = make_input({4, 5}, d, 75, -2, 2), g = p.to(kGpu);
    check_exact(prod(g, 1), prod(p, 1));
    check_exact(prod(g, 0, true), prod(p, 0, true));
    check_exact(prod(g), prod(p));
  }
}

TEST_CASE("cuda dot, outer and baddbmm", "[gpu][matmul]") {
  const Tensor a = make_input({37}, kFloat32, 76), b = make_input({37}, kFloat32, 77);
  check_matches(dot(a.to(kGpu), b.to(kGpu)), dot(a, b), 10.0);
  check_exact(outer(a.to(kGpu), b.narrow(0, 0, 5).to(kGpu)), outer(a, b.narrow(0, 0, 5)));
  const Tensor s = make_input({3, 4}, kFloat32, 78), x = make_input({2, 3, 5}, kFloat32, 79);
  const Tensor y = make_input({2, 5, 4}, kFloat32, 80);
  check_matches(baddbmm(s.to(kGpu), x.to(kGpu), y.to(kGpu), 0.5, 2.0), baddbmm(s, x, y, 0.5, 2.0),
                10.0);
}
