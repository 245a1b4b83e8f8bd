#include "dtensor/parallel/data_parallel/data_parallel.h"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/node.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/parallel/data_parallel/detail/grad_comm.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

// GCC 12 reports -Wmaybe-uninitialized inside absl::InlinedVector when a default Tensor is
// move-assigned to release a gradient buffer (`g = Tensor()`): the move copies the whole inline
// shape buffer (Storage::MemcpyFrom), unused tail included, which GCC cannot see is never read.
// A false positive (as in dtensor/ops/reduction/reduction_strategy.cc); silenced for this file
// only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace dtensor {

namespace {

struct ParamState {
  UnitParam info;
  DTensor storage;                                  // the leaf on the whole mesh
  std::shared_ptr<const DTensorSpec> compute_spec;  // on the mesh of the other dims
  Shape compute_shape;                              // local shape of the compute parameter
  DType compute_dtype = kFloat32;                   // param_dtype, or the parameter's own
  DType reduce_dtype = kFloat32;                    // its gradient's reduction dtype
  int64_t shard_dim = -1;                           // -1: replicated on dp
  bool trained = false;                             // requires grad
  Tensor gathered;                                  // sharded: the gathered compute local
  // The version of storage's local shard when `gathered` was last unpacked from it (see
  // unpack_gathered); none before the first.
  std::optional<uint32_t> unpacked_from;
  Tensor unsynced;  // no_sync: summed local gradients
  int64_t bucket = -1;
  int64_t offset = 0;  // sharded: offset in the unit's per-rank flat block

  int64_t rest() const {  // elements per index of shard_dim
    int64_t r = 1;
    for (size_t d = 0; d < compute_shape.size(); ++d) {
      if (static_cast<int64_t>(d) != shard_dim) r *= compute_shape[d];
    }
    return r;
  }
  ChunkBounds chunk(int64_t n, int64_t i) const {
    return chunk_bounds(compute_shape[shard_dim], n, i);
  }
  Shape chunk_shape(int64_t size) const {
    Shape s = compute_shape;
    s[shard_dim] = size;
    return s;
  }
};

struct UnitState {
  std::string fqn;
  nn::Module* module = nullptr;
  bool root = false;
  // Forwards whose backward has not run yet (several before their backwards: GPipe's
  // microbatches, gradient accumulation over separate graphs). The root unit has no re-gather
  // hook (it is never resharded after forward), so its backward releases its gathered
  // parameters only when no other backward will read them. A forward whose graph is dropped
  // without a backward (an evaluation loss computed with gradients on, a step that raised
  // before its backward) is never counted back: the root then stays gathered after each
  // backward from then on (memory held, never a stale read: each forward gathers again). To be
  // tied to the graph's lifetime instead.
  mutable int64_t backwards_pending = 0;
  // Indices into State::params: sharded ones (frozen included, as FSDP2: gathered for forward
  // and backward, never reduced) and trained replicated ones.
  std::vector<size_t> sharded, replicated;
  std::vector<size_t> all;  // every parameter of the unit
  // Sharded parameters, none trained: no gather node to release it. Its input's
  // FrozenUnitInputBackward node does, once every call's input gradient is computed
  // (release_after_input_grad below); otherwise post_forward's hook has the end of the
  // backward pass do it (FSDP2's final callback).
  bool frozen = false;
  // A frozen non-root unit with no trained parameter and no tied one (each parameter in one
  // module slot): released as soon as its own backward is done (FSDP2's post-backward on the
  // unit's inputs), when the FrozenUnitInputBackward node that runs is the last one pending of
  // the unit's wrapped calls (the gradient of its input is computed). No backward op of the unit
  // reads the parameters after it: the engine runs ready nodes latest-recorded first and the
  // input node is its call's first, so the call's other nodes (one toward a trainable tensor
  // the forward read besides its input too) have run; an earlier call's run after it, behind
  // that call's output, whose hook gathers the unit again. (A tensor the forward leaves behind
  // besides its output is not guarded, as for a trained unit.) Otherwise (an input without a
  // gradient, a call whose backward did not run yet) the end of the backward pass releases it.
  // `pending_inputs` counts the wrapped calls whose node has not run: a node's token (shared with
  // the counter) counts it back when it runs, or when it is destroyed unrun (a graph dropped before
  // its backward, a forward that raised after wrapping), so the counts never stay apart. A call not
  // wrapped (in a compile capture, an input without a gradient) is not counted.
  bool release_after_input_grad = false;
  std::shared_ptr<int64_t> pending_inputs = std::make_shared<int64_t>(0);
  // The current call's input x and what the forward got for it (the FrozenUnitInputBackward
  // node's output), from wrap_frozen_input to post_forward (check_written_input).
  mutable DTensor wrapped_input, wrapped;
  mutable const autograd::Node* wrap_node = nullptr;
  int64_t block = 0;              // per-rank elements of the flat buffers
  DType dtype = kFloat32;         // of the gather buffers (the compute dtype)
  DType reduce_dtype = kFloat32;  // of the reduce-scatter buffers
};

struct Bucket {
  std::vector<size_t> params;
  std::vector<Tensor> grads;  // parallel to params; undefined until ready
  int64_t ready = 0;
};

// Whether a step is being captured by dtensor::compile (dtensor/compile/). Data parallel then
// issues each collective inside one recorded primitive that packs, reduces (or gathers) and
// unpacks, waited at once, so that replay runs it again on the replay's tensors; no prefetch,
// nothing left in flight across primitives (the compiler's schedule pass overlaps collectives
// instead), and the gathered parameters of forward serve backward too (no second gather).
bool capturing() {
  return detail::capture_recorder() != nullptr;
}

void bind_or_add_grad(const DTensor& storage, Tensor local) {
  if (local.dtype() != storage.dtype()) local = local.to(storage.dtype());  // mixed precision
  DTensor g(std::move(local), storage.spec_ptr());
  storage.set_grad(storage.grad().defined() ? autograd::add_gradients(storage.grad(), g) : g);
}

// `local` is a view into its reduction's output buffer (a unit's reduce-scatter output, a
// bucket's all-reduce buffer), which becomes the gradient as is: no copy, and no second
// buffer of the gradients' size at the end of backward (FSDP2 makes the same views; DDP with
// gradient_as_bucket_view). Each parameter's view is its own region of the buffer.
// Captured, it is one primitive deciding when it runs whether to bind or to add (a replay may
// follow calls that left a gradient), as autograd's own accumulation does.
// Then the parameter's post accumulate grad hooks run (DTensor::register_post_accumulate_grad_hook)
// with the reduced gradient, as FSDP2 runs them after its reduce-scatter's accumulation (DDP's
// run before its all-reduce, on the local gradient).
void accumulate_into_grad(const DTensor& storage, Tensor local) {
  if (!capturing()) {
    bind_or_add_grad(storage, std::move(local));
  } else {
    Tensor result[1];
    detail::run_recorded("grad", "accumulate", {local}, result, 0,
                         [storage](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
                           bind_or_add_grad(storage, in[0]);
                           out[0] = storage.grad().to_local();
                         });
  }
  if (const auto& meta = storage.autograd_meta(); meta != nullptr) {
    const std::vector<std::function<void()>> hooks = meta->post_accumulate_grad_hooks;
    for (const auto& hook : hooks) hook();
  }
}

// Each parameter's place in a flat reduction buffer (a unit's, a bucket's) starts on a
// 16-element boundary, so that its gradient view (which becomes .grad) is 16-byte aligned, as
// a fresh tensor is: the vectorised CUDA elementwise path
// (dtensor/ops/common/detail/loops_cuda.cuh) needs it.
constexpr int64_t kFlatAlign = 16;
int64_t flat_slot(int64_t numel) {
  return (numel + kFlatAlign - 1) / kFlatAlign * kFlatAlign;
}

Tensor add_local(const Tensor& a, const Tensor& b) {
  return autograd::add_gradients(local_dtensor(a), local_dtensor(b)).to_local();
}

}  // namespace

