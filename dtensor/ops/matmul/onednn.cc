// Runs bfloat16 GEMMs with oneDNN (onednn.h says when and why), loaded by the shared loader
// (common/detail/onednn_loader.h: dlopen at the first use; without libdnnl the widen + sgemm
// path stays).
#include "dtensor/ops/matmul/detail/onednn.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <string_view>

#include "dtensor/ops/common/detail/onednn_loader.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

constexpr const char* kVariable = "DTENSOR_BF16_GEMM";

void check(dnnl_status_t status, const char* what) {
  onednn_check(status, what, "matmul");
}

// The user's choice: "" (none), "onednn" or "sgemm".
std::string_view forced() {
  return onednn_switch(kVariable, "onednn", "sgemm", "matmul");
}

}  // namespace

Bf16Gemm bf16_gemm_backend() {
  const std::string_view user = forced();
  if (user == "sgemm") return Bf16Gemm::kSgemm;
  const OnednnLib& lib = onednn_lib();
  if (user == "onednn") {
    DT_CHECK(lib.error.empty(), "[matmul] %s=onednn, but %s", kVariable, lib.error);
    return Bf16Gemm::kOnednn;
  }
  return lib.error.empty() && lib.bf16_isa ? Bf16Gemm::kOnednn : Bf16Gemm::kSgemm;
}

std::string bf16_gemm_info_str() {
  const auto [user, by, bad] = onednn_switch_report(kVariable, "onednn", "sgemm", "matmul");
  if (!bad.empty()) return bad;  // a report must not fail on a bad variable
  const OnednnLib& lib = onednn_lib();
  if (user == "onednn" && !lib.error.empty()) {
    return absl::StrCat("none: ", kVariable, "=onednn, but ", lib.error);  // GEMMs raise that
  }
  if (bf16_gemm_backend() == Bf16Gemm::kOnednn) {
    return absl::StrCat("oneDNN ", lib.version_str, " (ISA ", lib.isa, ", ", by, ")");
  }
  const std::string why = !user.empty() ? by
                          : !lib.error.empty()
                              ? absl::StrCat("oneDNN unusable: ", lib.error)
                              : absl::StrCat("oneDNN ", lib.version_str, "'s ISA ", lib.isa,
                                             " lacks AVX-512 BF16, chosen by dtensor");
  return absl::StrCat("OpenBLAS sgemm on operands widened to float32 (", why, ")");
}

OnednnBf16Gemm::OnednnBf16Gemm(int64_t n, int64_t m, int64_t k, bool trans_a, int64_t lda,
                               bool trans_b, int64_t ldb, float alpha, float beta) {
  const OnednnLib& lib = onednn_lib();
  DT_CHECK(lib.error.empty(), "[matmul] oneDNN: %s", lib.error);
  onednn_set_threads();  // the primitive is built for the calling thread's count
  // Row-major views: strides (ld, 1), or (1, ld) for the transpose of a row-major matrix.
  const auto desc = [&](dnnl_memory_desc_t* d, int64_t r, int64_t c, bool trans, int64_t ld,
                        dnnl_data_type_t dt) {
    const dnnl_dims_t dims = {r, c};
    dnnl_dims_t strides = {ld, 1};
    if (trans) {
      strides[0] = 1;
      strides[1] = ld;
    }
    check(lib.memory_desc_init_by_strides(d, 2, dims, dt, strides), "memory descriptor");
  };
  dnnl_memory_desc_t da, db, dc;
  desc(&da, n, k, trans_a, lda, dnnl_bf16);
  desc(&db, k, m, trans_b, ldb, dnnl_bf16);
  desc(&dc, n, m, false, std::max<int64_t>(1, m), dnnl_f32);
  dnnl_matmul_desc_t op;
  check(lib.matmul_desc_init(&op, &da, &db, nullptr, &dc), "matmul descriptor");
  // c = alpha * (a @ b) + beta * c: an output scale, then a sum post-op.
  dnnl_primitive_attr_t attr = nullptr;
  check(lib.attr_create(&attr), "attribute");
  dnnl_post_ops_t post = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_status_t status = dnnl_success;
  if (alpha != 1.f) status = lib.attr_set_output_scales(attr, 1, 0, &alpha);
  if (status == dnnl_success && beta != 0.f) {
    status = lib.post_ops_create(&post);
    if (status == dnnl_success) status = lib.post_ops_append_sum(post, beta);
    if (status == dnnl_success) status = lib.attr_set_post_ops(attr, post);
  }
  // Cheap after the first call of a shape: oneDNN caches primitives.
  if (status == dnnl_success) {
    status = lib.primitive_desc_create(&pd, &op, attr, lib.engine, nullptr);
  }
  if (status == dnnl_success) status = lib.primitive_create(&primitive_, pd);
  if (pd != nullptr) lib.primitive_desc_destroy(pd);
  if (post != nullptr) lib.post_ops_destroy(post);
  lib.attr_destroy(attr);
  // Unimplemented: this ISA has no bf16 matmul (oneDNN 2.6 on AVX2), reached by
  // DTENSOR_BF16_GEMM=onednn.
  DT_CHECK(status != dnnl_unimplemented,
           "[matmul] oneDNN %s has no bf16 matmul for [%d, %d] @ [%d, %d] on ISA %s "
           "(dnnl_status_t %d: %s); unset DTENSOR_BF16_GEMM or set it to sgemm",
           lib.version_str, n, k, k, m, lib.isa, static_cast<int>(status),
           onednn_status_name(status));
  DT_CHECK(status == dnnl_success,
           "[matmul] oneDNN %s could not create the bf16 matmul for [%d, %d] @ [%d, %d] on ISA "
           "%s (dnnl_status_t %d: %s)",
           lib.version_str, n, k, k, m, lib.isa, static_cast<int>(status),
           onednn_status_name(status));
  // The destructor does not run when the constructor throws: release what exists, then rethrow.
  try {
    check(lib.stream_create(&stream_, lib.engine, dnnl_stream_default_flags), "stream");
    const dnnl_memory_desc_t* descs[3] = {&da, &db, &dc};
    for (int i = 0; i < 3; ++i) {
      check(lib.memory_create(&mem_[i], descs[i], lib.engine, DNNL_MEMORY_NONE), "memory");
    }
  } catch (...) {
    release();
    throw;
  }
}

OnednnBf16Gemm::~OnednnBf16Gemm() {
  release();
}

void OnednnBf16Gemm::release() noexcept {
  const OnednnLib& lib = onednn_lib();
  for (dnnl_memory* m : mem_) {
    if (m != nullptr) lib.memory_destroy(m);
  }
  if (stream_ != nullptr) lib.stream_destroy(stream_);
  if (primitive_ != nullptr) lib.primitive_destroy(primitive_);
}

void OnednnBf16Gemm::run(const void* a, const void* b, float* c) {
  const OnednnLib& lib = onednn_lib();
  check(lib.memory_set_data_handle(mem_[0], const_cast<void*>(a)), "memory handle");
  check(lib.memory_set_data_handle(mem_[1], const_cast<void*>(b)), "memory handle");
  check(lib.memory_set_data_handle(mem_[2], c), "memory handle");
  const dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, mem_[0]}, {DNNL_ARG_WEIGHTS, mem_[1]}, {DNNL_ARG_DST, mem_[2]}};
  check(lib.primitive_execute(primitive_, stream_, 3, args), "matmul");
  check(lib.stream_wait(stream_), "stream wait");
}

}  // namespace dtensor::detail
