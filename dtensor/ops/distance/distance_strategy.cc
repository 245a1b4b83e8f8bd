// Registration of the distance family: cdist and its gradient op cdist_backward (meta, rows for
// ONE mesh dim — outputs then inputs —, kernels, samples, backward link). pairwise_distance and
// cosine_similarity are compositions (distance_dtensor.cc), not registered ops.
//
// cdist(x1 [*, P, M], x2 [*, R, M]; p) -> [*, P, R]:
//   batch dim b:  [S(b) | S(b), S(b)]
//   P of x1:      [S(-2) | S(-2), R]        (each rank its rows of x1 against all of x2)
//   R of x2:      [S(-1) | R, S(-2)]
//   M (p 0, 1):   [P(sum) | S(-1), S(-1)]   (sums of per-element terms)
//   M (p inf):    [P(max) | S(-1), S(-1)]   (an empty M shard gives 0, the identity of max |d|)
#include <cmath>
#include <vector>

#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/distance/detail/distance_backward.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

// Checks x1 [*, P, M] and x2 [*, R, M] specs (as cdist_geom does for tensors).
void check_pair(const OpSchema& s, int64_t i1, int64_t i2) {
  const Shape& a = s.input(i1).shape();
  const Shape& b = s.input(i2).shape();
  bool ok = a.size() >= 2 && a.size() == b.size() && a.back() == b.back() &&
            is_floating(s.input(i1).dtype()) && s.input(i1).dtype() == s.input(i2).dtype();
  for (size_t d = 0; ok && d + 2 < a.size(); ++d) ok = a[d] == b[d];
  DT_CHECK(ok,
           "[%s] expected floating x1 [*, P, M] and x2 [*, R, M] of one dtype and rank >= 2 with "
           "the same batch dims, got %s %s and %s %s",
           s.name(), shape_str(a), dtype_name(s.input(i1).dtype()), shape_str(b),
           dtype_name(s.input(i2).dtype()));
  const double p = s.arg<double>(0);
  DT_CHECK(p >= 0 && !std::isnan(p), "[%s] p must be >= 0, got %g", s.name(), p);
}

void register_cdist(Registry& r) {
  OpInfo op = detail::make_op("cdist", {"x1", "x2"});
  op.meta = [](const OpSchema& s) {
    check_pair(s, 0, 1);
    Shape shape = s.input(0).shape();
    shape.back() = s.input(1).shape()[shape.size() - 2];
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const double p = s.arg<double>(0);
    StrategyRows rows;
    for (int64_t b = 0; b < n - 2; ++b) rows.push_back({Shard(b), Shard(b), Shard(b)});
    rows.push_back({Shard(n - 2), Shard(n - 2), Replicate()});
    rows.push_back({Shard(n - 1), Replicate(), Shard(n - 2)});
    if (p == 0.0 || p == 1.0) rows.push_back({Partial(ReduceOp::kSum), Shard(n - 1), Shard(n - 1)});
    if (std::isinf(p)) rows.push_back({Partial(ReduceOp::kMax), Shard(n - 1), Shard(n - 1)});
    return rows;
  };
  op.kernel = single_output(
      [](const KernelContext& c, Locals l) { return cdist(l[0], l[1], c.arg<double>(0)); });
  op.backward = detail::cdist_grad;
  op.saved_inputs = 3u;
  op.saved_outputs = 1u;
  // Even, uneven and empty shards of each of B, P, R and M, every p form.
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t e = detail::short_size(w);
    const double inf = std::numeric_limits<double>::infinity();
    return std::vector<OpSample>{
        {{sample({2, 3 * w + 1, 3}), sample({2, 2 * w + 1, 3})}, {2.0}},
        {{sample({e, 4, 3 * w + 1}), sample({e, 5, 3 * w + 1})}, {1.0}},
        {{sample({3 * w + 1, 2}), sample({e, 2})}, {inf}},
        {{sample({4, e}), sample({3, e})}, {inf}},
        {{sample({2, 3, 2 * w + 1}), sample({2, 3 * w + 1, 2 * w + 1})}, {3.0}},
        {{sample({e, 3}), sample({2, 3})}, {0.0}},
        {{sample({3, 2 * w + 1}), sample({e, 2 * w + 1})}, {1.5}}};
  };
  r.add(std::move(op));
}

// cdist_backward(grad [*, P, R], x1 [*, P, M], x2 [*, R, M], dist [*, P, R]; p) -> [*, P, M]:
// batch dims alike; P: grad, x1, dist by rows; M: x1, x2 by columns (each column's gradient
// needs only its own differences and the whole distances); R: grad, x2, dist sharded leave each
// rank a partial sum over its j (Partial(sum)). Linear in grad.
void register_cdist_backward(Registry& r) {
  OpInfo op = detail::gradient_op("cdist_backward", {"grad", "x1", "x2", "cdist"});
  op.meta = [](const OpSchema& s) {
    check_pair(s, 1, 2);
    Shape dshape = s.input(1).shape();
    dshape.back() = s.input(2).shape()[dshape.size() - 2];
    DT_CHECK(s.input(0).shape() == dshape && s.input(3).shape() == dshape &&
                 s.input(0).dtype() == s.input(1).dtype() &&
                 s.input(3).dtype() == s.input(1).dtype(),
             "[cdist_backward] grad %s and cdist %s must have shape %s",
             shape_str(s.input(0).shape()), shape_str(s.input(3).shape()), shape_str(dshape));
    return OutputMetas{s.input(1).meta()};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(1).ndim();
    StrategyRows rows;
    for (int64_t b = 0; b < n - 2; ++b) {
      rows.push_back({Shard(b), Shard(b), Shard(b), Shard(b), Shard(b)});
    }
    const Placement rep = Replicate();
    rows.push_back({Shard(n - 2), Shard(n - 2), Shard(n - 2), rep, Shard(n - 2)});
    rows.push_back({Shard(n - 1), rep, Shard(n - 1), Shard(n - 1), rep});
    rows.push_back({Partial(ReduceOp::kSum), Shard(n - 1), rep, Shard(n - 2), Shard(n - 1)});
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    return detail::cdist_backward(l[0], l[1], l[2], l[3], c.arg<double>(0));
  });
  // The distances are drawn away from 0 (the formulas divide by them).
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t e = detail::short_size(w);
    const double inf = std::numeric_limits<double>::infinity();
    const auto call = [](int64_t b, int64_t p, int64_t rr, int64_t m, double pv) {
      Shape lead = b > 0 ? Shape{b} : Shape{};
      const auto with = [&](int64_t x, int64_t y) {
        Shape s = lead;
        s.push_back(x);
        s.push_back(y);
        return s;
      };
      return OpSample{{sample(with(p, rr)), sample(with(p, m)), sample(with(rr, m)),
                       sample(with(p, rr), kFloat64, 0.5, 3)},
                      {pv}};
    };
    return std::vector<OpSample>{call(2, 3 * w + 1, 2 * w + 1, 3, 2.0),
                                 call(e, 3, 4, 3 * w + 1, 1.0), call(0, e, 3 * w + 1, 2, inf),
                                 call(0, 3, e, 2 * w + 1, 3.0), call(2, 2, 3, e, 1.5)};
  };
  r.add(std::move(op));
}

}  // namespace

void register_distance_ops(Registry& registry) {
  register_cdist(registry);
  register_cdist_backward(registry);
}

}  // namespace dtensor