struct DataParallel::State {
  // This state itself: what a captured step's primitives hold (dtensor::compile), so that a
  // replay outliving the module's hooks and the DataParallel handle still finds the layout.
  std::weak_ptr<State> self;
  DeviceMesh mesh;
  CommunicatorPtr comm;
  int64_t n = 1, rank = 0;
  DataParallelOptions options;
  std::vector<Unit> units;
  std::vector<ParamState> params;
  std::vector<UnitState> unit_states;
  std::vector<Bucket> buckets;
  bool sync = true;
  bool callback_queued = false;
  // Units whose output gradient an autograd::grad pass reached (note_grad_call), and whether
  // that pass's end-of-backward callback (finish_grad_call) is queued.
  std::vector<const UnitState*> grad_call_units;
  bool grad_callback_queued = false;
  detail::PendingReductions pending;

  // Prefetching (options.prefetch). The first forward records the order in which the units
  // (the root aside) run; from then on a unit's gather launches the all-gather of the unit that
  // runs after it (forward) or before it (backward, where the units run in reverse), so that
  // collective proceeds on the communication thread while this unit computes, and that unit's
  // own gather only waits for it and unpacks. One extra unit's parameters are gathered at a
  // time (FSDP2's implicit prefetch does the same); a unit already gathered is never prefetched.
  struct InFlight {
    detail::DpCollective c;
    // The gathered flat buffer (read when the unit is gathered; this rank's packed shards
    // are its own block). Freed once the unit is unpacked.
    Tensor out;
  };
  std::vector<const UnitState*> forward_order;
  bool recording_order = false, order_known = false;
  absl::flat_hash_map<const UnitState*, InFlight> in_flight;
  absl::flat_hash_set<const UnitState*> gathered_units;
  int64_t prefetched = 0;  // gathers launched ahead of their unit (DataParallel::num_prefetched)

  void release(const UnitState& u) {
    for (size_t i : u.sharded) {
      if (!params[i].gathered.defined()) continue;
      // A captured step's gathered parameters are values of its graph: the handle is dropped,
      // the memory left to the graph's memory plan.
      if (capturing()) {
        params[i].gathered = Tensor();
      } else {
        params[i].gathered.storage().release_data();
      }
    }
    gathered_units.erase(&u);
  }

  // The unit next to u in the recorded forward order (+1 after it, -1 before it), or null.
  const UnitState* neighbour(const UnitState& u, int step) const {
    if (!order_known || !options.prefetch) return nullptr;
    const auto it = std::find(forward_order.begin(), forward_order.end(), &u);
    if (it == forward_order.end())
      return step > 0 && !forward_order.empty() && u.root ? forward_order.front() : nullptr;
    const auto pos = it - forward_order.begin() + step;
    if (pos < 0 || pos >= static_cast<int64_t>(forward_order.size())) return nullptr;
    return forward_order[pos];
  }

  // Launches the all-gather of a released unit ahead of its use.
  void prefetch(const UnitState* u) {
    if (u == nullptr || u->sharded.empty() || u->block == 0 || in_flight.contains(u) ||
        gathered_units.contains(u)) {
      return;
    }
    in_flight.emplace(u, launch_gather(*u));
    ++prefetched;
  }

  // Waits for every prefetch still in flight (each rank launched the same ones) and frees what
  // it gathered: a unit that did not run after all.
  void drain_prefetches() {
    for (auto& [u, f] : in_flight) {
      f.c.wait();
      release(*u);
    }
    in_flight.clear();
  }

  // (Re)allocates the unit's gathered parameters: when the unit is unpacked, not when its
  // gather is launched, so a prefetched unit holds only the all-gather's output meanwhile.
  void allocate_gathered(const UnitState& u) {
    for (size_t i : u.sharded) {
      ParamState& p = params[i];
      if (!p.gathered.defined()) {
        p.gathered =
            empty(p.compute_shape, TensorOptions(p.compute_dtype, p.storage.to_local().device()));
      } else {
        p.gathered.storage().reallocate_data();
      }
    }
  }

  // Launches the all-gather of the unit's shards. They are packed into this rank's block of
  // the output, which the all-gather leaves in place (FSDP2 does the same): no separate input
  // buffer.
  InFlight launch_gather(const UnitState& u) {
    std::vector<Tensor> shards;
    for (size_t i : u.sharded) shards.push_back(params[i].storage.to_local());
    return launch_gather(u, shards);
  }
  // `shards`: the local tensors of the unit's sharded parameters, in order.
  InFlight launch_gather(const UnitState& u, absl::Span<const Tensor> shards) {
    InFlight f;
    if (u.block == 0) return f;
    f.out = empty({n * u.block}, TensorOptions(u.dtype, shards[0].device()));
    Tensor in = f.out.narrow(0, rank * u.block, u.block);
    in.zero_();  // the padding after a short (uneven) shard
    for (size_t j = 0; j < u.sharded.size(); ++j) {
      const Tensor& s = shards[j];
      if (s.numel() > 0)
        in.narrow(0, params[u.sharded[j]].offset, s.numel()).view(s.shape()).copy_(s);
    }
    f.c = detail::launch_all_gather(*comm, f.out, in);
    return f;
  }

