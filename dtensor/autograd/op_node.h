// The node of a dispatched op (internal to dtensor/autograd/): what the forward saved for the op's
// registered backward formula.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtensor/autograd/node.h"
#include "dtensor/core/propagation/op_schema.h"

namespace dtensor::autograd {

class OpNode : public Node {
 public:
  struct Saved {
    DTensor value;         // detached; undefined when not saved
    uint32_t version = 0;  // storage version when saved
  };

  OpNode(const OpInfo& op, absl::Span<const ArgValue> args, int64_t num_outputs);
  std::string name() const override;
  DTensorList apply(DTensorList grad_outputs) override;
  void release_saved() override;

  const OpInfo& op() const { return *op_; }
  const ArgList& args() const { return args_; }
  // Set by dispatch while recording.
  SpecList seen_specs;  // inputs as the kernel saw them
  SpecList output_specs;
  // Parallel to the specs above, or empty when the op saves none of them (most ops save no
  // output, and scalar ones no input). On the heap, not inline: a node must stay small enough
  // for malloc's per-thread cache (1 KB; with two inline DTensors per list it measured 1.4 KB,
  // and every recorded op paid malloc's slow path and its consolidation when freed).
  std::vector<Saved> saved_inputs, saved_outputs;
  absl::InlinedVector<bool, 4> needs_grad;  // per input

 private:
  // Throws "[op backward] ..." when a saved tensor was modified in place since forward.
  void check_versions() const;

  const OpInfo* op_;
  ArgList args_;
  bool released_ = false;
};

}  // namespace dtensor::autograd
