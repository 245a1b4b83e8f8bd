#include "dtensor/collectives/mpi/mpi_types.h"

#include <algorithm>
#include <mutex>

#include "dtensor/collectives/mpi/mpi_check.h"

namespace dtensor::detail {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw_error(absl::StrFormat("[mpi] %s failed with error %d (%s) at %s:%d", call, code,
                              std::string(text, static_cast<size_t>(len)), file, line));
}

namespace {

struct SumF {
  template <typename C>
  C operator()(C a, C b) const {
    return a + b;
  }
};
// max/min propagate NaN (a NaN on any rank gives NaN, as the single-device reductions do);
// std::max/MPI_MAX keep or drop it depending on the order the ranks are combined in.
struct MaxF {
  template <typename C>
  C operator()(C a, C b) const {
    return a != a ? a : (b != b ? b : (a > b ? a : b));
  }
};
struct MinF {
  template <typename C>
  C operator()(C a, C b) const {
    return a != a ? a : (b != b ? b : (a < b ? a : b));
  }
};
struct ProdF {
  template <typename C>
  C operator()(C a, C b) const {
    return a * b;
  }
};

// MPI user function: inout[i] = f(in[i], inout[i]), computed in compute_t<T> (float for the
// 16-bit types, rounded back after each pairwise step; their sums travel as float32 instead,
// see the MPI backend).
template <typename T, typename F>
void reduce_user(void* in, void* inout, int* len, MPI_Datatype*) {
  using C = compute_t<T>;
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  F f;
  for (int i = 0; i < *len; ++i) b[i] = T(f(static_cast<C>(a[i]), static_cast<C>(b[i])));
}

// [0..3]: float16 sum/max/min/product, [4..7]: bfloat16; [8, 9]: float32 max/min, [10, 11]:
// float64 max/min.
MPI_Op g_user_ops[12];
std::once_flag g_user_ops_once;

void create_user_ops() {
  MPI_User_function* fns[12] = {
      &reduce_user<Half, SumF>,     &reduce_user<Half, MaxF>,      &reduce_user<Half, MinF>,
      &reduce_user<Half, ProdF>,    &reduce_user<BFloat16, SumF>,  &reduce_user<BFloat16, MaxF>,
      &reduce_user<BFloat16, MinF>, &reduce_user<BFloat16, ProdF>, &reduce_user<float, MaxF>,
      &reduce_user<float, MinF>,    &reduce_user<double, MaxF>,    &reduce_user<double, MinF>};
  for (int i = 0; i < 12; ++i) DT_CHECK_MPI(MPI_Op_create(fns[i], /*commute=*/1, &g_user_ops[i]));
}

MPI_Op user_op(int index) {
  std::call_once(g_user_ops_once, create_user_ops);
  return g_user_ops[index];
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return 0;
    case ReduceOp::kMax:
      return 1;
    case ReduceOp::kMin:
      return 2;
    case ReduceOp::kProduct:
      return 3;
  }
  return 0;
}

}  // namespace

MPI_Datatype mpi_datatype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_UINT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kBool:
      return MPI_C_BOOL;
  }
  DT_FAIL("[mpi] unknown dtype %d", static_cast<int>(d));
}

MPI_Op mpi_reduce_op(DType d, ReduceOp op) {
  if (is_reduced_float(d)) return user_op((d == DType::kBFloat16 ? 4 : 0) + op_index(op));
  if ((d == DType::kFloat32 || d == DType::kFloat64) &&
      (op == ReduceOp::kMax || op == ReduceOp::kMin)) {
    return user_op((d == DType::kFloat32 ? 8 : 10) + (op == ReduceOp::kMax ? 0 : 1));
  }
  if (d == DType::kBool) {
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? MPI_LAND : MPI_LOR;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kProduct:
      return MPI_PROD;
  }
  return MPI_SUM;
}

void divide_in_place(void* data, DType d, int64_t numel, int64_t divisor) {
  if (divisor == 1) return;
  dispatch_dtype(d, [&]<typename T>() {
    T* p = static_cast<T*>(data);
    if constexpr (std::is_same_v<T, bool>) {
      DT_FAIL("[all_reduce] reduce op avg is not defined for dtype bool");
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const float div = static_cast<float>(divisor);
      for (int64_t i = 0; i < numel; ++i) p[i] = T(static_cast<float>(p[i]) / div);
    } else {
      const T div = static_cast<T>(divisor);
      for (int64_t i = 0; i < numel; ++i) p[i] = p[i] / div;
    }
  });
}

}  // namespace dtensor::detail
