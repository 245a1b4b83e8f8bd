#include "dtensor/parallel/style.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/nn/two_input_module.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

Placement normalized(Placement p, int64_t ndim) {
  if (p.is_shard() && p.dim() < 0) return Shard(p.dim() + ndim);
  return p;
}

}  // namespace

DTensor prepare_input(DTensor x, const DeviceMesh& mesh, Placement input_layout, Placement desired,
                      std::optional<int64_t> known_size, std::string_view style,
                      std::string_view fqn) {
  DT_CHECK(x.defined(), "[%s] input of '%s' is undefined (expected a DTensor)", style, fqn);
  if (!(x.device_mesh() == mesh)) {
    DT_CHECK(nn::is_local(x),
             "[%s] input of '%s' is on mesh %s (expected the plan's mesh %s or a local tensor)",
             style, fqn, x.device_mesh().str(), mesh.str());
    const Placement in = normalized(input_layout, x.dim());
    Shape global = x.shape();
    if (in.is_shard()) {
      DT_CHECK(in.dim() >= 0 && in.dim() < x.dim(),
               "[%s] input layout %s of '%s' does not fit a %d-d input", style, input_layout.str(),
               fqn, x.dim());
      global[in.dim()] = known_size ? *known_size : global[in.dim()] * mesh.size();
    }
    // Differentiable: the local input's gradient is its piece of the DTensor's gradient.
    x = DTensor::from_local(x, mesh, {in}, /*run_check=*/false, global);
  }
  const Placement want[] = {normalized(desired, x.dim())};
  return std::move(x).redistribute(want);
}

DTensor finish_output(DTensor y, Placement layout, bool use_local_output) {
  const Placement want[] = {normalized(layout, y.dim())};
  // The hook owns y (Module::operator()), so a Partial output is reduced in its own memory.
  DTensor out = std::move(y).redistribute(want);
  return use_local_output ? out.to_local_dtensor() : out;
}

}  // namespace detail

namespace {

void check_mesh(const DeviceMesh& mesh, std::string_view style, std::string_view fqn) {
  DT_CHECK(mesh.defined(), "[%s] the mesh for '%s' is an empty handle", style, fqn);
  DT_CHECK(mesh.ndim() == 1,
           "[%s] expects a 1-d mesh, got a %d-d mesh for '%s' (pass a submesh such as "
           "mesh[\"tp\"])",
           style, mesh.ndim(), fqn);
}

// Replaces parameter `name` of `m` (a full local parameter) by its distribution on `mesh`.
void shard_param(nn::Module& m, std::string_view name, const DeviceMesh& mesh, Placement p,
                 std::string_view style, std::string_view fqn) {
  if (!m.has_param(name)) return;
  const DTensor& cur = m.param(name);
  DT_CHECK(cur.device_mesh() == nn::self_mesh(cur.device_mesh().device_type()),
           "[%s] parameter '%s' of %s at '%s' is already distributed on mesh %s (apply one style "
           "per module)",
           style, name, m.type_name(), fqn, cur.device_mesh().str());
  m.set_parameter(name, distribute_tensor(cur.to_local(), mesh, Placements{p}, std::nullopt));
}

std::string layout_str(const std::optional<Placement>& p, std::string_view dflt) {
  return p ? p->str() : std::string(dflt);
}

std::string quoted(std::string_view fqn) {
  return absl::StrFormat("'%s'", fqn);
}

// The module as a Linear (nullptr for an Embedding) after checking that it is one of the two
// and that the mesh is 1-d (ColwiseParallel and RowwiseParallel fit only these).
const nn::Linear* check_linear_or_embedding(nn::Module& module, const DeviceMesh& mesh,
                                            std::string_view style, std::string_view fqn) {
  const auto* linear = dynamic_cast<const nn::Linear*>(&module);
  const bool is_embedding = dynamic_cast<const nn::Embedding*>(&module) != nullptr;
  DT_CHECK(linear != nullptr || is_embedding, "[%s] expects Linear or Embedding, got %s at %s",
           style, module.type_name(), quoted(fqn));
  check_mesh(mesh, style, fqn);
  return linear;
}

// The hooks of ColwiseParallel and RowwiseParallel: the pre-hook lays a local input out as
// `in` and moves it to `desired`; `known_last` is the global size of the last dim when a local
// input arrives sharded on it (a Linear's in_features). The hook moves the output to `out`.
// `style` must point to static storage (a literal).
void install_hooks(nn::Module& module, const DeviceMesh& mesh, Placement in, Placement desired,
                   std::optional<int64_t> known_last, Placement out, bool use_local,
                   std::string_view style, std::string_view fqn) {
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    const bool last = detail::normalized(in, x.dim()).is_shard(x.dim() - 1);
    return detail::prepare_input(x, mesh, in, desired, last ? known_last : std::nullopt, style,
                                 name);
  });
  // y is the call's own output: moved from, a Partial one is reduced in its own memory.
  module.register_forward_hook([=](nn::Module&, const DTensor&, DTensor& y) {
    return detail::finish_output(std::move(y), out, use_local);
  });
}

