// Sharding strategies of the elementwise family, written for ONE mesh dim (the propagation
// engine expands them to the full mesh, adds the Partial rows the linearity flag allows, and
// costs them).
//
// Pointwise rule with broadcasting: output dim d can be sharded when every input either has
// the same size at the aligned dim (sharded the same way) or broadcasts there (replicated).
// Example: add(a[4, 6], b[6]) rows: [S(0) | S(0), R], [S(1) | S(1), S(0)].
#include <string>

#include "dtensor/propagation/op_schema.h"
#include "ops/common/type_promotion.h"
#include "ops/register_all.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

// The broadcast shape of every input; names the argument that does not broadcast.
Shape broadcast_inputs(const OpSchema& s) {
  Shape out = s.input(0).shape();
  for (int64_t i = 1; i < s.num_inputs(); ++i) {
    const Shape& in = s.input(i).shape();
    const int64_t n = std::max(out.size(), in.size());
    Shape next(n);
    for (int64_t d = 0; d < n; ++d) {
      const int64_t a = d - (n - static_cast<int64_t>(out.size()));
      const int64_t b = d - (n - static_cast<int64_t>(in.size()));
      const int64_t sa = a >= 0 ? out[a] : 1, sb = b >= 0 ? in[b] : 1;
      DT_CHECK(sa == sb || sa == 1 || sb == 1,
               "[%s] cannot broadcast shapes %s and %s (argument %s)", s.name(), shape_str(out),
               shape_str(in), s.op().input_name(i));
      next[d] = sa == 1 ? sb : sa;
    }
    out = std::move(next);
  }
  return out;
}

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

// A 1-element tensor with the rank and dtype of `spec`, so dtype rules (including the 0-d rule
// of result_type) are those of the local ops. Only built on a propagation miss.
Tensor probe(const DTensorSpec& spec) {
  return empty(Shape(spec.ndim(), 1), spec.dtype());
}

enum class DTypeRule : uint8_t {
  kPromote,       // result_type of the tensor inputs (add, sub, mul, maximum, minimum)
  kFloatPromote,  // floating_result_type(result_type(...)) (div)
  kBool,          // comparisons
  kSame,          // input 0's dtype (neg, abs, relu, gelu, silu)
  kFloatSame,     // floating_result_type(input 0) (exp, log, ...)
  kWhere,         // result_type(self, other) of where(condition, self, other)
  kArg,           // the static DType arg at index 1 (scalar forms, pow) or 0 (cast)
  kSelf,          // in-place: self's meta
};

DType out_dtype(const OpSchema& s, DTypeRule rule, int64_t dtype_arg) {
  switch (rule) {
    case DTypeRule::kPromote:
      return result_type(probe(s.input(0)), probe(s.input(1)));
    case DTypeRule::kFloatPromote:
      return floating_result_type(result_type(probe(s.input(0)), probe(s.input(1))));
    case DTypeRule::kBool:
      return DType::kBool;
    case DTypeRule::kSame:
    case DTypeRule::kSelf:
      return s.input(0).dtype();
    case DTypeRule::kFloatSame:
      return floating_result_type(s.input(0).dtype());
    case DTypeRule::kWhere:
      DT_CHECK(s.input(0).dtype() == DType::kBool, "[%s] argument condition must be bool, got %s",
               s.name(), dtype_name(s.input(0).dtype()));
      return result_type(probe(s.input(1)), probe(s.input(2)));
    case DTypeRule::kArg:
      return s.arg<DType>(dtype_arg);
  }
  return s.input(0).dtype();
}

struct PointwiseDef {
  const char* name;
  int num_inputs;
  Linearity linearity;
  DTypeRule dtype;
  int static_argnum = 0;  // args before it are runtime scalars
  int dtype_arg = 1;      // index of the DType arg for DTypeRule::kArg
  bool inplace = false;
};

