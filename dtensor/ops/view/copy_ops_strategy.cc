// Registration of the copying shape ops of copy_ops.h: strategies (rows for ONE mesh dim),
// meta functions, local kernels and samples (the backward formulas are in
// copy_ops_backward.cc). They move data only (tril / triu write zeros, the same on every rank),
// so Partial inputs pass through.
//
// Rows: a dim the op leaves in place keeps its shard ([S(d) | S(d)]); a flipped, rolled or
// repeated dim has no row (replicated first), except repeat_interleave's dim where every shard
// maps onto its own repeats (repeat_keeps_shards). tril / triu keep every dim: a shard applies the
// diagonal shifted by its global offsets, diagonal + row offset - column offset, which selects
// exactly the elements of the full triangle it holds.
#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/detail/copy_ops.h"
#include "dtensor/ops/view/detail/copy_ops_backward.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

// Input dim d keeps its shard at output dim map[d] (-1: replicated first).
using DimMapFn = Shape (*)(const OpSchema& s);

Shape identity_map(const OpSchema& s) {
  Shape map(s.input(0).ndim());
  for (int64_t d = 0; d < s.input(0).ndim(); ++d) map[d] = d;
  return map;
}

// The identity map with the dims listed in arg `arg` replicated.
template <int kArg>
Shape all_but_listed(const OpSchema& s) {
  Shape map = identity_map(s);
  for (int64_t d : detail::distinct_dims(s.arg<Shape>(kArg), s.input(0).ndim(), s.name())) {
    map[d] = -1;
  }
  return map;
}

Shape repeat_map(const OpSchema& s) {
  const Shape& reps = s.arg<Shape>(0);
  const int64_t n = s.input(0).ndim();
  const int64_t lead = static_cast<int64_t>(reps.size()) - n;
  Shape map(n);
  for (int64_t d = 0; d < n; ++d) map[d] = reps[lead + d] == 1 ? lead + d : -1;
  return map;
}

// Whether a dim of n elements sharded as `p` (Shard(0) on the mesh dims that shard it, nested in
// mesh-dim order, torch.chunk at each level) has on every rank after repeat_interleave(r)
// exactly the repeats of its own elements: the output shard is [r * offset, r * (offset +
// size)). Then the repeated dim keeps its shard with no communication: k/v heads repeated for
// grouped-query attention when each rank's q heads map onto its own kv heads (Hk divisible by
// the ranks, or uneven but aligned: 3 heads x 2 on 4 ranks, [1, 1, 1, 0] -> [2, 2, 2, 0]).
bool repeat_aligned(int64_t n, int64_t r, IntSpan mesh_shape, PlacementSpan p) {
  const size_t nd = mesh_shape.size();
  const int64_t in_shape[] = {n}, out_shape[] = {n * r};
  Shape coord(nd, 0);
  for (bool more = true; more;) {
    const LocalShard in = compute_local_shape_and_offset(in_shape, mesh_shape, coord, p);
    const LocalShard out = compute_local_shape_and_offset(out_shape, mesh_shape, coord, p);
    if (out.offset[0] != r * in.offset[0] || out.shape[0] != r * in.shape[0]) return false;
    more = false;  // the next coordinate, the last mesh dim fastest
    for (size_t m = nd; m-- > 0;) {
      if (++coord[m] < mesh_shape[m]) {
        more = true;
        break;
      }
      coord[m] = 0;
    }
  }
  return true;
}

