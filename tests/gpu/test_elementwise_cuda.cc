// Elementwise ops on CUDA against the CPU: every dtype, broadcasting, non-contiguous operands,
// scalars on either side, in-place updates of strided views, zero-size operands; and the
// pointwise math, composite reductions, copying shape ops and index ops built on them.
#include <cmath>

#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/gemm.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
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
      // The activations with parameters (pointwise_math.h's formulas on both devices).
      check_matches(relu6(g * Scalar(4.0)), relu6(x * Scalar(4.0)));
      check_matches(softplus(g), softplus(x));
      check_matches(softplus(g, 2.0, 1.0), softplus(x, 2.0, 1.0));
      check_matches(elu(g), elu(x));
      check_matches(elu(g, 0.5), elu(x, 0.5));
      check_matches(celu(g, 2.0), celu(x, 2.0));
      check_matches(leaky_relu(g), leaky_relu(x));
      check_matches(leaky_relu(g, 0.2), leaky_relu(x, 0.2));
      using UnaryFn = Tensor (*)(const Tensor&);
      for (UnaryFn f : {UnaryFn(&dtensor::sin),         UnaryFn(&dtensor::cos),
                        UnaryFn(&dtensor::erf),         UnaryFn(&dtensor::exp2),
                        UnaryFn(&dtensor::expm1),       UnaryFn(&dtensor::floor),
                        UnaryFn(&dtensor::ceil),        UnaryFn(&dtensor::round),
                        UnaryFn(&dtensor::trunc),       UnaryFn(&dtensor::frac),
                        UnaryFn(&dtensor::sign),        UnaryFn(&dtensor::sinh),
                        UnaryFn(&dtensor::cosh),        UnaryFn(&dtensor::atan),
                        UnaryFn(&dtensor::asinh),       UnaryFn(&dtensor::erfc),
                        UnaryFn(&dtensor::log_sigmoid), UnaryFn(&dtensor::hardsigmoid),
                        UnaryFn(&dtensor::hardswish),   UnaryFn(&dtensor::mish),
                        UnaryFn(&dtensor::selu)}) {
        check_matches(f(g), f(x));
      }
      // On their domains: (-1, 1) and above 1.
      for (UnaryFn f :
           {UnaryFn(&dtensor::asin), UnaryFn(&dtensor::acos), UnaryFn(&dtensor::atanh)}) {
        check_matches(f(tanh(g)), f(tanh(x)));
      }
      check_matches(dtensor::acosh(abs(g) + Scalar(1.1)), dtensor::acosh(abs(x) + Scalar(1.1)));
      check_matches(dtensor::tan(g * Scalar(0.5)), dtensor::tan(x * Scalar(0.5)));
      for (UnaryFn f : {UnaryFn(&dtensor::log1p), UnaryFn(&dtensor::log2), UnaryFn(&dtensor::log10),
                        UnaryFn(&dtensor::reciprocal)}) {
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
    check_matches(relu6(g), relu6(x));
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
    check_matches(logaddexp(gx, gy), logaddexp(x, y));
    check_matches(xlogy(gx, abs(gy)), xlogy(x, abs(y)));
    check_matches(copysign(gx, gy), copysign(x, y));
    // glu's halves are strided views of its input (both dims: inner and outer halves).
    check_matches(glu(gx.narrow(0, 0, 6), 0), glu(x.narrow(0, 0, 6), 0));
    check_matches(glu(gx.narrow(1, 0, 4), -1), glu(x.narrow(1, 0, 4), -1));
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
      check_matches(
          scatter_reduce(ints.to(kGpu), 1, many.to(kGpu), int_vals.to(kGpu), reduce, include_self),
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

namespace {

// A list of optional index tensors (advanced indexing) moved to the GPU.
using Idx = std::vector<std::optional<Tensor>>;
Idx on_gpu(const Idx& idx) {
  Idx out;
  for (const auto& t : idx) {
    out.emplace_back(t ? std::optional<Tensor>(t->to(kGpu)) : std::nullopt);
  }
  return out;
}

}  // namespace

// Advanced indexing: index gathers bit for bit; index_put without accumulate picks the same
// (last) entry as the CPU for repeated positions (claim pass), with accumulate integers and bool
// are exact and floats add atomically (16-bit in float32); adjacent and separated indexed dims,
// int32 / negative indices, a really strided self, a block-masked put and add (sharded self),
// an empty block, and the range error.
TEST_CASE("cuda advanced indexing: index and index_put", "[gpu][index]") {
  const Tensor i0 = make_input({4, 1}, kInt64, 91, -6, 6);  // repeats and negatives
  const Tensor i2 = make_input({3}, kInt32, 92, 0, 7);
  const Tensor i1 = make_input({4, 3}, kInt64, 93, -5, 5);
  const Idx separated = {i0, std::nullopt, i2}, adjacent = {std::nullopt, i1, i2};
  for (DType d : all_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({6, 5, 7}, d, 94), g = x.to(kGpu);
    // The same [6, 5, 7] shape as a transposed view of [7, 5, 6] storage, on either device.
    const Tensor base = make_input({7, 5, 6}, d, 102);
    const Tensor xs = base.transpose(0, 2), gs = base.to(kGpu).transpose(0, 2);
    REQUIRE(!gs.is_contiguous());
    for (const Idx& idx : {separated, adjacent}) {
      const Tensor want = index(x, idx);
      check_exact(index(g, on_gpu(idx)), want);
      check_exact(index(gs, on_gpu(idx)), index(xs, idx));
      const Tensor v = make_input(want.sizes(), d, 95);
      check_exact(index_put(g, on_gpu(idx), v.to(kGpu)), index_put(x, idx, v));
      check_exact(index_put(gs, on_gpu(idx), v.to(kGpu)), index_put(xs, idx, v));
      check_matches(index_put(gs, on_gpu(idx), v.to(kGpu), true), index_put(xs, idx, v, true),
                    10.0);
      const Tensor vb = make_input({want.size(-1)}, d, 96);  // broadcast values
      check_matches(index_put(g, on_gpu(idx), vb.to(kGpu), true), index_put(x, idx, vb, true),
                    10.0);
      check_matches(index_put(g, on_gpu(idx), v.to(kGpu), true), index_put(x, idx, v, true), 10.0);
    }
  }
  // Many blocks: 5000 entries into 300 rows (many repeats).
  const Tensor big = make_input({300, 64}, kFloat32, 97);
  const Tensor rows = make_input({5000}, kInt64, 98, 0, 300);
  const Tensor vals = make_input({5000, 64}, kFloat32, 99);
  check_exact(index(big.to(kGpu), {rows.to(kGpu)}), index(big, {rows}));
  check_exact(index_put(big.to(kGpu), {rows.to(kGpu)}, vals.to(kGpu)),
              index_put(big, {rows}, vals));
  check_matches(index_put(big.to(kGpu), {rows.to(kGpu)}, vals.to(kGpu), true),
                index_put(big, {rows}, vals, true), 100.0);
  const Tensor ivals = make_input({5000, 64}, kInt64, 100, -9, 9);
  const Tensor ibig = make_input({300, 64}, kInt64, 101, -9, 9);
  check_exact(index_put(ibig.to(kGpu), {rows.to(kGpu)}, ivals.to(kGpu), true),
              index_put(ibig, {rows}, ivals, true));
  // A block of a sharded self: rows [100, 200) of 300, entries outside skipped.
  const int64_t sizes[] = {300}, offsets[] = {100};
  const Tensor block = big.narrow(0, 100, 100);
  check_exact(detail::index_put_block(block.to(kGpu), {int64_t{0}}, {rows.to(kGpu)}, vals.to(kGpu),
                                      false, sizes, offsets),
              detail::index_put_block(block, {int64_t{0}}, {rows}, vals, false, sizes, offsets));
  check_matches(detail::index_put_block(block.to(kGpu), {int64_t{0}}, {rows.to(kGpu)},
                                        vals.to(kGpu), true, sizes, offsets),
                detail::index_put_block(block, {int64_t{0}}, {rows}, vals, true, sizes, offsets),
                100.0);
  const Tensor iblock = ibig.narrow(0, 100, 100);
  check_exact(detail::index_put_block(iblock.to(kGpu), {int64_t{0}}, {rows.to(kGpu)},
                                      ivals.to(kGpu), true, sizes, offsets),
              detail::index_put_block(iblock, {int64_t{0}}, {rows}, ivals, true, sizes, offsets));
  check_exact(detail::index_block(block.to(kGpu), {int64_t{0}}, {rows.to(kGpu)}, sizes, offsets),
              detail::index_block(block, {int64_t{0}}, {rows}, sizes, offsets));
  // An empty block (a rank's empty shard of the indexed dim, m == 0): nothing written, zeros
  // gathered.
  const int64_t end[] = {300};
  const Tensor empty_block = big.narrow(0, 300, 0);
  for (bool accumulate : {false, true}) {
    check_exact(
        detail::index_put_block(empty_block.to(kGpu), {int64_t{0}}, {rows.to(kGpu)}, vals.to(kGpu),
                                accumulate, sizes, end),
        detail::index_put_block(empty_block, {int64_t{0}}, {rows}, vals, accumulate, sizes, end));
  }
  check_exact(detail::index_block(empty_block.to(kGpu), {int64_t{0}}, {rows.to(kGpu)}, sizes, end),
              detail::index_block(empty_block, {int64_t{0}}, {rows}, sizes, end));
  REQUIRE_THROWS_WITH(
      index(big.to(kGpu), {std::nullopt, (rows + Scalar(int64_t{64})).to(kGpu)}),
      Catch::Contains("[index] index") && Catch::Contains("out of range for dim 1 of size 64"));
}

// index_put without accumulate on a large indexed extent with few entries (m > 4 n): CUDA picks
// the winners by sorting (position, entry) pairs instead of a dense claim array of m slots; the
// winner of a repeated position is still the CPU's (the last entry). Adjacent (with p = 3 leading
// rows) and separated dims, broadcast indices, every dtype's bits, and a block of a sharded self
// (entries outside it skipped).
TEST_CASE("cuda advanced indexing: index_put on a large indexed extent (sorted pick)",
          "[gpu][index]") {
  // 40 entries on a 5 x 6 corner (many repeats), 40 spread over the whole extent, and a
  // broadcast [40, 1] x [3] pair (n = 120).
  const Idx corner = {std::nullopt, make_input({40}, kInt64, 110, 0, 5),
                      make_input({40}, kInt64, 111, -6, 0)};
  const Idx spread = {std::nullopt, make_input({40}, kInt64, 112, -600, 600),
                      make_input({40}, kInt64, 113, -700, 700)};
  const Idx bcast = {std::nullopt, make_input({40, 1}, kInt64, 114, 0, 4),
                     make_input({3}, kInt32, 115, 0, 3)};
  for (DType d : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    INFO(dtype_name(d));
    const Tensor x = make_input({3, 600, 700}, d, 116), g = x.to(kGpu);  // m = 420000
    for (const Idx& idx : {corner, spread, bcast}) {
      const Tensor v = make_input(index(x, idx).sizes(), d, 117);
      check_exact(index_put(g, on_gpu(idx), v.to(kGpu)), index_put(x, idx, v));
    }
    // Separated: x[i, :, j] on [600, 3, 700], q = 3.
    const Tensor xsep = make_input({600, 3, 700}, d, 118);
    const Idx sep = {make_input({40}, kInt64, 119, 0, 4), std::nullopt,
                     make_input({40}, kInt64, 120, 0, 3)};
    const Tensor vsep = make_input({40, 3}, d, 121);
    check_exact(index_put(xsep.to(kGpu), on_gpu(sep), vsep.to(kGpu)), index_put(xsep, sep, vsep));
  }
  // A block of rows [500, 1500) of a [2000, 1000] self indexed on both dims (m = 10^6 locally):
  // entries outside the block sort last and are skipped.
  const Tensor big = make_input({2000, 1000}, kFloat32, 122);
  const Tensor block = big.narrow(0, 500, 1000);
  const std::vector<Tensor> ij = {make_input({64}, kInt64, 123, 0, 2000),
                                  make_input({64}, kInt64, 124, 0, 1000)};
  const std::vector<Tensor> ij_gpu = {ij[0].to(kGpu), ij[1].to(kGpu)};
  const Tensor vals = make_input({64}, kFloat32, 125);
  const int64_t dims[] = {0, 1}, sizes[] = {2000, 1000}, offsets[] = {500, 0};
  check_exact(
      detail::index_put_block(block.to(kGpu), dims, ij_gpu, vals.to(kGpu), false, sizes, offsets),
      detail::index_put_block(block, dims, ij, vals, false, sizes, offsets));
  // Repeats across the block boundary: 20 positions (half outside the block), ~3 entries each.
  const std::vector<Tensor> rep = {make_input({64}, kInt64, 126, 495, 505),
                                   make_input({64}, kInt64, 127, 0, 2)};
  const std::vector<Tensor> rep_gpu = {rep[0].to(kGpu), rep[1].to(kGpu)};
  check_exact(
      detail::index_put_block(block.to(kGpu), dims, rep_gpu, vals.to(kGpu), false, sizes, offsets),
      detail::index_put_block(block, dims, rep, vals, false, sizes, offsets));
}

TEST_CASE("cuda masked_select, nonzero and masked_select_backward", "[gpu][index]") {
  // Many count / compaction tiles (2048 flags each), a broadcast mask, every dtype family, and
  // masks selecting nothing and everything.
  for (DType d : {kFloat32, kFloat64, kFloat16, kInt32, kInt64, kBool}) {
    const Tensor x = make_input({37, 1001}, d, 81, -2, 2);
    const Tensor mask = gt(make_input({37, 1001}, kFloat32, 82), Scalar(0.0));
    const Tensor row = gt(make_input({1001}, kFloat32, 83), Scalar(0.5));
    INFO(dtype_name(d));
    check_exact(masked_select(x.to(kGpu), mask.to(kGpu)), masked_select(x, mask));
    check_exact(masked_select(x.to(kGpu), row.to(kGpu)), masked_select(x, row));
    check_exact(masked_select(x.transpose(0, 1).to(kGpu), mask.transpose(0, 1).to(kGpu)),
                masked_select(x.transpose(0, 1), mask.transpose(0, 1)));
    check_exact(nonzero(x.to(kGpu)), nonzero(x));
  }
  const Tensor x = make_input({5, 7}, kFloat32, 84);
  const Tensor none = zeros({5, 7}, TensorOptions(kBool)), all = ones({7}, TensorOptions(kBool));
  check_exact(masked_select(x.to(kGpu), none.to(kGpu)), masked_select(x, none));
  check_exact(masked_select(x.to(kGpu), all.to(kGpu)), masked_select(x, all));
  check_exact(nonzero(zeros({0, 3}).to(kGpu)), nonzero(zeros({0, 3})));
  const Tensor m = gt(make_input({4, 5, 6}, kFloat32, 85), Scalar(0.0));
  check_exact(nonzero(m.to(kGpu)), nonzero(m));
  const int64_t shape[] = {3, 4, 5, 6};
  const int64_t n = masked_select(zeros({3, 4, 5, 6}), m).numel();
  const Tensor grad = make_input({n}, kFloat64, 86);
  check_exact(detail::masked_select_backward(grad.to(kGpu), m.to(kGpu), shape),
              detail::masked_select_backward(grad, m, shape));
}

TEST_CASE("cuda block scan: cumsum / cumprod started from a block prefix", "[gpu][scan]") {
  // The form a rank runs on its block of a sharded dim: totals in the accumulator dtype, then
  // the scan started from a prefix (scan_kernels.h); equal to the CPU bit for bit.
  for (DType d : {kFloat32, kFloat64, kInt64}) {
    const Tensor x = make_input({6, 9}, d, 87, -2, 2);
    for (detail::ScanOp op : {detail::ScanOp::kSum, detail::ScanOp::kProd}) {
      INFO(dtype_name(d) << (op == detail::ScanOp::kSum ? " cumsum" : " cumprod"));
      const Tensor t = detail::scan_totals(op, x, 1);
      check_exact(detail::scan_totals(op, x.to(kGpu), 1), t);
      check_exact(detail::scan_from(op, x.to(kGpu), 1, t.to(kGpu)), detail::scan_from(op, x, 1, t));
    }
  }
}

// The scan family runs the CPU's own row code on the device: results are bit-identical.
TEST_CASE("cuda scan ops: cumsum, cumprod, cummax, cummin, sort, argsort, topk, kthvalue",
          "[gpu][scan]") {
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

TEST_CASE("cuda baddbmm_into: the copy path accumulates like baddbmm", "[gpu][matmul]") {
  // A CUDA out is never BLAS's C: it takes baddbmm's result by copy, into strided views too; with
  // beta 0 its old values (NaN here) are ignored, as the attention forward's scores rely on.
  const Tensor a = make_input({2, 3, 5}, kFloat32, 81), b = make_input({2, 5, 4}, kFloat32, 82);
  const Tensor c = make_input({2, 3, 4}, kFloat32, 83);
  Tensor out = c.to(kGpu);
  detail::baddbmm_into(out, a.to(kGpu), b.to(kGpu), 0.5, 2.0);
  check_matches(out, baddbmm(c, a, b, 0.5, 2.0), 10.0);
  Tensor wide = full({2, 3, 9}, Scalar(std::nan("")), TensorOptions(kFloat32)).to(kGpu);
  detail::baddbmm_into(wide.narrow(2, 2, 4), a.to(kGpu), b.to(kGpu), 0.0, 1.5);
  check_matches(wide.narrow(2, 2, 4), baddbmm(c, a, b, 0.0, 1.5), 10.0);
  CHECK(std::isnan(wide.to_vector<double>()[0]));  // outside the view: untouched
}
