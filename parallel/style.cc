#include "parallel/style.h"

#include <absl/strings/str_format.h>

#include "nn/functional.h"
#include "nn/layers.h"
#include "tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

Placement normalized(Placement p, int64_t ndim) {
  if (p.is_shard() && p.dim() < 0) return Shard(p.dim() + ndim);
  return p;
}

}  // namespace

DTensor prepare_input(const DTensor& x, const DeviceMesh& mesh, Placement input_layout,
                      Placement desired, std::optional<int64_t> known_size, std::string_view style,
                      std::string_view fqn) {
  DT_CHECK(x.defined(), "[%s] input of '%s' is undefined (expected a DTensor)", style, fqn);
  DTensor on = x;
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
    on = nn::functional::detail::wrap(x.to_local(), mesh, Placements{in}, global, x.dtype());
  }
  const Placement want = normalized(desired, on.dim());
  return nn::functional::detail::to_placements(on, Placements{want});
}

DTensor finish_output(const DTensor& y, Placement layout, bool use_local_output) {
  DTensor out = nn::functional::detail::to_placements(y, Placements{normalized(layout, y.dim())});
  return use_local_output ? nn::local(out.to_local()) : out;
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

}  // namespace

std::string ColwiseParallel::str() const {
  return absl::StrFormat(
      "ColwiseParallel(input=%s, output=%s%s)", layout_str(opts_.input_layouts, "R"),
      layout_str(opts_.output_layouts, "S(-1)"), opts_.use_local_output ? ", local" : "");
}

void ColwiseParallel::apply(nn::Module& module, std::string_view fqn,
                            const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "ColwiseParallel";
  const bool is_linear = dynamic_cast<nn::Linear*>(&module) != nullptr;
  const bool is_embedding = dynamic_cast<nn::Embedding*>(&module) != nullptr;
  DT_CHECK(is_linear || is_embedding, "[%s] expects Linear or Embedding, got %s at %s", kStyle,
           module.type_name(), quoted(fqn));
  check_mesh(mesh, kStyle, fqn);
  if (is_linear) {
    shard_param(module, "weight", mesh, Shard(0), kStyle, fqn);
    shard_param(module, "bias", mesh, Shard(0), kStyle, fqn);
  } else {
    shard_param(module, "weight", mesh, Shard(1), kStyle, fqn);
  }
  const Placement in = opts_.input_layouts.value_or(Replicate());
  const Placement out = opts_.output_layouts.value_or(Shard(-1));
  const bool use_local = opts_.use_local_output;
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    return detail::prepare_input(x, mesh, in, Replicate(), std::nullopt, kStyle, name);
  });
  module.register_forward_hook(
      [=](nn::Module&, const DTensor& y) { return detail::finish_output(y, out, use_local); });
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
  auto* linear = dynamic_cast<nn::Linear*>(&module);
  const bool is_embedding = dynamic_cast<nn::Embedding*>(&module) != nullptr;
  DT_CHECK(linear != nullptr || is_embedding, "[%s] expects Linear or Embedding, got %s at %s",
           kStyle, module.type_name(), quoted(fqn));
  check_mesh(mesh, kStyle, fqn);
  Placement in, desired;
  std::optional<int64_t> known;
  if (linear != nullptr) {
    shard_param(module, "weight", mesh, Shard(1), kStyle, fqn);
    shard_param(module, "bias", mesh, Replicate(), kStyle, fqn);
    in = opts_.input_layouts.value_or(Shard(-1));
    desired = Shard(-1);
    known = linear->in_features();
  } else {
    shard_param(module, "weight", mesh, Shard(0), kStyle, fqn);
    in = opts_.input_layouts.value_or(Replicate());
    desired = Replicate();
  }
  const Placement out = opts_.output_layouts.value_or(Replicate());
  const bool use_local = opts_.use_local_output;
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    // The in_features hint only applies to the last dim (the sharded contraction dim).
    const Placement p = in.is_shard() && in.dim() < 0 ? Shard(in.dim() + x.dim()) : in;
    const bool last = p.is_shard(x.dim() - 1);
    return detail::prepare_input(x, mesh, in, desired, last ? known : std::nullopt, kStyle, name);
  });
  module.register_forward_hook(
      [=](nn::Module&, const DTensor& y) { return detail::finish_output(y, out, use_local); });
}

std::string SequenceParallel::str() const {
  return absl::StrFormat("SequenceParallel(sequence_dim=%d%s)", opts_.sequence_dim,
                         opts_.use_local_output ? ", local" : "");
}

void SequenceParallel::apply(nn::Module& module, std::string_view fqn,
                             const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "SequenceParallel";
  const bool is_norm = dynamic_cast<nn::LayerNorm*>(&module) != nullptr ||
                       dynamic_cast<nn::RMSNorm*>(&module) != nullptr;
  DT_CHECK(is_norm, "[%s] expects LayerNorm or RMSNorm, got %s at %s", kStyle, module.type_name(),
           quoted(fqn));
  check_mesh(mesh, kStyle, fqn);
  shard_param(module, "weight", mesh, Replicate(), kStyle, fqn);
  shard_param(module, "bias", mesh, Replicate(), kStyle, fqn);
  const Placement seq = Shard(opts_.sequence_dim);
  const bool use_local = opts_.use_local_output;
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    return detail::prepare_input(x, mesh, seq, seq, std::nullopt, kStyle, name);
  });
  module.register_forward_hook(
      [=](nn::Module&, const DTensor& y) { return detail::finish_output(y, seq, use_local); });
}

std::string PrepareModuleInput::str() const {
  return absl::StrFormat("PrepareModuleInput(input=%s, desired=%s%s)", opts_.input_layouts.str(),
                         opts_.desired_input_layouts.str(),
                         opts_.use_local_output ? ", local" : "");
}

void PrepareModuleInput::apply(nn::Module& module, std::string_view fqn,
                               const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "PrepareModuleInput";
  check_mesh(mesh, kStyle, fqn);
  const Options o = opts_;
  const std::string name(fqn);
  module.register_forward_pre_hook([=](nn::Module&, const DTensor& x) {
    DTensor y = detail::prepare_input(x, mesh, o.input_layouts, o.desired_input_layouts,
                                      std::nullopt, kStyle, name);
    return o.use_local_output ? nn::local(y.to_local()) : y;
  });
}

std::string PrepareModuleOutput::str() const {
  return absl::StrFormat("PrepareModuleOutput(output=%s, desired=%s%s)", opts_.output_layouts.str(),
                         opts_.desired_output_layouts.str(),
                         opts_.use_local_output ? ", local" : "");
}

void PrepareModuleOutput::apply(nn::Module& module, std::string_view fqn,
                                const DeviceMesh& mesh) const {
  constexpr std::string_view kStyle = "PrepareModuleOutput";
  check_mesh(mesh, kStyle, fqn);
  const Options o = opts_;
  const std::string name(fqn);
  module.register_forward_hook([=](nn::Module&, const DTensor& y) {
    DTensor z = detail::prepare_input(y, mesh, o.output_layouts, o.desired_output_layouts,
                                      std::nullopt, kStyle, name);
    return o.use_local_output ? nn::local(z.to_local()) : z;
  });
}

}  // namespace dtensor