// Whether dim d (n elements before the repeat, n * r after) keeps its shard for the schema's
// input 0 (the repeated tensor, or its gradient: the condition is the same). A row is expanded
// on each mesh dim independently, so it is offered when every set of mesh dims is aligned; or
// when the set that shards d in the input now is and the op has a row for each of the input's
// other placements (`minmax_rows`: Partial(max / min) passes through): then taking the input as
// it is costs nothing and moves nothing, which the engine prefers to every other candidate
// (cost >= 0, more moves), so the unaligned combinations the row also expands to are never
// chosen. So on a dp x tp mesh 2 k/v heads sharded over tp 2 (not over all 4 ranks) stay so.
bool repeat_keeps_shards(const OpSchema& s, int64_t n, int64_t r, int64_t d, bool minmax_rows) {
  const DTensorSpec& in = s.input(0);
  const IntSpan mesh_shape = s.mesh().shape();
  const size_t nd = mesh_shape.size();
  bool every_set = true, now = false, kept_as_is = true;
  Placements current;
  for (size_t m = 0; m < nd; ++m) {
    const Placement& p = in.placement(static_cast<int64_t>(m));
    const bool sharded = p.is_shard(d);
    now = now || sharded;
    kept_as_is = kept_as_is && (minmax_rows || !p.is_partial() || p.reduce_op() == ReduceOp::kSum ||
                                p.reduce_op() == ReduceOp::kAvg);
    current.push_back(sharded ? Placement(Shard(0)) : Placement(Replicate()));
  }
  now = now && kept_as_is;
  if (now && repeat_aligned(n, r, mesh_shape, current)) return true;
  for (uint32_t set = 1; set < (1u << nd) && every_set; ++set) {
    Placements p;
    for (size_t m = 0; m < nd; ++m) {
      p.push_back((set >> m) & 1u ? Placement(Shard(0)) : Placement(Replicate()));
    }
    every_set = repeat_aligned(n, r, mesh_shape, p);
  }
  return every_set;
}

// repeat_interleave (args repeats, dim): every dim, the repeated one where repeat_keeps_shards.
Shape repeat_interleave_map(const OpSchema& s) {
  Shape map = identity_map(s);
  const int64_t r = s.arg<int64_t>(0);
  const int64_t d = detail::check_repeat_interleave(s.input(0).shape(), r, s.arg<int64_t>(1));
  if (!repeat_keeps_shards(s, s.input(0).shape()[d], r, d, /*minmax_rows=*/true)) map[d] = -1;
  return map;
}

// diagonal (args offset, dim1, dim2): the dims outside the plane, in order, then the diagonal.
Shape diagonal_map(const OpSchema& s) {
  const Shape& shape = s.input(0).shape();
  const detail::DiagonalDims dd =
      detail::diagonal_dims(shape, s.arg<int64_t>(0), s.arg<int64_t>(1), s.arg<int64_t>(2));
  Shape map(shape.size(), -1);
  int64_t next = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d != dd.dim1 && d != dd.dim2) map[d] = next++;
  }
  return map;
}

// diagonal_backward (grad; args input_shape, offset, dim1, dim2): grad's leading dims are the
// input's dims outside the plane; its last (the diagonal) is replicated first.
Shape diagonal_backward_map(const OpSchema& s) {
  const Shape& in = s.arg<Shape>(0);
  const detail::DiagonalDims dd =
      detail::diagonal_dims(in, s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3));
  Shape map(static_cast<size_t>(s.input(0).ndim()), -1);
  int64_t next = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d != dd.dim1 && d != dd.dim2) map[next++] = d;
  }
  return map;
}

struct CopyOpDef {
  const char* name;
  DimMapFn map_of;
  Tensor (*kernel)(const KernelContext& c, Locals l);
  std::vector<OpSample> (*samples)(int64_t w);
  BackwardFn backward;  // copy_ops_backward.cc (none: a gradient op)
  bool view = false;    // the output may alias the input (contiguous)
  // Argument checks in meta (every rank raises them) and the output shape when it is not the
  // input's (repeat).
  void (*check)(const OpSchema& s) = nullptr;
  Shape (*out_shape)(const OpSchema& s) = nullptr;
};

void check_roll(const OpSchema& s) {
  detail::check_roll_args(s.arg<Shape>(0), s.arg<Shape>(1));
}
void check_triangle(const OpSchema& s) {
  detail::check_triangle_input(s.name(), s.input(0).shape());
}
Shape repeat_out_shape(const OpSchema& s) {
  return detail::repeat_shape(s.input(0).shape(), s.arg<Shape>(0));
}
Shape repeat_interleave_out_shape(const OpSchema& s) {
  Shape out = s.input(0).shape();
  out[detail::check_repeat_interleave(out, s.arg<int64_t>(0), s.arg<int64_t>(1))] *=
      s.arg<int64_t>(0);
  return out;
}
Shape diagonal_out_shape(const OpSchema& s) {
  return detail::diagonal_shape(s.input(0).shape(), s.arg<int64_t>(0), s.arg<int64_t>(1),
                                s.arg<int64_t>(2));
}
// diagonal_backward: grad must have the diagonal's shape of the input.
Shape diagonal_backward_out_shape(const OpSchema& s) {
  const Shape& in = s.arg<Shape>(0);
  const Shape want =
      detail::diagonal_shape(in, s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3));
  DT_CHECK(s.input(0).shape() == want,
           "[diagonal_backward] grad has shape %s, expected %s (the diagonal of %s)",
           shape_str(s.input(0).shape()), shape_str(want), shape_str(in));
  return in;
}

