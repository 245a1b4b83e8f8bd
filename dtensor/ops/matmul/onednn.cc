// Loads oneDNN and runs bfloat16 GEMMs with it (onednn.h says when and why).
//
// Loaded (dlopen) rather than linked, as OpenBLAS: a machine without libdnnl keeps today's
// widen + sgemm path instead of failing to start. Loaded at the first bf16 GEMM or report, not
// when dtensor loads: most programs never run one, and the library is 40 MB.
#include "dtensor/ops/matmul/detail/onednn.h"

#include <absl/strings/str_cat.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "dtensor/ops/threads.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

constexpr const char* kLibrary = "libdnnl.so.2";  // Debian 12: libdnnl2 (oneDNN 2.6)
constexpr const char* kVariable = "DTENSOR_BF16_GEMM";

struct Onednn {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init_by_strides = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_output_scales) attr_set_output_scales = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops = nullptr;
  decltype(&dnnl_post_ops_create) post_ops_create = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_post_ops_append_sum) post_ops_append_sum = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_primitive_destroy) primitive_destroy = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_set_data_handle) memory_set_data_handle = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_version) version = nullptr;
  decltype(&dnnl_get_effective_cpu_isa) get_effective_cpu_isa = nullptr;
  // libgomp's, which oneDNN's threads are (Debian builds it with OpenMP): oneDNN runs as many
  // as the calling thread's OpenMP setting, set to dtensor's intra-op count before each GEMM.
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;

  dnnl_engine_t engine = nullptr;
  std::string error;  // why it is not usable ("" = loaded)
  std::string version_str;
  std::string isa;
  bool bf16_isa = false;  // its kernels use AVX-512 BF16 (or AMX) instructions
};

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

Onednn load() {
  Onednn lib;
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    lib.error = absl::StrCat("cannot load ", kLibrary, " (", e != nullptr ? e : "?",
                             "; Debian: libdnnl2, installed by scripts/install_deps.sh)");
    return lib;
  }
  bool ok = true;
  const auto sym = [&](auto& f, const char* name) {
    void* p = dlsym(handle, name);  // the library's dependencies (libgomp) are searched too
    if (p == nullptr && ok) {
      ok = false;
      lib.error = absl::StrCat(kLibrary, " has no symbol ", name, " (expected oneDNN 2.x)");
    }
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(p);
  };
  sym(lib.engine_create, "dnnl_engine_create");
  sym(lib.stream_create, "dnnl_stream_create");
  sym(lib.stream_destroy, "dnnl_stream_destroy");
  sym(lib.stream_wait, "dnnl_stream_wait");
  sym(lib.memory_desc_init_by_strides, "dnnl_memory_desc_init_by_strides");
  sym(lib.matmul_desc_init, "dnnl_matmul_desc_init");
  sym(lib.attr_create, "dnnl_primitive_attr_create");
  sym(lib.attr_destroy, "dnnl_primitive_attr_destroy");
  sym(lib.attr_set_output_scales, "dnnl_primitive_attr_set_output_scales");
  sym(lib.attr_set_post_ops, "dnnl_primitive_attr_set_post_ops");
  sym(lib.post_ops_create, "dnnl_post_ops_create");
  sym(lib.post_ops_destroy, "dnnl_post_ops_destroy");
  sym(lib.post_ops_append_sum, "dnnl_post_ops_append_sum");
  sym(lib.primitive_desc_create, "dnnl_primitive_desc_create");
  sym(lib.primitive_desc_destroy, "dnnl_primitive_desc_destroy");
  sym(lib.primitive_create, "dnnl_primitive_create");
  sym(lib.primitive_destroy, "dnnl_primitive_destroy");
  sym(lib.primitive_execute, "dnnl_primitive_execute");
  sym(lib.memory_create, "dnnl_memory_create");
  sym(lib.memory_set_data_handle, "dnnl_memory_set_data_handle");
  sym(lib.memory_destroy, "dnnl_memory_destroy");
  sym(lib.version, "dnnl_version");
  sym(lib.get_effective_cpu_isa, "dnnl_get_effective_cpu_isa");
  sym(lib.omp_set_num_threads, "omp_set_num_threads");
  sym(lib.omp_get_max_threads, "omp_get_max_threads");
  if (!ok) return lib;
  const dnnl_version_t* v = lib.version();
  lib.version_str = absl::StrCat(v->major, ".", v->minor, ".", v->patch);
  const dnnl_cpu_isa_t isa = lib.get_effective_cpu_isa();
  lib.isa = isa_name(isa);
  lib.bf16_isa = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  if (lib.engine_create(&lib.engine, dnnl_cpu, 0) != dnnl_success) {
    lib.error = absl::StrCat("oneDNN ", lib.version_str, " could not create its CPU engine");
  }
  return lib;
}