  // Copies every rank's chunks from the all-gather's output into the unit's gathered tensors.
  // A re-gather of the values the gathered tensor held (the shard unchanged since it was last
  // unpacked: a backward's re-gather of what the forward's ops saved) keeps its version, as
  // FSDP2's _unsafe_preserve_version_counter. A gather of changed values (an optimizer step
  // wrote the shard since) counts as the in-place write it is, so a graph that saved the old
  // values refuses its backward instead of reading the new ones (FSDP2 does not tell).
  void unpack_gathered(const UnitState& u, const Tensor& out, absl::Span<Tensor> gathered) {
    for (size_t j = 0; j < u.sharded.size(); ++j) {
      ParamState& p = params[u.sharded[j]];
      const uint32_t shard_version = p.storage.to_local().storage().version();
      const bool same_values = p.unpacked_from == shard_version;
      p.unpacked_from = shard_version;
      const uint32_t version = gathered[j].storage().version() + (same_values ? 0 : 1);
      for (int64_t r = 0; r < n; ++r) {
        const ChunkBounds cb = p.chunk(n, r);
        if (cb.size == 0 || p.rest() == 0) continue;
        gathered[j]
            .narrow(p.shard_dim, cb.offset, cb.size)
            .copy_(out.narrow(0, r * u.block + p.offset, cb.size * p.rest())
                       .view(p.chunk_shape(cb.size)));
      }
      gathered[j].storage().restore_version(version);
    }
  }

  // A captured step's gather (see capturing()): one primitive from the shards to freshly made
  // gathered parameters. In backward the forward's gathered parameters, which autograd saved,
  // are read again: nothing is recorded.
  void gather_recorded(const UnitState& u, int direction) {
    if (direction < 0) return;
    std::vector<Tensor> shards, gathered(u.sharded.size());
    for (size_t i : u.sharded) shards.push_back(params[i].storage.to_local());
    detail::run_recorded(
        "dp", "all_gather", shards, absl::MakeSpan(gathered), 0,
        [st = self.lock(), &u](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
          for (size_t j = 0; j < u.sharded.size(); ++j) {
            const ParamState& p = st->params[u.sharded[j]];
            out[j] = empty(p.compute_shape, TensorOptions(p.compute_dtype, in[j].device()));
          }
          if (u.block == 0) return;
          InFlight f = st->launch_gather(u, in);
          f.c.wait();
          st->unpack_gathered(u, f.out, out);
        });
    for (size_t j = 0; j < u.sharded.size(); ++j) params[u.sharded[j]].gathered = gathered[j];
    gathered_units.insert(&u);
  }

  // One all_gather of the unit's shards into the gathered (full compute-local) tensors: the
  // prefetched one if launched, else launched now; then the neighbour in `direction` (+1
  // forward, -1 backward) is prefetched. The prefetch is launched once this unit is unpacked
  // (as FSDP2 does), so that the neighbour's buffers are not alive beside this unit's gathered
  // output and gathered parameters; its all-gather still overlaps this unit's compute.
  // In backward, a unit still gathered since its forward (the last one, not resharded) is
  // not gathered again.
  void gather(const UnitState& u, int direction) {
    if (u.sharded.empty()) return;
    if (capturing()) {
      gather_recorded(u, direction);
      return;
    }
    if (direction < 0 && gathered_units.contains(&u)) {
      prefetch(neighbour(u, direction));
      return;
    }
    InFlight f;
    if (auto it = in_flight.find(&u); it != in_flight.end()) {
      f = std::move(it->second);
      in_flight.erase(it);
    } else {
      f = launch_gather(u);
    }
    gathered_units.insert(&u);
    allocate_gathered(u);
    if (u.block == 0) {
      prefetch(neighbour(u, direction));
      return;
    }
    f.c.wait();  // needed now: the forward (or backward) reads the parameters next
    std::vector<Tensor> gathered;
    for (size_t i : u.sharded) gathered.push_back(params[i].gathered);
    unpack_gathered(u, f.out, absl::MakeSpan(gathered));
    f = InFlight();  // the gathered output is freed before the neighbour's buffers exist
    prefetch(neighbour(u, direction));
  }

  void queue_finish() {
    if (callback_queued) return;
    callback_queued = true;
    autograd::queue_callback([this] { finish_backward(); });
  }

  // The gradient of a compute parameter as this rank's local contribution, folded with what
  // no_sync accumulated; undefined when it was accumulated instead (no sync).
  Tensor local_grad(ParamState& p, const DTensor& grad) {
    Tensor g;
    if (grad.defined()) {
      // A gradient may arrive Partial on a tensor-parallel dim: lay it out like the parameter.
      g = grad.placements() == p.compute_spec->placements()
              ? grad.to_local()
              : grad.redistribute(p.compute_spec->placements()).to_local();
    } else {
      g = zeros(p.compute_shape, TensorOptions(p.reduce_dtype, p.storage.to_local().device()));
    }
    if (g.dtype() != p.reduce_dtype) g = g.to(p.reduce_dtype);  // mixed precision
    if (!sync) {
      p.unsynced = p.unsynced.defined() ? add_local(p.unsynced, g) : g.contiguous().clone();
      return Tensor();
    }
    if (p.unsynced.defined()) {
      g = add_local(p.unsynced, g);
      p.unsynced = Tensor();
    }
    return g;
  }

  // A captured step's gradient (see capturing()): laid out like the compute parameter (a
  // recorded redistribute), or undefined (the packing fills zeros); the cast of mixed precision
  // happens in the packing, inside the recorded reduction.
  Tensor captured_grad(const ParamState& p, const DTensor& grad) const {
    DT_CHECK(sync && !p.unsynced.defined(),
             "[data_parallel] a step whose gradients are not synchronised "
             "(set_requires_gradient_sync(false) / NoSync, or gradients a no_sync step left to "
             "fold in) cannot be captured by dtensor::compile: accumulate micro-batches inside "
             "one compiled step, or run such steps eagerly");
    if (!grad.defined()) return Tensor();
    return grad.placements() == p.compute_spec->placements()
               ? grad.to_local()
               : grad.redistribute(p.compute_spec->placements()).to_local();
  }

