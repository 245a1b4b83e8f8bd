#include "dtensor/autograd/grad_mode.h"

namespace dtensor::autograd {
namespace {
// Read by every dispatched op (dispatch_multi). Initial-exec: at a fixed offset from the thread
// pointer, not through __tls_get_addr (this library is linked by its users, not dlopen'ed).
[[gnu::tls_model("initial-exec")]] thread_local bool t_grad_enabled = true;
}  // namespace

bool grad_enabled() {
  return t_grad_enabled;
}

void set_grad_enabled(bool enabled) {
  t_grad_enabled = enabled;
}

AutoGradMode::AutoGradMode(bool enabled) : prev_(t_grad_enabled) {
  t_grad_enabled = enabled;
}

AutoGradMode::~AutoGradMode() {
  t_grad_enabled = prev_;
}

}  // namespace dtensor::autograd