// The hook of PrepareModuleOutput, after checking the mesh: a local tensor is laid out as `from`
// on `mesh`, then moved to `to`, and made local again when `use_local`. `style` must point to
// static storage (a literal).
// The args form: it runs on a module of any number of inputs (a loss's output too).
nn::ForwardArgsHook checked_relayout_hook(const DeviceMesh& mesh, Placement from, Placement to,
                                          bool use_local, std::string_view style,
                                          std::string_view fqn) {
  check_mesh(mesh, style, fqn);
  const std::string name(fqn);
  // x is the call's own output: moved from, a Partial one is reduced in its own memory.
  return [=](nn::Module&, absl::Span<const DTensor>, DTensor& x) -> std::optional<DTensor> {
    DTensor y = detail::prepare_input(std::move(x), mesh, from, to, std::nullopt, style, name);
    // to_local_dtensor: the local result stays in the autograd graph (PyTorch's to_local()).
    return use_local ? y.to_local_dtensor() : y;
  };
}

}  // namespace

std::string ColwiseParallel::str() const {
  return absl::StrFormat(
      "ColwiseParallel(input=%s, output=%s%s)", layout_str(opts_.input_layouts, "R"),
      layout_str(opts_.output_layouts, "S(-1)"), opts_.use_local_output ? ", local" : "");
}

void ColwiseParallel::apply(nn::Module& module, std::string_view fqn,
                            const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "ColwiseParallel";
  const bool is_linear = check_linear_or_embedding(module, mesh, kStyle, fqn) != nullptr;
  if (is_linear) {
    shard_param(module, "weight", mesh, Shard(0), kStyle, fqn);
    shard_param(module, "bias", mesh, Shard(0), kStyle, fqn);
  } else {
    shard_param(module, "weight", mesh, Shard(1), kStyle, fqn);
  }
  install_hooks(module, mesh, opts_.input_layouts.value_or(Replicate()), Replicate(), std::nullopt,
                opts_.output_layouts.value_or(Shard(-1)), opts_.use_local_output, kStyle, fqn);
}

std::string RowwiseParallel::str() const {
  return absl::StrFormat("RowwiseParallel(input=%s, output=%s%s)",
                         layout_str(opts_.input_layouts, "S(-1) (R for Embedding)"),
                         layout_str(opts_.output_layouts, "R"),
                         opts_.use_local_output ? ", local" : "");
}

void RowwiseParallel::apply(nn::Module& module, std::string_view fqn,
                            const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "RowwiseParallel";
  const nn::Linear* linear = check_linear_or_embedding(module, mesh, kStyle, fqn);
  std::optional<int64_t> known_last;
  if (linear != nullptr) {
    shard_param(module, "weight", mesh, Shard(1), kStyle, fqn);
    shard_param(module, "bias", mesh, Replicate(), kStyle, fqn);
    known_last = linear->in_features();
  } else {
    shard_param(module, "weight", mesh, Shard(0), kStyle, fqn);
  }
  // Linear: the input sharded on its contraction (last) dim; Embedding: indices replicated.
  const Placement need = linear != nullptr ? Shard(-1) : Replicate();
  install_hooks(module, mesh, opts_.input_layouts.value_or(need), need, known_last,
                opts_.output_layouts.value_or(Replicate()), opts_.use_local_output, kStyle, fqn);
}

std::string SequenceParallel::str() const {
  return absl::StrFormat("SequenceParallel(sequence_dim=%d%s)", opts_.sequence_dim,
                         opts_.use_local_output ? ", local" : "");
}

void SequenceParallel::apply(nn::Module& module, std::string_view fqn,
                             const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "SequenceParallel";
  check_mesh(mesh, kStyle, fqn);
  // Any module, as PyTorch's (which replicates the module's parameters whatever its type): every
  // parameter of the subtree is replicated. Sharding propagation makes whatever the module computes
  // on the sequence-sharded input right; a norm or an elementwise module needs no communication.
  for (const auto& [prefix, sub] : module.named_modules()) {
    const std::string at =
        prefix.empty() ? std::string(fqn) : absl::StrFormat("%s.%s", fqn, prefix);
    std::vector<std::string> names;
    for (const auto& [name, value] : sub->own_parameters()) names.push_back(name);
    for (const std::string& name : names) shard_param(*sub, name, mesh, Replicate(), kStyle, at);
  }
  const Placement seq = Shard(opts_.sequence_dim);
  const bool use_local = opts_.use_local_output;
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    return detail::prepare_input(x, mesh, seq, seq, std::nullopt, kStyle, name);
  });
  module.register_forward_hook([=](nn::Module&, const DTensor&, DTensor& y) {
    return detail::finish_output(std::move(y), seq, use_local);
  });
}

