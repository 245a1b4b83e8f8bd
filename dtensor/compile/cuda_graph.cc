// CompileOptions::cuda_graph: what the host can tell before a capture (detail/cuda_graph.h).
#include "dtensor/compile/detail/cuda_graph.h"

#include <absl/strings/str_cat.h>

#include "dtensor/collectives/communicator.h"
#include "dtensor/core/detail/captured_move.h"

namespace dtensor::compiler {

std::string cuda_graph_refusal(const Graph& g, const DTensorList& inputs, bool profile) {
  if (profile) {
    return "CompileOptions::profile times each node, which one graph launch does not show";
  }
  int device = -1;
  // Every tensor on one CUDA device: a CUDA graph captures CUDA work only.
  auto off_device = [&](const Tensor& t, const std::string& what) -> std::string {
    if (!t.defined() || t.numel() == 0) return "";
    if (!t.device().is_cuda()) {
      return absl::StrCat(what, " is on ", t.device().str(),
                          ": a CUDA graph captures CUDA work only");
    }
    if (device >= 0 && t.device().index != device) {
      return absl::StrCat(what, " is on ", t.device().str(), ", another tensor on cuda:", device,
                          ": one CUDA graph runs on one device");
    }
    device = t.device().index;
    return "";
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string why = off_device(inputs[i].to_local(), absl::StrCat("input ", i));
    if (!why.empty()) return why;
  }
  for (size_t v = 0; v < g.values().size(); ++v) {
    const Value& value = g.values()[v];
    if (value.kind != Value::Kind::kExternal) continue;
    // "%c<v>": the value's name in Graph::dump (an external tensor: a parameter, a state).
    std::string why = off_device(
        value.external,
        absl::StrCat("the step's tensor %c", v, " (", std::string(role_name(value.role)), ")"));
    if (!why.empty()) return why;
  }
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    const std::string node = absl::StrCat("node ", k, " (", n.kind, " ", n.name, ")");
    if (n.async) {
      return absl::StrCat(node,
                          " runs on the communication thread (schedule_collectives): a capture "
                          "records one thread's stream");
    }
    if (n.kind == "eager") {
      return absl::StrCat(node, " calls back into user code kept eager (an Override)");
    }
    if (n.name == "clip_grad_norm_.coef") {
      return absl::StrCat(node,
                          " reads the gradients' total norm on the host each step (a "
                          "device-to-host copy and a host decision), which a graph launch does "
                          "not redo");
    }
    if (n.name == "num_batches_tracked") {
      // A BatchNorm without momentum averages with 1 / batches, a host value its kernel takes
      // as an argument: a graph launch would repeat the captured one.
      return absl::StrCat(node,
                          " counts BatchNorm's batches on the host, a value its kernels may take "
                          "as an argument (momentum=None), which a graph launch does not redo");
    }
    if (n.collectives.empty()) continue;
    if (n.kind != "redistribute" || n.payload == nullptr) {
      return absl::StrCat(node,
                          " issues collectives whose communicator cannot be checked for NCCL");
    }
    const auto* move = static_cast<const detail::CapturedMove*>(n.payload.get());
    for (const DTensorSpec* spec : {move->src.get(), move->dst.get()}) {
      const DeviceMesh& mesh = spec->mesh();
      if (!mesh.contains_me()) continue;
      for (int64_t d = 0; d < mesh.ndim(); ++d) {
        const std::string backend(mesh.communicator(d)->backend());
        if (backend != "nccl") {
          return absl::StrCat(node, " communicates over ", backend,
                              ", not NCCL (only NCCL calls can be captured)");
        }
      }
    }
  }
  return "";
}

bool cuda_graph_device_only(const Node& n) {
  return n.name == "zero_grad" || n.name == "ones" || n.name == "clip_grad_value_";
}

bool cuda_graph_irreversible(const Node& n) {
  if (n.kind == "optim" || n.kind == "host") return true;
  return n.kind == "grad" && !cuda_graph_device_only(n);
}

}  // namespace dtensor::compiler
