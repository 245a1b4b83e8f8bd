// float32 convolutions on oneDNN (conv_onednn.h says when and why).
//
// Each pass is one oneDNN convolution primitive between dtensor's plain layouts (im / col
// [N, C, *spatial], weight [Co, Ci / groups, *k] = oneDNN's [G, Co / G, Ci / G, *k]). The
// primitive is created with format_tag_any, so oneDNN picks its blocked layouts (nChw16c on
// AVX-512), and plain <-> blocked reorders run around it: measured faster than primitives on
// the plain layouts, which oneDNN 2.6 serves only with its own im2col + GEMM
// (benchmarks/kernels/bench_ops2_notes.md). The spatial dims that are trivial (size 1 on both
// sides, kernel 1, no padding) are dropped, so a conv2d is oneDNN's 2-D convolution.
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/ops/common/detail/onednn_loader.h"
#include "dtensor/ops/conv/detail/conv_onednn.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

constexpr const char* kVariable = "DTENSOR_CONV";
constexpr const char* kOp = "convolution";

// The user's choice: "" (none), "onednn" or "im2col".
std::string_view forced() {
  return onednn_switch(kVariable, "onednn", "im2col", kOp);
}

bool is_pointwise(const ConvGeometry& g) {
  for (int i = 0; i < 3; ++i) {
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0 || g.im[i] != g.col[i]) return false;
  }
  return true;
}

void check(dnnl_status_t status, const char* what) {
  onednn_check(status, what, kOp);
}

enum class Pass { kForward, kData, kWeight };

// One argument of a primitive in dtensor's plain layout, and oneDNN's layout when it differs
// (then a reorder moves it through a scratch buffer).
struct Arg {
  int arg = 0;          // DNNL_ARG_*
  bool output = false;  // written by the convolution
  dnnl_memory_desc_t user{};
  dnnl_memory_desc_t inner{};
  dnnl_primitive_t reorder = nullptr;  // user -> inner for an input, inner -> user for an output
  size_t offset = 0;                   // of inner in the scratch buffer (bytes)
  size_t bytes = 0;                    // inner's size there (rounded up to 64)
};

// A convolution primitive with its arguments; destroyed when the cache drops it and no call
// still runs it.
struct Conv {
  dnnl_primitive_t primitive = nullptr;
  std::vector<Arg> args;
  size_t scratch = 0;  // bytes of the reordered arguments
  // oneDNN's direct JIT kernel, not its own im2col + GEMM ("gemm" in the implementation's
  // name), which it picks for some small or odd geometries: only the direct kernels measured
  // faster than ours, so dtensor chooses the others only under DTENSOR_CONV=onednn.
  bool direct = false;

  Conv() = default;
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;
  ~Conv() {
    const OnednnLib& lib = onednn_lib();
    for (const Arg& a : args) {
      if (a.reorder != nullptr) lib.primitive_destroy(a.reorder);
    }
    if (primitive != nullptr) lib.primitive_destroy(primitive);
  }
};

// The oneDNN problem of a geometry: dims of the kept spatial dims.
struct Problem {
  int sp = 0;  // spatial dims kept (1..3)
  dnnl_dims_t src{}, wei{}, dst{}, bias{};
  int wei_nd = 0;
  dnnl_dims_t strides{}, dilates{}, pad_l{}, pad_r{};
  dnnl_format_tag_t src_tag{}, wei_tag{};
};

