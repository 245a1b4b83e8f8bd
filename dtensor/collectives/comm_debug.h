// CommDebugMode: counts the collectives issued while it is alive and attributes each to the
// module, phase (forward/backward) and op that issued it (PyTorch's CommDebugMode).
//
//   dtensor::CommDebugMode comm;
//   auto y = x.redistribute(mesh, {dtensor::Replicate()});
//   REQUIRE(comm.count(dtensor::CollectiveKind::kAllGather) == 1);
//   std::cout << comm.table();          // module / phase / op / collective / count / bytes
//   std::string json = comm.json();     // the same as JSON (nlohmann-json)
//
// Scopes nest; each counts what was issued during its own lifetime, on this thread.
// Attribution comes from labels the higher layers push while a CommDebugMode is alive (and
// only then: with none alive a label costs one thread-local load): nn::Module calls push the
// module's dotted path (its registered names; a root module shows its type name), op dispatch
// pushes the op's name, DTensor::redistribute pushes "redistribute", and the autograd engine
// runs each backward node under the module path that was current when the node was recorded,
// phase "backward" and the node's name as the op. A collective issued outside any label is
// attributed to module "Global" and op "-".
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/collectives/communicator.h"

namespace dtensor {
namespace detail {
// CommDebugModes alive on any thread: OpScope's fast path (no thread-local access, which in a
// shared library goes through __tls_get_addr) when it is zero.
extern std::atomic<int> g_alive_modes;
}  // namespace detail

/// Counts and attributes the collectives issued on this thread while it is alive (see above).
class CommDebugMode {
 public:
  /// Starts counting (nested inside any scope already alive on this thread).
  CommDebugMode();
  ~CommDebugMode();
  CommDebugMode(const CommDebugMode&) = delete;
  CommDebugMode& operator=(const CommDebugMode&) = delete;

  /// Operations of `kind` issued during this scope's lifetime on this thread.
  int64_t count(CollectiveKind kind) const;
  /// All operations issued during this scope's lifetime.
  int64_t total_count() const;
  /// Bytes of the tensors passed (input for gathers/sends, the tensor for in-place ops, the
  /// output (the block each rank receives) for scatter).
  int64_t bytes(CollectiveKind kind) const;
  /// "all_gather: 1 (4096 B), all_reduce: 2 (...)"
  std::string str() const;

  /// How many of the counted operations ran on a communicator of one rank (a size-1 mesh dim:
  /// the library never issues one, a relabel suffices).
  int64_t single_rank_count() const;

  /// One row of the attribution: collectives of one kind issued by one op of one module in one
  /// phase, in order of first occurrence.
  struct Record {
    std::string module;   ///< dotted module path, "Global" outside any module
    bool backward;        ///< issued while running the backward pass
    std::string op;       ///< the op ("mm", "redistribute", "MmBackward"), "-" when none
    CollectiveKind kind;  ///< the collective
    int64_t count;        ///< how many were issued
    int64_t bytes;        ///< their bytes in total (as bytes() counts them)
  };
  /// The attributed rows.
  const std::vector<Record>& records() const { return records_; }
  /// Operations of `kind` issued inside module `module` (its dotted path, sub-modules
  /// included) in the given phase.
  int64_t module_count(std::string_view module, bool backward, CollectiveKind kind) const;
  /// A printable table: one line per record, indented by module depth, then the totals.
  std::string table() const;
  /// The records and totals as JSON: {"totals": {kind: {"count", "bytes"}}, "records":
  /// [{"module", "phase", "op", "collective", "count", "bytes"}]}.
  std::string json(int indent = 2) const;

  /// Called by Communicator for every issued operation, with its communicator's size.
  static void record(CollectiveKind kind, int64_t bytes, int64_t ranks);
  /// The labels collectives issued on this thread now are attributed to.
  struct Attribution {
    std::string module;     ///< dotted module path ("" outside any module)
    std::string op;         ///< the op ("" when none)
    bool backward = false;  ///< the backward phase
  };
  /// The labels current on this thread.
  static Attribution current_attribution();
  /// Adds `records` (collectives issued on another thread: an async operation, see
  /// comm_worker.h) to every scope alive on this thread, with their own attribution.
  static void replay(const std::vector<Record>& records);
  /// True while a CommDebugMode is alive on this thread (labels are pushed only then).
  static bool active();
  /// RAII: collectives issued on this thread while it lives are not counted (their caller
  /// counted them already, see dtensor/parallel/data_parallel/grad_comm.cc).
  class Silence {
   public:
    Silence();
    ~Silence();
    Silence(const Silence&) = delete;
    Silence& operator=(const Silence&) = delete;

   private:
    CommDebugMode* saved_;
  };
  /// The dotted module path labels currently pushed ("" outside any module).
  static std::string current_module();

  /// RAII label: a module (one path segment) entered on this thread; no-op when inactive.
  class ModuleScope {
   public:
    /// Appends `name` to the module path until the scope ends.
    explicit ModuleScope(std::string_view name);
    ~ModuleScope();
    ModuleScope(const ModuleScope&) = delete;
    ModuleScope& operator=(const ModuleScope&) = delete;

   private:
    bool pushed_ = false;
  };
  /// RAII label: the op issuing collectives; with `module_path` set (backward), also replaces
  /// the module path and marks the backward phase. No-op when inactive.
  class OpScope {
   public:
    /// Labels collectives with `op` until the scope ends; the second form also sets the module
    /// path and the phase (the autograd engine's backward nodes).
    explicit OpScope(std::string_view op) {
      // Every dispatched op opens one: with no mode alive anywhere this is one relaxed load.
      if (detail::g_alive_modes.load(std::memory_order_relaxed) != 0) push(op);
    }
    /// Labels `op` in `module_path`, phase backward when `backward` (the engine's form).
    OpScope(std::string_view op, std::string module_path, bool backward);
    ~OpScope() {
      if (saved_) pop();
    }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

   private:
    struct Saved {
      std::string op;
      std::string module;
      bool backward = false;
      bool swapped_module = false;
    };
    void push(std::string_view op);
    void pop();
    std::optional<Saved> saved_;  // engaged while this scope's labels are pushed
  };

 private:
  void add(CollectiveKind kind, int64_t bytes, int64_t ranks);
  // Adds `count` operations of `kind` attributed to (module, op, backward).
  void add_attributed(CollectiveKind kind, int64_t count, int64_t bytes, const std::string& module,
                      bool backward, const std::string& op);

  std::array<int64_t, kNumCollectiveKinds> counts_{};
  std::array<int64_t, kNumCollectiveKinds> bytes_{};
  int64_t single_rank_count_ = 0;
  std::vector<Record> records_;
  CommDebugMode* parent_;
};

}  // namespace dtensor
