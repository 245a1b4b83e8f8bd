#include "dtensor/rng/distributions.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "dtensor/ops/threads.h"
#include "dtensor/rng/detail/cuda_launch.h"
#include "dtensor/rng/detail/distributions_impl.h"
#include "dtensor/rng/detail/fill_internal.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

std::string_view random_kind_name(RandomKind k) {
  switch (k) {
    case RandomKind::kUniform:
      return "uniform";
    case RandomKind::kNormal:
      return "normal";
    case RandomKind::kBernoulli:
      return "bernoulli";
    case RandomKind::kRandint:
      return "randint";
    case RandomKind::kDropoutMask:
      return "dropout_mask";
  }
  return "?";
}

// Aggregate initialisation: each factory names only the fields its kind reads.
RandomSpec RandomSpec::uniform(DType dtype, double low, double high) {
  return {.kind = RandomKind::kUniform, .dtype = dtype, .low = low, .high = high};
}
RandomSpec RandomSpec::normal(DType dtype, double mean, double stddev) {
  return {.kind = RandomKind::kNormal, .dtype = dtype, .mean = mean, .stddev = stddev};
}
RandomSpec RandomSpec::bernoulli(DType dtype, double p) {
  return {.kind = RandomKind::kBernoulli, .dtype = dtype, .p = p};
}
RandomSpec RandomSpec::randint(DType dtype, int64_t low, int64_t high) {
  return {.kind = RandomKind::kRandint, .dtype = dtype, .int_low = low, .int_high = high};
}
RandomSpec RandomSpec::dropout_mask(DType dtype, double p) {
  return {.kind = RandomKind::kDropoutMask, .dtype = dtype, .p = p};
}

void check_random_spec(const RandomSpec& s, std::string_view op) {
  const std::string_view kind = random_kind_name(s.kind);
  switch (s.kind) {
    case RandomKind::kUniform:
      DT_CHECK(is_floating(s.dtype), "[%s] uniform needs a floating dtype, got %s", op,
               dtype_name(s.dtype));
      DT_CHECK(std::isfinite(s.low) && std::isfinite(s.high) && s.low <= s.high,
               "[%s] uniform expects finite low <= high, got low=%g high=%g", op, s.low, s.high);
      break;
    case RandomKind::kNormal:
      DT_CHECK(is_floating(s.dtype), "[%s] normal needs a floating dtype, got %s", op,
               dtype_name(s.dtype));
      DT_CHECK(std::isfinite(s.mean) && std::isfinite(s.stddev) && s.stddev >= 0.0,
               "[%s] normal expects finite mean and std >= 0, got mean=%g std=%g", op, s.mean,
               s.stddev);
      break;
    case RandomKind::kBernoulli:
    case RandomKind::kDropoutMask:
      DT_CHECK(s.kind == RandomKind::kBernoulli || is_floating(s.dtype),
               "[%s] dropout needs a floating dtype, got %s", op, dtype_name(s.dtype));
      DT_CHECK(s.p >= 0.0 && s.p <= 1.0, "[%s] %s expects p in [0, 1], got p=%g", op, kind, s.p);
      break;
    case RandomKind::kRandint: {
      DT_CHECK(s.dtype != DType::kBool, "[%s] randint needs an integer or floating dtype, got %s",
               op, dtype_name(s.dtype));
      DT_CHECK(s.int_low < s.int_high, "[%s] randint expects low < high, got low=%d high=%d", op,
               s.int_low, s.int_high);
      if (s.dtype == DType::kInt32) {
        DT_CHECK(s.int_low >= std::numeric_limits<int32_t>::min() &&
                     s.int_high - 1 <= std::numeric_limits<int32_t>::max(),
                 "[%s] randint range [%d, %d) does not fit int32", op, s.int_low, s.int_high);
      }
      break;
    }
    default:
      DT_FAIL("[%s] unknown random kind %d", op, static_cast<int>(s.kind));
  }
}

int64_t words_per_element(const RandomSpec& s) {
  check_random_spec(s, "words_per_element");
  switch (s.kind) {
    case RandomKind::kUniform:
      return s.dtype == DType::kFloat64 ? 2 : 1;
    case RandomKind::kNormal:
      return s.dtype == DType::kFloat64 ? 4 : 2;
    case RandomKind::kBernoulli:
      return 1;
    case RandomKind::kRandint:
      return 2;
    case RandomKind::kDropoutMask:
      return 1;
  }
  return 1;
}

uint64_t words_to_reserve(const RandomSpec& spec, int64_t numel) {
  DT_CHECK(numel >= 0, "[words_to_reserve] numel must be >= 0, got %d", numel);
  const uint64_t w = static_cast<uint64_t>(numel) * static_cast<uint64_t>(words_per_element(spec));
  return (w + 3) / 4 * 4;
}

