// dtensor::Error and the checks that raise it.
//
// Every message starts with the operation in brackets and states the offending value and
// what was expected, e.g. "[narrow] dim 3 out of range for a 2-d tensor (expected -2..1)".
#pragma once

#include <absl/strings/str_format.h>

#include <stdexcept>
#include <string>

namespace dtensor {

// The one exception type the library throws for user-facing errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_error(std::string message);
}  // namespace detail

}  // namespace dtensor

// DT_CHECK(cond, "[op] format", args...): throws dtensor::Error with the formatted message
// when cond is false. The format string is checked at compile time (absl::StrFormat).
#define DT_CHECK(cond, ...)                                           \
  do {                                                                \
    if (!(cond)) [[unlikely]] {                                       \
      ::dtensor::detail::throw_error(::absl::StrFormat(__VA_ARGS__)); \
    }                                                                 \
  } while (0)

// DT_FAIL("[op] format", args...): throws unconditionally.
#define DT_FAIL(...) ::dtensor::detail::throw_error(::absl::StrFormat(__VA_ARGS__))
