#include "tensor/storage.h"

#include <cstdint>

#include "tensor/error.h"

namespace dtensor {

Storage::Impl::~Impl() {
  if (deleter != nullptr) deleter(data, ctx);
}

Storage Storage::allocate(size_t nbytes, Device device) {
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  if (device.is_cpu()) {
    s.impl_->data = detail::cpu_allocate(nbytes);
    s.impl_->deleter = &detail::cpu_free;
  } else {
    s.impl_->data = detail::cuda_allocate(nbytes, device.index);
    s.impl_->deleter = &detail::cuda_free;
    // The ordinal travels in ctx so that cuda_free can make the right device current.
    s.impl_->ctx = reinterpret_cast<void*>(static_cast<intptr_t>(device.index));
  }
  return s;
}

Storage Storage::from_blob(void* data, size_t nbytes, Device device, Deleter deleter, void* ctx) {
  DT_CHECK(data != nullptr || nbytes == 0,
           "[Storage::from_blob] data is null but nbytes is %d (expected a valid pointer)", nbytes);
  Storage s;
  s.impl_ = std::make_shared<Impl>();
  s.impl_->data = data;
  s.impl_->nbytes = nbytes;
  s.impl_->device = device;
  s.impl_->deleter = deleter;
  s.impl_->ctx = ctx;
  return s;
}

}  // namespace dtensor
