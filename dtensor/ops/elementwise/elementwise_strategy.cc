// Registration of the elementwise family: per op its sharding strategy (rows for ONE mesh dim;
// the propagation engine expands them to the full mesh, adds the Partial rows the linearity
// flag allows, and costs them), meta function and local kernel.
//
// Pointwise rule with broadcasting: output dim d can be sharded when every input either has
// the same size at the aligned dim (sharded the same way) or broadcasts there (replicated).
// Example: add(a[4, 6], b[6]) rows: [S(0) | S(0), R], [S(1) | S(1), S(0)].
#include <array>
#include <string>
#include <tuple>

#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/detail/elementwise_backward.h"
#include "dtensor/ops/elementwise/detail/elementwise_impl.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// One row per output dim: [S(d) | S(aligned dim) or R per input].
StrategyRows pointwise_rows(const OpSchema& s, const Shape& out) {
  const int64_t out_ndim = static_cast<int64_t>(out.size());
  StrategyRows rows;
  for (int64_t d = 0; d < out_ndim; ++d) {
    Placements row = {Shard(d)};
    for (int64_t i = 0; i < s.num_inputs(); ++i) {
      const Shape& in = s.input(i).shape();
      const int64_t k = d - (out_ndim - static_cast<int64_t>(in.size()));
      row.push_back(k >= 0 && in[k] == out[d] ? Shard(k) : Replicate());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

enum class DTypeRule : uint8_t {
  kPromote,       // result_type of the tensor inputs (add, sub, mul, maximum, minimum, lerp)
  kFloatPromote,  // floating_result_type(result_type(...)) (div)
  kBool,          // comparisons, logical ops, float predicates (not differentiable)
  kSame,          // input 0's dtype (neg)
  kSameNotBool,   // input 0's dtype, bool refused (abs, relu, rounding, sign)
  kFloating,      // input 0's dtype, which must be floating (gelu, silu, frac)
  kFloatSame,     // floating_result_type(input 0) (exp, log, ...)
  kWhere,         // result_type(self, other) of where(condition, self, other)
  kArg,           // the static DType arg at index 1 (scalar forms, pow) or 0 (cast)
  kSelf,          // in-place: self's meta
};

// torch.result_type of inputs i and j (dtype and rank: the 0-d rule).
DType promoted(const OpSchema& s, int64_t i, int64_t j) {
  return result_type(s.input(i).dtype(), s.input(i).ndim(), s.input(j).dtype(), s.input(j).ndim());
}

// torch.result_type of all tensor inputs (folded pairwise with the 0-d rule).
DType promoted_all(const OpSchema& s) {
  DType d = s.input(0).dtype();
  int64_t ndim = s.input(0).ndim();
  for (int64_t i = 1; i < s.num_inputs(); ++i) {
    d = result_type(d, ndim, s.input(i).dtype(), s.input(i).ndim());
    ndim = std::max(ndim, s.input(i).ndim());
  }
  return d;
}

DType out_dtype(const OpSchema& s, DTypeRule rule, int64_t dtype_arg) {
  switch (rule) {
    case DTypeRule::kPromote:
      return promoted_all(s);
    case DTypeRule::kFloatPromote:
      return floating_result_type(promoted_all(s));
    case DTypeRule::kBool:
      return DType::kBool;
    case DTypeRule::kSame:
    case DTypeRule::kSelf:
      return s.input(0).dtype();
    case DTypeRule::kSameNotBool:
      // In meta, so that every rank raises it (ranks outside the mesh run no kernel).
      DT_CHECK(s.input(0).dtype() != DType::kBool,
               "[%s] not supported for bool tensors (argument self)", s.name());
      return s.input(0).dtype();
    case DTypeRule::kFloating:
      DT_CHECK(is_floating(s.input(0).dtype()),
               "[%s] argument self has dtype %s, expected a floating dtype", s.name(),
               dtype_name(s.input(0).dtype()));
      return s.input(0).dtype();
    case DTypeRule::kFloatSame:
      return floating_result_type(s.input(0).dtype());
    case DTypeRule::kWhere:
      DT_CHECK(s.input(0).dtype() == DType::kBool, "[%s] argument condition must be bool, got %s",
               s.name(), dtype_name(s.input(0).dtype()));
      return promoted(s, 1, 2);
    case DTypeRule::kArg:
      return s.arg<DType>(dtype_arg);
  }
  return s.input(0).dtype();
}

using Locals = absl::Span<const Tensor>;
using PointwiseKernel = Tensor (*)(const KernelContext& ctx, Locals in);

enum class Monotone : uint8_t { kNone, kIncreasing, kDecreasing };

// The Partial(max/min) rows of an op whose value is a monotone function of its last input
// alone (PointwiseDef::monotone): [P(max) | P(max)], [P(min) | P(min)], crossed for a
// decreasing one. copy_'s self, overwritten, keeps the output's: [P(max) | P(max), P(max)].
void add_monotone_rows(StrategyRows& rows, Monotone m, int num_inputs) {
  if (m == Monotone::kNone) return;
  const Placement pmax = Partial(ReduceOp::kMax), pmin = Partial(ReduceOp::kMin);
  const bool up = m == Monotone::kIncreasing;
  for (const Placement& in : {pmax, pmin}) {
    Placements row(static_cast<size_t>(num_inputs) + 1, up == (in == pmax) ? pmax : pmin);
    row.back() = in;
    rows.push_back(std::move(row));
  }
}

// copy_ into a Partial self: linear only when the values are not rounded differently per rank
// (a float src into an integer or bool self would truncate each rank's partial value).
void check_partial_copy(const OpSchema& s) {
  const DType self = s.input(0).dtype(), src = s.input(1).dtype();
  if (self == src || (is_floating(self) && is_floating(src))) return;
  DT_CHECK(!s.input(0).has_partial(),
           "[copy_] self is Partial (%s) of dtype %s and src has dtype %s: converting each "
           "rank's partial value is not exact (expected self reduced first, or src of self's "
           "dtype)",
           placements_str(s.input(0).placements()), dtype_name(self), dtype_name(src));
}

struct PointwiseDef {
  const char* name;
  int num_inputs;
  Linearity linearity;
  DTypeRule dtype;
  PointwiseKernel kernel;
  int static_argnum = 0;  // args before it are runtime scalars
  int dtype_arg = 1;      // index of the DType arg for DTypeRule::kArg
  bool inplace = false;
  // A gradient op (gelu_backward): inputs (grad, x) of one shape and dtype, no broadcasting,
  // not differentiated again (no double backward).
  bool grad_op = false;
  const char* grad_input = "self";  // the name of a gradient op's second input
  // Extra argument checks in meta (so every rank raises them, ranks outside the mesh too).
  void (*check)(const OpSchema& s) = nullptr;
  bool differentiable = true;  // false: bitwise ops (comparisons and grad ops never are)
  bool converts = false;       // in place: any dtype of `other` is written into self (copy_)
  int integer_args = 0;        // samples: integer inputs in [0, 100) (bitwise ops)
  // Ops whose value is a function f of their last input alone (unary ops; copy_, whose self
  // is overwritten; zero_, constant), f monotone over the whole extended real line (+-inf
  // included, no NaN made from a non-NaN): f(max x_i) = max f(x_i), so Partial(max/min)
  // passes through a non-decreasing f and swaps kind through a non-increasing one (neg), with
  // no communication. Ops undefined somewhere (log, sqrt: a rank's partial may be -inf) are
  // not monotone here. The Partial(sum/avg) rows come from `linearity`.
  Monotone monotone = Monotone::kNone;
  // Input names other than the defaults (self, other / tensor1, tensor2), e.g. lerp's end.
  std::array<const char*, 3> input_names{};
  // A binary op non-decreasing in each input with the other fixed, over the extended reals
  // (logaddexp): f(max a_i, b) = max f(a_i, b), so one Partial(max/min) input passes through
  // with the other replicated, [P(max) | P(max), R] and [P(max) | R, P(max)] (PyTorch's
  // monotonic binary rules). Both Partial would not: max f(a_i, b_i) is not f(max a, max b).
  bool monotone_each = false;
  // With monotone_each: non-increasing in the second input instead (sub): a Partial(max) there
  // gives Partial(min), [P(min) | R, P(max)].
  bool decreasing_other = false;
};

// The rows of PointwiseDef::monotone_each for a binary op (in place: self's Partial only).
void add_monotone_each_rows(StrategyRows& rows, bool inplace, bool decreasing_other) {
  const Placement max = Partial(ReduceOp::kMax), min = Partial(ReduceOp::kMin);
  for (const Placement& p : {max, min}) {
    rows.push_back({p, p, Replicate()});
    const Placement out = !decreasing_other ? p : p == max ? min : max;
    if (!inplace) rows.push_back({out, Replicate(), p});
  }
}

// Samples: even/uneven/empty shards, broadcasting for the binary ops; positive values where
// the op needs them (division, log, sqrt); the runtime scalar 2 and the static result dtype.
std::vector<OpSample> pointwise_samples(const PointwiseDef& def, int64_t w) {
  const std::string_view name = def.name;
  // Positive for division (fmod, remainder: away from their jumps at zero), logs (not
  // logaddexp, defined everywhere), roots and the real powers of pow.Tensor.
  const bool positive = name.starts_with("div") || name.starts_with("rdiv") ||
                        (name.starts_with("log") && name != "logaddexp") || name == "sqrt" ||
                        name == "rsqrt" || name == "reciprocal" || name.starts_with("fmod") ||
                        name.starts_with("remainder") || name == "pow.Tensor" || name == "addcdiv";
  // tan: inside (-pi/2, pi/2), away from its poles; erfinv, asin, acos, atanh: inside
  // (-1, 1); acosh: above 1, away from its infinite slope there.
  const bool unit = name == "erfinv" || name == "asin" || name == "acos" || name == "atanh";
  // relu6: both kinks (0 and 6) and beyond.
  const double bound = name == "tan" ? 1.2 : unit ? 0.9 : name == "relu6" ? 8 : 5;
  const double low = name == "acosh" ? 1.5 : positive ? 1 : -bound;
  const double high = bound;
  auto in = [&](Shape shape) {
    return def.integer_args ? detail::sample(std::move(shape), kInt64, 0, 100)
                            : detail::sample(std::move(shape), kFloat64, low, high);
  };
  ArgList args;
  if (name == "clamp") {
    args = {-1.0, 2.0, kFloat64};
  } else if (name == "nan_to_num") {
    args = {0.0, 1.0, -1.0};
  } else if (name == "lerp.Scalar" || name == "addcmul" || name == "addcdiv" ||
             name == "masked_fill") {
    args = {0.7};
  } else if (def.dtype == DTypeRule::kArg && def.static_argnum == 1) {
    args = {2.0, kFloat64};
  } else if (def.dtype == DTypeRule::kBool && def.num_inputs == 1) {
    args = {2.0, kBool};
  } else if (name == "zero_") {
    args = {};
  } else if (def.dtype == DTypeRule::kSelf && def.num_inputs == 1) {
    args = {2.0};
  } else if (name == "cast") {
    args = {kFloat32};
  } else if (name == "gelu" || name == "gelu_backward") {
    args = {int64_t{0}};
  } else if (name == "softplus") {
    args = {2.0, 5.0};  // beta, threshold: beta x crosses the threshold inside [-5, 5]
  } else if (name == "elu") {
    args = {0.7};
  } else if (name == "celu") {
    args = {1.5};
  } else if (name == "leaky_relu") {
    args = {0.2};
  }
  std::vector<OpSample> out;
  std::vector<std::pair<Shape, Shape>> shapes = {
      {{3 * w + 1, 5}, {3 * w + 1, 5}}, {{4, 2 * w}, {2 * w}}, {{1, 3}, {1, 3}}};
  if (def.grad_op) shapes[1].second = shapes[1].first;
  for (const auto& [a, b] : shapes) {
    OpSample sm{{in(a)}, args};
    if (def.dtype == DTypeRule::kWhere) {
      sm.inputs = {detail::sample(a, kBool, 0, 1), in(a), in(b)};
    } else if (name == "masked_fill") {
      sm.inputs.push_back(detail::sample(b, kBool, 0, 1));
    } else {
      for (int i = 1; i < def.num_inputs; ++i) sm.inputs.push_back(in(b));
    }
    // xlogy: self in [-5, 5] (zeros included), other positive (log's domain).
    if (name == "xlogy") sm.inputs[1] = detail::sample(b, kFloat64, 1, 5);
    out.push_back(std::move(sm));
  }
  return out;
}

void add_pointwise(Registry& reg, const PointwiseDef& def) {
  OpInfo info;
  info.name = def.name;
  if (def.dtype == DTypeRule::kWhere) {
    info.input_names = {"condition", "self", "other"};
  } else if (def.grad_op) {
    info.input_names = {"grad", def.grad_input};
  } else if (def.num_inputs == 3) {
    info.input_names = {"self", "tensor1", "tensor2"};
  } else {
    info.input_names = {"self", "other"};
    info.input_names.resize(def.num_inputs);
  }
  if (def.input_names[0] != nullptr) {
    info.input_names.assign(def.input_names.begin(), def.input_names.begin() + def.num_inputs);
  }
  info.schema_info.static_argnum = def.static_argnum;
  info.linearity = def.linearity;
  info.inplace = def.inplace;
  const DTypeRule rule = def.dtype;
  const int dtype_arg = def.dtype_arg;
  const int num_inputs = def.num_inputs;
  const bool grad_op = def.grad_op;
  const auto check = def.check;
  info.meta = [rule, dtype_arg, num_inputs, grad_op, check,
               converts = def.converts](const OpSchema& s) {
    DT_CHECK(s.num_inputs() == num_inputs, "[%s] expected %d DTensor inputs, got %d", s.name(),
             num_inputs, s.num_inputs());
    if (check) check(s);
    const Shape shape = detail::broadcast_inputs(s);
    if (grad_op) {
      DT_CHECK(s.input(0).shape() == s.input(1).shape() &&
                   s.input(0).dtype() == s.input(1).dtype() && is_floating(s.input(0).dtype()),
               "[%s] grad (%s, %s) and %s (%s, %s) must have one shape and one floating dtype",
               s.name(), shape_str(s.input(0).shape()), dtype_name(s.input(0).dtype()),
               s.op().input_name(1), shape_str(s.input(1).shape()), dtype_name(s.input(1).dtype()));
    }
    if (rule == DTypeRule::kSelf) {
      DT_CHECK(shape == s.input(0).shape(),
               "[%s] argument other with shape %s does not broadcast to self's shape %s", s.name(),
               shape_str(s.input(1).shape()), shape_str(s.input(0).shape()));
      if (s.num_inputs() > 1 && !converts) {
        const DType result = promoted(s, 0, 1);
        DT_CHECK(can_cast(result, s.input(0).dtype()),
                 "[%s] result dtype %s cannot be written into self of dtype %s", s.name(),
                 dtype_name(result), dtype_name(s.input(0).dtype()));
      }
      return OutputMetas{s.input(0).meta()};
    }
    return OutputMetas{TensorMeta(shape, out_dtype(s, rule, dtype_arg))};
  };
  // A monotone op of several inputs must be an overwrite of self by its last (copy_): the
  // rows would be wrong for add, monotone in each input but not max-preserving in both.
  DT_CHECK(def.monotone == Monotone::kNone || def.num_inputs == 1 ||
               (def.inplace && def.converts && def.num_inputs == 2),
           "[%s] monotone rows are for an op whose value depends on one input", def.name);
  DT_CHECK(!def.monotone_each || def.num_inputs == 2, "[%s] monotone_each rows are for a binary op",
           def.name);
  info.strategy = [monotone = def.monotone, monotone_each = def.monotone_each,
                   inplace = def.inplace, decreasing_other = def.decreasing_other,
                   num_inputs](const OpSchema& s) {
    StrategyRows rows = pointwise_rows(s, detail::broadcast_inputs(s));
    add_monotone_rows(rows, monotone, num_inputs);
    if (monotone_each) add_monotone_each_rows(rows, inplace, decreasing_other);
    return rows;
  };
  info.kernel = single_output(def.kernel);
  info.differentiable = def.dtype != DTypeRule::kBool && !def.grad_op && def.differentiable;
  const detail::PointwiseGrad grad = detail::pointwise_grad(def.name);
  info.backward = grad.backward;
  info.saved_inputs = grad.saved_inputs;
  info.saved_outputs = grad.saved_outputs;
  info.samples = [def](int64_t w) { return pointwise_samples(def, w); };
  reg.add(std::move(info));
}

// Meta checks of the pointwise math ops (elementwise_math.cc raises the same for tensors).
void check_number(const OpSchema& s) {  // fmod, remainder: bool refused
  const DType d = promoted_all(s);
  DT_CHECK(d != DType::kBool, "[%s] argument self has dtype %s, expected a number type", s.name(),
           dtype_name(d));
}
void check_self_number(const OpSchema& s) {  // clamp: bool refused
  DT_CHECK(s.input(0).dtype() != DType::kBool,
           "[%s] argument self has dtype bool, expected a number type", s.name());
}
void check_integral(const OpSchema& s) {  // bitwise ops
  const DType d = promoted_all(s);
  DT_CHECK(!is_floating(d), "[%s] argument self has dtype %s, expected an integer or bool dtype",
           s.name(), dtype_name(d));
}
void check_all_floating(const OpSchema& s) {  // hypot, lerp
  for (int64_t i = 0; i < s.num_inputs(); ++i) {
    DT_CHECK(is_floating(s.input(i).dtype()),
             "[%s] argument %s has dtype %s, expected a floating dtype", s.name(),
             s.op().input_name(i), dtype_name(s.input(i).dtype()));
  }
}
void check_floating_promoted(const OpSchema& s) {  // logaddexp
  const DType d = promoted_all(s);
  DT_CHECK(is_floating(d), "[%s] argument self has dtype %s, expected a floating dtype", s.name(),
           dtype_name(d));
}
void check_mask(const OpSchema& s) {  // masked_fill
  DT_CHECK(s.input(1).dtype() == DType::kBool, "[%s] argument mask has dtype %s, expected bool",
           s.name(), dtype_name(s.input(1).dtype()));
  DT_CHECK(detail::broadcast_inputs(s) == s.input(0).shape(),
           "[%s] mask of shape %s does not broadcast to self's shape %s", s.name(),
           shape_str(s.input(1).shape()), shape_str(s.input(0).shape()));
}
void check_float_division(const OpSchema& s) {  // addcdiv
  DT_CHECK(is_floating(promoted(s, 1, 2)),
           "[%s] integer division of tensor1 (%s) by tensor2 (%s) is not supported (use a "
           "floating dtype)",
           s.name(), dtype_name(s.input(1).dtype()), dtype_name(s.input(2).dtype()));
}

// fmod / remainder of DTensors: an integer zero divisor is raised on every rank that may hold
// different divisors (the data-dependent error rule), then the local op runs.
// (The divisor is scanned once: the kernel then runs without the Tensor form's own check.)
template <bool kFmod>
Tensor mod_kernel(const KernelContext& c, Locals l) {
  const char* op = kFmod ? "fmod" : "remainder";
  const DType dt = result_type(l[0], l[1]);
  check_on_all_ranks(c.input_spec(1), detail::integer_division_error(op, l[1], dt));
  return detail::binary_op(op, kFmod ? detail::BinaryOp::kFmod : detail::BinaryOp::kRemainder, l[0],
                           l[1], dt);
}

// glu: a * sigmoid(b) of x's two halves along dim (arg 0, static). The glu dim must be whole
// on each rank (a shard of x is a block of one half or of both, not matching blocks of each;
// PyTorch's DTensor has no glu rule to follow); every other dim keeps its shard, uneven and
// empty shards included, as softmax's. Not linear: a Partial input is reduced first.
void register_glu(Registry& reg) {
  OpInfo info = detail::make_op("glu", {"self"});
  info.meta = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    DT_CHECK(n > 0, "[glu] glu does not support scalars because halving size must be even");
    const int64_t d = normalize_dim(s.arg<int64_t>(0), n, "glu");
    Shape shape = s.input(0).shape();
    DT_CHECK(shape[d] % 2 == 0, "[glu] halving dimension must be even, but dimension %d is size %d",
             d, shape[d]);
    DT_CHECK(is_floating(s.input(0).dtype()),
             "[glu] argument self has dtype %s, expected a floating dtype",
             dtype_name(s.input(0).dtype()));
    shape[d] /= 2;
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  info.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    return detail::rows_all_but(n, normalize_dim(s.arg<int64_t>(0), n, "glu"), 2);
  };
  info.kernel =
      single_output([](const KernelContext& c, Locals l) { return glu(l[0], c.arg<int64_t>(0)); });
  const detail::PointwiseGrad grad = detail::pointwise_grad("glu");
  info.backward = grad.backward;
  info.saved_inputs = grad.saved_inputs;
  // Even, uneven and empty shards of the other dims; the glu dim first, last and inner.
  info.samples = [](int64_t w) {
    const auto call = [](Shape shape, int64_t dim) {
      return OpSample{{detail::sample(std::move(shape))}, {dim}};
    };
    return std::vector<OpSample>{call({3 * w + 1, 4}, 1), call({6, 3 * w + 1}, 0),
                                 call({2, 2 * w + 1, 4}, -1), call({2, 4, 2 * w + 1}, 1),
                                 call({detail::short_size(w), 6}, -1)};
  };
  reg.add(std::move(info));
}

}  // namespace

// Kernels: a tensor op on the local inputs, a scalar op on input 0 and the runtime scalar arg 0.
#define DT_BINARY(fn) [](const KernelContext&, Locals l) { return fn(l[0], l[1]); }
#define DT_SCALAR(fn) [](const KernelContext& c, Locals l) { return fn(l[0], c.scalar(0)); }
#define DT_UNARY(fn) [](const KernelContext&, Locals l) { return fn(l[0]); }

void register_elementwise_ops(Registry& reg) {
  using L = Linearity;
  using D = DTypeRule;
  using M = Monotone;
  // Tensor-tensor arithmetic: Partial passes through add/sub (both sides), mul (one side),
  // div (numerator).
  // add is increasing in each input: one Partial(max/min) input with the other replicated passes
  // (max(a_i) + b = max(a_i + b), rounding included), as PyTorch 2.15 keeps P(max) + R.
  add_pointwise(reg, {.name = "add",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kPromote,
                      .kernel = DT_BINARY(add),
                      .monotone_each = true});
  add_pointwise(reg, {.name = "sub",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kPromote,
                      .kernel = DT_BINARY(sub),
                      .monotone_each = true,
                      .decreasing_other = true});
  add_pointwise(reg, {"mul", 2, L::kMultilinear, D::kPromote, DT_BINARY(mul)});
  add_pointwise(reg, {"div", 2, L::kLinearInFirst, D::kFloatPromote, DT_BINARY(div)});
  add_pointwise(reg, {"maximum", 2, L::kNone, D::kPromote, DT_BINARY(maximum)});
  add_pointwise(reg, {"minimum", 2, L::kNone, D::kPromote, DT_BINARY(minimum)});
  add_pointwise(reg, {"eq", 2, L::kNone, D::kBool, DT_BINARY(eq)});
  add_pointwise(reg, {"ne", 2, L::kNone, D::kBool, DT_BINARY(ne)});
  add_pointwise(reg, {"lt", 2, L::kNone, D::kBool, DT_BINARY(lt)});
  add_pointwise(reg, {"le", 2, L::kNone, D::kBool, DT_BINARY(le)});
  add_pointwise(reg, {"gt", 2, L::kNone, D::kBool, DT_BINARY(gt)});
  add_pointwise(reg, {"ge", 2, L::kNone, D::kBool, DT_BINARY(ge)});
  add_pointwise(reg, {"where", 3, L::kNone, D::kWhere,
                      [](const KernelContext&, Locals l) { return where(l[0], l[1], l[2]); }});

  // Tensor-scalar forms: args (scalar [runtime], result dtype [static]). Scaling is linear;
  // adding a scalar to a Partial would add it once per rank, so it is not.
  add_pointwise(reg, {"add.Scalar", 1, L::kNone, D::kArg, DT_SCALAR(add), 1});
  add_pointwise(reg, {"sub.Scalar", 1, L::kNone, D::kArg, DT_SCALAR(sub), 1});
  add_pointwise(reg, {"rsub.Scalar", 1, L::kNone, D::kArg,
                      [](const KernelContext& c, Locals l) { return c.scalar(0) - l[0]; }, 1});
  add_pointwise(reg, {"mul.Scalar", 1, L::kLinear, D::kArg, DT_SCALAR(mul), 1});
  add_pointwise(reg, {"div.Scalar", 1, L::kLinear, D::kArg, DT_SCALAR(div), 1});
  add_pointwise(reg, {"rdiv.Scalar", 1, L::kNone, D::kArg,
                      [](const KernelContext& c, Locals l) { return c.scalar(0) / l[0]; }, 1});
  add_pointwise(reg, {"eq.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(eq), 1});
  add_pointwise(reg, {"ne.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(ne), 1});
  add_pointwise(reg, {"lt.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(lt), 1});
  add_pointwise(reg, {"le.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(le), 1});
  add_pointwise(reg, {"gt.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(gt), 1});
  add_pointwise(reg, {"ge.Scalar", 1, L::kNone, D::kBool, DT_SCALAR(ge), 1});
  add_pointwise(reg, {"pow", 1, L::kNone, D::kArg, DT_SCALAR(pow), 1});

  // Unary ops.
  add_pointwise(reg, {.name = "neg",
                      .num_inputs = 1,
                      .linearity = L::kLinear,
                      .dtype = D::kSame,
                      .kernel = DT_UNARY(neg),
                      .monotone = M::kDecreasing});
  add_pointwise(reg, {"abs", 1, L::kNone, D::kSameNotBool, DT_UNARY(abs)});
  add_pointwise(reg, {.name = "relu",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(relu),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"silu", 1, L::kNone, D::kFloating, DT_UNARY(silu)});
  // arg 0: approximate (static).
  add_pointwise(reg, {"gelu", 1, L::kNone, D::kFloating, [](const KernelContext& c, Locals l) {
                        return gelu(l[0], static_cast<GeluApproximate>(c.arg<int64_t>(0)));
                      }});
  add_pointwise(reg, {.name = "exp",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(exp),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"log", 1, L::kNone, D::kFloatSame, DT_UNARY(log)});
  add_pointwise(reg, {"sqrt", 1, L::kNone, D::kFloatSame, DT_UNARY(sqrt)});
  add_pointwise(reg, {"rsqrt", 1, L::kNone, D::kFloatSame, DT_UNARY(rsqrt)});
  add_pointwise(reg, {.name = "sigmoid",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(sigmoid),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "tanh",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(tanh),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"sin", 1, L::kNone, D::kFloatSame, DT_UNARY(sin)});
  add_pointwise(reg, {"cos", 1, L::kNone, D::kFloatSame, DT_UNARY(cos)});
  add_pointwise(reg, {"tan", 1, L::kNone, D::kFloatSame, DT_UNARY(tan)});
  add_pointwise(reg, {.name = "erf",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(erf),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"erfinv", 1, L::kNone, D::kFloatSame, DT_UNARY(erfinv)});
  // Monotone over the whole extended line (Partial(max/min) pass through): sinh, atan, asinh,
  // log_sigmoid, hardsigmoid, selu increasing, erfc decreasing. asin / acosh / atanh are
  // monotone on their domains only (NaN outside), so they get no such rows.
  for (auto [name, kernel, monotone] :
       std::initializer_list<std::tuple<const char*, PointwiseKernel, Monotone>>{
           {"sinh", DT_UNARY(sinh), M::kIncreasing},
           {"cosh", DT_UNARY(cosh), M::kNone},
           {"asin", DT_UNARY(asin), M::kNone},
           {"acos", DT_UNARY(acos), M::kNone},
           {"atan", DT_UNARY(atan), M::kIncreasing},
           {"asinh", DT_UNARY(asinh), M::kIncreasing},
           {"acosh", DT_UNARY(acosh), M::kNone},
           {"atanh", DT_UNARY(atanh), M::kNone},
           {"erfc", DT_UNARY(erfc), M::kDecreasing},
           {"log_sigmoid", DT_UNARY(log_sigmoid), M::kIncreasing},
           {"hardsigmoid", DT_UNARY(hardsigmoid), M::kIncreasing},
           {"hardswish", DT_UNARY(hardswish), M::kNone},
           {"mish", DT_UNARY(mish), M::kNone},
           {"selu", DT_UNARY(selu), M::kIncreasing}}) {
    add_pointwise(reg, {.name = name,
                        .num_inputs = 1,
                        .linearity = L::kNone,
                        .dtype = D::kFloatSame,
                        .kernel = kernel,
                        .monotone = monotone});
  }
  // More activations (pointwise_math.h). relu6 is non-decreasing over the extended line with
  // NaN passing through, so Partial(max/min) pass. softplus, elu, celu and leaky_relu are
  // monotone for some parameters only (runtime values, not in the propagation cache key), so
  // a Partial input is reduced first. Args: the parameters (runtime).
  add_pointwise(reg, {.name = "relu6",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(relu6),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "softplus",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloating,
                      .kernel =
                          [](const KernelContext& c, Locals l) {
                            return softplus(l[0], c.scalar(0).to_double(), c.scalar(1).to_double());
                          },
                      .static_argnum = 2});
  add_pointwise(reg, {.name = "elu",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloating,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return elu(l[0], c.scalar(0).to_double()); },
                      .static_argnum = 1});
  add_pointwise(reg, {.name = "celu",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloating,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return celu(l[0], c.scalar(0).to_double()); },
                      .static_argnum = 1});
  add_pointwise(reg, {.name = "leaky_relu",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloating,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return leaky_relu(l[0], c.scalar(0).to_double()); },
                      .static_argnum = 1});
  register_glu(reg);
  add_pointwise(reg, {.name = "exp2",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(exp2),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "expm1",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kFloatSame,
                      .kernel = DT_UNARY(expm1),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"log1p", 1, L::kNone, D::kFloatSame, DT_UNARY(log1p)});
  add_pointwise(reg, {"log2", 1, L::kNone, D::kFloatSame, DT_UNARY(log2)});
  add_pointwise(reg, {"log10", 1, L::kNone, D::kFloatSame, DT_UNARY(log10)});
  add_pointwise(reg, {"reciprocal", 1, L::kNone, D::kFloatSame, DT_UNARY(reciprocal)});
  add_pointwise(reg, {.name = "floor",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(floor),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "ceil",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(ceil),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "round",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(round),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {.name = "trunc",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(trunc),
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"frac", 1, L::kNone, D::kFloating, DT_UNARY(frac)});
  // sign is not monotone on NaN (sign(NaN) = 0), so no Partial(max/min) rows.
  add_pointwise(reg, {"sign", 1, L::kNone, D::kSameNotBool, DT_UNARY(sign)});
  // More pointwise math (elementwise_math.cc). Scalar args are runtime values; the clamp
  // forms and fmod/remainder.Scalar carry their result dtype as the last (static) arg.
  add_pointwise(reg, {.name = "square",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSameNotBool,
                      .kernel = DT_UNARY(square)});
  add_pointwise(reg, {.name = "pow.Tensor",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = [](const KernelContext&, Locals l) { return pow(l[0], l[1]); }});
  add_pointwise(reg, {.name = "fmod",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = mod_kernel<true>,
                      .check = check_number});
  add_pointwise(reg, {.name = "remainder",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = mod_kernel<false>,
                      .check = check_number});
  add_pointwise(reg, {.name = "fmod.Scalar",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kArg,
                      .kernel = DT_SCALAR(fmod),
                      .static_argnum = 1,
                      .check = check_number});
  add_pointwise(reg, {.name = "remainder.Scalar",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kArg,
                      .kernel = DT_SCALAR(remainder),
                      .static_argnum = 1,
                      .check = check_number});
  add_pointwise(reg, {"atan2", 2, L::kNone, D::kFloatPromote, DT_BINARY(atan2)});
  add_pointwise(reg, {.name = "hypot",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = DT_BINARY(hypot),
                      .check = check_all_floating});
  // logaddexp: increasing in each input (Partial(max/min) in one, the other replicated, passes).
  // xlogy is not linear in self (xlogy(0, 0) = 0, but shares 1 and -1 give -inf + inf = NaN),
  // copysign in neither input: a Partial input is reduced first.
  add_pointwise(reg, {.name = "logaddexp",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = DT_BINARY(logaddexp),
                      .check = check_floating_promoted,
                      .monotone_each = true});
  add_pointwise(reg, {"xlogy", 2, L::kNone, D::kFloatPromote, DT_BINARY(xlogy)});
  add_pointwise(reg, {"copysign", 2, L::kNone, D::kFloatPromote, DT_BINARY(copysign)});
  // args (min, max, dtype) and (bound, dtype).
  add_pointwise(reg, {.name = "clamp",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kArg,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return clamp(l[0], c.scalar(0), c.scalar(1)); },
                      .static_argnum = 2,
                      .dtype_arg = 2,
                      .check = check_self_number});
  add_pointwise(reg, {.name = "clamp_min",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kArg,
                      .kernel = DT_SCALAR(clamp_min),
                      .static_argnum = 1,
                      .check = check_self_number});
  add_pointwise(reg, {.name = "clamp_max",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kArg,
                      .kernel = DT_SCALAR(clamp_max),
                      .static_argnum = 1,
                      .check = check_self_number});
  add_pointwise(reg,
                {.name = "clamp.Tensor",
                 .num_inputs = 3,
                 .linearity = L::kNone,
                 .dtype = D::kPromote,
                 .kernel = [](const KernelContext&, Locals l) { return clamp(l[0], l[1], l[2]); },
                 .check = check_self_number,
                 .input_names = {"self", "min", "max"}});
  // args (nan, posinf, neginf): the values to write, resolved by the caller.
  add_pointwise(reg, {.name = "nan_to_num",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSame,
                      .kernel =
                          [](const KernelContext& c, Locals l) {
                            return nan_to_num(l[0], c.scalar(0).to_double(),
                                              c.scalar(1).to_double(), c.scalar(2).to_double());
                          },
                      .static_argnum = 3});
  add_pointwise(reg, {"isnan", 1, L::kNone, D::kBool, DT_UNARY(isnan)});
  add_pointwise(reg, {"isinf", 1, L::kNone, D::kBool, DT_UNARY(isinf)});
  add_pointwise(reg, {"isposinf", 1, L::kNone, D::kBool, DT_UNARY(isposinf)});
  add_pointwise(reg, {"isneginf", 1, L::kNone, D::kBool, DT_UNARY(isneginf)});
  add_pointwise(reg, {"isfinite", 1, L::kNone, D::kBool, DT_UNARY(isfinite)});
  add_pointwise(reg, {"logical_not", 1, L::kNone, D::kBool, DT_UNARY(logical_not)});
  add_pointwise(reg, {"logical_and", 2, L::kNone, D::kBool, DT_BINARY(logical_and)});
  add_pointwise(reg, {"logical_or", 2, L::kNone, D::kBool, DT_BINARY(logical_or)});
  add_pointwise(reg, {"logical_xor", 2, L::kNone, D::kBool, DT_BINARY(logical_xor)});
  for (const auto& [name, kernel] :
       {std::pair<const char*, PointwiseKernel>{"bitwise_and", DT_BINARY(bitwise_and)},
        {"bitwise_or", DT_BINARY(bitwise_or)},
        {"bitwise_xor", DT_BINARY(bitwise_xor)}}) {
    add_pointwise(reg, {.name = name,
                        .num_inputs = 2,
                        .linearity = L::kNone,
                        .dtype = D::kPromote,
                        .kernel = kernel,
                        .check = check_integral,
                        .differentiable = false,
                        .integer_args = 1});
  }
  add_pointwise(reg, {.name = "bitwise_not",
                      .num_inputs = 1,
                      .linearity = L::kNone,
                      .dtype = D::kSame,
                      .kernel = DT_UNARY(bitwise_not),
                      .check = check_integral,
                      .differentiable = false,
                      .integer_args = 1});
  // arg 0: value (runtime).
  add_pointwise(reg, {.name = "masked_fill",
                      .num_inputs = 2,
                      .linearity = L::kNone,
                      .dtype = D::kSame,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return masked_fill(l[0], l[1], c.scalar(0)); },
                      .static_argnum = 1,
                      .check = check_mask,
                      .input_names = {"self", "mask"}});
  // lerp with a scalar weight is linear in (start, end) together: [P | P, P].
  add_pointwise(reg, {.name = "lerp.Scalar",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kPromote,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return lerp(l[0], l[1], c.scalar(0)); },
                      .static_argnum = 1,
                      .check = check_all_floating,
                      .input_names = {"self", "end"}});
  add_pointwise(reg,
                {.name = "lerp",
                 .num_inputs = 3,
                 .linearity = L::kNone,
                 .dtype = D::kPromote,
                 .kernel = [](const KernelContext&, Locals l) { return lerp(l[0], l[1], l[2]); },
                 .check = check_all_floating,
                 .input_names = {"self", "end", "weight"}});
  // arg 0: value (runtime).
  add_pointwise(reg, {.name = "addcmul",
                      .num_inputs = 3,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return addcmul(l[0], l[1], l[2], c.scalar(0)); },
                      .static_argnum = 1});
  add_pointwise(reg, {.name = "addcdiv",
                      .num_inputs = 3,
                      .linearity = L::kNone,
                      .dtype = D::kPromote,
                      .kernel = [](const KernelContext& c,
                                   Locals l) { return addcdiv(l[0], l[1], l[2], c.scalar(0)); },
                      .static_argnum = 1,
                      .check = check_float_division});

  // Their gradients, one fused kernel each (the backward formulas call them): linear in grad.
  add_pointwise(reg, {.name = "gelu_backward",
                      .num_inputs = 2,
                      .linearity = L::kLinearInFirst,
                      .dtype = D::kSame,
                      .kernel =
                          [](const KernelContext& c, Locals l) {
                            return gelu_backward(l[0], l[1],
                                                 static_cast<GeluApproximate>(c.arg<int64_t>(0)));
                          },
                      .grad_op = true});
  add_pointwise(reg, {.name = "silu_backward",
                      .num_inputs = 2,
                      .linearity = L::kLinearInFirst,
                      .dtype = D::kSame,
                      .kernel = DT_BINARY(silu_backward),
                      .grad_op = true});
  add_pointwise(reg, {.name = "sigmoid_backward",
                      .num_inputs = 2,
                      .linearity = L::kLinearInFirst,
                      .dtype = D::kSame,
                      .kernel = DT_BINARY(sigmoid_backward),
                      .grad_op = true,
                      .grad_input = "output"});
  add_pointwise(reg, {.name = "tanh_backward",
                      .num_inputs = 2,
                      .linearity = L::kLinearInFirst,
                      .dtype = D::kSame,
                      .kernel = DT_BINARY(tanh_backward),
                      .grad_op = true,
                      .grad_input = "output"});
  add_pointwise(
      reg, {"cast", 1, L::kNone, D::kArg,
            [](const KernelContext& c, Locals l) { return cast(l[0], c.arg<DType>(0)); }, 0, 0});

  // In place: self keeps its placements (the engine refuses strategies that would move it); the
  // kernel writes into the local self and returns it.
  add_pointwise(reg, {.name = "add_",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kSelf,
                      .kernel = DT_BINARY(add_),
                      .static_argnum = 0,
                      .dtype_arg = 1,
                      .inplace = true,
                      .monotone_each = true});
  add_pointwise(reg, {.name = "sub_",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kSelf,
                      .kernel = DT_BINARY(sub_),
                      .static_argnum = 0,
                      .dtype_arg = 1,
                      .inplace = true,
                      .monotone_each = true,
                      .decreasing_other = true});
  add_pointwise(reg, {"mul_", 2, L::kMultilinear, D::kSelf, DT_BINARY(mul_), 0, 1, true});
  add_pointwise(reg, {"div_", 2, L::kLinearInFirst, D::kSelf, DT_BINARY(div_), 0, 1, true});
  add_pointwise(reg, {"add_.Scalar", 1, L::kNone, D::kSelf, DT_SCALAR(add_), 1, 1, true});
  add_pointwise(reg, {"sub_.Scalar", 1, L::kNone, D::kSelf, DT_SCALAR(sub_), 1, 1, true});
  add_pointwise(reg, {"mul_.Scalar", 1, L::kLinear, D::kSelf, DT_SCALAR(mul_), 1, 1, true});
  add_pointwise(reg, {"div_.Scalar", 1, L::kLinear, D::kSelf, DT_SCALAR(div_), 1, 1, true});
  // Overwrites, in place: copy_ (src redistributed to self's placements, any dtype converted;
  // the identity on src, linear and increasing, so a Partial src fills a Partial self of any
  // of sum / avg / max / min), zero_ (zero is every Partial's zero: linear, and constant, so
  // monotone) and fill_ (a Partial self would have to be reduced first: refused, as in-place
  // ops are).
  add_pointwise(reg, {.name = "copy_",
                      .num_inputs = 2,
                      .linearity = L::kLinear,
                      .dtype = D::kSelf,
                      .kernel =
                          [](const KernelContext&, Locals l) {
                            Tensor self = l[0];
                            self.copy_(l[1]);
                            return self;
                          },
                      .inplace = true,
                      .check = check_partial_copy,
                      .converts = true,
                      .monotone = M::kIncreasing});
  add_pointwise(reg, {"fill_.Scalar", 1, L::kNone, D::kSelf, DT_SCALAR(fill_), 1, 1, true});
  add_pointwise(reg, {.name = "zero_",
                      .num_inputs = 1,
                      .linearity = L::kLinear,
                      .dtype = D::kSelf,
                      .kernel = DT_UNARY(zero_),
                      .inplace = true,
                      .monotone = M::kIncreasing});
}

#undef DT_BINARY
#undef DT_SCALAR
#undef DT_UNARY

}  // namespace dtensor
