#include <cmath>

#include "dtensor/optim/detail/optim_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim::detail {

void sgd_update(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s) {
  if (p.device().is_cuda()) return sgd_update_cuda(p, g, buf, s);
  // A dry run's parameter: no data to update (its states are meta too).
  if (p.device().is_meta()) return;
  dispatch_floating(p.dtype(), "SGD", [&]<typename T>() {
    using C = compute_t<T>;
    T* pp = p.data<T>();
    const T* gp = g.data<T>();
    T* bp = buf.defined() ? buf.data<T>() : nullptr;
    const C lr = static_cast<C>(s.lr), mom = static_cast<C>(s.momentum),
            damp = static_cast<C>(1.0 - s.dampening), wd = static_cast<C>(s.weight_decay);
    const C sign = s.maximize ? C(-1) : C(1);
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const C w = static_cast<C>(pp[i]);
      C d = sign * static_cast<C>(gp[i]) + wd * w;
      if (bp != nullptr) {
        const C b = s.first ? d : mom * static_cast<C>(bp[i]) + damp * d;
        bp[i] = static_cast<T>(b);
        d = s.nesterov ? d + mom * b : b;
      }
      pp[i] = static_cast<T>(w - lr * d);
    }
  });
}

void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const Tensor& vmax, const AdamWStep& s) {
  if (p.device().is_cuda()) return adamw_update_cuda(p, g, m, v, vmax, s);
  // A dry run's parameter: no data to update (its states are meta too).
  if (p.device().is_meta()) return;
  dispatch_floating(p.dtype(), "AdamW", [&]<typename T>() {
    using C = compute_t<T>;
    T* pp = p.data<T>();
    const T* gp = g.data<T>();
    T* mp = m.data<T>();
    T* vp = v.data<T>();
    T* xp = s.amsgrad ? vmax.data<T>() : nullptr;
    const C b1 = static_cast<C>(s.beta1), b2 = static_cast<C>(s.beta2);
    // Decoupled (AdamW) decays the parameter; L2 (Adam) adds wd p to the gradient.
    const C decay = static_cast<C>(s.decoupled_weight_decay ? 1.0 - s.lr * s.weight_decay : 1.0);
    const C l2 = static_cast<C>(s.decoupled_weight_decay ? 0.0 : s.weight_decay);
    const C step_size = static_cast<C>(s.lr / s.bias_correction1);
    const C root_bc2 = static_cast<C>(std::sqrt(s.bias_correction2));
    const C eps = static_cast<C>(s.eps);
    const C sign = s.maximize ? C(-1) : C(1);
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      C gi = sign * static_cast<C>(gp[i]);
      if (l2 != 0) gi += l2 * static_cast<C>(pp[i]);
      const C mi = b1 * static_cast<C>(mp[i]) + (1 - b1) * gi;
      const C vi = b2 * static_cast<C>(vp[i]) + (1 - b2) * gi * gi;
      mp[i] = static_cast<T>(mi);
      vp[i] = static_cast<T>(vi);
      C denom_v = vi;
      if (xp != nullptr) {
        denom_v = std::max(static_cast<C>(xp[i]), vi);
        xp[i] = static_cast<T>(denom_v);
      }
      const C denom = std::sqrt(denom_v) / root_bc2 + eps;
      pp[i] = static_cast<T>(static_cast<C>(pp[i]) * decay - step_size * mi / denom);
    }
  });
}

void rmsprop_update(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& buf,
                    const Tensor& gavg, const RMSpropStep& s) {
  if (p.device().is_cuda()) return rmsprop_update_cuda(p, g, sq, buf, gavg, s);
  // A dry run's parameter: no data to update (its states are meta too).
  if (p.device().is_meta()) return;
  dispatch_floating(p.dtype(), "RMSprop", [&]<typename T>() {
    using C = compute_t<T>;
    T* pp = p.data<T>();
    const T* gp = g.data<T>();
    T* sp = sq.data<T>();
    T* bp = buf.defined() ? buf.data<T>() : nullptr;
    T* ap = s.centered ? gavg.data<T>() : nullptr;
    const C lr = static_cast<C>(s.lr), alpha = static_cast<C>(s.alpha), eps = static_cast<C>(s.eps),
            wd = static_cast<C>(s.weight_decay), mom = static_cast<C>(s.momentum);
    const C sign = s.maximize ? C(-1) : C(1);
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const C w = static_cast<C>(pp[i]);
      C gi = sign * static_cast<C>(gp[i]);
      if (wd != 0) gi += wd * w;
      const C si = alpha * static_cast<C>(sp[i]) + (1 - alpha) * gi * gi;
      sp[i] = static_cast<T>(si);
      C var = si;
      if (ap != nullptr) {
        const C a = alpha * static_cast<C>(ap[i]) + (1 - alpha) * gi;
        ap[i] = static_cast<T>(a);
        var = si - a * a;
      }
      const C avg = std::sqrt(var) + eps;
      if (bp != nullptr) {
        const C b = mom * static_cast<C>(bp[i]) + gi / avg;
        bp[i] = static_cast<T>(b);
        pp[i] = static_cast<T>(w - lr * b);
      } else {
        pp[i] = static_cast<T>(w - lr * gi / avg);
      }
    }
  });
}

void adagrad_update(const Tensor& p, const Tensor& g, const Tensor& sum, const AdagradStep& s) {
  if (p.device().is_cuda()) return adagrad_update_cuda(p, g, sum, s);
  // A dry run's parameter: no data to update (its states are meta too).
  if (p.device().is_meta()) return;
  dispatch_floating(p.dtype(), "Adagrad", [&]<typename T>() {
    using C = compute_t<T>;
    T* pp = p.data<T>();
    const T* gp = g.data<T>();
    T* sp = sum.data<T>();
    const C clr = static_cast<C>(s.clr), eps = static_cast<C>(s.eps),
            wd = static_cast<C>(s.weight_decay);
    const C sign = s.maximize ? C(-1) : C(1);
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const C w = static_cast<C>(pp[i]);
      C gi = sign * static_cast<C>(gp[i]);
      if (wd != 0) gi += wd * w;
      const C si = static_cast<C>(sp[i]) + gi * gi;
      sp[i] = static_cast<T>(si);
      pp[i] = static_cast<T>(w - clr * gi / (std::sqrt(si) + eps));
    }
  });
}

}  // namespace dtensor::optim::detail
