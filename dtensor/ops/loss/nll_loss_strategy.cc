// Registration of nll_loss and its gradient op nll_loss_backward (the DTensor nll_loss in
// loss_dtensor.cc is one dispatch of it; the backward formula is in loss_backward.cc).
//
// nll_loss(input, target[, weight]; reduction, ignore_index, has_weight) -> (output,
// total_weight), as PyTorch's nll_loss_forward. For input [N, C, d...] (or [C]) and target
// [N, d...] (or []): loss_i = -weight[t_i] * input[i, t_i], 0 where t_i is ignore_index; 'sum'
// adds them, 'mean' divides the sum by W, the sum of weight[t_i] over the counted elements
// (their count without weights; nothing counted gives 0 / 0 = NaN, as PyTorch). total_weight
// is W for the mean (0-d, the input's dtype or float32 for 16-bit inputs, Replicate), which the
// backward divides by instead of reducing W again; 0 for 'sum' and 'none' (their backward does not
// read it). Rows for one mesh dim (outputs | input, target, weight; total_weight is R in every
// row):
//   [P(sum) | S(class dim), R, S(0)]   loss parallel: each rank picks the targets that fall in
//                                      its class block (0 elsewhere), the weights sharded like
//                                      the classes; the sum over ranks is the loss, and the
//                                      input is never gathered
//   [S(k) | S(d), S(k), R]             'none': a batch / spatial dim d of the input, k of target
//   [P(sum) | S(d), S(k), R]           'sum' / 'mean': each rank's sum over its elements (divided
//                                      by the GLOBAL W), exact for uneven and empty shards
//   [P | P, R, R]                      linear in the input (Partial inputs pass through)
// The mean is reduced by the kernel (R where the rows above say P): each rank sums the weights
// of its counted targets that fall in its block of the weights, and ONE all-reduce of (loss
// sum, W, out-of-range flag) runs per mesh dim where the INPUT is sharded (class or batch dims
// alike: an unweighted class-sharded mean has a replicated target and no weights, and still
// needs it; none on one process). The target is sharded on no other dims, so the flag reaches
// every rank that may hold different targets. Targets out of range raise "[nll_loss] target 7
// out of range for 5 classes (raised on rank R)" on all those ranks (the message is agreed on
// only when the flag is up; 'sum' and 'none' check before anything else).
//
// nll_loss_backward(grad, target, total_weight[, weight]; input_shape, reduction, ignore_index,
// has_weight): the input's gradient, zeros with -weight[t_i] * grad_i / W (W = total_weight for
// 'mean', else 1) at [i, t_i] (PyTorch's formula), with no communication. Rows as nll_loss's,
// output and grad swapped: [S(class) | R, R, R, S(0)] and [S(d) | S(k), S(k), R, R] ('none'),
// [S(d) | R, S(k), R, R] (a reduced loss's 0-d grad); linear in grad.
#include <absl/strings/str_format.h>

#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/loss/detail/loss_backward.h"
#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

using Locals = absl::Span<const Tensor>;
constexpr const char* kOp = "nll_loss";

int64_t class_dim_of(int64_t input_ndim) {
  return input_ndim == 1 ? 0 : 1;
}

// The args from `first` on: reduction, ignore_index, has_weight.
struct NllCall {
  Reduction reduction;
  int64_t ignore_index;
  bool has_weight;
};

template <typename Ctx>
NllCall parse_nll_call(const Ctx& c, int64_t first) {
  return {parse_reduction(c.template arg<std::string_view>(first), std::string_view(kOp)),
          c.template arg<int64_t>(first + 1), c.template arg<bool>(first + 2)};
}

// total_weight's dtype: the input's, as PyTorch's, except float32 for 16-bit inputs: the mean's
// backward divides by it, and W (a count of targets, or a sum of weights) overflows float16
// above 65504 (every gradient would be 0) and loses bfloat16's low bits (the backward's scale
// would differ from the forward's, which divides in double).
DType total_weight_dtype(DType input) {
  return input == DType::kFloat16 || input == DType::kBFloat16 ? DType::kFloat32 : input;
}