Problem problem(const ConvGeometry& g) {
  Problem p;
  int first = 2;  // the first kept dim of (depth, height, width); width is always kept
  for (int i = 0; i < 2; ++i) {
    if (g.im[i] != 1 || g.col[i] != 1 || g.k[i] != 1 || g.pad[i] != 0) {
      first = i;
      break;
    }
  }
  p.sp = 3 - first;
  p.src[0] = p.dst[0] = g.n;
  p.src[1] = g.ci;
  p.dst[1] = g.co;
  const bool grouped = g.groups > 1;
  int w = 0;
  if (grouped) p.wei[w++] = g.groups;
  p.wei[w++] = g.co / g.groups;
  p.wei[w++] = g.ci / g.groups;
  for (int i = first; i < 3; ++i) {
    const int j = i - first;
    p.src[2 + j] = g.im[i];
    p.dst[2 + j] = g.col[i];
    p.wei[w++] = g.k[i];
    p.strides[j] = g.stride[i];
    p.dilates[j] = g.dil[i] - 1;  // oneDNN counts the gaps: 0 = dense
    p.pad_l[j] = g.pad[i];
    // What makes (im + pad_l + pad_r - span) / stride + 1 == col hold exactly (oneDNN's check):
    // smaller than pad_l where the last rows read no output (negative allowed down to
    // 1 - stride), and pad_l - output_padding for a transposed conv's output_padding.
    p.pad_r[j] = (g.col[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.im[i] - g.pad[i];
  }
  p.wei_nd = w;
  p.bias[0] = g.co;
  static constexpr dnnl_format_tag_t kSrc[3] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
  static constexpr dnnl_format_tag_t kWei[3] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
  static constexpr dnnl_format_tag_t kGWei[3] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
  p.src_tag = kSrc[p.sp - 1];
  p.wei_tag = grouped ? kGWei[p.sp - 1] : kWei[p.sp - 1];
  return p;
}

// Plain-layout memory descs of a problem and ones whose format oneDNN picks (any).
struct Descs {
  dnnl_memory_desc_t src, wei, dst, bias;
};
Descs descs(const Problem& p, bool any) {
  const OnednnLib& lib = onednn_lib();
  Descs d;
  const int nd = 2 + p.sp;
  check(lib.memory_desc_init_by_tag(&d.src, nd, p.src, dnnl_f32,
                                    any ? dnnl_format_tag_any : p.src_tag),
        "memory descriptor");
  check(lib.memory_desc_init_by_tag(&d.dst, nd, p.dst, dnnl_f32,
                                    any ? dnnl_format_tag_any : p.src_tag),
        "memory descriptor");
  check(lib.memory_desc_init_by_tag(&d.wei, p.wei_nd, p.wei, dnnl_f32,
                                    any ? dnnl_format_tag_any : p.wei_tag),
        "memory descriptor");
  check(lib.memory_desc_init_by_tag(&d.bias, 1, p.bias, dnnl_f32, dnnl_a), "memory descriptor");
  return d;
}

// Creates the primitive of pass for g, or returns null when oneDNN has no implementation (or
// only its reference one, far slower than im2col).
std::shared_ptr<Conv> create(Pass pass, const ConvGeometry& g, bool with_bias) {
  const OnednnLib& lib = onednn_lib();
  const Problem p = problem(g);
  const Descs plain = descs(p, false), want = descs(p, true);
  const dnnl_alg_kind_t alg = dnnl_convolution_direct;
  // The forward primitive desc: the forward pass itself, or the hint the backward ones need.
  // invalid_arguments from a descriptor: a geometry oneDNN does not express (a transposed
  // conv's output_padding beyond what its padding rule allows), left to im2col.
  dnnl_convolution_desc_t fwd;
  dnnl_status_t status = lib.conv_forward_desc_init(
      &fwd, dnnl_forward_training, alg, &want.src, &want.wei, with_bias ? &want.bias : nullptr,
      &want.dst, p.strides, p.dilates, p.pad_l, p.pad_r);
  dnnl_primitive_desc_t fwd_pd = nullptr, pd = nullptr;
  if (status == dnnl_success) {
    status = lib.primitive_desc_create(&fwd_pd, &fwd, nullptr, lib.engine, nullptr);
  }
  if (status == dnnl_success && pass == Pass::kForward) {
    pd = fwd_pd;
    fwd_pd = nullptr;
  } else if (status == dnnl_success) {
    dnnl_convolution_desc_t bwd;
    status = pass == Pass::kData
                 ? lib.conv_data_desc_init(&bwd, alg, &want.src, &want.wei, &want.dst, p.strides,
                                           p.dilates, p.pad_l, p.pad_r)
                 : lib.conv_weights_desc_init(&bwd, alg, &want.src, &want.wei, nullptr, &want.dst,
                                              p.strides, p.dilates, p.pad_l, p.pad_r);
    if (status == dnnl_success) {
      status = lib.primitive_desc_create(&pd, &bwd, nullptr, lib.engine, fwd_pd);
    }
  }
  if (fwd_pd != nullptr) lib.primitive_desc_destroy(fwd_pd);
  if (status == dnnl_unimplemented || status == dnnl_invalid_arguments) return nullptr;
  check(status, "convolution primitive descriptor");
  auto conv = std::make_shared<Conv>();
  try {
    const char* impl = nullptr;
    check(lib.primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), "query");
    const std::string_view name = impl != nullptr ? impl : "ref";
    if (name.find("ref") != std::string_view::npos) {
      lib.primitive_desc_destroy(pd);
      return nullptr;
    }
    conv->direct = name.find("gemm") == std::string_view::npos;
    // The arguments: (DNNL_ARG, output?, plain desc, the query of oneDNN's desc).
    struct Spec {
      int arg;
      bool output;
      const dnnl_memory_desc_t* user;
      dnnl_query_t query;
    };
    std::vector<Spec> specs;
    if (pass == Pass::kForward) {
      specs = {{DNNL_ARG_SRC, false, &plain.src, dnnl_query_src_md},
               {DNNL_ARG_WEIGHTS, false, &plain.wei, dnnl_query_weights_md},
               {DNNL_ARG_DST, true, &plain.dst, dnnl_query_dst_md}};
      if (with_bias) specs.push_back({DNNL_ARG_BIAS, false, &plain.bias, dnnl_query_weights_md});
    } else if (pass == Pass::kData) {
      specs = {{DNNL_ARG_DIFF_DST, false, &plain.dst, dnnl_query_diff_dst_md},
               {DNNL_ARG_WEIGHTS, false, &plain.wei, dnnl_query_weights_md},
               {DNNL_ARG_DIFF_SRC, true, &plain.src, dnnl_query_diff_src_md}};
    } else {
      specs = {{DNNL_ARG_SRC, false, &plain.src, dnnl_query_src_md},
               {DNNL_ARG_DIFF_DST, false, &plain.dst, dnnl_query_diff_dst_md},
               {DNNL_ARG_DIFF_WEIGHTS, true, &plain.wei, dnnl_query_diff_weights_md}};
    }
    for (const Spec& s : specs) {
      Arg a;
      a.arg = s.arg;
      a.output = s.output;
      a.user = *s.user;
      // The bias is weights index 1 of a forward primitive.
      const dnnl_memory_desc_t* md =
          lib.primitive_desc_query_md(pd, s.query, s.arg == DNNL_ARG_BIAS ? 1 : 0);
      DT_CHECK(md != nullptr, "[convolution] oneDNN returned no memory descriptor");
      a.inner = *md;
      if (!lib.memory_desc_equal(&a.user, &a.inner)) {
        dnnl_primitive_desc_t rpd = nullptr;
        const dnnl_memory_desc_t* from = s.output ? &a.inner : &a.user;
        const dnnl_memory_desc_t* to = s.output ? &a.user : &a.inner;
        check(lib.reorder_primitive_desc_create(&rpd, from, lib.engine, to, lib.engine, nullptr),
              "reorder primitive descriptor");
        const dnnl_status_t st = lib.primitive_create(&a.reorder, rpd);
        lib.primitive_desc_destroy(rpd);
        check(st, "reorder primitive");
        a.offset = conv->scratch;
        a.bytes = (lib.memory_desc_get_size(&a.inner) + 63) / 64 * 64;
        conv->scratch += a.bytes;
      }
      conv->args.push_back(a);
    }
    check(lib.primitive_create(&conv->primitive, pd), "convolution primitive");
  } catch (...) {
    lib.primitive_desc_destroy(pd);
    throw;
  }
  lib.primitive_desc_destroy(pd);
  return conv;
}

// The primitives built so far on this thread, by (pass, bias, thread count, geometry); null where
// oneDNN has none (remembered too, so im2col is chosen without asking again). One cache per
// thread: Debian's oneDNN is built without concurrent execution (DNNL_ENABLE_CONCURRENT_EXEC=OFF),
// where a primitive with a library-managed scratchpad must run on the thread that created it and
// never twice at once, so threads running convolutions side by side each build their own.
class Cache {
 public:
  std::shared_ptr<Conv> get(Pass pass, const ConvGeometry& g, bool with_bias, int threads) {
    std::vector<int64_t> key = {
        static_cast<int64_t>(pass), with_bias, threads, g.n, g.groups, g.ci, g.co};
    for (const auto* a : {&g.im, &g.col, &g.k, &g.stride, &g.pad, &g.dil}) {
      key.insert(key.end(), a->begin(), a->end());
    }
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    // A bound on what a program with ever-changing shapes keeps (each entry holds oneDNN's
    // generated code): start over when it is reached. Calls running a dropped entry keep it alive.
    if (map_.size() >= 1024) map_.clear();
    std::shared_ptr<Conv> conv = create(pass, g, with_bias);
    map_.emplace(std::move(key), conv);
    return conv;
  }

 private:
  std::map<std::vector<int64_t>, std::shared_ptr<Conv>> map_;
};

Cache& cache() {
  // Never destroyed: no oneDNN calls during thread or static destruction (a thread's entries are
  // leaked when it ends; programs run convolutions on few, long-lived threads).
  thread_local Cache* c = new Cache();
  return *c;
}

// A CPU stream per thread (an in-order stream is not shared between threads).
dnnl_stream_t thread_stream() {
  struct Holder {
    dnnl_stream_t stream = nullptr;
    ~Holder() {
      if (stream != nullptr) onednn_lib().stream_destroy(stream);
    }
  };
  thread_local Holder h;
  if (h.stream == nullptr) {
    const OnednnLib& lib = onednn_lib();
    check(lib.stream_create(&h.stream, lib.engine, dnnl_stream_default_flags), "stream");
  }
  return h.stream;
}

// Memory objects of one call, destroyed at its end.
class Memories {
 public:
  dnnl_memory_t make(const dnnl_memory_desc_t& md, void* data) {
    dnnl_memory_t m = nullptr;
    check(onednn_lib().memory_create(&m, &md, onednn_lib().engine, data), "memory");
    mems_.push_back(m);
    return m;
  }
  ~Memories() {
    for (dnnl_memory_t m : mems_) onednn_lib().memory_destroy(m);
  }

 private:
  std::vector<dnnl_memory_t> mems_;
};

// A cached primitive dtensor runs: oneDNN has one, and it is a direct kernel (or the user
// forces oneDNN).
bool usable(const std::shared_ptr<Conv>& conv) {
  return conv != nullptr && (conv->direct || forced() == "onednn");
}

// An input of a primitive already in oneDNN's layout (args[index] of the Conv): not reordered.
struct Given {
  int index = -1;
  dnnl_memory_t inner = nullptr;
};

// Where conv's reordered arguments go in a scratch buffer at base (its own layout; null for an
// argument used as is).
std::vector<char*> slots(const Conv& conv, char* base) {
  std::vector<char*> at;
  for (const Arg& a : conv.args) at.push_back(a.reorder != nullptr ? base + a.offset : nullptr);
  return at;
}

// Runs conv on the plain buffers data[i] (in the order of Conv::args), the reordered arguments
// at at[i], except `given`; queued on stream (the caller waits). Returns the memories the
// primitive read its arguments from (oneDNN's layout).
std::vector<dnnl_memory_t> execute(const Conv& conv, const std::vector<void*>& data,
                                   const std::vector<char*>& at, dnnl_stream_t stream,
                                   Memories& mems, Given given = {}) {
  const OnednnLib& lib = onednn_lib();
  std::vector<dnnl_exec_arg_t> args;
  std::vector<dnnl_memory_t> used;
  std::vector<std::pair<dnnl_primitive_t, std::array<dnnl_memory_t, 2>>> after;
  for (size_t i = 0; i < conv.args.size(); ++i) {
    const Arg& a = conv.args[i];
    if (static_cast<int>(i) == given.index) {
      args.push_back({a.arg, given.inner});
      used.push_back(given.inner);
      continue;
    }
    dnnl_memory_t user = mems.make(a.user, data[i]);
    if (a.reorder == nullptr) {
      args.push_back({a.arg, user});
      used.push_back(user);
      continue;
    }
    dnnl_memory_t inner = mems.make(a.inner, at[i]);
    args.push_back({a.arg, inner});
    used.push_back(inner);
    if (a.output) {
      after.push_back({a.reorder, {inner, user}});
    } else {
      const dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}};
      check(lib.primitive_execute(a.reorder, stream, 2, r), "reorder");
    }
  }
  check(lib.primitive_execute(conv.primitive, stream, static_cast<int>(args.size()), args.data()),
        "convolution");
  for (const auto& [reorder, m] : after) {
    const dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, m[0]}, {DNNL_ARG_TO, m[1]}};
    check(lib.primitive_execute(reorder, stream, 2, r), "reorder");
  }
  return used;
}

