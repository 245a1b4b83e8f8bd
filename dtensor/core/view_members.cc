// DTensor's view and copy members (distributed_tensor.h): each calls the free function of
// dtensor/ops/view through the table the ops layer installs (detail/view_hooks.h).
#include <atomic>

#include "dtensor/core/detail/view_hooks.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

constinit std::atomic<const ViewHooks*> g_view_hooks{nullptr};

}  // namespace

const ViewHooks* view_hooks() {
  return g_view_hooks.load(std::memory_order_acquire);
}

void set_view_hooks(const ViewHooks* hooks) {
  g_view_hooks.store(hooks, std::memory_order_release);
}

}  // namespace detail

namespace {

// The installed table, or an error naming `member` when the ops layer is not loaded.
const detail::ViewHooks& required_view_hooks(const char* member) {
  const detail::ViewHooks* hooks = detail::view_hooks();
  if (hooks == nullptr) [[unlikely]] {
    throw Error(std::string("[DTensor::") + member +
                "] needs the ops layer (dtensor::ops), which is not linked: link dtensor::dtensor "
                "(or dtensor::ops), or call the free function of dtensor/ops/view/view.h");
  }
  return *hooks;
}

}  // namespace

DTensor DTensor::view(IntSpan shape) const {
  return required_view_hooks("view").view(*this, shape);
}
DTensor DTensor::reshape(IntSpan shape) const {
  return required_view_hooks("reshape").reshape(*this, shape);
}
DTensor DTensor::transpose(int64_t dim0, int64_t dim1) const {
  return required_view_hooks("transpose").transpose(*this, dim0, dim1);
}
DTensor DTensor::t() const {
  return required_view_hooks("t").t(*this);
}
DTensor DTensor::permute(IntSpan dims) const {
  return required_view_hooks("permute").permute(*this, dims);
}
DTensor DTensor::unsqueeze(int64_t dim) const {
  return required_view_hooks("unsqueeze").unsqueeze(*this, dim);
}
DTensor DTensor::squeeze() const {
  return required_view_hooks("squeeze").squeeze_all(*this);
}
DTensor DTensor::squeeze(int64_t dim) const {
  return required_view_hooks("squeeze").squeeze_dim(*this, dim);
}
DTensor DTensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return required_view_hooks("flatten").flatten(*this, start_dim, end_dim);
}
DTensor DTensor::expand(IntSpan shape) const {
  return required_view_hooks("expand").expand(*this, shape);
}
DTensor DTensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return required_view_hooks("narrow").narrow(*this, dim, start, length);
}
DTensor DTensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return required_view_hooks("slice").slice(*this, dim, start, end, step);
}
DTensor DTensor::select(int64_t dim, int64_t index) const {
  return required_view_hooks("select").select(*this, dim, index);
}
DTensor DTensor::contiguous() const {
  return required_view_hooks("contiguous").contiguous(*this);
}
DTensor DTensor::clone() const {
  return required_view_hooks("clone").clone(*this);
}

}  // namespace dtensor
