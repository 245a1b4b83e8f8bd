#include "dtensor/autograd/engine.h"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/container/inlined_vector.h>
#include <absl/strings/match.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "dtensor/autograd/accumulate_grad.h"
#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/node.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::autograd {
namespace {

// The gradient 1 of a one-element root: Replicate on the root's mesh.
DTensor ones_like_root(const DTensor& root) {
  auto spec = std::make_shared<const DTensorSpec>(
      root.spec().with_placements(Placements(root.placements().size(), Replicate()), "backward"));
  Tensor ones[1];
  // Recorded when a step is captured: replay makes the seed again.
  detail::run_recorded(
      "grad", "ones", {}, ones, 0,
      [shape = spec->local_shard().shape,
       opts = TensorOptions(root.dtype(), local_device(spec->mesh()))](
          absl::Span<const Tensor>, absl::Span<Tensor> out) { out[0] = full(shape, 1, opts); });
  return DTensor(std::move(ones[0]), std::move(spec));
}

void check_gradient(const DTensor& grad, const DTensorSpec& want, std::string_view node, size_t i) {
  DT_CHECK(grad.shape() == want.shape() && grad.dtype() == want.dtype() &&
               grad.device_mesh() == want.mesh(),
           "[backward] %s returned a gradient %s for input %d, expected global shape %s, %s, on "
           "mesh %s",
           node, grad.str(), i, shape_str(want.shape()), dtype_name(want.dtype()),
           want.mesh().str());
}

void accumulate(DTensorList& slots, size_t slot, DTensor grad) {
  if (!slots[slot].defined()) {
    slots[slot] = std::move(grad);
  } else {
    slots[slot] = add_gradients(slots[slot], grad);
  }
}

}  // namespace

DTensor add_gradients(const DTensor& a, const DTensor& b) {
  // The op library registers "add" (any placements, broadcasting); looked up once it exists.
  static std::atomic<const OpInfo*> add_op{nullptr};
  const OpInfo* op = add_op.load(std::memory_order_acquire);
  if (op == nullptr) {
    op = op_registry().find("add");
    DT_CHECK(op != nullptr,
             "[backward] no 'add' op is registered to sum gradients (the op library registers "
             "it on first use of any op)");
    add_op.store(op, std::memory_order_release);
  }
  const DTensor* in[] = {&a, &b};
  // create_graph: the sum is recorded (grad mode is on in such a pass).
  if (in_create_graph() && grad_enabled()) return std::move(dispatch_multi(*op, in, {})[0]);
  NoGradGuard no_grad;
  return std::move(dispatch_sharded(*op, in, {})[0]);
}

namespace {
void zero_one_grad(const DTensor& p, bool set_to_none) {
  if (!p.grad().defined()) return;
  if (set_to_none) {
    p.set_grad(DTensor());
  } else {
    Tensor g = p.grad().to_local();
    g.zero_();
  }
}
}  // namespace

void zero_grad(absl::Span<const DTensor> params, bool set_to_none) {
  if (detail::capture_recorder() == nullptr) {
    for (const DTensor& p : params) zero_one_grad(p, set_to_none);
    return;
  }
  // A step being captured records the clearing of every parameter, gradient or not: replay
  // runs after steps that left gradients behind, which the capture may not have seen.
  for (const DTensor& p : params) {
    detail::run_recorded("grad", "zero_grad", {}, {}, 0,
                         [p, set_to_none](absl::Span<const Tensor>, absl::Span<Tensor>) {
                           zero_one_grad(p, set_to_none);
                         });
  }
}

namespace {
// The callbacks of the innermost backward running on this thread (nullptr: none runs).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

struct CallbackScope {
  std::vector<std::function<void()>> callbacks;
  std::vector<std::function<void()>>* saved = t_callbacks;
  CallbackScope() { t_callbacks = &callbacks; }
  ~CallbackScope() { t_callbacks = saved; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  void run() {
    // By index: a callback may queue another.
    for (size_t i = 0; i < callbacks.size(); ++i) callbacks[i]();
  }
};
}  // namespace

void queue_callback(std::function<void()> callback) {
  DT_CHECK(t_callbacks != nullptr,
           "[queue_callback] no backward is running on this thread (call it from a gradient "
           "hook or a backward function)");
  t_callbacks->push_back(std::move(callback));
}

bool in_backward() {
  return t_callbacks != nullptr;
}

namespace {

// The meshes a backward runs on, in the order first seen (the same on every rank), so that
// a failure can be reported on them and the ranks can meet on them at the end.
class MeshesSeen {
 public:
  void add(const DeviceMesh& mesh) {
    if (!mesh.defined() || mesh.size() == 1) return;
    for (const DeviceMesh& m : meshes_) {
      if (m == mesh) return;
    }
    meshes_.push_back(mesh);
  }
  void add_node(const Node& node) {
    for (const auto& spec : node.input_specs()) {
      if (spec != nullptr) add(spec->mesh());
    }
  }
  // From a catch block: reports the error in flight on every mesh seen.
  void report_failure() const noexcept {
    for (const DeviceMesh& m : meshes_) report_failure_on_mesh(m, "backward");
  }
  // Every rank meets every other rank of each mesh once (each communicator once, in the
  // order seen): a rank that failed anywhere in this backward has reported it on its mesh
  // (dispatch, redistribute, or report_failure above), and the report pairs with one of these
  // meets or with a collective before them, so backward() raises on every rank.
  void meet() const {
    if (collective_check_mode() == CollectiveCheckMode::kOff) return;
    const CollectiveLabel label("end of backward");
    absl::InlinedVector<Communicator*, 4> done;
    for (const DeviceMesh& m : meshes_) {
      if (!m.contains_me()) continue;
      for (int64_t d = 0; d < m.ndim(); ++d) {
        Communicator* comm = m.communicator(d).get();
        if (comm == nullptr || comm->size() == 1 ||
            std::find(done.begin(), done.end(), comm) != done.end()) {
          continue;
        }
        done.push_back(comm);
        comm->meet();
      }
    }
  }

