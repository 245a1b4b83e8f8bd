// What sharding propagation sees of one op call: the op, its inputs' DTensorSpecs and its
// non-tensor arguments, plus the per-op declarations made at registration (OpInfo): which
// arguments are static (enter the cache key), how Partial inputs pass through (Linearity),
// the strategy (rows for ONE mesh dim) and the output-meta function (shape/dtype inference).
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dtensor/dtensor_spec.h"
#include "dtensor/placement.h"

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

// Strategy rows for ONE mesh dim: each row holds the output placements (num_outputs of
// them) followed by one placement per input, e.g. mm: {S(0), S(0), R} = [S(0) | S(0), R].
using StrategyRows = std::vector<Placements>;
using StrategyFn = std::function<StrategyRows(const OpSchema&)>;
// Global TensorMeta of every output (shape/dtype inference); its size is the number of outputs.
using OutputMetas = absl::InlinedVector<TensorMeta, 1>;
using MetaFn = std::function<OutputMetas(const OpSchema&)>;

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
      check_arg(i, ArgValue(T{}).index());
    }
    return *v;
  }

  // "add(DTensorSpec([S(0)], shape=[8], float32, mesh=[2]), 0.23)"
  std::string str() const;

 private:
  void check_arg(int64_t i, size_t expected_index) const;

  const OpInfo* op_;
  absl::Span<const DTensorSpec* const> inputs_;
  absl::Span<const ArgValue> args_;
};

}  // namespace dtensor
