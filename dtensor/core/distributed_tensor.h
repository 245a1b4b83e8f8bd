// DTensor: a global tensor described by a DTensorSpec, of which this process holds its local
// shard (a plain Tensor on the mesh's device). Cheap to copy (shared spec, shared storage).
#pragma once

#include <absl/container/inlined_vector.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

class DTensor;
struct AutogradMeta;
namespace autograd {
class Node;
}  // namespace autograd

// A gradient hook (DTensor::register_hook): sees the gradient flowing into a DTensor and
// returns the gradient to use instead (or an undefined DTensor to keep it).
using GradHook = std::function<DTensor(const DTensor& grad)>;

// A distributed tensor: this rank's local shard plus the DTensorSpec (mesh, placements, global
// meta) saying where the other pieces live (PyTorch's DTensor). Copies share the shard and the
// autograd state.
class DTensor {
 public:
  // An undefined DTensor (defined() == false).
  DTensor() = default;
  // Wraps a local shard that already matches `spec` (no checks, no communication). Used by
  // the library itself; users call from_local.
  DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec);
  // A DTensor whose local shard is still being computed by `pending` (an async redistribute):
  // `local` has the shard's shape and is filled when `pending` completes; to_local() (so every
  // op, full_tensor, a kernel reading it) waits for it first, nothing earlier does.
  DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec, WorkPtr pending);

  // Builds a DTensor from each rank's local piece (PyTorch DTensor.from_local).
  // `shape`/`stride` give the global geometry when the shards are uneven; when empty the
  // global shape is inferred assuming even shards (local size * mesh size along sharded dims).
  // run_check: verifies across the mesh that every rank's local shape and dtype equal what the
  // placements imply (one all-gather of a small record per mesh dim of size > 1; the first 16
  // dims of each shape are compared; an inferred global shape is taken from the mesh's first
  // rank) and throws the same error on every rank, e.g. "[from_local] rank 3 holds a local
  // shard of shape [2, 5] but placements [S(0), R] on global shape [8, 5] imply [2, 4]"
  // (followed by "(mismatching ranks: 1, 3)" when several do); then, as PyTorch does, the
  // data of Replicate mesh dims is broadcast from the dim's first member (coordinate 0), so
  // replicas that differed are made equal (one broadcast per Replicate mesh dim of size > 1).
  // Ranks outside the mesh communicate nothing and hold an empty local tensor. The local
  // tensor is moved to the mesh's device when needed; no copy when it is already there (the
  // DTensor shares its storage). Not recorded by autograd (a Tensor has no gradient): see the
  // DTensor overload.
  static DTensor from_local(const Tensor& local, const DeviceMesh& mesh, PlacementSpan placements,
                            bool run_check = false, IntSpan shape = {}, IntSpan stride = {});
  // The differentiable from_local (recorded when the autograd layer is linked, see
  // detail/autograd_hooks.h): `local` is a DTensor on this process's self mesh (the local case,
  // see self_mesh()). Its gradient is the incoming gradient redistributed to
  // `grad_placements`, then taken as this rank's local piece.
  // Default (PyTorch 2.15): `placements` with every Partial made Replicate, so a piece of a
  // Partial(sum) value receives the whole gradient (it enters the sum whole); pass e.g.
  // {Partial()} to receive pieces that sum to the gradient instead.
  static DTensor from_local(const DTensor& local, const DeviceMesh& mesh, PlacementSpan placements,
                            bool run_check = false, IntSpan shape = {}, IntSpan stride = {},
                            PlacementSpan grad_placements = {});

  // False for a default-constructed DTensor.
  bool defined() const { return spec_ != nullptr; }
  // This process's shard (empty on ranks outside the mesh). The raw local tensor: not
  // recorded by autograd (see to_local_dtensor()).
  const Tensor& to_local() const {
    if (pending_ != nullptr) [[unlikely]]
      wait();
    return local_;
  }
  // Whether the local shard is still pending (an async redistribute that has not completed
  // yet); never blocks.
  bool is_pending() const { return pending_ != nullptr && !pending_->is_completed(); }
  // Waits for a pending local shard (rethrowing the error of its collectives); a no-op
  // otherwise. The shard's shape, dtype and spec are known without waiting.
  void wait() const;
  // The whole global tensor on every rank of the mesh (redistributes to all-Replicate). Not
  // recorded by autograd (see full_tensor_dtensor()).
  Tensor full_tensor() const;
  // The differentiable counterparts of to_local() / full_tensor() (PyTorch's
  // to_local(grad_placements=...) / full_tensor(grad_placements=...)): this rank's shard / the
  // full tensor as a local DTensor (on this process's self mesh, as local_dtensor() makes),
  // recorded when the autograd layer is linked (the same value, unrecorded, otherwise). Each
  // rank's local gradient is read as its piece of a gradient laid out as `grad_placements`,
  // which then flows back like any redistribute gradient. Default (PyTorch 2.15):
  // to_local_dtensor(): this DTensor's placements with every Partial made Replicate (a Partial
  // value's piece enters what is computed from it whole, so each rank holds the whole
  // gradient); full_tensor_dtensor(): all Replicate. Pass e.g. {Partial()} when the local
  // gradients are partial sums. Any contiguous range of placements is accepted (initializer
  // list, std::vector<Placement>, Placements).
  DTensor to_local_dtensor() const;
  DTensor to_local_dtensor(PlacementSpan grad_placements) const;
  DTensor full_tensor_dtensor() const;
  DTensor full_tensor_dtensor(PlacementSpan grad_placements) const;
  // The same logical tensor with other placements on `mesh`. On this DTensor's mesh it issues
  // the collectives of the cheapest plan (see redistribute.h); on another mesh (other shape,
  // ranks or device type) it moves the pieces point to point (redistribute_cross_mesh_local:
  // every rank of either mesh calls it, synchronous, the gradient goes back to this mesh).
  // Recorded by autograd when its layer is linked (detail/autograd_hooks.h): the gradient flows
  // back to this DTensor's placements, except that a Partial placement receives a Replicate
  // gradient and a Replicate placement whose gradient arrives Partial keeps it Partial (reduced
  // later, where it is needed).
  DTensor redistribute(const DeviceMesh& mesh, PlacementSpan placements) const;
  DTensor redistribute(PlacementSpan placements) const&;
  // The same on a DTensor the caller gives up (a temporary, or std::move(x)), which is left
  // undefined: when nothing else shares its local memory (no copy of the DTensor, no view, no
  // tensor autograd saved, no from_blob memory: Storage::sole_owner), the plan may work in that
  // memory, so P -> R reduces it in place instead of into a fresh buffer (the forward hook of
  // RowwiseParallel does so with the layer's Partial output). Same result and recording.
  DTensor redistribute(PlacementSpan placements) &&;
  // async_op = true: returns at once with a pending DTensor (is_pending()) whose collectives
  // run on the communication thread (dtensor/collectives/comm_worker.h) while the caller goes on;
  // its first use waits for them. A plan with no collective completes inline. Same result, errors
  // (raised at the first use) and autograd recording as the blocking form.
  DTensor redistribute(const DeviceMesh& mesh, PlacementSpan placements, bool async_op) const;
  DTensor redistribute(PlacementSpan placements, bool async_op) const;

  // The spec and its parts: mesh, placements, global shape (== sizes), size of one dim
  // (negative dims allowed), rank, global element count, dtype, and the local shard's device.
  const DTensorSpec& spec() const { return *spec_; }
  const std::shared_ptr<const DTensorSpec>& spec_ptr() const { return spec_; }
  const Placements& placements() const { return spec_->placements(); }
  const DeviceMesh& device_mesh() const { return spec_->mesh(); }
  const Shape& shape() const { return spec_->shape(); }
  const Shape& sizes() const { return spec_->shape(); }
  int64_t size(int64_t dim) const;
  int64_t dim() const { return spec_->ndim(); }
  int64_t numel() const { return spec_->numel(); }
  DType dtype() const { return spec_->dtype(); }
  Device device() const { return local_.device(); }

  // ---- autograd (libtorch's names) -----------------------------------------------------------
  // The autograd state is shared by every copy of a DTensor made after it exists (a parameter
  // registered with a module, or requires_grad_() called before the DTensor is copied).
  // Whether gradients are computed for this DTensor: a leaf marked by requires_grad_(), or the
  // output of a recorded op with an input that requires grad.
  bool requires_grad() const;
  // Marks a leaf (a DTensor no recorded op produced) as needing its gradient; floating dtypes
  // only. Throws "[requires_grad_] ..." on an integer DTensor, and on a non-leaf asked to stop
  // requiring grad (asked to require it, a non-leaf is left as it is, as PyTorch). Returns *this.
  DTensor& requires_grad_(bool requires_grad = true);
  // True unless the DTensor was produced by a recorded op.
  bool is_leaf() const;
  // The accumulated gradient of a leaf (or of a non-leaf after retain_grad()), laid out like
  // this DTensor; undefined when none has been computed.
  const DTensor& grad() const;
  // Replaces (or, with an undefined DTensor, clears) the stored gradient.
  void set_grad(const DTensor& grad) const;
  // The node that produced this DTensor (nullptr for leaves).
  std::shared_ptr<autograd::Node> grad_fn() const;
  // The same data and spec without autograd state (shares storage).
  DTensor detach() const;
  // Computes the gradients of this DTensor with respect to every leaf it depends on and
  // accumulates them into the leaves' grad() (see dtensor/autograd/engine.h for the rules;
  // without the autograd layer linked it throws "[backward] ... not linked", as do
  // retain_grad and register_hook). `gradient`: d(something)/d(this), required unless this
  // DTensor has one element. Every rank of the mesh must call it (backward runs collectives).
  // PyTorch's tensor.backward(gradient, retain_graph, create_graph): create_graph records the
  // pass so that the gradients can be differentiated again (dtensor/autograd/create_graph.h);
  // retain_graph unset means create_graph, as PyTorch's None.
  void backward(const DTensor& gradient = DTensor(),
                std::optional<bool> retain_graph = std::nullopt, bool create_graph = false) const;
  // Keeps the gradient of a non-leaf in grad() after backward.
  void retain_grad() const;
  // Runs `hook` on the gradient flowing into this DTensor, before it is accumulated (leaves)
  // or passed on. Requires requires_grad().
  void register_hook(GradHook hook) const;
  // Runs `hook` on this leaf (the parameter, its grad() already updated) each time backward
  // has accumulated a gradient into grad() (PyTorch 2.1's register_post_accumulate_grad_hook:
  // optimizer-in-backward steps a parameter there). Hooks run in the order registered, after
  // the register_hook hooks and the accumulation; autograd::grad accumulates nothing and runs
  // none. Throws "[register_post_accumulate_grad_hook] ..." on a DTensor that is not a leaf
  // requiring grad.
  void register_post_accumulate_grad_hook(std::function<void(const DTensor& param)> hook) const;
  // Internal: the autograd state (nullptr when the DTensor has none).
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return autograd_; }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }

  // ---- views and copies as members, as Tensor has them (PyTorch's x.view(...), x.t(), ...) ----
  // The same ops as the free functions of dtensor/ops/view (view.h, copy_ops.h): sharded,
  // recorded by autograd, cached. They are installed by the ops layer when it is loaded
  // (detail/view_hooks.h); without it they raise "[DTensor::view] ... the ops layer
  // (dtensor::ops) is not linked".
  DTensor view(IntSpan shape) const;
  DTensor reshape(IntSpan shape) const;
  DTensor transpose(int64_t dim0, int64_t dim1) const;
  DTensor t() const;
  DTensor permute(IntSpan dims) const;
  DTensor unsqueeze(int64_t dim) const;
  DTensor squeeze() const;             // drops every size-1 dim
  DTensor squeeze(int64_t dim) const;  // drops dim if it has size 1
  DTensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  DTensor expand(IntSpan shape) const;
  DTensor narrow(int64_t dim, int64_t start, int64_t length) const;
  DTensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  DTensor select(int64_t dim, int64_t index) const;
  DTensor contiguous() const;
  DTensor clone() const;

  // "DTensor(local=[4, 16], global=[8, 16], placements=[S(0), R], float32, mesh=[2, 2])"
  std::string str() const;

 private:
  Tensor local_;
  std::shared_ptr<const DTensorSpec> spec_;
  std::shared_ptr<AutogradMeta> autograd_;
  mutable WorkPtr pending_;  // set while the local shard may still be pending; cleared by wait()
};

