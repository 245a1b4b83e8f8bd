#include "dtensor/propagation/dispatch.h"

#include "dtensor/detail/util.h"
#include "dtensor/redistribute.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

using SpecList = absl::InlinedVector<const DTensorSpec*, 4>;
using LocalList = absl::InlinedVector<Tensor, 4>;

// Validates the inputs, propagates (cached) and gathers the local inputs, redistributed where
// the chosen strategy needs it.
std::shared_ptr<const OutputSharding> prepare(const OpInfo& op,
                                              absl::Span<const DTensor* const> inputs,
                                              absl::Span<const ArgValue> args, LocalList& locals) {
  DT_CHECK(!inputs.empty(), "[%s] needs at least one DTensor input", op.name);
  SpecList specs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    DT_CHECK(inputs[i] != nullptr && inputs[i]->defined(),
             "[%s] argument %s is an undefined DTensor", op.name, op.input_name(i));
    specs.push_back(&inputs[i]->spec());
  }
  const DeviceMesh& mesh = specs[0]->mesh();
  for (size_t i = 1; i < specs.size(); ++i) {
    DT_CHECK(specs[i]->mesh() == mesh, "[%s] inputs live on different meshes (argument %s)",
             op.name, op.input_name(i));
  }
  std::shared_ptr<const OutputSharding> sharding =
      propagate(OpSchema(op, absl::MakeConstSpan(specs), args));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& local = inputs[i]->to_local();
    if (sharding->needs_redistribute() && sharding->required_inputs[i] != nullptr) {
      locals.push_back(redistribute_local(local, *specs[i], *sharding->required_inputs[i]));
    } else {
      locals.push_back(local);
    }
  }
  return sharding;
}

void check_output(const OpInfo& op, size_t o, const Tensor& out, const DTensorSpec& spec) {
  DT_CHECK(out.defined(), "[%s] local kernel returned an undefined tensor for output %d", op.name,
           o);
  const LocalShard shard = spec.local_shard();
  DT_CHECK(out.sizes() == shard.shape && out.dtype() == spec.dtype(),
           "[%s] local kernel returned %s %s for output %d, expected %s %s (placements %s)",
           op.name, shape_str(out.sizes()), dtype_name(out.dtype()), o, shape_str(shard.shape),
           dtype_name(spec.dtype()), placements_str(spec.placements()));
}

// The empty local output of a rank outside the mesh.
Tensor empty_output(const DTensorSpec& spec, const DTensor& first_input) {
  const Device device = detail::mesh_device(spec.mesh(), first_input.to_local());
  return empty(spec.local_shard().shape, TensorOptions(spec.dtype(), device));
}

}  // namespace

DTensor dispatch(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                 absl::Span<const ArgValue> args, LocalKernel kernel) {
  LocalList locals;
  const std::shared_ptr<const OutputSharding> sharding = prepare(op, inputs, args, locals);
  DT_CHECK(sharding->outputs.size() == 1, "[%s] the op has %d outputs; use dispatch_multi", op.name,
           sharding->outputs.size());
  const std::shared_ptr<const DTensorSpec>& spec = sharding->outputs[0];
  if (!spec->mesh().contains_me()) return DTensor(empty_output(*spec, *inputs[0]), spec);
  Tensor out = kernel(absl::MakeConstSpan(locals));
  check_output(op, 0, out, *spec);
  return DTensor(std::move(out), spec);
}

DTensorList dispatch_multi(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                           absl::Span<const ArgValue> args, MultiLocalKernel kernel) {
  LocalList locals;
  const std::shared_ptr<const OutputSharding> sharding = prepare(op, inputs, args, locals);
  const size_t nout = sharding->outputs.size();
  absl::InlinedVector<Tensor, 2> outs(nout);
  if (sharding->outputs[0]->mesh().contains_me()) {
    kernel(absl::MakeConstSpan(locals), absl::MakeSpan(outs));
    for (size_t o = 0; o < nout; ++o) check_output(op, o, outs[o], *sharding->outputs[o]);
  } else {
    for (size_t o = 0; o < nout; ++o) outs[o] = empty_output(*sharding->outputs[o], *inputs[0]);
  }
  DTensorList result;
  for (size_t o = 0; o < nout; ++o) result.emplace_back(std::move(outs[o]), sharding->outputs[o]);
  return result;
}

}  // namespace dtensor