 private:
  absl::InlinedVector<DeviceMesh, 2> meshes_;
};

// What autograd::grad adds to a pass: where each input's gradient is taken, and which nodes
// must run (PyTorch's exec_info): those on a path from a root to a capture.
struct Capture {
  struct At {
    uint32_t slot;  // the node's incoming gradient slot
    size_t input;   // index into grad()'s inputs
  };
  absl::flat_hash_map<Node*, absl::InlinedVector<At, 1>> at;
  absl::flat_hash_set<Node*> needed;
  std::vector<DTensor> grads;  // one per input, undefined until taken

  bool executes(Node* n) const { return needed.contains(n) || at.contains(n); }
  void take(Node* n, const DTensorList& grads_in) {
    if (auto it = at.find(n); it != at.end()) {
      for (const At& a : it->second) grads[a.input] = grads_in[a.slot];
    }
  }
  // Marks `needed` over the graph reachable from `starts` (iterative post-order: a node is
  // needed when one of its next edges leads to a needed or captured node).
  void mark_needed(absl::Span<Node* const> starts);
};

void Capture::mark_needed(absl::Span<Node* const> starts) {
  absl::flat_hash_set<Node*> done;
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* start : starts) {
    if (start == nullptr || !done.insert(start).second) continue;
    stack.emplace_back(start, 0);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      const EdgeList& edges = n->next_edges();
      if (next < edges.size()) {
        Node* child = edges[next++].node.get();
        if (child != nullptr && done.insert(child).second) stack.emplace_back(child, 0);
        continue;
      }
      for (const Edge& e : edges) {
        if (e.valid() && executes(e.node.get())) {
          needed.insert(n);
          break;
        }
      }
      stack.pop_back();
    }
  }
}

// The pass running on this thread is a grad() (see in_grad_call); a backward() that a hook of a
// grad() runs is not.
thread_local bool t_grad_call = false;
// create_graph (create_graph.h): set for the pass, with the node now running.
[[gnu::tls_model("initial-exec")]] thread_local bool t_create_graph = false;
thread_local std::shared_ptr<Node> t_node;
struct CreateGraphScope {
  bool saved = t_create_graph;
  std::shared_ptr<Node> saved_node = std::move(t_node);
  explicit CreateGraphScope(bool on) { t_create_graph = on; }
  ~CreateGraphScope() {
    t_create_graph = saved;
    t_node = std::move(saved_node);
  }
  CreateGraphScope(const CreateGraphScope&) = delete;
  CreateGraphScope& operator=(const CreateGraphScope&) = delete;
};
struct GradCallScope {
  bool saved = t_grad_call;
  explicit GradCallScope(bool on) { t_grad_call = on; }
  ~GradCallScope() { t_grad_call = saved; }
  GradCallScope(const GradCallScope&) = delete;
  GradCallScope& operator=(const GradCallScope&) = delete;
};

// The backward pass itself (the engine's rules in engine.h); with `capture`, autograd::grad's.
void run_backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots,
                  bool retain_graph, MeshesSeen& meshes, Capture* capture = nullptr,
                  const char* op = "backward", bool create_graph = false);

}  // namespace

void backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots,
              bool retain_graph) {
  backward(roots, grad_roots, retain_graph, false);
}

void backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots,
              std::optional<bool> retain_graph, bool create_graph) {
  DT_CHECK(!create_graph || dtensor::detail::capture_recorder() == nullptr,
           "[compile] the step cannot be captured: it runs backward with create_graph=true (a "
           "captured step records a first-order backward only): run it eagerly");
  MeshesSeen meshes;
  for (const DTensor& root : roots) {
    if (root.defined()) meshes.add(root.device_mesh());
  }
  try {
    const GradCallScope not_grad(false);
    run_backward(roots, grad_roots, retain_graph.value_or(create_graph), meshes, nullptr,
                 "backward", create_graph);
    meshes.meet();
  } catch (...) {
    meshes.report_failure();
    throw;
  }
}

bool in_grad_call() {
  return t_grad_call;
}

std::vector<DTensor> grad(absl::Span<const DTensor> outputs, absl::Span<const DTensor> inputs,
                          absl::Span<const DTensor> grad_outputs, std::optional<bool> retain_graph,
                          bool create_graph, bool allow_unused, bool materialize_grads) {
  DT_CHECK(dtensor::detail::capture_recorder() == nullptr,
           "[compile] the step cannot be captured: it runs autograd::grad (a captured step "
           "records backward() only): call backward() in the step, or run grad() eagerly");
  MeshesSeen meshes;
  for (const DTensor& out : outputs) {
    if (out.defined()) meshes.add(out.device_mesh());
  }
  Capture capture;
  capture.grads.resize(inputs.size());
  std::vector<Edge> keep;  // holds accumulators created here for the pass
  for (size_t i = 0; i < inputs.size(); ++i) {
    DT_CHECK(inputs[i].defined(), "[autograd.grad] input %d is an undefined DTensor", i);
    DT_CHECK(inputs[i].requires_grad(),
             "[autograd.grad] input %d does not require grad (%s): expected a leaf marked by "
             "requires_grad_() or a DTensor computed from one",
             i, inputs[i].str());
    Edge e = gradient_edge(inputs[i]);
    capture.at[e.node.get()].push_back({e.input_nr, i});
    keep.push_back(std::move(e));
  }
  try {
    {
      const GradCallScope grad_call(true);
      run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph), meshes, &capture,
                   "autograd.grad", create_graph);
    }
    std::vector<DTensor>& result = capture.grads;
    for (size_t i = 0; i < inputs.size(); ++i) {
      DTensor& g = result[i];
      if (!g.defined()) {
        DT_CHECK(allow_unused || materialize_grads,
                 "[autograd.grad] input %d (%s) appears to not have been used in the graph (no "
                 "gradient reaches it); pass allow_unused=true for an undefined gradient, or "
                 "materialize_grads=true for zeros",
                 i, inputs[i].str());
        if (materialize_grads) g = zeros_like(inputs[i]);
      } else if (inputs[i].is_leaf() && g.placements() != inputs[i].placements()) {
        // Laid out like the leaf, as AccumulateGrad lays out its grad().
        g = create_graph
                ? g.redistribute(inputs[i].placements())
                : detail::redistribute_no_grad(
                      g, g.spec().with_placements(inputs[i].placements(), "autograd.grad"));
      }
    }
    meshes.meet();
    return std::move(result);
  } catch (...) {
    meshes.report_failure();
    throw;
  }
}

namespace {

void run_backward(absl::Span<const DTensor> roots, absl::Span<const DTensor> grad_roots,
                  bool retain_graph, MeshesSeen& meshes, Capture* capture, const char* op,
                  bool create_graph) {
  CallbackScope callbacks;
  DT_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(),
           "[%s] got %d gradients for %d roots (expected one per root, or none)", op,
           grad_roots.size(), roots.size());
  // Grad mode off, except under create_graph (the formulas then record their graph).
  const AutoGradMode grad_mode(create_graph);
  const CreateGraphScope create_graph_scope(create_graph);

