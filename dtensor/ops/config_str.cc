#include "dtensor/ops/config_str.h"

#include <absl/strings/str_cat.h>

#include "dtensor/config.h"
#include "dtensor/ops/matmul/blas_info.h"
#include "dtensor/ops/threads.h"

namespace dtensor {

std::string config_str() {
  return absl::StrCat("dtensor ", DTENSOR_VERSION,
                      DTENSOR_HAVE_CUDA ? ", CUDA compiled in" : ", no CUDA",
                      ", GEMM: ", blas_info_str(), ", intra-op threads ", get_num_threads());
}

}  // namespace dtensor