  // The unit's reduce-scatter input: each rank's chunk of every gradient in its block, in the
  // reduction dtype; zeros where a gradient is undefined and in the padding.
  Tensor pack_unit_grads(const UnitState& u, absl::Span<const Tensor> local) const {
    const Device dev = params[u.sharded[0]].storage.to_local().device();
    Tensor in = zeros({n * u.block}, TensorOptions(u.reduce_dtype, dev));
    for (size_t j = 0; j < u.sharded.size(); ++j) {
      if (!local[j].defined()) continue;
      const ParamState& p = params[u.sharded[j]];
      for (int64_t r = 0; r < n; ++r) {
        const ChunkBounds cb = p.chunk(n, r);
        if (cb.size == 0 || p.rest() == 0) continue;
        in.narrow(0, r * u.block + p.offset, cb.size * p.rest())
            .view(p.chunk_shape(cb.size))
            .copy_(local[j].narrow(p.shard_dim, cb.offset, cb.size));
      }
    }
    return in;
  }

  // Each sharded parameter's gradient: its view of the reduce-scatter output.
  void unit_grad_views(const UnitState& u, const Tensor& out, absl::Span<Tensor> views) const {
    for (size_t j = 0; j < u.sharded.size(); ++j) {
      const Tensor& s = params[u.sharded[j]].storage.to_local();
      views[j] = out.narrow(0, params[u.sharded[j]].offset, s.numel()).view(s.shape());
    }
  }

  // Backward of a unit's gather: one reduce_scatter(avg) of the unit's gradients.
  // `grads`: those of the unit's trained sharded parameters, in order (a frozen one has none;
  // its block is reduced as zeros and dropped).
  // autograd::grad with respect to a data-parallel parameter: refused on every rank (the graph
  // decides), before any gradient state changes; what the pass gathered so far is released
  // first (a throwing pass drops its queued callbacks).
  void refuse_grad_call() {
    const bool create_graph = autograd::in_create_graph();
    if (!autograd::in_grad_call() && !create_graph) return;
    finish_grad_call();
    // create_graph: the reduction would drop the gradient's history (gradients of gradients
    // silently wrong).
    DT_CHECK(!create_graph,
             "[backward] create_graph=true reached a parameter of a replicate / fully_shard "
             "module: data parallel reduces its gradient without history, so double backward "
             "through it is not supported (under replicate, take the gradient penalty's first "
             "gradient with autograd::grad with respect to the input)");
    DT_FAIL(
        "[autograd.grad] an input is a parameter of a replicate / fully_shard module: data "
        "parallel reduces its gradient into grad(), which autograd::grad must not do (call "
        "backward(); PyTorch's DDP does not support autograd.grad either)");
  }

  // An autograd::grad pass reached a (trained) unit's output gradient: its gather node never
  // completes in such a pass (pruned when the inputs are not parameters, refused when one is),
  // so the pass's end counts the unit's backward and releases it instead.
  // create_graph through a fully_shard unit (a gradient penalty's autograd::grad with respect to
  // the input, say): the pass records nodes that save the unit's gathered parameters, and the
  // unit frees them after its backward or at the pass's end, so a backward over that recorded
  // graph would read freed storage (a crash, or another forward's values). Refused when the
  // unit's output gradient arrives, before anything is gathered for it: the graph decides, so
  // every rank raises at the same node; what the pass gathered so far is released first.
  void refuse_create_graph(const UnitState& u) {
    if (!autograd::in_create_graph()) return;
    finish_grad_call();
    DT_FAIL(
        "[fully_shard] create_graph=true through unit '%s': fully_shard frees the unit's gathered "
        "parameters after its backward, which the recorded graph of gradients would read later; "
        "double backward through a fully_shard unit is not supported (for a gradient penalty, "
        "use replicate or no data parallel)",
        u.fqn.empty() ? "<root>" : u.fqn);
  }

  void note_grad_call(const UnitState& u) {
    grad_call_units.push_back(&u);
    if (grad_callback_queued) return;
    grad_callback_queued = true;
    autograd::queue_callback([this] { finish_grad_call(); });
  }

  // The end of an autograd::grad pass (or its refusal): the noted units' backwards are counted,
  // and what the pass gathered is released (a root once no pending backward reads it).
  void finish_grad_call() {
    grad_callback_queued = false;
    drain_prefetches();
    for (const UnitState* u : grad_call_units) {
      if (u->backwards_pending > 0) --u->backwards_pending;
      if (u->root && u->backwards_pending == 0) release(*u);
    }
    grad_call_units.clear();
    release_leftovers();
  }

  void on_unit_grads(const UnitState& u, absl::Span<const DTensor> grads) {
    refuse_grad_call();
    queue_finish();
    std::vector<Tensor> local(u.sharded.size());
    bool any = false;
    for (size_t j = 0, k = 0; j < u.sharded.size(); ++j) {
      ParamState& p = params[u.sharded[j]];
      if (!p.trained) continue;
      local[j] = capturing() ? captured_grad(p, grads[k]) : local_grad(p, grads[k]);
      ++k;
      any = any || local[j].defined();
    }
    if (u.backwards_pending > 0) --u.backwards_pending;
    // After backward every unit is resharded (FSDP2 does too); the root once no other pending
    // backward reads its gathered parameters (the others gather again in their backward).
    if (!u.root || u.backwards_pending == 0) release(u);
    // Eager, an undefined gradient is zeros already (local_grad), so `any` holds when synced.
    if ((!any && !capturing()) || u.block == 0) return;
    std::vector<Tensor> views(u.sharded.size());
    if (capturing()) {
      detail::run_recorded(
          "dp", "reduce_scatter", local, absl::MakeSpan(views), 0,
          [st = self.lock(), &u](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
            const Tensor flat = st->pack_unit_grads(u, in);
            const Tensor reduced = empty({u.block}, TensorOptions(u.reduce_dtype, flat.device()));
            detail::launch_reduce_scatter_avg(*st->comm, reduced, flat).wait();
            st->unit_grad_views(u, reduced, out);
          });
      pending.add(detail::DpCollective(), [this, &u, views] { accumulate_unit_grads(u, views); });
      return;
    }
    const Tensor in = pack_unit_grads(u, local);
    Tensor out = empty({u.block}, TensorOptions(u.reduce_dtype, in.device()));
    unit_grad_views(u, out, absl::MakeSpan(views));
    pending.add(detail::launch_reduce_scatter_avg(*comm, out, in),
                [this, &u, views] { accumulate_unit_grads(u, views); });
  }

  void accumulate_unit_grads(const UnitState& u, absl::Span<const Tensor> views) {
    for (size_t j = 0; j < u.sharded.size(); ++j) {
      if (params[u.sharded[j]].trained)
        accumulate_into_grad(params[u.sharded[j]].storage, views[j]);
    }
  }

