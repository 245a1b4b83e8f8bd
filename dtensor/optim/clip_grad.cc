#include <cmath>
#include <limits>
#include <map>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim {

// Per mesh, each gradient's local contribution (sum |g|^p, or max |g| for inf) is a DTensor
// scalar whose placements say what is left to reduce (Partial over the mesh dims the gradient
// is sharded on, Replicate elsewhere); they are added up on the mesh, then made Replicate: at
// most one all-reduce per mesh dim, whatever the number of parameters. The meshes' totals are
// combined on the host.
double clip_grad_norm_(const std::vector<DTensor>& params, double max_norm, double norm_type) {
  DT_CHECK(norm_type > 0, "[clip_grad_norm_] norm_type must be positive or inf, got %g", norm_type);
  autograd::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  std::map<std::string, DTensor> per_mesh;  // keyed by the mesh's description
  std::vector<DTensor> grads;
  for (const DTensor& p : params) {
    const DTensor& g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    const DTensor a = abs(cast(g, kFloat64));
    const DTensor part = inf ? amax(a) : sum(pow(a, Scalar(norm_type)));
    DTensor& acc = per_mesh[g.device_mesh().str()];
    acc = !acc.defined() ? part : inf ? maximum(acc, part) : acc + part;
  }
  double total = 0;
  for (auto& [mesh, acc] : per_mesh) {
    if (!acc.device_mesh().contains_me()) continue;  // this rank holds none of it
    const double v = acc.full_tensor().to(Device(kCPU)).data<double>()[0];
    total = inf ? std::max(total, v) : total + v;
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    for (const DTensor& g : grads) {
      mul_(g.to_local(), Scalar(coef));
    }
  }
  return total;
}

}  // namespace dtensor::optim