void add_copy_op(Registry& reg, const CopyOpDef& def) {
  OpInfo op = detail::make_op(def.name, {"self"}, Linearity::kLinear);
  op.view = def.view;
  op.saved_inputs = 0;  // every formula needs the specs and args only
  op.meta = [check = def.check, out_shape = def.out_shape](const OpSchema& s) {
    if (check) check(s);
    if (out_shape) return OutputMetas{TensorMeta(out_shape(s), s.input(0).dtype())};
    return OutputMetas{s.input(0).meta()};
  };
  op.strategy = [map_of = def.map_of](const OpSchema& s) { return detail::mapped_rows(map_of(s)); };
  op.kernel = single_output(def.kernel);
  op.samples = def.samples;
  op.backward = def.backward;
  reg.add(std::move(op));
}

// ---- kernels -----------------------------------------------------------------------------------
template <bool kLower>
Tensor triangle_kernel(const KernelContext& c, Locals l) {
  const LocalShard shard = c.input_shard(0);
  const int64_t n = static_cast<int64_t>(shard.offset.size());
  const int64_t k = c.arg<int64_t>(0) + shard.offset[n - 2] - shard.offset[n - 1];
  return kLower ? tril(l[0], k) : triu(l[0], k);
}

// ---- samples: even, uneven and empty shards; dims the op moves and dims it keeps -------------
using detail::sample;
OpSample one(SampleInput in, ArgList args) {
  return OpSample{{std::move(in)}, std::move(args)};
}
std::vector<OpSample> plain_samples(int64_t w) {
  return {one(sample({3 * w + 1, 5}), {}), one(sample({2, 2 * w}), {}),
          one(sample({detail::short_size(w), 3}), {})};
}
std::vector<OpSample> flip_samples(int64_t w) {
  return {one(sample({3 * w + 1, 5, 2}), {Shape{0, 2}}), one(sample({4, 2 * w + 1}), {Shape{-2}}),
          one(sample({detail::short_size(w), 3}), {Shape{1}})};
}
std::vector<OpSample> roll_samples(int64_t w) {
  return {one(sample({3 * w + 1, 5}), {Shape{2}, Shape{0}}),
          one(sample({4, 2 * w + 1}), {Shape{-3, 1}, Shape{1, 0}}),
          one(sample({detail::short_size(w), 4}), {Shape{1}, Shape{1}})};
}
std::vector<OpSample> repeat_samples(int64_t w) {
  return {one(sample({3 * w + 1, 3}), {Shape{1, 2}}), one(sample({2, 3 * w + 1}), {Shape{2, 1, 1}}),
          one(sample({detail::short_size(w), 3}), {Shape{1, 2}})};
}
// The repeated dim keeps its shard when aligned: even (2w k/v heads, grouped-query attention's
// [B, Hk, S, D]), uneven or empty (w - 1 heads: aligned x2 and x3 on 4 ranks, not on 2).
std::vector<OpSample> repeat_interleave_samples(int64_t w) {
  const int64_t s = detail::short_size(w);
  return {one(sample({3 * w + 1, 3}), {int64_t{2}, int64_t{1}}),
          one(sample({2, 3 * w + 1}), {int64_t{3}, int64_t{0}}),
          one(sample({2 * w, 2}), {int64_t{2}, int64_t{-2}}),
          one(sample({s, 3}), {int64_t{2}, int64_t{1}}),
          one(sample({2, 2 * w, 3, 2}), {int64_t{2}, int64_t{1}}),
          one(sample({1, s, 2, 2}), {int64_t{3}, int64_t{1}}),
          one(sample({2, s, 2, 2}), {int64_t{2}, int64_t{1}})};
}
std::vector<OpSample> diagonal_samples(int64_t w) {
  const int64_t n = 3 * w + 1;
  return {one(sample({n, n + 2}), {int64_t{0}, int64_t{0}, int64_t{1}}),
          one(sample({2 * w, n, 5}), {int64_t{1}, int64_t{-1}, int64_t{1}}),
          one(sample({4, 3, n}), {int64_t{-1}, int64_t{0}, int64_t{1}}),
          one(sample({detail::short_size(w), 3, 4}), {int64_t{0}, int64_t{1}, int64_t{2}})};
}
std::vector<OpSample> diagonal_backward_samples(int64_t w) {
  const int64_t n = 3 * w + 1;
  return {one(sample({n}), {Shape{n, n + 2}, int64_t{0}, int64_t{0}, int64_t{1}}),
          one(sample({2 * w, n - 1}), {Shape{2 * w, n, n}, int64_t{1}, int64_t{-1}, int64_t{1}}),
          one(sample({detail::short_size(w), 3}),
              {Shape{detail::short_size(w), 3, 4}, int64_t{0}, int64_t{1}, int64_t{2}})};
}
std::vector<OpSample> triangle_samples(int64_t w) {
  const int64_t n = 3 * w + 1;
  return {one(sample({n, n + 2}), {int64_t{0}}), one(sample({2, n, 5}), {int64_t{-1}}),
          one(sample({5, n}), {int64_t{2}}),
          one(sample({detail::short_size(w), 3, 4}), {int64_t{0}})};
}