namespace {

std::atomic<int> g_rng_threads{0};

detail::RngDType rng_dtype(DType d) {
  return static_cast<detail::RngDType>(static_cast<int>(d));
}

void launch_or_throw(const detail::RngLaunch& l, std::string_view op) {
  const char* err = detail::rng_cuda_launch(l);
  DT_CHECK(err == nullptr, "[%s] CUDA launch failed: %s", op, err ? err : "");
}

// Fills the launch's geometry for a contiguous CUDA operand from the (uncoalesced) block.
void set_launch_geometry(detail::RngLaunch& l, const detail::BlockGeometry& g,
                         std::string_view op) {
  // Use the coalesced geometry; the CUDA kernels walk contiguous memory, so take the block
  // sizes and global strides only.
  DT_CHECK(static_cast<int>(g.size.size()) <= detail::kRngMaxDims,
           "[%s] at most %d non-trivial dims are supported on CUDA, got %d", op,
           detail::kRngMaxDims, static_cast<int>(g.size.size()));
  l.ndim = static_cast<int>(g.size.size());
  for (int d = 0; d < l.ndim; ++d) {
    l.size[d] = g.size[d];
    l.gstride[d] = g.gstride[d];
  }
  l.gbase = g.gbase;
  l.numel = g.numel;
}

void check_block_args(std::string_view op, const Tensor& t, IntSpan global_shape,
                      IntSpan block_offset) {
  DT_CHECK(t.defined(), "[%s] the output tensor is undefined", op);
  DT_CHECK(static_cast<int64_t>(global_shape.size()) == t.dim() &&
               static_cast<int64_t>(block_offset.size()) == t.dim(),
           "[%s] block rank %d, global_shape %s and block_offset %s must have the same rank", op,
           t.dim(), shape_str(global_shape), shape_str(block_offset));
}

}  // namespace

namespace detail {

BlockGeometry make_block_geometry(std::string_view op, IntSpan block_shape, IntSpan global_shape,
                                  IntSpan block_offset, const IntSpan* operand_strides, int nops) {
  const int64_t nd = static_cast<int64_t>(block_shape.size());
  for (int64_t d = 0; d < nd; ++d) {
    DT_CHECK(global_shape[d] >= 0, "[%s] global_shape %s has a negative size", op,
             shape_str(global_shape));
    DT_CHECK(block_offset[d] >= 0 && block_offset[d] + block_shape[d] <= global_shape[d],
             "[%s] block of shape %s at offset %s does not fit in global shape %s (dim %d)", op,
             shape_str(block_shape), shape_str(block_offset), shape_str(global_shape), d);
  }
  BlockGeometry g;
  g.nops = nops;
  g.numel = shape_numel(block_shape);
  const Shape gstrides = contiguous_strides(global_shape);
  for (int64_t d = 0; d < nd; ++d) {
    g.gbase += static_cast<uint64_t>(block_offset[d] * gstrides[d]);
  }
  if (g.numel == 0) return g;
  for (int64_t d = 0; d < nd; ++d) {
    if (block_shape[d] == 1) continue;
    const size_t n = g.size.size();
    bool merge = n > 0 && g.gstride[n - 1] == gstrides[d] * block_shape[d];
    for (int k = 0; k < nops && merge; ++k) {
      merge = g.stride[k][n - 1] == operand_strides[k][d] * block_shape[d];
    }
    if (merge) {
      g.size[n - 1] *= block_shape[d];
      g.gstride[n - 1] = gstrides[d];
      for (int k = 0; k < nops; ++k) g.stride[k][n - 1] = operand_strides[k][d];
    } else {
      g.size.push_back(block_shape[d]);
      g.gstride.push_back(gstrides[d]);
      for (int k = 0; k < nops; ++k) g.stride[k].push_back(operand_strides[k][d]);
    }
  }
  if (g.size.empty()) {  // a single element
    g.size.push_back(1);
    g.gstride.push_back(1);
    for (int k = 0; k < nops; ++k) g.stride[k].push_back(1);
  }
  return g;
}

}  // namespace detail