void add_pointwise(Registry& reg, const PointwiseDef& def) {
  OpInfo info;
  info.name = def.name;
  if (def.dtype == DTypeRule::kWhere) {
    info.input_names = {"condition", "self", "other"};
  } else {
    info.input_names = {"self", "other"};
    info.input_names.resize(def.num_inputs);
  }
  info.schema_info.static_argnum = def.static_argnum;
  info.linearity = def.linearity;
  info.inplace = def.inplace;
  const DTypeRule rule = def.dtype;
  const int dtype_arg = def.dtype_arg;
  const int num_inputs = def.num_inputs;
  info.meta = [rule, dtype_arg, num_inputs](const OpSchema& s) {
    DT_CHECK(s.num_inputs() == num_inputs, "[%s] expected %d DTensor inputs, got %d", s.name(),
             num_inputs, s.num_inputs());
    const Shape shape = broadcast_inputs(s);
    if (rule == DTypeRule::kSelf) {
      DT_CHECK(shape == s.input(0).shape(),
               "[%s] argument other with shape %s does not broadcast to self's shape %s", s.name(),
               shape_str(s.input(1).shape()), shape_str(s.input(0).shape()));
      if (s.num_inputs() > 1) {
        const DType promoted = result_type(probe(s.input(0)), probe(s.input(1)));
        DT_CHECK(can_cast(promoted, s.input(0).dtype()),
                 "[%s] result dtype %s cannot be written into self of dtype %s", s.name(),
                 dtype_name(promoted), dtype_name(s.input(0).dtype()));
      }
      return OutputMetas{s.input(0).meta()};
    }
    return OutputMetas{TensorMeta(shape, out_dtype(s, rule, dtype_arg))};
  };
  info.strategy = [](const OpSchema& s) { return pointwise_rows(s, broadcast_inputs(s)); };
  reg.add(std::move(info));
}

}  // namespace

void register_elementwise_ops(Registry& reg) {
  using L = Linearity;
  using D = DTypeRule;
  // Tensor-tensor arithmetic: Partial passes through add/sub (both sides), mul (one side),
  // div (numerator).
  add_pointwise(reg, {"add", 2, L::kLinear, D::kPromote});
  add_pointwise(reg, {"sub", 2, L::kLinear, D::kPromote});
  add_pointwise(reg, {"mul", 2, L::kMultilinear, D::kPromote});
  add_pointwise(reg, {"div", 2, L::kLinearInFirst, D::kFloatPromote});
  add_pointwise(reg, {"maximum", 2, L::kNone, D::kPromote});
  add_pointwise(reg, {"minimum", 2, L::kNone, D::kPromote});
  for (const char* cmp : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    add_pointwise(reg, {cmp, 2, L::kNone, D::kBool});
  }
  add_pointwise(reg, {"where", 3, L::kNone, D::kWhere});

  // Tensor-scalar forms: args (scalar [runtime], result dtype [static]). Scaling is linear;
  // adding a scalar to a Partial would add it once per rank, so it is not.
  add_pointwise(reg, {"add.Scalar", 1, L::kNone, D::kArg, 1});
  add_pointwise(reg, {"sub.Scalar", 1, L::kNone, D::kArg, 1});
  add_pointwise(reg, {"rsub.Scalar", 1, L::kNone, D::kArg, 1});
  add_pointwise(reg, {"mul.Scalar", 1, L::kLinear, D::kArg, 1});
  add_pointwise(reg, {"div.Scalar", 1, L::kLinear, D::kArg, 1});
  add_pointwise(reg, {"rdiv.Scalar", 1, L::kNone, D::kArg, 1});
  for (const char* cmp :
       {"eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar", "ge.Scalar"}) {
    add_pointwise(reg, {cmp, 1, L::kNone, D::kBool, 1});
  }
  add_pointwise(reg, {"pow", 1, L::kNone, D::kArg, 1});

  // Unary ops.
  add_pointwise(reg, {"neg", 1, L::kLinear, D::kSame});
  for (const char* op : {"abs", "relu", "silu"}) add_pointwise(reg, {op, 1, L::kNone, D::kSame});
  add_pointwise(reg, {"gelu", 1, L::kNone, D::kSame});  // arg 0: approximate (static)
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh"}) {
    add_pointwise(reg, {op, 1, L::kNone, D::kFloatSame});
  }
  add_pointwise(reg, {"cast", 1, L::kNone, D::kArg, 0, 0});

  // In place: self keeps its placements (the engine refuses strategies that would move it).
  add_pointwise(reg, {"add_", 2, L::kLinear, D::kSelf, 0, 1, true});
  add_pointwise(reg, {"sub_", 2, L::kLinear, D::kSelf, 0, 1, true});
  add_pointwise(reg, {"mul_", 2, L::kMultilinear, D::kSelf, 0, 1, true});
  add_pointwise(reg, {"div_", 2, L::kLinearInFirst, D::kSelf, 0, 1, true});
  add_pointwise(reg, {"add_.Scalar", 1, L::kNone, D::kSelf, 1, 1, true});
  add_pointwise(reg, {"sub_.Scalar", 1, L::kNone, D::kSelf, 1, 1, true});
  add_pointwise(reg, {"mul_.Scalar", 1, L::kLinear, D::kSelf, 1, 1, true});
  add_pointwise(reg, {"div_.Scalar", 1, L::kLinear, D::kSelf, 1, 1, true});
}

}  // namespace dtensor
