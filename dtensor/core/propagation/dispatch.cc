#include "dtensor/core/propagation/dispatch.h"

#include <absl/strings/str_cat.h>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/detail/log.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using SpecList = absl::InlinedVector<const DTensorSpec*, 4>;
using LocalList = absl::InlinedVector<Tensor, 4>;

void check_output(const OpInfo& op, size_t o, const Tensor& out, const OutputSharding& sharding,
                  const Shape& coord) {
  DT_CHECK(out.defined(), "[%s] local kernel returned an undefined tensor for output %d", op.name,
           o);
  const DTensorSpec& spec = *sharding.outputs[o];
  // propagate() precomputed the expected local shapes; a sharding built elsewhere did not.
  Shape computed;
  const Shape* expected = &computed;
  if (o < sharding.local_output_shapes.size()) {
    expected = &sharding.local_output_shapes[o];
  } else {
    computed = spec.local_shard(coord).shape;
  }
  DT_CHECK(out.sizes() == *expected && out.dtype() == spec.dtype(),
           "[%s] local kernel returned %s %s for output %d, expected %s %s (placements %s)",
           op.name, shape_str(out.sizes()), dtype_name(out.dtype()), o, shape_str(*expected),
           dtype_name(spec.dtype()), placements_str(spec.placements()));
}

DTensorList run_local(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                      const SpecList& specs, const OpSchema& schema,
                      std::shared_ptr<const OutputSharding> sharding, DispatchTrace* trace);

bool any_meta(const LocalList& locals) {
  for (const Tensor& t : locals) {
    if (t.device().is_meta()) return true;
  }
  return false;
}

// The kernel's stand-in when an input is a meta tensor (PyTorch's meta kernels): the outputs are
// meta tensors of the local shapes propagation computed, so every op runs its meta function and
// sharding propagation (and its inputs' redistributions) as usual, without data. An input with
// data beside a meta one makes meta outputs too (a dry run may feed real token ids to a meta
// model, as FakeTensorMode converts them). An in-place op's output is its input 0, as its kernel
// returns. An output whose shape depends on the values cannot be made: refused.
void meta_outputs(const OpInfo& op, const OutputSharding& sharding, const Shape& coord,
                  const LocalList& locals, absl::Span<Tensor> outs) {
  DT_CHECK(!op.data_dependent_shape,
           "[%s] [meta] the output's shape depends on the input's values, and meta tensors have "
           "no data (run this op on tensors with data)",
           op.name);
  for (size_t o = 0; o < outs.size(); ++o) {
    if (o == 0 && op.inplace) {
      outs[0] = locals[0];
      continue;
    }
    const DTensorSpec& spec = *sharding.outputs[o];
    const Shape shape = o < sharding.local_output_shapes.size() ? sharding.local_output_shapes[o]
                                                                : spec.local_shard(coord).shape;
    outs[o] = empty(shape, TensorOptions(spec.dtype(), Device(kMeta)));
  }
}

// A step being captured (dtensor/compile/) records the kernel call with what dispatch chose:
// replay calls the kernel again on the replay's local tensors with the same schema, sharding
// and coordinate — no propagation, no cache look-up.
void record_kernel(detail::CaptureRecorder& recorder, const OpSchema& schema,
                   const std::shared_ptr<const OutputSharding>& sharding, const Shape& coord,
                   absl::Span<const Tensor> locals, absl::Span<const Tensor> outs) {
  const OpInfo& op = schema.op();
  if (op.data_dependent_shape) {
    recorder.refuse(absl::StrCat(op.name,
                                 " (its output's shape depends on the values, so the ops after it "
                                 "could not keep their captured layouts)"));
  }
  struct Frozen {
    std::vector<std::shared_ptr<const DTensorSpec>> specs;
    SpecList spec_ptrs;
    ArgList args;
    std::shared_ptr<const OutputSharding> sharding;
    Shape coord;
  };
  auto f = std::make_shared<Frozen>();
  for (const DTensorSpec* spec : schema.inputs()) {
    f->specs.push_back(std::make_shared<const DTensorSpec>(*spec));
    f->spec_ptrs.push_back(f->specs.back().get());
  }
  f->args.assign(schema.args().begin(), schema.args().end());
  f->sharding = sharding;
  f->coord = coord;
  detail::ReplayFn fn = [&op, f](absl::Span<const Tensor> in, absl::Span<Tensor> out) {
    const OpSchema frozen(op, absl::MakeConstSpan(f->spec_ptrs), absl::MakeConstSpan(f->args));
    op.kernel(KernelContext(frozen, *f->sharding, f->coord), in, out);
  };
  detail::CaptureEvent event;
  event.kind = "op";
  event.name = op.name;
  std::string in_places;
  for (int64_t i = 0; i < schema.num_inputs(); ++i) {
    const DTensorSpec& seen = sharding->needs_redistribute() && sharding->required_inputs[i]
                                  ? *sharding->required_inputs[i]
                                  : schema.input(i);
    absl::StrAppend(&in_places, i == 0 ? "" : ", ", placements_str(seen.placements()));
  }
  std::string out_places;
  for (size_t o = 0; o < sharding->outputs.size(); ++o) {
    absl::StrAppend(&out_places, o == 0 ? "" : ", ",
                    placements_str(sharding->outputs[o]->placements()));
  }
  event.detail = absl::StrCat(in_places, " -> ", out_places);
  event.inputs = locals;
  event.outputs = outs;
  event.mutated_inputs = op.inplace ? 1u : 0u;
  // The op's mesh (its first input's spec): only that mesh's ranks record the op, which the
  // capture's cross-rank check must know (dtensor/compile/agree.cc).
  if (!f->specs.empty()) event.payload = f->specs.front();
  recorder.record(event, std::move(fn));
}