void fill_random(const Tensor& out, const RandomSpec& spec, uint64_t seed, uint64_t offset,
                 IntSpan global_shape, IntSpan block_offset) {
  constexpr std::string_view op = "fill_random";
  check_block_args(op, out, global_shape, block_offset);
  check_random_spec(spec, op);
  DT_CHECK(out.dtype() == spec.dtype, "[fill_random] out has dtype %s but the spec asks for %s",
           dtype_name(out.dtype()), dtype_name(spec.dtype));
  if (out.device().is_cpu()) {
    const IntSpan strides(out.strides());
    const detail::BlockGeometry g =
        detail::make_block_geometry(op, out.sizes(), global_shape, block_offset, &strides, 1);
    detail::fill_random_cpu(out, spec, seed, offset, g);
    return;
  }
  // CUDA: generate into a contiguous buffer, copy into `out` when it is strided.
  const Tensor dst = out.is_contiguous() ? out : empty(out.sizes(), {out.dtype(), out.device()});
  const IntSpan strides(dst.strides());
  const detail::BlockGeometry g =
      detail::make_block_geometry(op, dst.sizes(), global_shape, block_offset, &strides, 1);
  if (g.numel == 0) return;
  detail::RngLaunch l;
  l.kind = static_cast<int>(spec.kind);
  l.dtype = rng_dtype(spec.dtype);
  l.device = out.device().index;
  l.out = dst.data_ptr();
  set_launch_geometry(l, g, op);
  l.seed = seed;
  l.offset = offset;
  switch (spec.kind) {
    case RandomKind::kUniform:
      l.a = spec.low;
      l.b = spec.high - spec.low;
      break;
    case RandomKind::kNormal:
      l.a = spec.mean;
      l.b = spec.stddev;
      break;
    case RandomKind::kBernoulli:
      l.threshold = detail::bernoulli_threshold(spec.p);
      break;
    case RandomKind::kRandint:
      l.int_low = spec.int_low;
      l.int_range = static_cast<uint64_t>(spec.int_high) - static_cast<uint64_t>(spec.int_low);
      break;
    case RandomKind::kDropoutMask:
      l.threshold = detail::bernoulli_threshold(spec.p);
      l.a = spec.p < 1.0 ? 1.0 / (1.0 - spec.p) : 0.0;
      break;
  }
  launch_or_throw(l, op);
  if (dst.data_ptr() != out.data_ptr()) {
    Tensor target = out;
    target.copy_(dst);
  }
}

void dropout_block(const Tensor& input, const Tensor& out, const Tensor& mask, double p,
                   uint64_t seed, uint64_t offset, IntSpan global_shape, IntSpan block_offset) {
  constexpr std::string_view op = "dropout";
  check_block_args(op, out, global_shape, block_offset);
  DT_CHECK(input.defined(), "[dropout] input is undefined");
  DT_CHECK(is_floating(input.dtype()), "[dropout] input must be floating, got %s",
           dtype_name(input.dtype()));
  DT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] expects p in [0, 1], got p=%g", p);
  DT_CHECK(input.sizes() == out.sizes() && input.dtype() == out.dtype() &&
               input.device() == out.device(),
           "[dropout] input %s %s on %s and out %s %s on %s must match", shape_str(input.sizes()),
           dtype_name(input.dtype()), input.device().str(), shape_str(out.sizes()),
           dtype_name(out.dtype()), out.device().str());
  if (mask.defined()) {
    DT_CHECK(mask.sizes() == out.sizes() && mask.dtype() == DType::kBool &&
                 mask.device() == out.device(),
             "[dropout] mask must be a bool tensor of shape %s on %s, got %s %s on %s",
             shape_str(out.sizes()), out.device().str(), shape_str(mask.sizes()),
             dtype_name(mask.dtype()), mask.device().str());
  }
  if (out.device().is_cpu()) {
    IntSpan strides[3] = {input.strides(), out.strides(),
                          mask.defined() ? IntSpan(mask.strides()) : IntSpan(out.strides())};
    const detail::BlockGeometry g = detail::make_block_geometry(
        op, out.sizes(), global_shape, block_offset, strides, mask.defined() ? 3 : 2);
    detail::dropout_cpu(input, out, mask, p, seed, offset, g);
    return;
  }
  const Tensor in_c = input.contiguous();
  const Tensor out_c = out.is_contiguous() ? out : empty(out.sizes(), {out.dtype(), out.device()});
  Tensor mask_c;
  if (mask.defined()) {
    mask_c = mask.is_contiguous() ? mask : empty(mask.sizes(), {DType::kBool, mask.device()});
  }
  const IntSpan strides(out_c.strides());
  const detail::BlockGeometry g =
      detail::make_block_geometry(op, out_c.sizes(), global_shape, block_offset, &strides, 1);
  if (g.numel == 0) return;
  detail::RngLaunch l;
  l.kind = -1;
  l.dtype = rng_dtype(out.dtype());
  l.device = out.device().index;
  l.out = out_c.data_ptr();
  l.in = in_c.data_ptr();
  l.mask = mask.defined() ? static_cast<bool*>(mask_c.data_ptr()) : nullptr;
  set_launch_geometry(l, g, op);
  l.seed = seed;
  l.offset = offset;
  l.threshold = detail::bernoulli_threshold(p);
  l.a = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  launch_or_throw(l, op);
  if (out_c.data_ptr() != out.data_ptr()) {
    Tensor target = out;
    target.copy_(out_c);
  }
  if (mask.defined() && mask_c.data_ptr() != mask.data_ptr()) {
    Tensor target = mask;
    target.copy_(mask_c);
  }
}

void set_rng_num_threads(int n) {
  DT_CHECK(n >= 0, "[set_rng_num_threads] n must be >= 0, got %d", n);
  g_rng_threads.store(n);
}

int rng_num_threads() {
  const int n = g_rng_threads.load();
  // By default the generator follows the intra-op count: it used to take every hardware thread,
  // which oversubscribes the cores when several ranks share them.
  return n > 0 ? n : get_num_threads();
}

}  // namespace dtensor
