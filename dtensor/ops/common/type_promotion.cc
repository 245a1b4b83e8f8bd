#include "dtensor/ops/common/detail/type_promotion.h"

namespace dtensor {

namespace {

DType scalar_default_dtype(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::kDouble:
      return kDefaultFloatDType;
    case Scalar::Kind::kInt:
      return DType::kInt64;
    case Scalar::Kind::kBool:
      break;
  }
  return DType::kBool;
}

}  // namespace

DType result_type(DType a, int64_t a_ndim, DType b, int64_t b_ndim) {
  const bool a0 = a_ndim == 0;
  const bool b0 = b_ndim == 0;
  if (a0 == b0) return promote_types(a, b);
  // One 0-d operand: it only matters when its category is higher.
  const DType dimmed = a0 ? b : a;
  const DType zero_d = a0 ? a : b;
  return dtype_category(zero_d) > dtype_category(dimmed) ? zero_d : dimmed;
}

DType result_type(const Tensor& a, const Tensor& b) {
  return result_type(a.dtype(), a.dim(), b.dtype(), b.dim());
}

DType result_type(DType t, const Scalar& s) {
  const DType sd = scalar_default_dtype(s);
  return dtype_category(sd) > dtype_category(t) ? sd : t;
}

DType result_type(const Tensor& t, const Scalar& s) {
  return result_type(t.dtype(), s);
}

}  // namespace dtensor