namespace {
// "PrepareModuleInput(input=..., desired=...[, local])" and its output twin.
std::string relayout_str(std::string_view style, std::string_view what, const std::string& from,
                         const std::string& to, bool local) {
  return absl::StrFormat("%s(%s=%s, desired=%s%s)", style, what, from, to, local ? ", local" : "");
}

std::string optional_str(const std::optional<Placement>& p) {
  return p ? p->str() : "None";
}

std::string layouts_str(const InputLayouts& l, const std::map<std::string, Placement>& kwargs) {
  std::vector<std::string> parts;
  for (const auto& p : l.layouts) parts.push_back(optional_str(p));
  for (const auto& [name, p] : kwargs) parts.push_back(absl::StrFormat("%s: %s", name, p.str()));
  return parts.size() == 1 ? parts[0] : absl::StrFormat("(%s)", absl::StrJoin(parts, ", "));
}

// One input's pair of layouts (both unset: the input passes as it is).
struct InputPlan {
  std::optional<Placement> from, to;
};
}  // namespace

std::string PrepareModuleInput::str() const {
  return relayout_str("PrepareModuleInput", "input",
                      layouts_str(opts_.input_layouts, opts_.input_kwarg_layouts),
                      layouts_str(opts_.desired_input_layouts, opts_.desired_input_kwarg_layouts),
                      opts_.use_local_output);
}

void PrepareModuleInput::apply(nn::Module& module, std::string_view fqn,
                               const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "PrepareModuleInput";
  check_mesh(mesh, kStyle, fqn);
  auto* multi = dynamic_cast<nn::MultiInputModule*>(&module);
  std::vector<std::string> names{"input"};
  if (multi != nullptr) {
    const auto multi_names = multi->input_name_list();
    names.assign(multi_names.begin(), multi_names.end());
  }
  const auto& from = opts_.input_layouts.layouts;
  const auto& to = opts_.desired_input_layouts.layouts;
  const auto& kw_from = opts_.input_kwarg_layouts;
  const auto& kw_to = opts_.desired_input_kwarg_layouts;
  DT_CHECK(from.size() == to.size(),
           "[%s] input_layouts has %d entries and desired_input_layouts %d for %s (expected the "
           "same count)",
           kStyle, from.size(), to.size(), quoted(fqn));
  // A module input count differing from the layouts given: PyTorch raises at the call.
  DT_CHECK(from.size() + kw_from.size() == names.size(),
           "[%s] %s (%s) takes %d input(s) (%s); input_layouts gives %d and input_kwarg_layouts "
           "%d (expected each input once, by position or by name)",
           kStyle, quoted(fqn), module.type_name(), names.size(), absl::StrJoin(names, ", "),
           from.size(), kw_from.size());
  std::vector<InputPlan> plan(names.size());
  for (size_t i = 0; i < from.size(); ++i) plan[i] = {from[i], to[i]};
  for (const auto& [name, layout] : kw_from) {
    const auto at = std::find(names.begin(), names.end(), name);
    DT_CHECK(at != names.end() && at - names.begin() >= static_cast<ptrdiff_t>(from.size()),
             "[%s] input_kwarg_layouts names '%s', which is not an input of %s (%s) after the %d "
             "given by position (its inputs: %s)",
             kStyle, name, quoted(fqn), module.type_name(), from.size(),
             absl::StrJoin(names, ", "));
    const auto desired = kw_to.find(name);
    DT_CHECK(desired != kw_to.end(),
             "[%s] input_kwarg_layouts names '%s' and desired_input_kwarg_layouts does not, for "
             "%s (expected the same names)",
             kStyle, name, quoted(fqn));
    plan[static_cast<size_t>(at - names.begin())] = {layout, desired->second};
  }
  DT_CHECK(kw_to.size() == kw_from.size(),
           "[%s] desired_input_kwarg_layouts names %d input(s) and input_kwarg_layouts %d for %s "
           "(expected the same names)",
           kStyle, kw_to.size(), kw_from.size(), quoted(fqn));
  const bool use_local = opts_.use_local_output;
  const std::string name(fqn);
  // PyTorch's _prepare_input_arg: an input without a layout passes as it is; one whose desired
  // layout is unset is only wrapped.
  auto prepare = [=](const DTensor& x, const InputPlan& p) {
    if (!p.from) return x;
    DTensor y =
        detail::prepare_input(x, mesh, *p.from, p.to.value_or(*p.from), std::nullopt, kStyle, name);
    return use_local ? y.to_local_dtensor() : y;
  };
  if (multi != nullptr) {
    multi->register_forward_pre_hook(
        [=](nn::Module&, absl::Span<const DTensor> in) -> std::optional<std::vector<DTensor>> {
          std::vector<DTensor> out;
          for (size_t i = 0; i < in.size(); ++i) out.push_back(prepare(in[i], plan[i]));
          return out;
        });
  } else {
    module.register_forward_pre_hook(
        [=](nn::Module&, const DTensor& x) { return prepare(x, plan[0]); });
  }
}

std::string PrepareModuleOutput::str() const {
  return relayout_str("PrepareModuleOutput", "output", opts_.output_layouts.str(),
                      opts_.desired_output_layouts.str(), opts_.use_local_output);
}

void PrepareModuleOutput::apply(nn::Module& module, std::string_view fqn,
                                const DeviceMesh& mesh) const {
  module.register_forward_hook(
      checked_relayout_hook(mesh, opts_.output_layouts, opts_.desired_output_layouts,
                            opts_.use_local_output, "PrepareModuleOutput", fqn));
}

}  // namespace dtensor
