#include "dtensor/tensor/detail/capture_hook.h"

#include <string>

#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
// The recorder and the storage pool of this thread, in one thread-local so that
// Storage::allocate tests both with one access (declared in detail/capture_hook.h).
[[gnu::tls_model("initial-exec")]] constinit thread_local AllocationHooks t_hooks;
constinit std::atomic<bool> g_meta_storage_made{false};

void set_capture_recorder(CaptureRecorder* recorder) {
  t_hooks.recorder = recorder;
}

StoragePool* set_storage_pool(StoragePool* pool) {
  StoragePool* previous = t_hooks.pool;
  t_hooks.pool = pool;
  return previous;
}

void run_recorded(std::string_view kind, std::string name, absl::Span<const Tensor> inputs,
                  absl::Span<Tensor> outputs, uint32_t mutated_inputs, const ReplayFn& fn) {
  const CaptureScope scope;
  fn(inputs, outputs);
  if (!scope.recording()) return;
  CaptureEvent event;
  event.kind = kind;
  event.name = std::move(name);
  event.inputs = inputs;
  event.outputs = outputs;
  event.mutated_inputs = mutated_inputs;
  scope.recorder().record(event, fn);
}

void refuse_in_capture(std::string_view what, bool even_inside) {
  CaptureRecorder* r = t_hooks.recorder;
  if (r == nullptr || (r->depth > 0 && !even_inside)) return;
  r->refuse(std::string(what));
}

void keep_in_capture(const Tensor& t) {
  if (t_hooks.recorder != nullptr && t.defined()) t_hooks.recorder->keep(t.storage().id());
}

void check_alive(const std::weak_ptr<const char>& owner, std::string_view what) {
  DT_CHECK(!owner.expired(),
           "[compile] the step's graph replays %s, which was destroyed: keep the model and the "
           "optimizer alive as long as the compiled step",
           what);
}

void note_collective_in_capture(std::string_view kind, int64_t bytes) {
  CaptureRecorder* r = t_hooks.recorder;
  if (r == nullptr) return;
  if (r->depth == 0) {
    r->refuse("a " + std::string(kind) +
              " outside any op or redistribute (a data-parallel gradient hook, a direct "
              "Communicator call): replay would not issue it");
  }
  r->note_collective(kind, bytes);
}

}  // namespace dtensor::detail
