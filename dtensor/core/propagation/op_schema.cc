#include "dtensor/core/propagation/op_schema.h"

#include <absl/hash/hash.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

constexpr std::string_view kArgTypeNames[] = {"None",  "int",   "float",     "bool",
                                              "shape", "dtype", "reduce op", "string"};
static_assert(std::size(kArgTypeNames) == std::variant_size_v<ArgValue>);

struct ArgPrinter {
  std::string operator()(std::monostate) const { return "None"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(double v) const { return absl::StrFormat("%g", v); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(const Shape& v) const { return shape_str(v); }
  std::string operator()(DType v) const { return std::string(dtype_name(v)); }
  std::string operator()(ReduceOp v) const { return std::string(reduce_op_name(v)); }
  std::string operator()(std::string_view v) const { return absl::StrFormat("'%s'", v); }
};

}  // namespace

std::string arg_str(const ArgValue& v) {
  return std::visit(ArgPrinter{}, v);
}

size_t args_hash(absl::Span<const ArgValue> args) {
  size_t h = absl::HashOf(args.size());
  for (const ArgValue& a : args) {
    const size_t one = std::visit(
        [](const auto& x) -> size_t {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            return 0x9e3779b97f4a7c15ull;
          } else if constexpr (std::is_same_v<T, DType> || std::is_same_v<T, ReduceOp>) {
            return absl::HashOf(static_cast<uint8_t>(x));
          } else {
            return absl::HashOf(x);
          }
        },
        a);
    h = absl::HashOf(h, a.index(), one);
  }
  return h;
}

std::string OpInfo::input_name(int64_t i) const {
  if (i >= 0 && i < static_cast<int64_t>(input_names.size())) return input_names[i];
  return absl::StrCat("input ", i);
}

absl::Span<const ArgValue> OpSchema::static_args() const {
  const size_t first = static_cast<size_t>(std::max(op_->schema_info.static_argnum, 0));
  return first >= args_.size() ? absl::Span<const ArgValue>() : args_.subspan(first);
}

bool OpSchema::has_arg(int64_t i) const {
  return i >= 0 && i < num_args() && !std::holds_alternative<std::monostate>(args_[i]);
}

void OpSchema::check_arg(int64_t i, size_t expected_index) const {
  DT_CHECK(i >= 0 && i < num_args(), "[%s] argument %d is missing (the call has %d args)", name(),
           i, num_args());
  if (expected_index != std::variant_npos && args_[i].index() != expected_index) {
    DT_FAIL("[%s] argument %d is %s %s, expected a %s", name(), i, kArgTypeNames[args_[i].index()],
            arg_str(args_[i]), kArgTypeNames[expected_index]);
  }
}

std::string OpSchema::str() const {
  std::string s = std::string(name()) + "(";
  bool first = true;
  for (const DTensorSpec* spec : inputs_) {
    absl::StrAppend(&s, first ? "" : ", ", spec != nullptr ? spec->str() : "None");
    first = false;
  }
  for (const ArgValue& a : args_) {
    absl::StrAppend(&s, first ? "" : ", ", arg_str(a));
    first = false;
  }
  s += ")";
  return s;
}

}  // namespace dtensor
