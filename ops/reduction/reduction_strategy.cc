// Sharding strategies of the reduction family, for ONE mesh dim (the engine expands them).
//
// A dim that is kept can stay sharded: [S(out dim) | S(d)]. A reduced dim that is sharded
// leaves each rank a partial result: sum and mean give Partial(sum) (mean's local kernel
// divides the local sum by the GLOBAL count, which is exact for uneven shards, unlike
// Partial(avg)), amax/max give Partial(max), amin/min Partial(min). argmax/argmin, max/min
// with indices and var need a reduced dim replicated (no row shards it).
// Example: sum(x[8, 4], dims {0}) rows: [P(sum) | S(0)], [S(0) | S(1)].
#include <algorithm>
#include <optional>

#include "dtensor/propagation/op_schema.h"
#include "ops/register_all.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

// Which dims a reduction over `dims` reduces (empty = all), from the static args.
absl::InlinedVector<bool, 6> reduced_mask(const OpSchema& s, const Shape& dims) {
  const int64_t ndim = s.input(0).ndim();
  absl::InlinedVector<bool, 6> mask(std::max<int64_t>(ndim, 0), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, s.name());
    if (ndim == 0) continue;
    DT_CHECK(!mask[n], "[%s] dim %d appears more than once in dims %s", s.name(), n,
             shape_str(dims));
    mask[n] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, absl::Span<const bool> mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

StrategyRows reduction_rows(absl::Span<const bool> mask, bool keepdim,
                            std::optional<ReduceOp> partial, int num_outputs) {
  StrategyRows rows;
  int64_t removed = 0;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (!mask[d]) {
      const int64_t out_dim = keepdim ? static_cast<int64_t>(d) : static_cast<int64_t>(d) - removed;
      Placements row(num_outputs, Shard(out_dim));
      row.push_back(Shard(static_cast<int64_t>(d)));
      rows.push_back(std::move(row));
    } else {
      ++removed;
      if (partial) {
        Placements row(num_outputs, Partial(*partial));
        row.push_back(Shard(static_cast<int64_t>(d)));
        rows.push_back(std::move(row));
      }
    }
  }
  // Partial(max) / Partial(min) inputs pass through amax / amin of the same kind.
  if (partial == ReduceOp::kMax || partial == ReduceOp::kMin) {
    rows.push_back(Placements(num_outputs + 1, Partial(*partial)));
  }
  return rows;
}

enum class OutDType : uint8_t { kSum, kFloatOnly, kSame, kInt64 };

DType reduction_dtype(const OpSchema& s, OutDType rule) {
  const DType in = s.input(0).dtype();
  switch (rule) {
    case OutDType::kSum:
      return is_floating(in) ? in : DType::kInt64;
    case OutDType::kFloatOnly:
      DT_CHECK(is_floating(in),
               "[%s] expected a floating dtype (float32, float64, float16, bfloat16), got %s",
               s.name(), dtype_name(in));
      return in;
    case OutDType::kSame:
      return in;
    case OutDType::kInt64:
      return DType::kInt64;
  }
  return in;
}

// How an op reads its static args.
enum class ArgLayout : uint8_t {
  kDimsKeepdim,            // (dims, keepdim)
  kCorrectionDimsKeepdim,  // (correction [runtime], dims, keepdim)
  kAll,                    // () full reduction to a 0-d tensor
  kDimKeepdim,             // (dim, keepdim): one dim, must be given
  kOptDimKeepdim,          // (dim or None, keepdim): None = flattened
};

struct ReductionDef {
  const char* name;
  ArgLayout layout;
  OutDType dtype;
  std::optional<ReduceOp> partial;  // Partial kind of a sharded reduced dim, none: replicate
  Linearity linearity = Linearity::kNone;
  int num_outputs = 1;
  bool needs_elements = false;  // raises on an empty reduction (max, argmax, ...)
};

struct Parsed {
  absl::InlinedVector<bool, 6> mask;
  bool keepdim = false;
};