// The kernel call of run_local when a capture is in progress on this thread or meta storages
// exist: meta inputs get meta outputs (refused under a capture), otherwise the kernel runs in a
// capture scope and the outermost call is recorded.
[[gnu::noinline, gnu::cold]] void run_kernel_hooked(
    const OpSchema& schema, const std::shared_ptr<const OutputSharding>& sharding,
    const Shape& coord, const LocalList& locals, absl::Span<Tensor> outs) {
  const OpInfo& op = schema.op();
  if (any_meta(locals)) {
    // No data to record or replay, and a capture keys values by their memory (issue 46).
    if (detail::CaptureRecorder* r = detail::capture_recorder()) {
      r->refuse(absl::StrCat(op.name,
                             " on the meta device (meta tensors hold no data to record "
                             "or replay: run a meta, dry-run step eagerly)"));
    }
    meta_outputs(op, *sharding, coord, locals, outs);
    return;
  }
  const detail::CaptureScope capture;
  op.kernel(KernelContext(schema, *sharding, coord), absl::MakeConstSpan(locals), outs);
  if (capture.recording()) record_kernel(capture.recorder(), schema, sharding, coord, locals, outs);
}

}  // namespace

std::shared_ptr<const DTensorSpec> data_dependent_output_spec(const OpInfo& op, size_t o,
                                                              const Tensor& out,
                                                              const DTensorSpec& placeholder) {
  DT_CHECK(out.defined(), "[%s] local kernel returned an undefined tensor for output %d", op.name,
           o);
  for (const Placement& p : placeholder.placements()) {
    DT_CHECK(p.is_replicate(),
             "[%s] output %d has a data-dependent shape and must be Replicate, got placements %s",
             op.name, o, placements_str(placeholder.placements()));
  }
  bool fixed_dims_match = out.dim() == placeholder.ndim();
  for (int64_t d = 0; fixed_dims_match && d < out.dim(); ++d) {
    // The placeholder's non-zero dims are fixed by the op (nonzero's [n, ndim]).
    const int64_t want = placeholder.shape()[static_cast<size_t>(d)];
    fixed_dims_match = want == 0 || out.size(d) == want;
  }
  DT_CHECK(fixed_dims_match && out.dtype() == placeholder.dtype(),
           "[%s] local kernel returned %s %s for output %d, expected %s %s (0 = any size)", op.name,
           shape_str(out.sizes()), dtype_name(out.dtype()), o, shape_str(placeholder.shape()),
           dtype_name(placeholder.dtype()));
  return std::make_shared<const DTensorSpec>(placeholder.mesh(), placeholder.placements(),
                                             TensorMeta(out.sizes(), out.dtype()), op.name);
}

const DTensorSpec& KernelContext::input_spec(int64_t i) const {
  if (sharding_.needs_redistribute() && sharding_.required_inputs[i] != nullptr) {
    return *sharding_.required_inputs[i];
  }
  return schema_.input(i);
}

