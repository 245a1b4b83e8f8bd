// What sharding propagation sees of one op call: the op, its inputs' DTensorSpecs and its
// non-tensor arguments, plus everything registered for the op in one place (OpInfo): which
// arguments are static (enter the cache key), how Partial inputs pass through (Linearity),
// the strategy (rows for ONE mesh dim), the output-meta function (shape/dtype inference), the
// local kernel dispatch runs on each rank's shards, and the backward formula autograd runs.
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/placement.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Small integer interned from the op name at registration (unique in the process).
using OpId = int32_t;

// A non-tensor argument of an op: None (std::monostate), int, float, bool, int list / shape,
// dtype, reduce op, or a string-like enum (a string_view that must point to static storage,
// e.g. a literal such as "mean").
using ArgValue =
    std::variant<std::monostate, int64_t, double, bool, Shape, DType, ReduceOp, std::string_view>;
using ArgList = absl::InlinedVector<ArgValue, 4>;

// "None", "3", "0.23", "true", "[0, 1]", "float32", "sum", "'mean'".
std::string arg_str(const ArgValue& v);
// Hash of a list of args (type and value of each).
size_t args_hash(absl::Span<const ArgValue> args);

// Declared once per op at registration (PyTorch RuntimeSchemaInfo): args with index >=
// static_argnum are static — they can change the output sharding or shape, so they enter the
// propagation cache key (reduction dims, keepdim, transpose dims). Args before static_argnum
// are runtime values (the 0.23 of div(t, 0.23)) that never change the sharding and are left
// out of the key, so a loop with changing scalars hits the cache. Default: every arg static.
struct RuntimeSchemaInfo {
  int static_argnum = 0;
};

// How Partial inputs pass through the op (data, not ad-hoc ifs). The expansion adds, per mesh
// dim, rows for Partial(sum) and Partial(avg):
//   kNone          Partial inputs must be reduced first (relu, exp, comparisons, ...)
//   kLinear        f(sum x_i, sum y_i) = sum f(x_i, y_i): [P | P, P, ...]  (add, sub, neg)
//   kMultilinear   linear in each input separately: [P | R.., P, R..] for each input (mul, mm)
//   kLinearInFirst linear in input 0 only: [P | P, R, ...]  (div by a tensor)
enum class Linearity : uint8_t { kNone, kLinear, kMultilinear, kLinearInFirst };

class OpSchema;
struct OpInfo;
class KernelContext;  // dtensor/core/propagation/dispatch.h
namespace autograd {
class BackwardContext;  // dtensor/autograd/function.h
}  // namespace autograd

// Strategy rows for ONE mesh dim: each row holds the output placements (num_outputs of
// them) followed by one placement per input, e.g. mm: {S(0), S(0), R} = [S(0) | S(0), R].
using StrategyRows = std::vector<Placements>;
using StrategyFn = std::function<StrategyRows(const OpSchema&)>;
// Global TensorMeta of every output (shape/dtype inference); its size is the number of outputs.
using OutputMetas = absl::InlinedVector<TensorMeta, 1>;
using MetaFn = std::function<OutputMetas(const OpSchema&)>;
// The op's local computation on one rank: reads the local inputs (already redistributed to the
// chosen strategy) and sets outputs[o] to a local tensor of the shape and dtype that output o's
// spec implies for this rank. `ctx` holds the args and what dispatch chose (specs after
// redistribution, this rank's mesh coordinate), for kernels whose work depends on the layout.
using KernelFn = std::function<void(const KernelContext& ctx, absl::Span<const Tensor> inputs,
                                    absl::Span<Tensor> outputs)>;
// Gradients of the op's inputs (one per input; undefined where none flows or none is needed)
// from the gradients of its outputs (undefined where none arrived), written with DTensor ops
// so that backward runs through the same sharding engine and cache as forward.
using BackwardFn = std::function<DTensorList(const autograd::BackwardContext& ctx,
                                             absl::Span<const DTensor> grad_outputs)>;

// One sample call of an op, for the tests that check every op the same way (the strategy
// validation harness runs the kernel on inputs laid out by every strategy row and compares with
// the op on the full tensors): each input's global meta and the range its integer-valued
// elements are drawn from (integers keep every Partial split and sum exact), and the args.
struct SampleInput {
  TensorMeta meta;
  double low = -5;
  double high = 5;
};
struct OpSample {
  std::vector<SampleInput> inputs;
  ArgList args;
};
// Sample calls for a world of `world` ranks: shapes chosen so that shards are even, uneven and
// empty on meshes of that many ranks.
using SampleFn = std::function<std::vector<OpSample>(int64_t world)>;

// A single-output kernel `Tensor f(const KernelContext&, absl::Span<const Tensor> inputs)` as a
// KernelFn.
template <typename F>
KernelFn single_output(F f) {
  return [f = std::move(f)](const KernelContext& ctx, absl::Span<const Tensor> in,
                            absl::Span<Tensor> out) { out[0] = f(ctx, in); };
}