// The argument checks (the messages the composed DTensor nll_loss raised).
OutputMetas nll_meta(const OpSchema& s) {
  const NllCall call = parse_nll_call(s, 0);
  check_reduction(kOp, call.reduction, false);
  DT_CHECK(s.num_inputs() == (call.has_weight ? 3 : 2),
           "[%s] expected %d DTensor inputs (input, target%s), got %d", kOp,
           call.has_weight ? 3 : 2, call.has_weight ? ", weight" : "", s.num_inputs());
  const DTensorSpec& x = s.input(0);
  const DTensorSpec& t = s.input(1);
  DT_CHECK(is_floating(x.dtype()), "[%s] argument input has dtype %s, expected a floating dtype",
           kOp, dtype_name(x.dtype()));
  DT_CHECK(x.ndim() >= 1, "[%s] argument input is 0-d, expected [C], [N, C] or [N, C, ...]", kOp);
  const int64_t class_dim = class_dim_of(x.ndim());
  Shape expected = x.shape();
  expected.erase(expected.begin() + class_dim);
  DT_CHECK(t.shape() == expected && (t.dtype() == kInt64 || t.dtype() == kInt32),
           "[%s] argument target has shape %s and dtype %s, expected %s and int64 (or int32)", kOp,
           shape_str(t.shape()), dtype_name(t.dtype()), shape_str(expected));
  if (call.has_weight) {
    const DTensorSpec& w = s.input(2);
    const int64_t classes = x.shape()[class_dim];
    DT_CHECK(w.ndim() == 1 && w.shape()[0] == classes && is_floating(w.dtype()),
             "[%s] weight of shape %s and dtype %s, expected [%d] floating (one weight per class)",
             kOp, shape_str(w.shape()), dtype_name(w.dtype()), classes);
  }
  const bool none = call.reduction == Reduction::kNone;
  return OutputMetas{TensorMeta(none ? t.shape() : Shape{}, x.dtype()),
                     TensorMeta({}, total_weight_dtype(x.dtype()))};
}

// Where the operand `weight` (when given) sits: after input and target in nll_loss, after grad,
// target and total_weight in nll_loss_backward.
constexpr int64_t kForwardWeight = 2;
constexpr int64_t kGradWeight = 3;

// The rows of both ops (`grad_op`: the gradient op's, whose operand 0 is the grad).
StrategyRows nll_rows(int64_t input_ndim, const NllCall& call, bool grad_op) {
  const int64_t class_dim = class_dim_of(input_ndim);
  const bool none = call.reduction == Reduction::kNone;
  // The mean is reduced by the kernel itself (with the weight sum it must all-reduce anyway).
  const Placement reduced =
      call.reduction == Reduction::kMean ? Placement(Replicate()) : Placement(Partial());
  StrategyRows rows;
  // total_weight is Replicate throughout: the forward's output, the gradient op's input.
  const auto add = [&](Placement out, Placement x_or_grad, Placement target, Placement weight) {
    Placements row = grad_op ? Placements{out, x_or_grad, target, Replicate()}
                             : Placements{out, Replicate(), x_or_grad, target};
    if (call.has_weight) row.push_back(weight);
    rows.push_back(std::move(row));
  };
  // The weights follow the classes (a replicated weight is sliced, free): offering them
  // replicated too would let one mesh dim take R and another S(0) for a nested class sharding,
  // whose weight blocks would not hold the input's classes.
  if (grad_op) {
    add(Shard(class_dim), Replicate(), Replicate(), Shard(0));
  } else {
    add(none ? Placement(Partial()) : reduced, Shard(class_dim), Replicate(), Shard(0));
  }
  for (int64_t d = 0; d < input_ndim; ++d) {
    if (d == class_dim) continue;
    const int64_t k = d < class_dim ? d : d - 1;
    if (grad_op) {
      add(Shard(d), none ? Placement(Shard(k)) : Placement(Replicate()), Shard(k), Replicate());
    } else {
      add(none ? Placement(Shard(k)) : reduced, Shard(d), Shard(k), Replicate());
    }
  }
  // Linear in the input: the forward's Partial rows, written here since total_weight is not
  // Partial (the registry's linearity would make every output Partial); the gradient op's come
  // from its linearity (one output).
  if (!grad_op) {
    for (const ReduceOp rop : {ReduceOp::kSum, ReduceOp::kAvg}) {
      add(Partial(rop), Partial(rop), Replicate(), Replicate());
    }
  }
  return rows;
}