Scalar KernelContext::scalar(int64_t i) const {
  DT_CHECK(schema_.has_arg(i), "[%s] argument %d is missing (expected a scalar)", schema_.name(),
           i);
  const ArgValue& v = schema_.args()[i];
  if (const double* d = std::get_if<double>(&v)) return Scalar(*d);
  if (const int64_t* n = std::get_if<int64_t>(&v)) return Scalar(*n);
  if (const bool* b = std::get_if<bool>(&v)) return Scalar(*b);
  DT_FAIL("[%s] argument %d is %s, expected a scalar (int, float or bool)", schema_.name(), i,
          arg_str(v));
}

ArgValue scalar_arg(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::kDouble:
      return s.to_double();
    case Scalar::Kind::kInt:
      return s.to_int();
    case Scalar::Kind::kBool:
      return s.to_bool();
  }
  return s.to_double();
}

DTensorList dispatch_sharded(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                             absl::Span<const ArgValue> args, DispatchTrace* trace) {
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
  const CommDebugMode::OpScope label(op.name);  // CommDebugMode attribution
  const OpSchema schema(op, absl::MakeConstSpan(specs), args);
  std::shared_ptr<const OutputSharding> sharding = propagate(schema);
  if (log_enabled(LogTopic::kDispatch)) detail::log_dispatch(schema, *sharding);
  const size_t nout = sharding->outputs.size();
  DTensorList result;
  if (!mesh.contains_me()) {
    // The output's shape exists only in the values the mesh's ranks hold: an outside rank would
    // get a placeholder shape and disagree with them later, so it is told now.
    DT_CHECK(!op.data_dependent_shape,
             "[%s] the output's shape depends on the values held by the ranks of %s, and rank "
             "%d is outside that mesh: call the op on the mesh's ranks only",
             op.name, mesh.str(), world_rank());
    const Tensor& hint = inputs[0]->to_local();
    const Device device = hint.device().is_meta() ? hint.device() : detail::mesh_device(mesh, hint);
    for (size_t o = 0; o < nout; ++o) {
      const DTensorSpec& spec = *sharding->outputs[o];
      result.emplace_back(detail::empty_local(spec.ndim(), spec.dtype(), device),
                          sharding->outputs[o]);
    }
    if (trace != nullptr) trace->sharding = std::move(sharding);
    return result;
  }
  // Everything from here on may fail on some ranks only (an allocation, a kernel's check of
  // its shard): the others are told (report_failure_on_mesh), so that their next collective on
  // the mesh raises the same error instead of waiting for this rank.
  try {
    return run_local(op, inputs, specs, schema, std::move(sharding), trace);
  } catch (...) {
    report_failure_on_mesh(mesh, op.name);
    throw;
  }
}

namespace {

// The mesh-member half of dispatch_sharded: redistribute the inputs, run the kernel, wrap.
DTensorList run_local(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                      const SpecList& specs, const OpSchema& schema,
                      std::shared_ptr<const OutputSharding> sharding, DispatchTrace* trace) {
  const DeviceMesh& mesh = specs[0]->mesh();
  const size_t nout = sharding->outputs.size();
  DTensorList result;
  LocalList locals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& local = inputs[i]->to_local();
    if (sharding->needs_redistribute() && sharding->required_inputs[i] != nullptr) {
      locals.push_back(redistribute_local(local, *specs[i], *sharding->required_inputs[i]));
    } else {
      locals.push_back(local);
    }
  }
  absl::InlinedVector<Tensor, 2> outs(nout);
  const Shape& coord = mesh.get_coordinate();
  // One test on the eager path: no capture on this thread and no meta storage in the process.
  if (detail::dispatch_hooks_may_apply()) [[unlikely]] {
    run_kernel_hooked(schema, sharding, coord, locals, absl::MakeSpan(outs));
  } else {
    op.kernel(KernelContext(schema, *sharding, coord), absl::MakeConstSpan(locals),
              absl::MakeSpan(outs));
  }
  for (size_t o = 0; o < nout; ++o) {
    if (op.data_dependent_shape) {
      // The shape is the kernel's (replicated inputs: the same on every rank); a fresh spec per
      // call, so the cached sharding never carries a previous call's shape.
      auto spec = data_dependent_output_spec(op, o, outs[o], *sharding->outputs[o]);
      result.emplace_back(std::move(outs[o]), std::move(spec));
      continue;
    }
    check_output(op, o, outs[o], *sharding, coord);
    result.emplace_back(std::move(outs[o]), sharding->outputs[o]);
  }
  if (trace != nullptr) {
    trace->sharding = std::move(sharding);
    if (op.saved_inputs != 0) trace->inputs = std::move(locals);  // for autograd to save
  }
  return result;
}

}  // namespace
}  // namespace dtensor