const Onednn& onednn() {
  static const Onednn lib = load();
  return lib;
}

const char* status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_out_of_memory:
      return "out of memory";
    case dnnl_invalid_arguments:
      return "invalid arguments";
    case dnnl_unimplemented:
      return "unimplemented";
    case dnnl_runtime_error:
      return "runtime error";
    default:
      return "error";
  }
}

void check(dnnl_status_t status, const char* what) {
  DT_CHECK(status == dnnl_success, "[matmul] oneDNN %s failed (dnnl_status_t %d: %s)", what,
           static_cast<int>(status), status_name(status));
}

// The user's choice: "" (none), "onednn" or "sgemm".
std::string_view forced() {
  const char* v = std::getenv(kVariable);
  if (v == nullptr || *v == '\0') return "";
  const std::string_view s(v);
  DT_CHECK(s == "onednn" || s == "sgemm", "[matmul] %s=%s: expected onednn or sgemm", kVariable, s);
  return s;
}

}  // namespace

Bf16Gemm bf16_gemm_backend() {
  const std::string_view user = forced();
  if (user == "sgemm") return Bf16Gemm::kSgemm;
  const Onednn& lib = onednn();
  if (user == "onednn") {
    DT_CHECK(lib.error.empty(), "[matmul] %s=onednn, but %s", kVariable, lib.error);
    return Bf16Gemm::kOnednn;
  }
  return lib.error.empty() && lib.bf16_isa ? Bf16Gemm::kOnednn : Bf16Gemm::kSgemm;
}

std::string bf16_gemm_info_str() {
  std::string_view user;
  try {
    user = forced();
  } catch (const Error& e) {
    return e.what();  // a report must not fail on a bad variable
  }
  const Onednn& lib = onednn();
  const std::string by =
      user.empty() ? std::string("chosen by dtensor") : absl::StrCat("chosen by ", kVariable);
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
  const Onednn& lib = onednn();
  DT_CHECK(lib.error.empty(), "[matmul] oneDNN: %s", lib.error);
  // OpenMP's thread count is per calling thread; the primitive is built for it.
  const int threads = get_num_threads();
  if (lib.omp_get_max_threads() != threads) lib.omp_set_num_threads(threads);
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
           lib.version_str, n, k, k, m, lib.isa, static_cast<int>(status), status_name(status));
  DT_CHECK(status == dnnl_success,
           "[matmul] oneDNN %s could not create the bf16 matmul for [%d, %d] @ [%d, %d] on ISA "
           "%s (dnnl_status_t %d: %s)",
           lib.version_str, n, k, k, m, lib.isa, static_cast<int>(status), status_name(status));
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
  const Onednn& lib = onednn();
  for (dnnl_memory* m : mem_) {
    if (m != nullptr) lib.memory_destroy(m);
  }
  if (stream_ != nullptr) lib.stream_destroy(stream_);
  if (primitive_ != nullptr) lib.primitive_destroy(primitive_);
}

void OnednnBf16Gemm::run(const void* a, const void* b, float* c) {
  const Onednn& lib = onednn();
  check(lib.memory_set_data_handle(mem_[0], const_cast<void*>(a)), "memory handle");
  check(lib.memory_set_data_handle(mem_[1], const_cast<void*>(b)), "memory handle");
  check(lib.memory_set_data_handle(mem_[2], c), "memory handle");
  const dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, mem_[0]}, {DNNL_ARG_WEIGHTS, mem_[1]}, {DNNL_ARG_DST, mem_[2]}};
  check(lib.primitive_execute(primitive_, stream_, 3, args), "matmul");
  check(lib.stream_wait(stream_), "stream wait");
}

}  // namespace dtensor::detail
