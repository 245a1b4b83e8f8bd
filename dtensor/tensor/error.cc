#include "dtensor/tensor/error.h"

#include <utility>

namespace dtensor::detail {

void throw_error(std::string message) {
  throw Error(std::move(message));
}

}  // namespace dtensor::detail
