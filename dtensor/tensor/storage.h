// Reference-counted memory owned by one device. Tensors are views into a Storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "dtensor/tensor/device.h"

namespace dtensor {

// Releases the memory of a Storage; `ctx` is whatever the allocator or from_blob passed.
using Deleter = void (*)(void* data, void* ctx);

class Storage {
 public:
  Storage() = default;

  // Allocates `nbytes` on `device`: 64-byte aligned host memory for the CPU, the CUDA
  // stream-ordered pool (cudaMallocAsync on the current stream) for CUDA devices. On the meta
  // device nothing is allocated: the storage keeps `nbytes` (what a real device would hold, so
  // a dry run can add it up) with data() null; memory_stats() does not count it (it counts
  // memory held; a meta step must leave it unchanged), meta_memory_stats() does.
  static Storage allocate(size_t nbytes, Device device);

  // Wraps memory the caller owns. `deleter(data, ctx)` runs when the last reference goes;
  // pass nullptr to keep ownership with the caller.
  static Storage from_blob(void* data, size_t nbytes, Device device, Deleter deleter = nullptr,
                           void* ctx = nullptr);

  bool defined() const { return impl_ != nullptr; }
  void* data() const { return impl_ ? impl_->data : nullptr; }
  size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->device : Device(); }
  long use_count() const { return impl_.use_count(); }
  bool is_same(const Storage& o) const { return impl_ == o.impl_; }
  // An identity of the memory block shared by every handle and view (for bookkeeping that must
  // tell storages apart, e.g. step capture); null for an undefined storage.
  const void* id() const { return impl_.get(); }
  // Whether this handle is the only reference to memory the library allocated (not from_blob
  // memory, which its owner may still read): nothing else can observe a write into it, so a
  // caller giving up the handle may let it be reused in place (DTensor::redistribute &&, the
  // compiled step's replay pool). A reference dropped on another thread (a task of the
  // communication thread) may be seen late, which only makes this false; a true answer is
  // followed by an acquire fence, so that thread's accesses to the memory happen before the
  // caller's (storage.cc).
  bool sole_owner() const;
  // Version counter shared by every view of this memory (PyTorch's): every in-place write
  // bumps it -- the Tensor API's (copy_, fill_, zero_, add_ and the other in-place ops, the
  // random fills, index_put_) as well as in-place DTensor ops and optimizer steps -- and
  // autograd compares it with the value saved at forward time to refuse a backward that would
  // read modified data (a write into a saved DTensor's to_local() included). Not atomic (one
  // thread per storage at a time, like its data).
  uint32_t version() const { return impl_ ? impl_->version : 0; }
  void bump_version() const {
    if (impl_) ++impl_->version;
  }
  // Puts the counter back to `version` (PyTorch's _unsafe_preserve_version_counter): only for
  // writes that restore values autograd already saw, as FSDP's re-gather of a resharded
  // parameter into the storage its forward saved (data_parallel.cc); anything else would hide
  // an in-place update from autograd.
  void restore_version(uint32_t version) const {
    if (impl_) impl_->version = version;
  }
  // FSDP's "resize the storage to zero and back": release_data frees the memory of a Storage
  // made by allocate (every view stays valid as an object but must not be read: data() is null)
  // and reallocate_data gives it fresh memory of the same size (contents undefined; no-op
  // when it has memory). Every view of the storage sees the change. On the meta device there
  // is never memory: they only take the storage out of meta_memory_stats() and put it back.
  void release_data() const;
  void reallocate_data() const;
  bool has_data() const { return impl_ != nullptr && impl_->data != nullptr; }
  // Exchanges the memory of this storage and `other` when both were made by allocate, on the
  // same device, with the same size; every view of either then reads the other's former
  // bytes. A whole-storage copy without copying (checkpoint::load commits its staging buffers
  // so). Bumps both versions (an in-place write for autograd). Returns false, changing
  // nothing, when the two do not qualify (memory from from_blob stays where its owner put it).
  bool try_swap_data(const Storage& other) const;

 private:
  void* allocate_data() const;
  struct Impl {
    void* data = nullptr;
    size_t nbytes = 0;
    Device device;
    Deleter deleter = nullptr;
    void* ctx = nullptr;
    uint32_t version = 0;
    ~Impl();
  };
  // Memory made by allocate (so the library's to reuse or swap), not by from_blob.
  static bool allocated(const Impl& i);
  std::shared_ptr<Impl> impl_;
};

namespace detail {
// Backend allocators (cpu_allocator.cc; cuda_allocator.cc, or no_cuda_allocator.cc without CUDA).
// The allocator's size for an nbytes request (what memory_stats() counts).
size_t cpu_allocation_size(size_t nbytes);
void* cpu_allocate(size_t nbytes);
void cpu_free(void* p, void* ctx);
void* cuda_allocate(size_t nbytes, int device);
void cuda_free(void* p, void* ctx);
// Copies bytes between any two devices (host<->device, device<->device); synchronous.
void cuda_memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);
}  // namespace detail

}  // namespace dtensor