  // Seed: the edge each root's gradient enters, with the gradient.
  std::vector<std::pair<Edge, DTensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const DTensor& root = roots[i];
    DT_CHECK(root.defined(), "[%s] root %d is an undefined DTensor", op, i);
    DT_CHECK(root.requires_grad(),
             "[%s] root %d does not require grad and has no grad_fn (%s): nothing it "
             "depends on requires grad, or it was computed under NoGradGuard",
             op, i, root.str());
    DTensor g;
    if (!grad_roots.empty() && grad_roots[i].defined()) {
      g = grad_roots[i];
      DT_CHECK(g.shape() == root.shape() && g.dtype() == root.dtype() &&
                   g.device_mesh() == root.device_mesh(),
               "[%s] gradient %s for root %d does not match the root %s (expected the "
               "same global shape, dtype and mesh)",
               op, g.str(), i, root.str());
    } else {
      DT_CHECK(root.numel() == 1,
               "[%s] a gradient can be implied only for a one-element root; root %d has "
               "shape %s (pass its gradient)",
               op, i, shape_str(root.shape()));
      g = ones_like_root(root);
    }
    seeds.emplace_back(gradient_edge(root), std::move(g));
  }
  if (capture != nullptr) {
    std::vector<Node*> starts;
    for (const auto& [edge, g] : seeds) starts.push_back(edge.node.get());
    capture->mark_needed(starts);
  }
  // grad(): a node that neither leads to an input nor takes one's gradient does not run.
  auto skipped = [capture](Node* n) { return capture != nullptr && !capture->executes(n); };

  // Dependencies: how many edges of the reachable graph point at each node.
  absl::flat_hash_map<Node*, int64_t> deps;
  {
    std::vector<Node*> stack;
    absl::flat_hash_map<Node*, bool> seen;
    for (const auto& [edge, g] : seeds) {
      if (edge.valid() && seen.emplace(edge.node.get(), true).second) {
        stack.push_back(edge.node.get());
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        ++deps[e.node.get()];
        if (seen.emplace(e.node.get(), true).second) stack.push_back(e.node.get());
      }
    }
  }

  // Incoming gradients per node; ready nodes run latest-recorded first.
  absl::flat_hash_map<Node*, DTensorList> buffers;
  auto buffer_of = [&](Node* n) -> DTensorList& {
    DTensorList& b = buffers[n];
    if (b.empty()) b.resize(static_cast<size_t>(n->num_outputs()));
    return b;
  };
  using Ready = std::pair<uint64_t, Node*>;
  std::priority_queue<Ready> ready;
  for (auto& [edge, g] : seeds) {
    if (!edge.valid() || skipped(edge.node.get())) continue;
    accumulate(buffer_of(edge.node.get()), edge.input_nr, std::move(g));
  }
  // create_graph: the owner of each ready node (a saved output takes its history from it).
  absl::flat_hash_map<Node*, std::shared_ptr<Node>> owners;
  auto push_ready = [&](const std::shared_ptr<Node>& n) {
    ready.emplace(n->sequence_nr(), n.get());
    if (create_graph) owners.emplace(n.get(), n);
  };
  absl::flat_hash_map<Node*, bool> queued;
  for (const auto& [edge, g] : seeds) {
    Node* n = edge.node.get();
    if (n != nullptr && !skipped(n) && deps[n] == 0 && queued.emplace(n, true).second) {
      push_ready(edge.node);
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top().second;
    ready.pop();
    meshes.add_node(*node);
    DTensorList grads = std::move(buffer_of(node));
    buffers.erase(node);
    // grad(): as PyTorch, an input whose node also runs is taken before the hooks, one whose node
    // does not after them (a leaf's: after its register_hook hooks, without accumulating).
    const bool runs = capture == nullptr || capture->needed.contains(node);
    if (capture != nullptr && runs) capture->take(node, grads);
    bool any = false;
    for (size_t o = 0; o < grads.size(); ++o) {
      if (!grads[o].defined()) continue;
      grads[o] = node->run_pre_hooks(static_cast<uint32_t>(o), std::move(grads[o]));
      if (!runs) grads[o] = run_leaf_hooks(*node, std::move(grads[o]));
      any = true;
    }
    if (!runs) {
      capture->take(node, grads);
      continue;
    }
    // A node no gradient reached passes none on (its inputs' gradients are zero).
    DTensorList out;
    if (any) {
      // CommDebugMode attribution: the node's module, phase backward, the node as the op.
      std::optional<CommDebugMode::OpScope> label;
      if (CommDebugMode::active()) label.emplace(node->name(), node->comm_module(), true);
      if (create_graph) {
        auto it = owners.find(node);
        t_node = std::move(it->second);
        owners.erase(it);
      }
      out = node->apply(std::move(grads));
      if (create_graph) t_node = nullptr;
    }
    if (!retain_graph) node->release_saved();
    const EdgeList& edges = node->next_edges();
    DT_CHECK(out.empty() || out.size() == edges.size(),
             "[backward] %s returned %d gradients for %d inputs", node->name(), out.size(),
             edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid() || skipped(e.node.get())) continue;
      if (i < out.size() && out[i].defined()) {
        check_gradient(out[i], *node->input_specs()[i], node->name(), i);
        accumulate(buffer_of(e.node.get()), e.input_nr, std::move(out[i]));
      }
      if (--deps[e.node.get()] == 0) push_ready(e.node);
    }
  }
  callbacks.run();
}

}  // namespace

bool in_create_graph() {
  return t_create_graph;
}

const std::shared_ptr<Node>& create_graph_node() {
  return t_node;
}

void fail_no_double_backward(std::string_view grad_op) {
  std::string name = t_node != nullptr ? t_node->name() : std::string("a node");
  if (absl::EndsWith(name, "Backward")) name.resize(name.size() - 8);
  DT_FAIL(
      "[autograd] create_graph: %s's backward uses %s, which has no derivative (double backward "
      "is not implemented for it)",
      name, grad_op);
}

}  // namespace dtensor::autograd