// An op's outputs (most ops have one; the inline capacity avoids a heap allocation).
using DTensorList = absl::InlinedVector<DTensor, 2>;

// Autograd state of a DTensor, shared by its copies. The autograd layer (dtensor/autograd/) fills
// it; it is defined here so that the DTensor accessors above need no higher layer.
struct AutogradMeta {
  bool requires_grad = false;  // see DTensor::requires_grad()
  bool retains_grad = false;   // see DTensor::retain_grad()
  // Produced by a view op (OpInfo::view) from an input that requires grad: in-place ops on it
  // are refused, since the input's graph would not see the write.
  bool is_view = false;
  DTensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // nullptr for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this DTensor is
  // Leaves: the node that accumulates into `grad`, created on first use and shared by every
  // recorded use of the leaf; and the hooks it runs before accumulating.
  std::weak_ptr<autograd::Node> grad_accumulator;
  std::vector<GradHook> hooks;
  // Leaves: the register_post_accumulate_grad_hook hooks, bound to the leaf they were
  // registered on.
  std::vector<std::function<void()>> post_accumulate_grad_hooks;
};

// The 1-rank mesh of this process for `device_type`: DeviceMesh(device_type, {1},
// {world_rank()}, {"self"}), built once per device type and cached. A DTensor on it (Replicate)
// stands for a plain local tensor: the form local values take when autograd records them.
const DeviceMesh& self_mesh(DeviceType device_type = kCPU);
// Whether `mesh` is a mesh of one rank that contains this process (a self mesh).
bool is_self_mesh(const DeviceMesh& mesh);
// `t` as a Replicate DTensor on self_mesh(t.device().type) (no copy, no communication).
DTensor local_dtensor(const Tensor& t);
// Whether `x` lives on a self mesh (i.e. it is a local tensor in DTensor clothing).
bool is_local(const DTensor& x);
// The device this process's local tensors of `mesh` live on: the CPU, or this process's CUDA
// device (local_cuda_device()) for a CUDA mesh.
Device local_device(const DeviceMesh& mesh);