// Everything registered for one op.
struct OpInfo {
  OpId id = -1;                          // assigned by Registry::add
  std::string name;                      // "add", "sum", "mm"
  std::vector<std::string> input_names;  // "self", "other": used in error messages
  RuntimeSchemaInfo schema_info;
  Linearity linearity = Linearity::kNone;
  // In-place op (add_): output 0 is input 0, so its placements must not change and input 0 is
  // never redistributed; propagation throws when no strategy keeps them.
  bool inplace = false;
  StrategyFn strategy;
  MetaFn meta;
  KernelFn kernel;
  // The backward formula (dtensor/autograd/function.h). When empty: if `differentiable` is false
  // the op's outputs never require grad (comparisons, argmax, random ops); otherwise a backward
  // that reaches the op throws "[backward] op 'x' has no backward formula".
  BackwardFn backward;
  bool differentiable = true;
  // What the backward formula reads through BackwardContext (bit i: input i as the kernel saw
  // it, after redistribution; output o): only these are kept alive between forward and
  // backward. Specs are always kept (they are small).
  uint32_t saved_inputs = ~uint32_t{0};
  uint32_t saved_outputs = 0;
  // Output 0 shares input 0's memory (views): autograd refuses in-place ops on it while the
  // input requires grad (the input's graph would not see the write).
  bool view = false;
  // The output shapes depend on the input VALUES (masked_select, nonzero), not only on their
  // specs. Then:
  //   meta      returns placeholder metas: final dtype and rank, 0 in the data-dependent dims;
  //   strategy  every row must give each output Replicate (checked when propagating: a sharded
  //             or Partial output would need its local sizes exchanged; inputs in other layouts
  //             are redistributed to the row's, usually Replicate);
  //   linearity must be kNone and the op must not be in-place (checked at registration);
  //   dispatch  takes each output's global shape from the local kernel's result (Replicate on
  //             every mesh dim: the local tensor is the whole tensor) and builds its spec per
  //             call, so the propagation cache holds placements only, never a stale shape.
  // Every rank computes the same shape because every rank holds the same (replicated) inputs.
  // A rank outside the mesh cannot know the shape: dispatch raises there ("[op] the output's
  // shape depends on the values held by the ranks of DeviceMesh(...)").
  bool data_dependent_shape = false;
  // Sample calls for the tests every op goes through (see OpSample). The op library registers
  // samples for each of its ops; the harness fails for an op without them.
  SampleFn samples;

  // Name of input i ("input 2" when none was registered).
  std::string input_name(int64_t i) const;
};

// One op call as propagation sees it. Non-owning: spans point at the caller's specs and args,
// so building a schema on the dispatch hot path copies nothing.
class OpSchema {
 public:
  OpSchema(const OpInfo& op, absl::Span<const DTensorSpec* const> inputs,
           absl::Span<const ArgValue> args)
      : op_(&op), inputs_(inputs), args_(args) {}

  const OpInfo& op() const { return *op_; }
  OpId op_id() const { return op_->id; }
  std::string_view name() const { return op_->name; }

  int64_t num_inputs() const { return static_cast<int64_t>(inputs_.size()); }
  const DTensorSpec& input(int64_t i) const { return *inputs_[i]; }
  absl::Span<const DTensorSpec* const> inputs() const { return inputs_; }
  // The mesh of input 0 (dispatch checks that all inputs share it).
  const DeviceMesh& mesh() const { return inputs_[0]->mesh(); }

  int64_t num_args() const { return static_cast<int64_t>(args_.size()); }
  absl::Span<const ArgValue> args() const { return args_; }
  // The args that enter the cache key (index >= static_argnum).
  absl::Span<const ArgValue> static_args() const;
  // Whether arg i exists and is not None.
  bool has_arg(int64_t i) const;
  // Arg i as T; throws "[op] argument i is <type>, expected <T>" (or "missing").
  template <typename T>
  const T& arg(int64_t i) const {
    check_arg(i, std::variant_npos);
    const T* v = std::get_if<T>(&args_[i]);
    if (v == nullptr) [[unlikely]] {
      check_arg(i, arg_index<T>(static_cast<const ArgValue*>(nullptr)));
    }
    return *v;
  }

  // "add(DTensorSpec([S(0)], shape=[8], float32, mesh=[2]), 0.23)"
  std::string str() const;

 private:
  // The index of alternative T in ArgValue, at compile time.
  template <typename T, typename... Ts>
  static constexpr size_t arg_index(const std::variant<Ts...>*) {
    constexpr bool same[] = {std::is_same_v<T, Ts>...};
    for (size_t k = 0; k < sizeof...(Ts); ++k) {
      if (same[k]) return k;
    }
    return std::variant_npos;
  }

  void check_arg(int64_t i, size_t expected_index) const;

  const OpInfo* op_;
  absl::Span<const DTensorSpec* const> inputs_;
  absl::Span<const ArgValue> args_;
};

}  // namespace dtensor