// The local block of the call: layout, offsets, the weights as doubles (block.weight points
// into `weights`, whose storage copies share; an empty block leaves it null).
struct LocalBlock {
  NllBlock block;
  LossLayout layout;
  Tensor weights;
};

// `input_shard`: this rank's shard of the log-probabilities (of the gradient op's output); the
// weights, when given, are operand `weight_operand`.
LocalBlock local_block(const KernelContext& c, const LocalShard& input_shard, const NllCall& call,
                       Locals l, int64_t weight_operand) {
  LocalBlock lb;
  const int64_t nd = static_cast<int64_t>(input_shard.shape.size());
  const int64_t class_dim = class_dim_of(nd);
  for (int64_t d = 0; d < nd; ++d) {
    if (d < class_dim) lb.layout.outer *= input_shard.shape[d];
    if (d > class_dim) lb.layout.inner *= input_shard.shape[d];
  }
  lb.layout.classes = input_shard.shape[class_dim];
  lb.block.class_offset = input_shard.offset[class_dim];
  lb.block.ignore_index = call.ignore_index;
  if (call.has_weight) {
    lb.weights = l[weight_operand].to(Device(kCPU), kFloat64).contiguous();
    lb.block.weight = lb.weights.numel() > 0 ? lb.weights.data<double>() : nullptr;
    lb.block.weight_offset = c.input_shard(weight_operand).offset[0];
  }
  return lb;
}

// This rank's targets read once: the first one out of range (as an error message; empty when
// none) and W's share, the weights of the counted targets in the rank's class block (their
// count without weights). Every target falls in one class block, so the shares add up to W
// over the mesh dims where the log-probabilities are sharded, class or batch dims alike.
struct TargetScan {
  std::string error;
  double weight_sum = 0;
};

std::string range_error(int64_t target, int64_t classes) {
  return absl::StrFormat("[%s] target %d out of range for %d classes", kOp, target, classes);
}

TargetScan scan_targets(const Tensor& target, int64_t classes, const LocalBlock& lb,
                        bool has_weight) {
  TargetScan s;
  const Tensor t = target.to(Device(kCPU), kInt64).contiguous();
  const int64_t* p = t.numel() > 0 ? t.data<int64_t>() : nullptr;
  const NllBlock& b = lb.block;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] == b.ignore_index) continue;
    if (p[i] < 0 || p[i] >= classes) {
      if (s.error.empty()) s.error = range_error(p[i], classes);
      continue;
    }
    if (p[i] < b.class_offset || p[i] >= b.class_offset + lb.layout.classes) continue;
    s.weight_sum += has_weight ? b.weight[p[i] - b.weight_offset] : 1.0;
  }
  return s;
}

// `values` summed over the ranks of every mesh dim where `sharded` is Shard (one all-reduce
// per such dim of size > 1; none on one process).
void sum_over_shards(const KernelContext& c, const DTensorSpec& sharded,
                     absl::Span<double> values) {
  const DeviceMesh& mesh = c.mesh();
  Tensor sums;
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    if (!sharded.placements()[m].is_shard() || mesh.size(m) == 1) continue;
    if (!sums.defined()) {
      sums =
          from_vector<double>(std::vector<double>(values.begin(), values.end()),
                              {static_cast<int64_t>(values.size())}, mesh_device(mesh, Tensor()));
    }
    mesh.communicator(m)->all_reduce(sums, ReduceOp::kSum)->wait();
  }
  if (!sums.defined()) return;
  const Tensor host = sums.to(Device(kCPU));
  for (size_t i = 0; i < values.size(); ++i) values[i] = host.data<double>()[i];
}