// repeat_interleave_backward (grad; args input shape, repeats, dim): repeat_interleave's
// gradient, each input element's the sum of its copies (grad's dim split into [n, repeats],
// summed over the repeats). Rows [S(e) | S(e)] for every dim, the repeated one where its shards
// are aligned (repeat_keeps_shards: the group sums of grouped-query attention's k/v heads stay
// on their ranks); linear, so Partial(sum / avg) gradients pass through (not max / min).
Shape repeat_interleave_backward_dims(const OpSchema& s, int64_t& d) {
  const Shape& in = s.arg<Shape>(0);
  d = detail::check_repeat_interleave(in, s.arg<int64_t>(1), s.arg<int64_t>(2));
  return in;
}

void register_repeat_interleave_backward(Registry& reg) {
  OpInfo op = detail::gradient_op("repeat_interleave_backward", {"grad"}, Linearity::kLinear);
  op.meta = [](const OpSchema& s) {
    int64_t d = 0;
    const Shape in = repeat_interleave_backward_dims(s, d);
    Shape want = in;
    want[d] *= s.arg<int64_t>(1);
    DT_CHECK(s.input(0).shape() == want,
             "[repeat_interleave_backward] grad has shape %s, expected %s (repeat_interleave of "
             "%s by %d along dim %d)",
             shape_str(s.input(0).shape()), shape_str(want), shape_str(in), s.arg<int64_t>(1), d);
    return OutputMetas{TensorMeta(in, s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    int64_t d = 0;
    const Shape in = repeat_interleave_backward_dims(s, d);
    StrategyRows rows;
    for (int64_t e = 0; e < static_cast<int64_t>(in.size()); ++e) {
      if (e != d || repeat_keeps_shards(s, in[d], s.arg<int64_t>(1), d, /*minmax_rows=*/false)) {
        rows.push_back({Shard(e), Shard(e)});
      }
    }
    return rows;
  };
  // Linear in grad: its gradient is repeat_interleave of the incoming one (create_graph).
  op.differentiable = true;
  op.backward = detail::repeat_interleave_backward_grad;
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    int64_t d = 0;
    repeat_interleave_backward_dims(c.schema(), d);
    const int64_t r = c.arg<int64_t>(1);
    const Shape out = c.output_shard(0).shape;
    if (r == 0 || shape_numel(out) == 0) {
      return zeros(out, TensorOptions(l[0].dtype(), l[0].device()));
    }
    Shape split = out;
    split.insert(split.begin() + d + 1, r);
    const int64_t dims[] = {d + 1};
    return sum(l[0].contiguous().reshape(split), dims);
  });
  op.samples = [](int64_t w) {
    const auto grad_of = [](Shape in, int64_t r, int64_t d) {
      Shape g = in;
      g[d] *= r;
      return OpSample{{sample(g)}, {in, r, d}};
    };
    const int64_t s = detail::short_size(w);
    return std::vector<OpSample>{grad_of({3 * w + 1, 3}, 2, 1), grad_of({2, 3 * w + 1}, 3, 0),
                                 grad_of({2 * w, 2}, 2, 0),     grad_of({2, 2 * w, 3, 2}, 2, 1),
                                 grad_of({1, s, 2, 2}, 3, 1),   grad_of({2, s, 2, 2}, 2, 1),
                                 grad_of({2, 3}, 0, 1)};
  };
  reg.add(std::move(op));
}

}  // namespace

