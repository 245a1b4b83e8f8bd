#include "collectives/mpi/mpi_types.h"

#include <algorithm>
#include <mutex>

#include "collectives/mpi/mpi_check.h"

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
  float operator()(float a, float b) const { return a + b; }
};
struct MaxF {
  float operator()(float a, float b) const { return std::max(a, b); }
};
struct MinF {
  float operator()(float a, float b) const { return std::min(a, b); }
};
struct ProdF {
  float operator()(float a, float b) const { return a * b; }
};

// MPI user function: inout[i] = f(in[i], inout[i]), computed in float.
template <typename T, typename F>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  F f;
  for (int i = 0; i < *len; ++i) b[i] = T(f(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

// [0..3]: float16 sum/max/min/product, [4..7]: bfloat16.
MPI_Op g_ops16[8];
std::once_flag g_ops16_once;

void create_ops16() {
  MPI_User_function* fns[8] = {&reduce16<Half, SumF>,     &reduce16<Half, MaxF>,
                               &reduce16<Half, MinF>,     &reduce16<Half, ProdF>,
                               &reduce16<BFloat16, SumF>, &reduce16<BFloat16, MaxF>,
                               &reduce16<BFloat16, MinF>, &reduce16<BFloat16, ProdF>};
  for (int i = 0; i < 8; ++i) DT_CHECK_MPI(MPI_Op_create(fns[i], /*commute=*/1, &g_ops16[i]));
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
  if (is_reduced_float(d)) {
    std::call_once(g_ops16_once, create_ops16);
    return g_ops16[(d == DType::kBFloat16 ? 4 : 0) + op_index(op)];
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