  void on_replicated_grad(size_t i, const DTensor& grad) {
    refuse_grad_call();
    queue_finish();
    ParamState& p = params[i];
    Tensor g;
    if (!capturing()) {
      g = local_grad(p, grad);
    } else if (g = captured_grad(p, grad); !g.defined()) {
      // Zeros as local_grad makes them, made by a recorded primitive (replay makes them again).
      Tensor z[1];
      detail::run_recorded(
          "dp", "zeros", {}, z, 0,
          [shape = p.compute_shape,
           opts = TensorOptions(p.reduce_dtype, p.storage.to_local().device())](
              absl::Span<const Tensor>, absl::Span<Tensor> out) { out[0] = zeros(shape, opts); });
      g = z[0];
    }
    if (!g.defined()) return;
    Bucket& b = buckets[p.bucket];
    const size_t slot = std::find(b.params.begin(), b.params.end(), i) - b.params.begin();
    if (b.grads[slot].defined()) {
      // A second gradient for the parameter before its bucket launched (the module ran twice
      // before one backward): summed, and the parameter counted once.
      b.grads[slot] = capturing() ? add_local(b.grads[slot], g) : add(b.grads[slot], g);
      return;
    }
    b.grads[slot] = capturing() ? g : g.contiguous();
    if (++b.ready == static_cast<int64_t>(b.params.size())) launch_bucket(b);
  }

  // A bucket's all-reduce buffer: the gradients of `which` (parameter indices) one after the
  // other in the reduction dtype, each from a 16-element boundary (flat_slot); `offsets` gets
  // each one's place.
  Tensor pack_bucket(absl::Span<const size_t> which, absl::Span<const Tensor> grads,
                     std::vector<int64_t>& offsets) const {
    int64_t total = 0;
    for (const Tensor& g : grads) total += flat_slot(g.numel());
    const DType dtype = params[which[0]].reduce_dtype;
    Tensor flat = empty({total}, TensorOptions(dtype, grads[0].device()));
    offsets.clear();
    int64_t off = 0;
    for (const Tensor& g : grads) {
      const int64_t numel = g.numel();
      flat.narrow(0, off, numel).view(g.shape()).copy_(g);
      // The alignment padding: reduced like the rest, never read, kept deterministic.
      if (flat_slot(numel) > numel) flat.narrow(0, off + numel, flat_slot(numel) - numel).zero_();
      offsets.push_back(off);
      off += flat_slot(numel);
    }
    return flat;
  }

  // Each parameter's gradient: its view of the bucket's buffer.
  void bucket_views(absl::Span<const size_t> which, const Tensor& flat,
                    absl::Span<const int64_t> offsets, absl::Span<Tensor> views) const {
    for (size_t k = 0; k < which.size(); ++k) {
      const Tensor& s = params[which[k]].storage.to_local();
      views[k] = flat.narrow(0, offsets[k], s.numel()).view(s.shape());
    }
  }

  void launch_bucket(Bucket& b) {
    std::vector<size_t> which;
    std::vector<Tensor> grads;
    for (size_t s = 0; s < b.params.size(); ++s) {
      if (!b.grads[s].defined()) continue;
      which.push_back(b.params[s]);
      grads.push_back(std::move(b.grads[s]));
      b.grads[s] = Tensor();
    }
    b.ready = 0;
    std::vector<Tensor> views(which.size());
    if (capturing()) {  // see capturing()
      detail::run_recorded(
          "dp", "all_reduce", grads, absl::MakeSpan(views), 0,
          [st = self.lock(), which](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
            std::vector<int64_t> offsets;
            const Tensor flat = st->pack_bucket(which, in, offsets);
            detail::launch_all_reduce_avg(*st->comm, flat).wait();
            st->bucket_views(which, flat, offsets, out);
          });
      pending.add(detail::DpCollective(), [this, which, views] {
        for (size_t k = 0; k < which.size(); ++k) {
          accumulate_into_grad(params[which[k]].storage, views[k]);
        }
      });
      return;
    }
    std::vector<int64_t> offsets;
    const Tensor flat = pack_bucket(which, grads, offsets);
    grads.clear();
    bucket_views(which, flat, offsets, absl::MakeSpan(views));
    pending.add(detail::launch_all_reduce_avg(*comm, flat), [this, which, views] {
      for (size_t k = 0; k < which.size(); ++k) {
        accumulate_into_grad(params[which[k]].storage, views[k]);
      }
    });
  }

  // Frees every non-root unit still gathered: one whose backward did not run (its output did not
  // reach the loss, or no backward followed its forward), which would otherwise hold its
  // parameters until its next forward (FSDP2's final callback reshards likewise); a frozen root
  // too once no pending backward reads it (a trained one is released by its gather's backward).
  void release_leftovers() {
    std::vector<const UnitState*> left;
    for (const UnitState* u : gathered_units) {
      if (!u->root || (u->frozen && u->backwards_pending == 0)) left.push_back(u);
    }
    for (const UnitState* u : left) release(*u);
  }

  void finish_backward() {
    callback_queued = false;
    drain_prefetches();  // a unit before the first one that needed its gradient
    release_leftovers();
    // Buckets some of whose parameters received no gradient (the same on every rank).
    for (Bucket& b : buckets) {
      if (b.ready > 0) launch_bucket(b);
    }
    pending.finish_all();
  }

  void reset_step() {
    if (grad_callback_queued) {
      // The last autograd::grad pass raised before its end (its queued callback dropped): its
      // noted units' backwards are counted and what it gathered released, as its end would.
      // Left set, no later pass would queue the callback: units kept gathered for good.
      finish_grad_call();
    }
    if (callback_queued) {
      // The last backward raised before its end (the engine drops queued callbacks then):
      // its launched reductions are waited and dropped, and the gradients it began to
      // accumulate under no_sync are discarded with the earlier micro-batches' (they cannot
      // be told apart). Left pending, the next backward's finish would add those stale
      // reductions into the gradients after the user's zero_grad.
      pending.discard_all();
      for (ParamState& p : params) p.unsynced = Tensor();
    }
    callback_queued = false;
    for (Bucket& b : buckets) {
      b.ready = 0;
      for (Tensor& g : b.grads) g = Tensor();
    }
  }

  // An unsharded parameter's local tensor in the compute dtype (cast under mixed precision;
  // a recorded primitive when a step is captured).
  static Tensor compute_local(const ParamState& p) {
    const Tensor& t = p.storage.to_local();
    if (t.dtype() == p.compute_dtype) return t;
    if (!capturing()) return t.to(p.compute_dtype);
    Tensor cast[1];
    detail::run_recorded(
        "dp", "cast", {t}, cast, 0,
        [dtype = p.compute_dtype](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
          out[0] = in[0].to(dtype);
        });
    return cast[0];
  }