void register_copy_ops(Registry& reg) {
  register_repeat_interleave_backward(reg);
  add_copy_op(reg,
              {"clone", identity_map, [](const KernelContext&, Locals l) { return l[0].clone(); },
               plain_samples, detail::copy_grad});
  add_copy_op(reg, {"contiguous", identity_map,
                    [](const KernelContext&, Locals l) { return l[0].contiguous(); }, plain_samples,
                    detail::copy_grad, /*view=*/true});
  // args (dims).
  add_copy_op(reg, {"flip", all_but_listed<0>,
                    [](const KernelContext& c, Locals l) { return flip(l[0], c.arg<Shape>(0)); },
                    flip_samples, detail::flip_grad});
  // args (shifts, dims), dims not empty (the flattened form is a composite).
  add_copy_op(reg, {"roll", all_but_listed<1>,
                    [](const KernelContext& c, Locals l) {
                      return roll(l[0], c.arg<Shape>(0), c.arg<Shape>(1));
                    },
                    roll_samples, detail::roll_grad, /*view=*/false, check_roll});
  // args (repeats).
  add_copy_op(reg,
              {"repeat", repeat_map,
               [](const KernelContext& c, Locals l) { return repeat(l[0], c.arg<Shape>(0)); },
               repeat_samples, detail::repeat_grad, /*view=*/false, nullptr, repeat_out_shape});
  // args (repeats, dim).
  add_copy_op(reg, {"repeat_interleave.self_int", repeat_interleave_map,
                    [](const KernelContext& c, Locals l) {
                      return repeat_interleave(l[0], c.arg<int64_t>(0), c.arg<int64_t>(1));
                    },
                    repeat_interleave_samples, detail::repeat_interleave_grad, /*view=*/false,
                    nullptr, repeat_interleave_out_shape});
  // args (offset, dim1, dim2); a copy (PyTorch's is a view).
  add_copy_op(
      reg, {"diagonal", diagonal_map,
            [](const KernelContext& c, Locals l) {
              return diagonal(l[0], c.arg<int64_t>(0), c.arg<int64_t>(1), c.arg<int64_t>(2));
            },
            diagonal_samples, detail::diagonal_grad, /*view=*/false, nullptr, diagonal_out_shape});
  // args (input shape, offset, dim1, dim2): grad written on the diagonal of zeros.
  add_copy_op(reg, {"diagonal_backward", diagonal_backward_map,
                    [](const KernelContext& c, Locals l) {
                      // This shard's input shape: the dims outside the plane as grad's shard
                      // has them (the plane is whole).
                      Shape in = c.arg<Shape>(0);
                      const Shape map = diagonal_backward_map(c.schema());
                      for (int64_t k = 0; k + 1 < l[0].dim(); ++k) in[map[k]] = l[0].size(k);
                      return diagonal_backward(l[0], in, c.arg<int64_t>(1), c.arg<int64_t>(2),
                                               c.arg<int64_t>(3));
                    },
                    diagonal_backward_samples, detail::diagonal_backward_grad, /*view=*/false,
                    nullptr, diagonal_backward_out_shape});
  // args (diagonal).
  add_copy_op(reg, {"tril", identity_map, triangle_kernel<true>, triangle_samples,
                    detail::tril_grad, /*view=*/false, check_triangle});
  add_copy_op(reg, {"triu", identity_map, triangle_kernel<false>, triangle_samples,
                    detail::triu_grad, /*view=*/false, check_triangle});
}

}  // namespace dtensor
