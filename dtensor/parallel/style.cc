#include "dtensor/parallel/style.h"

#include <absl/strings/str_format.h>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
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
  module.register_forward_hook(
      [=](nn::Module&, DTensor y) { return detail::finish_output(std::move(y), out, use_local); });
}

// The hook of PrepareModuleInput / PrepareModuleOutput, after checking the mesh: a local
// tensor is laid out as `from` on `mesh`, then moved to `to`, and made local again when
// `use_local`. `style` must point to static storage (a literal).
nn::ForwardHook checked_relayout_hook(const DeviceMesh& mesh, Placement from, Placement to,
                                      bool use_local, std::string_view style,
                                      std::string_view fqn) {
  check_mesh(mesh, style, fqn);
  const std::string name(fqn);
  // x by value: as an output hook (PrepareModuleOutput) it owns the output, so a Partial one is
  // reduced in its own memory; as a pre-hook it is a copy of the caller's input (never reused).
  return [=](nn::Module&, DTensor x) {
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
  module.register_forward_hook(
      [=](nn::Module&, DTensor y) { return detail::finish_output(std::move(y), seq, use_local); });
}

namespace {
// "PrepareModuleInput(input=..., desired=...[, local])" and its output twin.
std::string relayout_str(std::string_view style, std::string_view what, const std::string& from,
                         const std::string& to, bool local) {
  return absl::StrFormat("%s(%s=%s, desired=%s%s)", style, what, from, to, local ? ", local" : "");
}
}  // namespace

std::string PrepareModuleInput::str() const {
  return relayout_str("PrepareModuleInput", "input", opts_.input_layouts.str(),
                      opts_.desired_input_layouts.str(), opts_.use_local_output);
}

void PrepareModuleInput::apply(nn::Module& module, std::string_view fqn,
                               const DeviceMesh& mesh) const {
  module.register_forward_pre_hook(
      checked_relayout_hook(mesh, opts_.input_layouts, opts_.desired_input_layouts,
                            opts_.use_local_output, "PrepareModuleInput", fqn));
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
