// The hook through which dtensor::compile (dtensor/compile/) records a step while it runs
// eagerly. It lives in the lowest layer because the places that must report what they do are
// spread over every layer above: op dispatch and redistribute (core), gradient accumulation
// (autograd), optimizer updates (optim), collectives and random numbers (which must refuse to
// run unrecorded).
//
// While a step is captured, this thread has a CaptureRecorder. Each *primitive* — one local
// computation that replay can run again on other tensors of the same layout: an op's kernel, a
// redistribute, an optimizer update, a host-side bookkeeping step — runs eagerly inside a
// CaptureScope and then hands the recorder its input and output local tensors and a ReplayFn
// that redoes it. Primitives nest (a kernel may redistribute internally, a redistribute runs
// collectives): only the outermost is recorded, the inner ones run as part of it. Outside a
// capture the cost is one thread-local read per primitive.
#pragma once

#include <absl/types/span.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Redoes a primitive at replay: reads `inputs` (the replay's tensors standing where the
// captured inputs stood), writes the mutated ones in place and sets each of `outputs`.
using ReplayFn = std::function<void(absl::Span<const Tensor> inputs, absl::Span<Tensor> outputs)>;

// What a primitive reports.
struct CaptureEvent {
  std::string_view kind;  // "op", "redistribute", "optim", "grad", "host"
  std::string name;       // "mm", "all_reduce", "adamw_update"
  std::string detail;     // printed beside it: placements in -> out
  absl::Span<const Tensor> inputs;
  absl::Span<const Tensor> outputs;
  uint32_t mutated_inputs = 0;  // bit i: input i is written in place
  // A redistribute: the source and target specs' text, so that passes can tell two equal moves
  // of one value, or a move undone by the next; whether the source has a Partial placement
  // (empty / false for other kinds).
  std::string move_src, move_dst;
  bool move_src_partial = false;
  // Kind-specific data for the compiler (a redistribute: dtensor/core/detail/captured_move.h's
  // CapturedMove; an op: its first input's DTensorSpec, whose mesh is the op's); null otherwise.
  std::shared_ptr<const void> payload;
};

class CaptureRecorder {
 public:
  virtual ~CaptureRecorder() = default;
  // Records one outermost primitive (it has already run).
  virtual void record(const CaptureEvent& event, ReplayFn fn) = 0;
  // A collective issued by the primitive being recorded (for the graph's text and counts);
  // `kind` is collective_name()'s text.
  virtual void note_collective(std::string_view kind, int64_t bytes) = 0;
  // Something that cannot be replayed ran during the capture (an async collective, a random
  // op, a collective outside any primitive): the capture fails with this message.
  [[noreturn]] virtual void refuse(const std::string& what) = 0;
  // A Storage was allocated (inside a primitive when depth > 0). The recorder uses it to refuse
  // a node input that was made during the step by anything else than a recorded primitive's
  // declared outputs: replay could not make it again (local Tensor computation in the step).
  virtual void note_allocation(const void* storage_id) = 0;
  // The tensor, made during the step outside any primitive, is state that outlives the step
  // (an optimizer's lazily created moments): replay keeps using it.
  virtual void keep(const void* storage_id) = 0;

  int depth = 0;  // CaptureScopes alive on this thread
};

// This thread's capture recorder and replay pool (dtensor/tensor/capture_hook.cc defines it).
// Initial-exec and constinit: the eager path reads it inline at a fixed offset from the thread
// pointer, with no call, no __tls_get_addr and no TLS init wrapper; the library is linked by its
// users, not dlopen'ed, so its static TLS is reserved when the program starts.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local AllocationHooks t_hooks;

// The recorder of this thread while a step is captured, else nullptr.
inline CaptureRecorder* capture_recorder() {
  return t_hooks.recorder;
}

// Set, and never cleared, when the process makes its first meta storage (Storage::allocate or
// Storage::from_blob on the meta device, dtensor/tensor/storage.cc): until then no tensor is
// meta. A thread handed a meta tensor by another sees it set (the hand-over synchronizes).
extern std::atomic<bool> g_meta_storage_made;

// The eager dispatch's one test per op (dtensor/core/propagation/dispatch.cc): false while this
// thread captures no step and the process has no meta storage, so that the kernel runs with no
// capture scope and no look at its inputs' devices; true sends the op to the out-of-line path
// that checks each case.
inline bool dispatch_hooks_may_apply() {
  return t_hooks.recorder != nullptr || g_meta_storage_made.load(std::memory_order_relaxed);
}
void set_capture_recorder(CaptureRecorder* recorder);

// Marks a primitive's eager run: recording() is true for the outermost one only.
class CaptureScope {
 public:
  CaptureScope() : recorder_(capture_recorder()) {
    if (recorder_ != nullptr) outermost_ = recorder_->depth++ == 0;
  }
  ~CaptureScope() {
    if (recorder_ != nullptr) --recorder_->depth;
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  bool recording() const { return outermost_; }
  CaptureRecorder& recorder() const { return *recorder_; }

 private:
  CaptureRecorder* recorder_;
  bool outermost_ = false;
};

// Runs `fn(inputs, outputs)` now and, when a step is being captured, records it as one
// primitive that replay runs again. For host-side steps of library code that are not ops
// (optimizer updates, gradient bookkeeping): `fn` must read its tensors only through its
// arguments (it is called again with the replay's tensors) and any scalar it needs at call
// time (a learning rate, a step count) from state it reads when called.
void run_recorded(std::string_view kind, std::string name, absl::Span<const Tensor> inputs,
                  absl::Span<Tensor> outputs, uint32_t mutated_inputs, const ReplayFn& fn);

// Raises through the recorder when a step is being captured and `what` is about to run
// outside any primitive (so it could not be replayed) — or anywhere when `even_inside` (a
// random op: replay would repeat its numbers); a no-op otherwise.
void refuse_in_capture(std::string_view what, bool even_inside = false);

// What a replay closure that captures `this` (an optimizer) holds to find out, when it runs,
// whether its owner still exists: the owner keeps a std::shared_ptr<const char> it never shares,
// the closure a weak_ptr to it, and check_alive raises "[compile] the step's graph replays
// <what>, which was destroyed ..." instead of touching freed memory (a compiled step kept longer
// than its optimizer).
void check_alive(const std::weak_ptr<const char>& owner, std::string_view what);

// A collective is issued: noted on the primitive being recorded; refused outside one.
void note_collective_in_capture(std::string_view kind, int64_t bytes);

// See CaptureRecorder::keep (a no-op outside a capture).
void keep_in_capture(const Tensor& t);

}  // namespace dtensor::detail
