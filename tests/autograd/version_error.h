// Shared by the saved-tensor version suites (test_saved_tensor_versions, test_inplace_sharded_mpi).
#pragma once

#include <functional>
#include <string>

#include "dtensor/tensor/error.h"

namespace dtensor::test {

// Whether f() raises autograd's "... modified by an in-place op ..." (a saved tensor written
// after the forward), not any other error.
inline bool raises_version_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()).find("modified by an in-place op") != std::string::npos;
  }
  return false;
}

}  // namespace dtensor::test
