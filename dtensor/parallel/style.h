// Tensor-parallel styles (PyTorch torch.distributed.tensor.parallel): how one module's
// parameters are sharded over a 1-d mesh and how its input and output are laid out.
//
// A style replaces the module's parameters by DTensors on the mesh (distribute_tensor of the
// full local parameter with src_data_rank = nullopt: each rank keeps its chunk, no
// communication) and installs forward hooks:
//   pre-hook:  a local input (a self-mesh DTensor, nn::local_dtensor) is wrapped as a DTensor
//              on the mesh with `input_layouts` (from_local semantics); an input already on the
//              mesh is taken as it is; then it is redistributed to the layout the module needs.
//   hook:      the output is redistributed to `output_layouts`; with use_local_output the
//              result is this rank's shard as a local DTensor (to_local_dtensor()), as PyTorch
//              returns a torch.Tensor.
// Layouts are single placements (the mesh is 1-d); Shard(-1) counts from the end.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/core/placement.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/nn/module.h"

namespace dtensor {

// A way to shard one module over a 1-d mesh (PyTorch's ParallelStyle); parallelize_module
// applies the plan's styles.
class ParallelStyle {
 public:
  virtual ~ParallelStyle() = default;
  // "ColwiseParallel(input=R, output=S(-1), local)"
  virtual std::string str() const = 0;
  // Shards `module` (found at `fqn`, used in errors) over the 1-d `mesh` and installs hooks.
  // Throws "[<Style>] ..." for a module type the style does not fit, a mesh that is not 1-d, or
  // parameters that are already distributed.
  virtual void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const = 0;
};
// Styles are shared, immutable values.
using ParallelStylePtr = std::shared_ptr<const ParallelStyle>;

// Column-wise: Linear weight [out, in] -> S(0) and bias -> S(0), output sharded on its last
// dim; Embedding weight [num, dim] -> S(1), output S(-1). No communication in the module
// itself; the input is redistributed to Replicate (an all-gather when it arrives sharded, e.g.
// Shard(1) after sequence parallelism).
class ColwiseParallel : public ParallelStyle {
 public:
  // The style's options (PyTorch's keyword arguments); unset layouts take the defaults noted.
  struct Options {
    std::optional<Placement> input_layouts;   // default Replicate()
    std::optional<Placement> output_layouts;  // default Shard(-1)
    bool use_local_output = true;             // return to_local() of the output
  };
  ColwiseParallel() : ColwiseParallel(Options{}) {}
  // The style with `opts`.
  explicit ColwiseParallel(Options opts) : opts_(opts) {}
  std::string str() const override;
  void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const override;

 private:
  Options opts_;
};

// Row-wise: Linear weight -> S(1), bias -> Replicate; input Shard(-1); the local products are
// Partial(sum) (bias added once) and become the output layout with ONE collective: all-reduce
// for Replicate (default), reduce-scatter for Shard(d) (sequence parallelism). Embedding:
// vocabulary-sharded table S(0), input Replicate, masked lookup -> Partial(sum) -> output.
class RowwiseParallel : public ParallelStyle {
 public:
  // The style's options (PyTorch's keyword arguments); unset layouts take the defaults noted.
  struct Options {
    std::optional<Placement> input_layouts;   // default Shard(-1) (Linear), Replicate (Embedding)
    std::optional<Placement> output_layouts;  // default Replicate()
    bool use_local_output = true;             // return to_local() of the output
  };
  RowwiseParallel() : RowwiseParallel(Options{}) {}
  // The style with `opts`.
  explicit RowwiseParallel(Options opts) : opts_(opts) {}
  std::string str() const override;
  void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const override;

 private:
  Options opts_;
};

// Sequence parallelism: parameters replicated, activations sharded on the sequence dim (input
// and output Shard(sequence_dim)). Made for LayerNorm / RMSNorm, Dropout and elementwise modules,
// which run on the local sequence chunk with no communication; as PyTorch's, any module is
// accepted (every parameter of its subtree replicated), and whatever it computes on the sharded
// sequence is right, communicating where its ops need to. The output stays a DTensor by default
// (PyTorch).
// A LOCAL input is taken as the even chunk of a sequence of local length * tp (PyTorch's
// from_local rule), so a local sequence-sharded activation needs a sequence length divisible by
// the mesh size; DTensor inputs carry their global shape and may be uneven.
class SequenceParallel : public ParallelStyle {
 public:
  // The style's options (PyTorch's keyword arguments); unset layouts take the defaults noted.
  struct Options {
    int64_t sequence_dim = 1;       // the activations' sequence dim
    bool use_local_output = false;  // return to_local() of the output
  };
  SequenceParallel() : SequenceParallel(Options{}) {}
  // The style with `opts`.
  explicit SequenceParallel(Options opts) : opts_(opts) {}
  std::string str() const override;
  void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const override;