  void swap_in(const ParamState& p, const DTensor& value) {
    for (const ParamSlot& s : p.info.slots) s.module->swap_parameter(s.name, value);
  }

  void pre_forward(const UnitState& u);
  DTensor wrap_frozen_input(const UnitState& u, const DTensor& x);
  void check_written_input(const UnitState& u);
  DTensor post_forward(const UnitState& u, const DTensor& out);
};

void DataParallel::State::pre_forward(const UnitState& u) {
  if (u.root) {
    reset_step();
    drain_prefetches();  // launched by a step that did not use them (it raised, or branched)
    // Kept gathered by a forward no backward followed (a graph saved across this forward
    // still works: its backward gathers the unit again into the same memory).
    release_leftovers();
    recording_order = !order_known;
    if (recording_order) forward_order.clear();
  } else if (recording_order &&
             std::find(forward_order.begin(), forward_order.end(), &u) == forward_order.end()) {
    forward_order.push_back(&u);
  }
  gather(u, +1);
  // The trained sharded parameters through one autograd node (its backward reduce-scatters);
  // the frozen ones are swapped in as they are, nothing recorded.
  DTensorList outs;
  std::vector<const DTensor*> ins;
  std::vector<size_t> trained;
  for (size_t i : u.sharded) {
    const DTensor gathered(params[i].gathered, params[i].compute_spec);
    if (!params[i].trained) {
      swap_in(params[i], gathered);
      continue;
    }
    outs.push_back(gathered);
    ins.push_back(&params[i].storage);
    trained.push_back(i);
  }
  if (!trained.empty()) {
    const size_t count = trained.size();
    outs = autograd::record_linear_function("FullyShardGatherBackward", ins, std::move(outs),
                                            [this, &u, count](absl::Span<const DTensor> grads) {
                                              on_unit_grads(u, grads);
                                              return DTensorList(count);
                                            });
    for (size_t j = 0; j < count; ++j) swap_in(params[trained[j]], outs[j]);
  }
  for (size_t i : u.replicated) {
    DTensor out =
        autograd::record_linear_function("ReplicateParamBackward", {&params[i].storage},
                                         DTensor(compute_local(params[i]), params[i].compute_spec),
                                         [this, i](absl::Span<const DTensor> grads) {
                                           on_replicated_grad(i, grads[0]);
                                           return DTensorList(1);
                                         });
    swap_in(params[i], out);
  }
  // Replicated frozen parameters: the same local tensor on the compute mesh, as the trained
  // ones, with nothing recorded.
  for (size_t i : u.all) {
    if (!params[i].trained && params[i].shard_dim < 0) {
      swap_in(params[i], DTensor(compute_local(params[i]), params[i].compute_spec));
    }
  }
}

// A frozen unit's input passed through an identity node whose backward releases the unit when
// no other wrapped call's node of the unit is pending (alive and not run).
DTensor DataParallel::State::wrap_frozen_input(const UnitState& u, const DTensor& x) {
  u.wrapped_input = u.wrapped = DTensor();  // a forward that raised left them
  // Without reshard_after_forward no re-gather hook would gather it again for another backward.
  if (!u.release_after_input_grad || capturing() || !options.reshard_after_forward) return x;
  if (!x.defined() || !x.requires_grad() || !autograd::grad_enabled()) return x;
  // Counted while its node is pending: un-counted when it runs or is destroyed unrun.
  struct Token {
    std::shared_ptr<int64_t> pending;
    bool open = true;
    void close() {
      if (open) --*pending;
      open = false;
    }
    ~Token() { close(); }
  };
  ++*u.pending_inputs;
  // x.detach() is not a view of x for autograd: a forward writing it in place is allowed (a
  // correct relu_ on the input), and check_written_input guards the caller's x after it.
  auto token = std::make_shared<Token>();
  token->pending = u.pending_inputs;
  u.wrapped_input = x;
  u.wrapped = autograd::record_linear_function(
      "FrozenUnitInputBackward", {&x}, x.detach(), [this, &u, token](absl::Span<const DTensor> g) {
        token->close();
        if (*u.pending_inputs == 0 && gathered_units.contains(&u)) {
          release(u);
        }
        return DTensorList{g[0]};
      });
  u.wrap_node = u.wrapped.autograd_meta()->grad_fn.get();
  return u.wrapped;
}

// A forward that wrote its wrapped input in place moved that tensor's history off the
// FrozenUnitInputBackward node, while the caller's x (the same memory) keeps its own: a later
// read of x would take a gradient without the write's derivative. So x's history is pointed
// at a node that refuses any gradient reaching it (on every rank: the graph is the same), as an
// in-place op on x itself re-points it; a leaf or a view that requires grad is refused at once,
// as that op on x itself is. One pointer compare per wrapped call otherwise.
void DataParallel::State::check_written_input(const UnitState& u) {
  DTensor x = std::exchange(u.wrapped_input, DTensor());
  const DTensor got = std::exchange(u.wrapped, DTensor());
  const std::shared_ptr<autograd::Node>& now = got.autograd_meta()->grad_fn;
  if (now == nullptr || now.get() == u.wrap_node) return;
  AutogradMeta& meta = *x.autograd_meta();
  DT_CHECK(meta.grad_fn != nullptr && !meta.is_view,
           "[fully_shard] unit '%s' wrote its input in place in its forward (%s), and that input "
           "is %s that requires grad: refused, as the in-place op on it is (clone it first)",
           u.fqn, now->name(), meta.grad_fn == nullptr ? "a leaf" : "a view of a DTensor");
  const DTensor guard = autograd::record_linear_function(
      "FrozenUnitInputWritten", {&got}, got.detach(),
      [fqn = u.fqn](absl::Span<const DTensor>) -> DTensorList {
        DT_FAIL(
            "[fully_shard] unit '%s' wrote its input in place in its forward and the caller "
            "read that input again: its gradient would skip the write's derivative (the unit "
            "sees its input through an identity node, not the caller's tensor). Write a copy "
            "in the forward, or call the unit on x.clone()",
            fqn);
      });
  meta.grad_fn = guard.autograd_meta()->grad_fn;
  meta.output_nr = 0;
}