// The reordered arguments' scratch: bytes of dtensor's caching allocator.
Tensor scratch_tensor(size_t bytes) {
  return empty({static_cast<int64_t>(bytes / sizeof(float))}, TensorOptions(kFloat32));
}

// Runs pass on the plain buffers data[i] (in the order of Conv::args); false when oneDNN has
// no implementation for g.
bool run(Pass pass, const ConvGeometry& g, std::vector<void*> data, bool with_bias) {
  const int threads = onednn_set_threads();
  const std::shared_ptr<Conv> conv = cache().get(pass, g, with_bias, threads);
  if (!usable(conv)) return false;
  const Tensor scratch = scratch_tensor(conv->scratch);
  dnnl_stream_t stream = thread_stream();
  Memories mems;
  execute(*conv, data, slots(*conv, static_cast<char*>(scratch.data_ptr())), stream, mems);
  check(onednn_lib().stream_wait(stream), "stream wait");
  return true;
}

bool empty_problem(const ConvGeometry& g) {
  return g.n == 0 || g.ci == 0 || g.co == 0 || g.im_size() == 0 || g.col_size() == 0;
}

}  // namespace

bool conv_use_onednn(const ConvGeometry& g) {
  const std::string_view user = forced();
  if (user == "im2col") return false;
  const OnednnLib& lib = onednn_lib();
  if (user == "onednn") {
    DT_CHECK(lib.error.empty(), "[convolution] %s=onednn, but %s", kVariable, lib.error);
    return true;
  }
  return lib.error.empty() && !is_pointwise(g);
}