 private:
  Options opts_;
};

// One layout per positional input of a module, std::nullopt (PyTorch's None) leaving that input
// alone: `Shard(1)` (one input) or `{Shard(0), std::nullopt}`; `{}` lists none.
struct InputLayouts {
  InputLayouts() = default;
  InputLayouts(Placement p) : layouts{p} {}  // NOLINT(google-explicit-constructor): one input
  InputLayouts(std::initializer_list<std::optional<Placement>> l) : layouts(l) {}
  std::vector<std::optional<Placement>> layouts;
};

// Lays out a module's inputs (any module type): a local input is wrapped with its input layout,
// then it is redistributed to its desired layout (none: it keeps its input layout) and, with
// use_local_output, made local. Parameters are left alone. A module takes one input, a
// TwoInputModule two (its input_names(): a loss's "input" and "target", a distance's "x1" and
// "x2"); input_layouts lists the first inputs, the keyword maps name the others, so that every
// input is given exactly once (as a PyTorch call passes each input once, by position or by
// keyword); an input whose layout is std::nullopt is passed as it is. A one-input module's input
// is named "input".
class PrepareModuleInput : public ParallelStyle {
 public:
  // The style's options (PyTorch's keyword arguments); unset layouts take the defaults noted.
  struct Options {
    InputLayouts input_layouts = Replicate();          // how the inputs arrive
    InputLayouts desired_input_layouts = Replicate();  // how the module's forward gets them
    std::map<std::string, Placement> input_kwarg_layouts = {};          // by input name
    std::map<std::string, Placement> desired_input_kwarg_layouts = {};  // the same names
    bool use_local_output = false;                                      // return to_local() of each
  };
  PrepareModuleInput() : PrepareModuleInput(Options{}) {}
  // The style with `opts`.
  explicit PrepareModuleInput(Options opts) : opts_(std::move(opts)) {}
  std::string str() const override;
  // Throws "[PrepareModuleInput] ..." (naming fqn and the module) when the layouts do not give
  // each of the module's inputs once, the desired layouts do not pair with them, or the mesh is
  // not 1-d.
  void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const override;

 private:
  Options opts_;
};

// Lays out a module's output (any module type): a local output is wrapped with output_layouts,
// then redistributed to desired_output_layouts.
class PrepareModuleOutput : public ParallelStyle {
 public:
  // The style's options (PyTorch's keyword arguments); unset layouts take the defaults noted.
  struct Options {
    Placement output_layouts = Replicate();          // how the forward's output is laid out
    Placement desired_output_layouts = Replicate();  // how the call returns it
    bool use_local_output = true;                    // return to_local() of the output
  };
  PrepareModuleOutput() : PrepareModuleOutput(Options{}) {}
  // The style with `opts`.
  explicit PrepareModuleOutput(Options opts) : opts_(opts) {}
  std::string str() const override;
  void apply(nn::Module& module, std::string_view fqn, const DeviceMesh& mesh) const override;

 private:
  Options opts_;
};

namespace detail {
// The pre-hook logic shared by the styles: `x` as a DTensor on `mesh` laid out `desired`.
// A local x is wrapped with `input_layout`; for a Shard(d) layout the global size of dim d is
// `known_size` when given (e.g. a Linear's in_features), else local size * mesh size (even
// shards, as PyTorch's from_local). Errors name `style` and `fqn`. `x` by value: a caller that
// gives it up (an output hook, which owns the output) lets the redistribute work in its memory.
DTensor prepare_input(DTensor x, const DeviceMesh& mesh, Placement input_layout, Placement desired,
                      std::optional<int64_t> known_size, std::string_view style,
                      std::string_view fqn);
// The hook logic: y redistributed to `layout`, then made local when use_local_output.
DTensor finish_output(DTensor y, Placement layout, bool use_local_output);
}  // namespace detail

}  // namespace dtensor