DTensor DataParallel::State::post_forward(const UnitState& u, const DTensor& out) {
  if (u.root && recording_order) {
    recording_order = false;
    order_known = true;
  }
  for (size_t i : u.all) swap_in(params[i], params[i].storage);
  if (u.wrapped.defined()) check_written_input(u);
  if (u.sharded.empty()) return out;
  const bool backward_follows = out.defined() && out.requires_grad();
  if (backward_follows) ++u.backwards_pending;
  if (backward_follows && !u.frozen && !capturing()) {
    // Before the re-gather hook below: in an autograd::grad pass, note the unit (the pass's
    // end releases it: its gather node does not run). The root (no re-gather hook) gathers
    // again if an earlier pass over a retained graph released it (a no-op when gathered).
    out.register_hook([this, &u](const DTensor&) {
      refuse_create_graph(u);
      if (autograd::in_grad_call()) note_grad_call(u);
      if (u.root) gather(u, -1);
      return DTensor();
    });
  }
  if (backward_follows && u.frozen) {
    // A frozen unit regathered for the gradient of its input (or kept: the root, the last unit,
    // no reshard_after_forward) is released at the end of the backward pass, which this queues
    // (nothing else may: with no trained parameter no data-parallel node runs).
    out.register_hook([this, &u](const DTensor&) {
      refuse_create_graph(u);
      if (u.backwards_pending > 0) --u.backwards_pending;
      queue_finish();
      return DTensor();
    });
  }
  if (!backward_follows) {
    release(u);
  } else if (!u.root && options.reshard_after_forward) {
    // The unit that ran last in forward is the first whose gradient arrives: resharding it
    // would free its parameters only to gather them again at once (one more all-gather, and
    // its output beside the gathered parameters at the start of backward, where activations
    // peak), so it stays gathered (torchtitan sets this by hand for the last block). "Last" is
    // the last to start in the recorded order: with a unit run twice or nested units it may not
    // be the last to finish, which costs memory held longer, not correctness. If its backward
    // does not run, the end of the backward or the next forward frees it.
    const bool last = order_known && !forward_order.empty() && forward_order.back() == &u;
    if (!last) release(u);
    // Gather again when the unit's output gradient arrives, before any of its backward ops
    // (the last unit: only its neighbour's prefetch is launched then).
    out.register_hook([this, &u](const DTensor&) {
      gather(u, -1);
      return DTensor();
    });
  }
  return out;
}

namespace {

const char* style_op(DataParallelStyle style) {
  switch (style) {
    case DataParallelStyle::kReplicate:
      return "replicate";
    case DataParallelStyle::kFullyShard:
      return "fully_shard";
    default:
      return "data_parallel";
  }
}

// The tensor dim the dp dim shards, or -1 to replicate.
int64_t choose_shard_dim(const DTensor& p, DataParallelStyle style, int64_t n) {
  if (style == DataParallelStyle::kReplicate || p.dim() == 0) return -1;
  auto sharded_elsewhere = [&](int64_t d) {
    if (is_local(p)) return false;
    for (const Placement& pl : p.placements()) {
      if (pl.is_shard() && pl.dim() == d) return true;
    }
    return false;
  };
  if (style == DataParallelStyle::kDefault) {
    return !sharded_elsewhere(0) && p.to_local().size(0) % n == 0 ? 0 : -1;
  }
  for (int64_t d = 0; d < p.dim(); ++d) {
    if (!sharded_elsewhere(d)) return d;
  }
  return -1;
}

}  // namespace