std::string conv_backend_info_str() {
  const auto [user, by, bad] = onednn_switch_report(kVariable, "onednn", "im2col", kOp);
  if (!bad.empty()) return bad;  // a report must not fail on a bad variable
  const OnednnLib& lib = onednn_lib();
  if (user == "im2col") return absl::StrCat("im2col + OpenBLAS sgemm (", by, ")");
  if (!lib.error.empty()) {
    if (user == "onednn") return absl::StrCat("none: ", kVariable, "=onednn, but ", lib.error);
    return absl::StrCat("im2col + OpenBLAS sgemm (oneDNN unusable: ", lib.error, ")");
  }
  return absl::StrCat("oneDNN ", lib.version_str, " (ISA ", lib.isa, ", ", by,
                      user.empty() ? "; 1x1 unpadded stride-1 convs on im2col + sgemm" : "",
                      "; float64 on im2col + sgemm)");
}

bool conv_forward_onednn(const ConvGeometry& g, const float* im, const float* w, const float* bias,
                         float* col) {
  if (empty_problem(g)) return false;
  std::vector<void*> data = {const_cast<float*>(im), const_cast<float*>(w), col};
  if (bias != nullptr) data.push_back(const_cast<float*>(bias));
  return run(Pass::kForward, g, std::move(data), bias != nullptr);
}

