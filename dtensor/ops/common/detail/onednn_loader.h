// oneDNN, loaded by dtensor at run time (dlopen, as OpenBLAS is: blas_info.h) for the kernels
// that run faster on it: the bfloat16 GEMM (matmul/detail/onednn.h) and the float32
// convolutions (conv/detail/conv_onednn.h). One loader for both, so the 40 MB library is opened
// once and its symbols looked up once.
//
// Loaded rather than linked: a machine without libdnnl keeps the other paths (widen + sgemm,
// im2col + sgemm) instead of failing to start. Loaded at the first kernel or report that asks,
// not when dtensor loads: most programs never run one. Internal to the ops library (it includes
// oneDNN's C header, found at configure time; nothing is linked).
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <string>
#include <string_view>

namespace dtensor::detail {

// The entry points dtensor calls (oneDNN 2.x's C API), the CPU engine, and why it is not usable.
struct OnednnLib {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init_by_strides = nullptr;
  decltype(&dnnl_memory_desc_init_by_tag) memory_desc_init_by_tag = nullptr;
  decltype(&dnnl_memory_desc_equal) memory_desc_equal = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_forward_desc_init) conv_forward_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_data_desc_init) conv_data_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_weights_desc_init) conv_weights_desc_init = nullptr;
  decltype(&dnnl_reorder_primitive_desc_create) reorder_primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_output_scales) attr_set_output_scales = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops = nullptr;
  decltype(&dnnl_post_ops_create) post_ops_create = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_post_ops_append_sum) post_ops_append_sum = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_desc_query) primitive_desc_query = nullptr;
  decltype(&dnnl_primitive_desc_query_md) primitive_desc_query_md = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_primitive_destroy) primitive_destroy = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_set_data_handle) memory_set_data_handle = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_version) version = nullptr;
  decltype(&dnnl_get_effective_cpu_isa) get_effective_cpu_isa = nullptr;
  // libgomp's, which oneDNN's threads are (Debian builds it with OpenMP): oneDNN runs as many
  // as the calling thread's OpenMP setting (onednn_set_threads).
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;

  dnnl_engine_t engine = nullptr;
  std::string error;  // why it is not usable ("" = loaded)
  std::string version_str;
  std::string isa;
  bool bf16_isa = false;  // its kernels use AVX-512 BF16 (or AMX) instructions
};

// The library, loaded at the first call (thread-safe); error says why when it is not usable.
const OnednnLib& onednn_lib();

// Sets the calling thread's OpenMP thread count (oneDNN's) to dtensor's intra-op count, which a
// primitive is built for and run with; returns that count. Requires a usable library.
int onednn_set_threads();

// Raises "[op] oneDNN <what> failed (dnnl_status_t ...)" unless status is dnnl_success.
void onednn_check(dnnl_status_t status, const char* what, const char* op);

// A backend switch read at every call (DTENSOR_BF16_GEMM, DTENSOR_CONV): "" when unset or
// empty, else its value, which must be a or b (raises "[op] VAR=v: expected a or b").
std::string_view onednn_switch(const char* variable, std::string_view a, std::string_view b,
                               const char* op);

// The same for a report, which must not fail: the value (user), who chose ("chosen by dtensor"
// or "chosen by VAR"), or, for a bad value, the error message to report instead (bad).
struct OnednnSwitchReport {
  std::string_view user;
  std::string by;
  std::string bad;
};
OnednnSwitchReport onednn_switch_report(const char* variable, std::string_view a,
                                        std::string_view b, const char* op);

// A short name of a failure status ("unimplemented", "out of memory", ...).
const char* onednn_status_name(dnnl_status_t status);

}  // namespace dtensor::detail
