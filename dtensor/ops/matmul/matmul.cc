// The public matmul functions of the family that are not kernels: the TF32 switch (public API
// in every build, harmless without CUDA).
#include "dtensor/ops/matmul/matmul.h"

#include <atomic>

namespace dtensor {

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow);
}
bool allow_tf32() {
  return g_allow_tf32.load();
}

}  // namespace dtensor