void nll_kernel(const KernelContext& c, Locals l, absl::Span<Tensor> out) {
  const NllCall call = parse_nll_call(c, 0);
  const DTensorSpec& x = c.input_spec(0);
  const int64_t classes = x.shape()[class_dim_of(x.ndim())];
  const LocalBlock lb = local_block(c, c.input_shard(0), call, l, kForwardWeight);
  const bool cuda = l[0].device().is_cuda();
  const Tensor weight = call.has_weight ? l[kForwardWeight] : Tensor();
  const TensorOptions opts(x.dtype(), l[0].device());
  const TensorOptions tw_opts(total_weight_dtype(x.dtype()), l[0].device());
  if (call.reduction == Reduction::kNone) {
    check_on_all_ranks(c.input_spec(1), scan_targets(l[1], classes, lb, call.has_weight).error);
    out[0] = cuda ? nll_loss_block_cuda(l[0], l[1], lb.layout, lb.block, weight, false)
                  : nll_loss_block_cpu(l[0], l[1], lb.layout, lb.block);
    out[1] = zeros({}, tw_opts);
    return;
  }
  std::string error;  // the first target out of range here
  double sums[3];     // the loss sum, W's share, and 1 where `error` is set
  if (cuda) {
    // The block kernels skip targets outside the block, in range or not: safe to run first.
    TargetScan scan = scan_targets(l[1], classes, lb, call.has_weight);
    error = std::move(scan.error);
    sums[0] = nll_loss_block_cuda(l[0], l[1], lb.layout, lb.block, weight, true)
                  .to(Device(kCPU))
                  .item<double>();
    sums[1] = scan.weight_sum;
  } else {
    // One pass over the targets on the CPU (the reduced loss is a few microseconds' gather).
    const NllSums s = nll_loss_block_sums_cpu(l[0], l[1], lb.layout, lb.block, classes);
    if (s.has_bad) error = range_error(s.bad, classes);
    sums[0] = s.loss;
    sums[1] = s.weight;
  }
  sums[2] = error.empty() ? 0.0 : 1.0;
  if (call.reduction == Reduction::kMean) {
    // The loss sum, W and the flag travel together; the output is then complete (Replicate)
    // over those dims, and Partial only where the input arrived Partial. The ranks agree on the
    // error's message only when one of them raised the flag.
    sum_over_shards(c, x, sums);
    if (sums[2] > 0) check_on_all_ranks(c.input_spec(1), error);
    out[0] = full({}, sums[0] / sums[1], opts);
    out[1] = full({}, sums[1], tw_opts);
    return;
  }
  check_on_all_ranks(c.input_spec(1), error);
  out[0] = full({}, sums[0], opts);
  out[1] = zeros({}, tw_opts);
}

Tensor nll_grad_kernel(const KernelContext& c, Locals l) {
  const NllCall call = parse_nll_call(c, 1);
  const LocalShard out = c.output_shard(0);
  const LocalBlock lb = local_block(c, out, call, l, kGradWeight);
  // The mean's W is the forward's total_weight, replicated: nothing to reduce here.
  const double divisor =
      call.reduction == Reduction::kMean ? l[2].to(Device(kCPU)).item<double>() : 1.0;
  if (l[0].device().is_cuda()) {
    return nll_loss_block_grad_cuda(l[0], l[1], out.shape, lb.layout, lb.block,
                                    call.has_weight ? l[kGradWeight] : Tensor(), divisor);
  }
  return nll_loss_block_grad_cpu(l[0], l[1], out.shape, lb.layout, lb.block, divisor);
}

OutputMetas nll_grad_meta(const OpSchema& s) {
  const NllCall call = parse_nll_call(s, 1);
  const Shape& shape = s.arg<Shape>(0);
  DT_CHECK(!shape.empty(), "[nll_loss_backward] input_shape is 0-d, expected [C], [N, C], ...");
  Shape target = shape;
  target.erase(target.begin() + class_dim_of(static_cast<int64_t>(shape.size())));
  const Shape grad = call.reduction == Reduction::kNone ? target : Shape{};
  DT_CHECK(s.input(0).shape() == grad && s.input(1).shape() == target,
           "[nll_loss_backward] grad of shape %s and target of shape %s, expected %s and %s",
           shape_str(s.input(0).shape()), shape_str(s.input(1).shape()), shape_str(grad),
           shape_str(target));
  DT_CHECK(s.num_inputs() == (call.has_weight ? 4 : 3) && s.input(2).ndim() == 0,
           "[nll_loss_backward] expected grad, target, a 0-d total_weight (nll_loss's second "
           "output)%s; got %d inputs",
           call.has_weight ? " and weight" : "", s.num_inputs());
  return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
}