bool conv_data_onednn(const ConvGeometry& g, const float* col, const float* w, float* im) {
  if (empty_problem(g)) return false;
  return run(Pass::kData, g, {const_cast<float*>(col), const_cast<float*>(w), im}, false);
}

bool conv_weight_onednn(const ConvGeometry& g, const float* im, const float* col, float* gw) {
  if (empty_problem(g)) return false;
  return run(Pass::kWeight, g, {const_cast<float*>(im), const_cast<float*>(col), gw}, false);
}

bool conv_backward_onednn(const ConvGeometry& g, const Tensor& col, const Tensor& im,
                          const Tensor& w, const Tensor& gim, const Tensor& gw) {
  if (im.dtype() != kFloat32 || empty_problem(g) || !conv_use_onednn(g)) return false;
  const int threads = onednn_set_threads();
  const std::shared_ptr<Conv> data = cache().get(Pass::kData, g, false, threads);
  const std::shared_ptr<Conv> weight = cache().get(Pass::kWeight, g, false, threads);
  if (!usable(data) || !usable(weight)) return false;
  // grad_output (col) is args[0] of the data pass, args[1] of the weight pass: shared when both
  // reorder it into the same layout.
  const Arg& a = data->args[0];
  const Arg& b = weight->args[1];
  if (a.reorder == nullptr || b.reorder == nullptr ||
      !onednn_lib().memory_desc_equal(&a.inner, &b.inner)) {
    return false;
  }
  // One scratch buffer: the data pass's layout (grad_output first: a's offset is 0), then the
  // weight pass's blocked input and weight gradient over the data pass's blocked weights and input
  // gradient, which the in-order stream has read by then (no more memory than one pass alone).
  const Arg& x = weight->args[0];
  const Arg& dw = weight->args[2];
  const size_t after_go = a.bytes + x.bytes + dw.bytes;
  const Tensor scratch = scratch_tensor(std::max(data->scratch, after_go));
  char* base = static_cast<char*>(scratch.data_ptr());
  const std::vector<char*> weight_at = {x.reorder != nullptr ? base + a.bytes : nullptr, nullptr,
                                        dw.reorder != nullptr ? base + a.bytes + x.bytes : nullptr};
  void* go = col.data_ptr();
  dnnl_stream_t stream = thread_stream();
  Memories mems;
  const std::vector<dnnl_memory_t> used =
      execute(*data, {go, w.data_ptr(), gim.data_ptr()}, slots(*data, base), stream, mems);
  execute(*weight, {im.data_ptr(), go, gw.data_ptr()}, weight_at, stream, mems, Given{1, used[0]});
  check(onednn_lib().stream_wait(stream), "stream wait");
  return true;
}

}  // namespace dtensor::detail
