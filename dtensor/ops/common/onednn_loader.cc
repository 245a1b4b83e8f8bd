// Loads oneDNN at run time (common/detail/onednn_loader.h says why it is loaded, not linked).
#include "dtensor/ops/common/detail/onednn_loader.h"

#include <absl/strings/str_cat.h>
#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include "dtensor/ops/threads.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

constexpr const char* kLibrary = "libdnnl.so.2";  // Debian 12: libdnnl2 (oneDNN 2.6)

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

OnednnLib load() {
  OnednnLib lib;
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
  sym(lib.memory_desc_init_by_tag, "dnnl_memory_desc_init_by_tag");
  sym(lib.memory_desc_equal, "dnnl_memory_desc_equal");
  sym(lib.memory_desc_get_size, "dnnl_memory_desc_get_size");
  sym(lib.matmul_desc_init, "dnnl_matmul_desc_init");
  sym(lib.conv_forward_desc_init, "dnnl_dilated_convolution_forward_desc_init");
  sym(lib.conv_data_desc_init, "dnnl_dilated_convolution_backward_data_desc_init");
  sym(lib.conv_weights_desc_init, "dnnl_dilated_convolution_backward_weights_desc_init");
  sym(lib.reorder_primitive_desc_create, "dnnl_reorder_primitive_desc_create");
  sym(lib.attr_create, "dnnl_primitive_attr_create");
  sym(lib.attr_destroy, "dnnl_primitive_attr_destroy");
  sym(lib.attr_set_output_scales, "dnnl_primitive_attr_set_output_scales");
  sym(lib.attr_set_post_ops, "dnnl_primitive_attr_set_post_ops");
  sym(lib.post_ops_create, "dnnl_post_ops_create");
  sym(lib.post_ops_destroy, "dnnl_post_ops_destroy");
  sym(lib.post_ops_append_sum, "dnnl_post_ops_append_sum");
  sym(lib.primitive_desc_create, "dnnl_primitive_desc_create");
  sym(lib.primitive_desc_destroy, "dnnl_primitive_desc_destroy");
  sym(lib.primitive_desc_query, "dnnl_primitive_desc_query");
  sym(lib.primitive_desc_query_md, "dnnl_primitive_desc_query_md");
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

}  // namespace

const OnednnLib& onednn_lib() {
  static const OnednnLib lib = load();
  return lib;
}

int onednn_set_threads() {
  const OnednnLib& lib = onednn_lib();
  // OpenMP's thread count is per calling thread; set it only when it differs (the call is not
  // free, and most calls find it already set).
  const int threads = get_num_threads();
  if (lib.omp_get_max_threads() != threads) lib.omp_set_num_threads(threads);
  return threads;
}

std::string_view onednn_switch(const char* variable, std::string_view a, std::string_view b,
                               const char* op) {
  const char* v = std::getenv(variable);
  if (v == nullptr || *v == '\0') return "";
  const std::string_view s(v);
  DT_CHECK(s == a || s == b, "[%s] %s=%s: expected %s or %s", op, variable, s, a, b);
  return s;
}

OnednnSwitchReport onednn_switch_report(const char* variable, std::string_view a,
                                        std::string_view b, const char* op) {
  OnednnSwitchReport r;
  try {
    r.user = onednn_switch(variable, a, b, op);
  } catch (const Error& e) {
    r.bad = e.what();
  }
  r.by = r.user.empty() ? std::string("chosen by dtensor") : absl::StrCat("chosen by ", variable);
  return r;
}

const char* onednn_status_name(dnnl_status_t status) {
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

void onednn_check(dnnl_status_t status, const char* what, const char* op) {
  DT_CHECK(status == dnnl_success, "[%s] oneDNN %s failed (dnnl_status_t %d: %s)", op, what,
           static_cast<int>(status), onednn_status_name(status));
}

}  // namespace dtensor::detail