Parsed parse(const OpSchema& s, ArgLayout layout) {
  const int64_t ndim = s.input(0).ndim();
  Parsed p;
  switch (layout) {
    case ArgLayout::kDimsKeepdim:
      p.mask = reduced_mask(s, s.arg<Shape>(0));
      p.keepdim = s.arg<bool>(1);
      break;
    case ArgLayout::kCorrectionDimsKeepdim:
      p.mask = reduced_mask(s, s.arg<Shape>(1));
      p.keepdim = s.arg<bool>(2);
      break;
    case ArgLayout::kAll:
      p.mask = reduced_mask(s, Shape{});
      break;
    case ArgLayout::kDimKeepdim:
      p.mask = reduced_mask(s, Shape{s.arg<int64_t>(0)});
      p.keepdim = s.arg<bool>(1);
      break;
    case ArgLayout::kOptDimKeepdim:
      p.mask = s.has_arg(0) ? reduced_mask(s, Shape{s.arg<int64_t>(0)}) : reduced_mask(s, Shape{});
      p.keepdim = s.arg<bool>(1);
      break;
  }
  (void)ndim;
  return p;
}

void add_reduction(Registry& reg, const ReductionDef& def) {
  OpInfo info;
  info.name = def.name;
  info.input_names = {"self"};
  info.linearity = def.linearity;
  if (def.layout == ArgLayout::kCorrectionDimsKeepdim) info.schema_info.static_argnum = 1;
  info.meta = [def](const OpSchema& s) {
    const Parsed p = parse(s, def.layout);
    const Shape& shape = s.input(0).shape();
    if (def.needs_elements) {
      int64_t count = 1;
      for (size_t d = 0; d < shape.size(); ++d) count *= p.mask[d] ? shape[d] : 1;
      DT_CHECK(count > 0, "[%s] cannot reduce over zero elements (input shape %s)", s.name(),
               shape_str(shape));
    }
    const TensorMeta meta(reduced_shape(shape, p.mask, p.keepdim), reduction_dtype(s, def.dtype));
    OutputMetas metas{meta};
    if (def.num_outputs == 2) metas.push_back(TensorMeta(meta.shape, DType::kInt64));  // indices
    return metas;
  };
  info.strategy = [def](const OpSchema& s) {
    const Parsed p = parse(s, def.layout);
    return reduction_rows(p.mask, p.keepdim, def.partial, def.num_outputs);
  };
  reg.add(std::move(info));
}

}  // namespace

void register_reduction_ops(Registry& reg) {
  using A = ArgLayout;
  using D = OutDType;
  const auto kSum = ReduceOp::kSum, kMax = ReduceOp::kMax, kMin = ReduceOp::kMin;
  // Sums and means are linear: Partial(sum)/Partial(avg) inputs pass through.
  add_reduction(reg, {"sum", A::kDimsKeepdim, D::kSum, kSum, Linearity::kLinear});
  add_reduction(reg, {"mean", A::kDimsKeepdim, D::kFloatOnly, kSum, Linearity::kLinear});
  add_reduction(reg, {"var", A::kCorrectionDimsKeepdim, D::kFloatOnly, std::nullopt});
  add_reduction(reg, {"amax", A::kDimsKeepdim, D::kSame, kMax, Linearity::kNone, 1, true});
  add_reduction(reg, {"amin", A::kDimsKeepdim, D::kSame, kMin, Linearity::kNone, 1, true});
  add_reduction(reg, {"max", A::kAll, D::kSame, kMax, Linearity::kNone, 1, true});
  add_reduction(reg, {"min", A::kAll, D::kSame, kMin, Linearity::kNone, 1, true});
  add_reduction(reg,
                {"max.dim", A::kDimKeepdim, D::kSame, std::nullopt, Linearity::kNone, 2, true});
  add_reduction(reg,
                {"min.dim", A::kDimKeepdim, D::kSame, std::nullopt, Linearity::kNone, 2, true});
  add_reduction(reg,
                {"argmax", A::kOptDimKeepdim, D::kInt64, std::nullopt, Linearity::kNone, 1, true});
  add_reduction(reg,
                {"argmin", A::kOptDimKeepdim, D::kInt64, std::nullopt, Linearity::kNone, 1, true});
}

}  // namespace dtensor