// Samples: even, uneven (3w + 1 rows, 2w + 1 classes), spatial, 0-d target and short (an empty
// shard on the last rank) calls, each reduction, with and without weights and ignored targets.
std::vector<OpSample> nll_samples(int64_t w) {
  const int64_t c = 2 * w + 1, n = 3 * w + 1, s = short_size(w);
  const auto args = [](const char* r, int64_t ignore, bool weighted) {
    return ArgList{std::string_view(r), ignore, weighted};
  };
  return {{{sample({n, c}), sample({n}, kInt64, 0, c - 1), sample({c}, kFloat64, 1, 3)},
           args("none", -100, true)},
          {{sample({w + 1, 5, 2}), sample({w + 1, 2}, kInt64, 0, 4), sample({5}, kFloat64, 1, 3)},
           args("mean", 2, true)},
          {{sample({c}), sample({}, kInt64, 0, c - 1)}, args("sum", -100, false)},
          {{sample({s, c}), sample({s}, kInt64, 0, c - 1), sample({c}, kFloat64, 1, 3)},
           args("sum", -100, true)},
          {{sample({n, c}), sample({n}, kInt64, 0, c - 1)}, args("mean", 0, false)}};
}

std::vector<OpSample> nll_grad_samples(int64_t w) {
  const int64_t c = 2 * w + 1, n = 3 * w + 1, s = short_size(w);
  const auto args = [](Shape shape, const char* r, int64_t ignore, bool weighted) {
    return ArgList{std::move(shape), std::string_view(r), ignore, weighted};
  };
  // total_weight: any positive value (the mean divides by it; the others ignore it).
  const SampleInput tw = sample({}, kFloat64, 1, 3);
  return {{{sample({n}), sample({n}, kInt64, 0, c - 1), tw, sample({c}, kFloat64, 1, 3)},
           args({n, c}, "none", -100, true)},
          {{sample({}), sample({w + 1, 2}, kInt64, 0, 4), tw, sample({5}, kFloat64, 1, 3)},
           args({w + 1, 5, 2}, "mean", 2, true)},
          {{sample({}), sample({s}, kInt64, 0, c - 1), tw}, args({s, c}, "sum", -100, false)},
          {{sample({}), sample({}, kInt64, 0, c - 1), tw}, args({c}, "mean", -100, false)}};
}

}  // namespace

void register_nll_loss_ops(Registry& registry) {
  OpInfo op = detail::make_op(kOp, {"input", "target", "weight"});
  op.linearity = Linearity::kNone;  // the Partial rows are in nll_rows (total_weight stays R)
  op.meta = nll_meta;
  op.strategy = [](const OpSchema& s) {
    return nll_rows(s.input(0).ndim(), parse_nll_call(s, 0), false);
  };
  op.kernel = nll_kernel;
  op.backward = nll_loss_grad;
  // The input's gradient reads total_weight; the weights' gradient of a mean the loss too.
  op.saved_outputs = 3u;
  op.samples = nll_samples;
  registry.add(std::move(op));

  OpInfo grad = gradient_op("nll_loss_backward", {"grad", "target", "total_weight", "weight"});
  grad.meta = nll_grad_meta;
  grad.strategy = [](const OpSchema& s) {
    return nll_rows(static_cast<int64_t>(s.arg<Shape>(0).size()), parse_nll_call(s, 1), true);
  };
  grad.kernel = single_output(nll_grad_kernel);
  grad.samples = nll_grad_samples;
  registry.add(std::move(grad));
}

}  // namespace dtensor::detail