// Prints DTensor::str().
std::ostream& operator<<(std::ostream& os, const DTensor& t);

// Distributes `tensor` over `mesh` with `placements` (PyTorch distribute_tensor).
// src_data_rank: the world rank whose `tensor` is the source of truth (it must be a rank of
// the mesh); the default kMeshFirstRank is the mesh's first rank (coordinate 0 on every mesh
// dim, PyTorch's default group rank 0), so a mesh without world rank 0 needs no argument. Every
// rank of the mesh must pass a tensor of the same shape and dtype: this is checked first with one
// small all_gather per mesh dim (a fixed-size record: ndim, dtype, the first 16 sizes), and a
// mismatch throws on every rank of the mesh, e.g. "[distribute_tensor] argument tensor differs
// across ranks: rank 3 passed shape [9, 4] float32 but src_data_rank 0 passed [8, 4] float32 (...
// mismatching ranks: 3)". CommDebugMode counts these all_gathers (they are real communication).
// Then the source's data moves down the mesh dims in order 0..ndim-1 (the nesting order of
// compute_local_shape_and_offset), on mesh.communicator(i): for Shard(d) on mesh dim i the member
// at the source's coordinate scatters the torch.chunk pieces of tensor dim d (padded to the chunk
// size ceil(m / n) for the transfer), so each rank receives only its piece, as in PyTorch; for
// Replicate/Partial it broadcasts its piece. So a source rank costs mesh.ndim() all_gathers + one
// scatter per sharded mesh dim + one broadcast per other mesh dim; a rank receives its piece after
// each step (only its shard's bytes, plus chunk padding, when every mesh dim shards). Pass
// std::nullopt when every rank already holds the same tensor: then no communication happens (and
// nothing is checked: a rank's shape and dtype are taken as the global ones) and each rank just
// takes its chunk. Partial placements keep the value on coordinate 0 of that mesh dim and zeros
// elsewhere for sum (the value everywhere for avg/max/min). Ranks outside the mesh get an empty
// local tensor and issue nothing. A contiguous, unsharded local may share storage with `tensor` (as
// in PyTorch).
inline constexpr int kMeshFirstRank = -1;
DTensor distribute_tensor(const Tensor& tensor, const DeviceMesh& mesh, PlacementSpan placements,
                          std::optional<int> src_data_rank = kMeshFirstRank);
// Same, on current_mesh() (the innermost MeshGuard).
DTensor distribute_tensor(const Tensor& tensor, PlacementSpan placements,
                          std::optional<int> src_data_rank = kMeshFirstRank);

// A DTensor of zeros with x's spec (global shape, dtype, mesh and placements; zeros are a
// valid Partial value): each rank allocates its shard, no communication.
DTensor zeros_like(const DTensor& x);
DTensor zeros_like(const DTensorSpec& spec);

// Prints, on the mesh's first rank, which ranks hold which block of a DTensor of any rank
// (PyTorch visualize_sharding): 1-d blocks as "elements [a, b)", 2-d as "rows [a, b) cols
// [c, d)", others as "block [a, b) x [c, d) x ...", each with the world ranks holding it.
// Returns the text (empty on other ranks).
std::string visualize_sharding(const DTensor& t, bool print = true);

}  // namespace dtensor
