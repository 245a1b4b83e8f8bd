#include "dtensor/compile/override.h"

#include <utility>
#include <vector>

#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/saved_versions.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::compiler {
namespace {

using Specs = std::vector<std::shared_ptr<const DTensorSpec>>;

Specs specs_of(const DTensorList& ts) {
  Specs s;
  for (const DTensor& t : ts) s.push_back(t.defined() ? t.spec_ptr() : nullptr);
  return s;
}

// The replay's local tensors as DTensors of the captured specs (undefined where none).
DTensorList wrap(absl::Span<const Tensor> locals, const Specs& specs, size_t from) {
  DTensorList out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Tensor& t = locals[from + i];
    out.push_back(t.defined() && specs[i] != nullptr ? DTensor(t, specs[i]) : DTensor());
  }
  return out;
}

void check_outputs(const EagerFunction& f, const DTensorList& outs, size_t want, const char* what) {
  DT_CHECK(want == 0 || outs.size() == want,
           "[compile] %s of '%s' returned %d tensors, expected %d", what, f.name, outs.size(),
           want);
}

// Runs `run` (returning DTensors) as one primitive of kind "eager" whose replay calls it again
// on the replay's tensors.
DTensorList run_eager_node(const std::string& name, const DTensorList& inputs,
                           std::function<DTensorList(const DTensorList&)> run) {
  std::vector<Tensor> in_locals;
  for (const DTensor& t : inputs) in_locals.push_back(t.defined() ? t.to_local() : Tensor());
  const detail::CaptureScope scope;
  DTensorList outs;
  {
    const autograd::NoGradGuard no_grad;
    outs = run(inputs);
  }
  if (!scope.recording()) return outs;
  std::vector<Tensor> out_locals;
  for (const DTensor& t : outs) out_locals.push_back(t.defined() ? t.to_local() : Tensor());
  detail::CaptureEvent event;
  event.kind = "eager";
  event.name = name;
  event.inputs = in_locals;
  event.outputs = out_locals;
  scope.recorder().record(event, [run = std::move(run), in_specs = specs_of(inputs)](
                                     absl::Span<const Tensor> in, absl::Span<Tensor> out) {
    const autograd::NoGradGuard no_grad;
    const DTensorList r = run(wrap(in, in_specs, 0));
    for (size_t o = 0; o < out.size() && o < r.size(); ++o) {
      out[o] = r[o].defined() ? r[o].to_local() : Tensor();
    }
  });
  return outs;
}

}  // namespace

DTensorList call_eager(const EagerFunction& f, const DTensorList& inputs) {
  DT_CHECK(static_cast<bool>(f.forward) && static_cast<bool>(f.backward),
           "[compile] EagerFunction '%s' needs both forward and backward", f.name);
  auto fn = std::make_shared<const EagerFunction>(f);
  DTensorList outs = run_eager_node(f.name + ".forward", inputs, [fn](const DTensorList& in) {
    DTensorList r = fn->forward(in);
    check_outputs(*fn, r, 0, "forward");
    return r;
  });
  std::vector<const DTensor*> ins;
  for (const DTensor& t : inputs) ins.push_back(&t);
  const size_t n_in = inputs.size();
  // The backward reads the inputs: an in-place write after this forward must make it raise.
  autograd::SavedVersions saved;
  for (const DTensor& t : inputs) saved.save(t.defined() ? t.to_local() : Tensor());
  // Backward: (inputs, grad outputs) -> grads, itself an eager node of the graph.
  return autograd::record_function(
      f.name, ins, std::move(outs),
      [fn, inputs, n_in, saved](absl::Span<const DTensor> grad_outputs) {
        saved.check(fn->name);
        DTensorList both(inputs.begin(), inputs.end());
        both.insert(both.end(), grad_outputs.begin(), grad_outputs.end());
        return run_eager_node(fn->name + ".backward", both, [fn, n_in](const DTensorList& all) {
          const DTensorList in(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_in));
          const DTensorList grads(all.begin() + static_cast<std::ptrdiff_t>(n_in), all.end());
          DTensorList r = fn->backward(in, grads);
          check_outputs(*fn, r, n_in, "backward");
          return r;
        });
      });
}

}  // namespace dtensor::compiler