std::shared_ptr<DataParallel> data_parallel(nn::Module& module, const DeviceMesh& mesh,
                                            DataParallelStyle style, DataParallelOptions options) {
  const char* op = style_op(style);
  int64_t dp_dim = 0;
  if (mesh.ndim() > 1) {
    const auto& names = mesh.dim_names();
    const auto it = std::find(names.begin(), names.end(), options.dp_dim_name);
    DT_CHECK(it != names.end(), "[%s] the mesh has %d dims and none is named '%s' (dims: %s)", op,
             mesh.ndim(), options.dp_dim_name, absl::StrJoin(names, ", "));
    dp_dim = it - names.begin();
  }
  DT_CHECK(mesh.contains_me(), "[%s] this rank is not part of the mesh", op);
  for (const auto& [what, d] : {std::pair{"param_dtype", options.param_dtype},
                                std::pair{"reduce_dtype", options.reduce_dtype}}) {
    DT_CHECK(!d || is_floating(*d), "[%s] %s %s is not a floating dtype", op, what, dtype_name(*d));
  }
  std::vector<int64_t> others;
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    if (d != dp_dim) others.push_back(d);
  }
  const DeviceMesh compute_mesh =
      others.empty() ? self_mesh(mesh.device_type()) : mesh.submesh(others);

  auto state = std::make_shared<DataParallel::State>();
  state->self = state;
  state->mesh = mesh;
  state->comm = mesh.communicator(dp_dim);
  state->n = mesh.size(dp_dim);
  state->rank = mesh.get_local_rank(dp_dim);
  state->options = options;
  state->units = group_modules(
      module, style == DataParallelStyle::kReplicate ? GroupingPolicy{} : options.grouping);
  DataParallel::State& s = *state;
  for (const Unit& unit : s.units) {
    UnitState u;
    u.fqn = unit.fqn;
    u.module = unit.module;
    u.root = unit.fqn.empty();
    for (const UnitParam& up : unit.params) {
      const DTensor p = up.slots.front().module->param(up.slots.front().name);
      // A parameter the tensor-parallel plan left alone is local (self mesh): replicated on
      // the other dims, and its forward keeps running on local tensors.
      DT_CHECK(is_local(p) || p.device_mesh() == compute_mesh,
               "[%s] parameter '%s' is %s; expected it local (unparallelized) or on the mesh of "
               "the non-dp dims %s (parallelize on the submesh without the dp dim first)",
               op, up.fqn, p.str(), compute_mesh.str());
      ParamState ps;
      ps.info = up;
      ps.compute_spec = p.spec_ptr();
      ps.compute_shape = p.to_local().shape();
      ps.compute_dtype = ps.reduce_dtype = p.dtype();
      if (options.param_dtype && is_floating(p.dtype())) {
        ps.compute_dtype = *options.param_dtype;
        ps.reduce_dtype = options.reduce_dtype.value_or(*options.param_dtype);
        ps.compute_spec = std::make_shared<const DTensorSpec>(
            p.spec().mesh(), p.placements(), TensorMeta(p.shape(), ps.compute_dtype), op);
      } else if (options.reduce_dtype && is_floating(p.dtype())) {
        ps.reduce_dtype = *options.reduce_dtype;
      }
      ps.trained = p.requires_grad();
      ps.shard_dim = choose_shard_dim(p, style, s.n);
      Placements pl;
      for (int64_t d = 0, o = 0; d < mesh.ndim(); ++d) {
        if (d == dp_dim) {
          pl.push_back(ps.shard_dim >= 0 ? Placement(Shard(ps.shard_dim)) : Placement(Replicate()));
        } else {
          pl.push_back(is_local(p) ? Placement(Replicate()) : p.placements()[o++]);
        }
      }
      auto spec =
          std::make_shared<const DTensorSpec>(mesh, pl, TensorMeta(p.shape(), p.dtype()), op);
      Tensor local = p.to_local();
      if (ps.shard_dim >= 0) {
        const ChunkBounds cb = ps.chunk(s.n, s.rank);
        local = local.narrow(ps.shard_dim, cb.offset, cb.size).clone();
      }
      DT_CHECK(local.shape() == spec->local_shard().shape,
               "[%s] internal: shard of '%s' has shape %s, spec %s implies %s", op, up.fqn,
               shape_str(local.shape()), spec->str(), shape_str(spec->local_shard().shape));
      ps.storage = DTensor(local, spec);
      if (ps.trained) ps.storage.requires_grad_();
      s.swap_in(ps, ps.storage);
      const size_t index = s.params.size();
      u.all.push_back(index);
      if (ps.shard_dim >= 0) {
        u.sharded.push_back(index);
      } else if (ps.trained) {
        u.replicated.push_back(index);
      }
      s.params.push_back(std::move(ps));
    }
    // The unit's flat layout: each sharded parameter's largest chunk, in order.
    for (size_t i : u.sharded) {
      ParamState& p = s.params[i];
      DT_CHECK(p.storage.dtype() == s.params[u.sharded[0]].storage.dtype(),
               "[%s] unit '%s' holds sharded parameters of dtypes %s and %s (one dtype per unit)",
               op, u.fqn, dtype_name(p.storage.dtype()),
               dtype_name(s.params[u.sharded[0]].storage.dtype()));
      u.dtype = p.compute_dtype;
      u.reduce_dtype = p.reduce_dtype;
      p.offset = u.block;
      u.block += flat_slot(p.chunk(s.n, 0).size * p.rest());
    }
    u.frozen = std::none_of(u.sharded.begin(), u.sharded.end(),
                            [&](size_t i) { return s.params[i].trained; }) &&
               !u.sharded.empty();
    u.release_after_input_grad =
        u.frozen && !u.root && std::none_of(u.all.begin(), u.all.end(), [&](size_t i) {
          return s.params[i].trained || s.params[i].info.slots.size() != 1;
        });
    s.unit_states.push_back(std::move(u));
  }
  // Buckets: replicated trained parameters in reverse registration order, by size and dtype.
  std::vector<size_t> order;
  for (size_t i = s.params.size(); i-- > 0;) {
    if (s.params[i].trained && s.params[i].shard_dim < 0) order.push_back(i);
  }
  int64_t bytes = 0;
  for (size_t i : order) {
    ParamState& p = s.params[i];
    const int64_t nb =
        p.storage.to_local().numel() * static_cast<int64_t>(dtype_size(p.storage.dtype()));
    const bool fits = !s.buckets.empty() && bytes + nb <= options.bucket_cap_bytes &&
                      s.params[s.buckets.back().params[0]].storage.dtype() == p.storage.dtype();
    if (!fits) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().params.push_back(i);
    s.buckets.back().grads.emplace_back();
    bytes += nb;
    p.bucket = static_cast<int64_t>(s.buckets.size()) - 1;
  }
  // Hooks: the state lives as long as the module's hooks (and the returned handle). The args
  // forms, so that a unit of any number of inputs (a TwoInputModule, a three-input loss) runs
  // them. The pre-hook is prepended, as FSDP2's (and torch's FSDP-based replicate): the
  // parameters are gathered before any pre-hook registered earlier (a user's, TP's
  // PrepareModuleInput), and a frozen unit's input node wraps the caller's input. A frozen unit
  // wraps one input: the first that requires grad (the release argument of
  // release_after_input_grad holds for the others as for any trainable tensor besides it).
  for (UnitState& u : s.unit_states) {
    const UnitState* up = &u;
    u.module->register_forward_pre_hook(
        [state, up](nn::Module&,
                    absl::Span<const DTensor> args) -> std::optional<std::vector<DTensor>> {
          state->pre_forward(*up);
          if (args.empty()) return std::nullopt;
          const auto first = std::find_if(args.begin(), args.end(), [](const DTensor& x) {
            return x.defined() && x.requires_grad();
          });
          const size_t i = first == args.end() ? 0 : static_cast<size_t>(first - args.begin());
          DTensor wrapped = state->wrap_frozen_input(*up, args[i]);
          if (!up->wrapped.defined()) return std::nullopt;  // not wrapped: args as they are
          std::vector<DTensor> out(args.begin(), args.end());
          out[i] = std::move(wrapped);
          return out;
        },
        {.prepend = true});
    u.module->register_forward_hook([state, up](nn::Module&, absl::Span<const DTensor>,
                                                DTensor& out) -> std::optional<DTensor> {
      return state->post_forward(*up, out);
    });
  }
  return std::make_shared<DataParallel>(state);
}

std::shared_ptr<DataParallel> replicate(nn::Module& module, const DeviceMesh& mesh,
                                        DataParallelOptions options) {
  return data_parallel(module, mesh, DataParallelStyle::kReplicate, std::move(options));
}

std::shared_ptr<DataParallel> fully_shard(nn::Module& module, const DeviceMesh& mesh,
                                          DataParallelOptions options) {
  return data_parallel(module, mesh, DataParallelStyle::kFullyShard, std::move(options));
}

void DataParallel::set_requires_gradient_sync(bool sync) {
  state_->sync = sync;
}
bool DataParallel::requires_gradient_sync() const {
  return state_->sync;
}
void DataParallel::discard_unsynced() {
  for (auto& p : state_->params) p.unsynced = Tensor();
}
const std::vector<Unit>& DataParallel::units() const {
  return state_->units;
}
int64_t DataParallel::num_buckets() const {
  return static_cast<int64_t>(state_->buckets.size());
}
int64_t DataParallel::num_prefetched() const {
  return state_->prefetched;
}
int64_t DataParallel::num_sharded_params() const {
  int64_t c = 0;
  for (const ParamState& p : state_->params) c += p.shard_dim >= 0 ? 1 : 0;
  return c;
}

std::string DataParallel::grouping_str() const {
  std::string out = ::dtensor::grouping_str(state_->units);
  for (const ParamState& p : state_->params) {
    absl::StrAppend(&out, "  ", p.info.fqn, ": ", p.storage.spec().str(),
                    p.bucket >= 0 ? absl::StrCat(" bucket ", p.bucket) : std::string(), "\n");
  }
  return out;
}

}  // namespace dtensor

#pragma GCC diagnostic pop
