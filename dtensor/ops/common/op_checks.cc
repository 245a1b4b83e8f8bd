#include "dtensor/ops/common/detail/op_checks.h"

#include <string>

namespace dtensor::detail {

void check_defined(std::string_view op, const Tensor& t, std::string_view arg) {
  DT_CHECK(t.defined(), "[%s] argument %s is an undefined tensor", op, arg);
}

void check_floating_input(std::string_view op, const Tensor& t, std::string_view arg) {
  check_defined(op, t, arg);
  check_floating_dtype(op, t.dtype(), arg);
}

void check_floating_dtype(std::string_view op, DType dtype, std::string_view arg) {
  DT_CHECK(is_floating(dtype),
           "[%s] expected a floating input, got %s (argument %s: float32, float64, float16 or "
           "bfloat16; cast it first)",
           op, dtype_name(dtype), arg);
}

void check_index_dtype(std::string_view op, DType dtype, std::string_view arg) {
  DT_CHECK(dtype == kInt64 || dtype == kInt32,
           "[%s] argument %s has dtype %s, expected int64 or int32", op, arg, dtype_name(dtype));
}

void check_same_device(std::string_view op, const Tensor& self, const Tensor& other,
                       std::string_view arg) {
  DT_CHECK(self.device() == other.device(),
           "[%s] expected all tensors on one device, but argument %s is on %s and the first "
           "input on %s",
           op, arg, other.device().str(), self.device().str());
}

Shape broadcast_pair(std::string_view op, IntSpan a, IntSpan b, std::string_view arg) {
  const size_t nd = a.size() > b.size() ? a.size() : b.size();
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t sa = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const int64_t sb = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    DT_CHECK(sa == sb || sa == 1 || sb == 1, "[%s] cannot broadcast shapes %s and %s (argument %s)",
             op, shape_str(a), shape_str(b), arg);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace dtensor::detail
