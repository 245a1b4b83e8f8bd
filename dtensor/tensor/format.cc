// PyTorch-like printing: tensor([[0., 1.],
//                                [2., 3.]], dtype=bfloat16)
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

// How one float tensor's elements are written: PyTorch's _Formatter rules.
struct FloatStyle {
  bool int_mode = true;  // every finite value is an integer: "1."
  bool sci_mode = false;
};

FloatStyle float_style(const std::vector<double>& v) {
  FloatStyle st;
  double max_abs = 0.0;
  double min_abs = 0.0;
  bool any = false;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    if (x != std::ceil(x)) st.int_mode = false;
    const double a = std::fabs(x);
    if (a == 0.0) continue;
    if (!any) {
      max_abs = min_abs = a;
      any = true;
    } else {
      max_abs = std::max(max_abs, a);
      min_abs = std::min(min_abs, a);
    }
  }
  if (!any) return st;
  if (st.int_mode) {
    st.sci_mode = max_abs > 1e8;
  } else {
    st.sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
  }
  return st;
}

std::string format_float(double x, const FloatStyle& st) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (st.sci_mode) return absl::StrFormat("%.4e", x);
  if (st.int_mode) return absl::StrFormat("%.0f.", x);
  return absl::StrFormat("%.4f", x);
}

// Keeps the first and last kEdgeItems along every dim longer than 2 * kEdgeItems.
Tensor summarize(const Tensor& t) {
  Tensor r = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = r.sizes()[d];
    if (n > 2 * kEdgeItems) {
      r = cat({r.narrow(d, 0, kEdgeItems), r.narrow(d, n - kEdgeItems, kEdgeItems)}, d);
    }
  }
  return r;
}

struct Printer {
  const std::vector<std::string>& cells;  // formatted elements of the (summarized) tensor
  Shape sizes;                            // sizes of the summarized tensor
  Shape full_sizes;                       // original sizes
  bool summarized;
  size_t width;
  int64_t indent;  // column where the outermost '[' sits

  // Writes the block at dim `d` whose first cell is `pos`.
  void block(std::string& out, int64_t d, int64_t pos) const {
    const int64_t nd = static_cast<int64_t>(sizes.size());
    const bool cut = summarized && full_sizes[d] > 2 * kEdgeItems;
    int64_t inner = 1;
    for (int64_t k = d + 1; k < nd; ++k) inner *= sizes[k];
    out += "[";
    if (d == nd - 1) {
      // PyTorch's _vector_str: fixed-width items (and " ..."), a fixed count per line.
      std::vector<std::string> items;
      for (int64_t i = 0; i < sizes[d]; ++i) {
        if (cut && i == kEdgeItems) items.push_back(" ...");
        const std::string& c = cells[pos + i];
        items.push_back(std::string(width - c.size(), ' ') + c);
      }
      const size_t per_line = static_cast<size_t>(
          std::max<int64_t>(1, (kLineWidth - indent - d) / static_cast<int64_t>(width + 2)));
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) {
          if (i % per_line == 0) {
            absl::StrAppend(&out, ",\n", std::string(indent + d + 1, ' '));
          } else {
            out += ", ";
          }
        }
        out += items[i];
      }
    } else {
      const std::string sep =
          absl::StrCat(",", std::string(nd - d - 1, '\n'), std::string(indent + d + 1, ' '));
      for (int64_t i = 0; i < sizes[d]; ++i) {
        if (i > 0) out += sep;
        if (cut && i == kEdgeItems) absl::StrAppend(&out, "...", sep);
        block(out, d + 1, pos + i * inner);
      }
    }
    out += "]";
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<std::string> suffix;
  if (device().is_cuda()) suffix.push_back(absl::StrCat("device='", device().str(), "'"));
  const bool empty = numel_ == 0;
  if (empty && dim() != 1) {
    suffix.push_back(absl::StrCat("size=(", absl::StrJoin(sizes_, ", "), dim() == 1 ? ",)" : ")"));
  }
  if (dtype_ != DType::kFloat32 && dtype_ != DType::kInt64 && dtype_ != DType::kBool) {
    suffix.push_back(absl::StrCat("dtype=", std::string(dtype_name(dtype_))));
  }
  std::string body;
  if (empty) {
    body = "[]";
  } else {
    const bool summarized = numel_ > kSummarizeThreshold;
    Tensor s = summarized ? summarize(to(Device())) : *this;
    std::vector<std::string> cells;
    cells.reserve(static_cast<size_t>(s.numel()));
    if (is_floating(dtype_)) {
      const std::vector<double> v = s.to_vector<double>();
      const FloatStyle st = float_style(v);
      for (double x : v) cells.push_back(format_float(x, st));
    } else if (dtype_ == DType::kBool) {
      for (bool x : s.to_vector<bool>()) cells.push_back(x ? "True" : "False");
    } else {
      for (int64_t x : s.to_vector<int64_t>()) cells.push_back(absl::StrCat(x));
    }
    size_t width = 0;
    for (const auto& c : cells) width = std::max(width, c.size());
    if (dim() == 0) {
      body = cells[0];
    } else {
      Printer p{cells, s.sizes(), sizes_, summarized, width, 7};
      p.block(body, 0, 0);
    }
  }
  std::string out = "tensor(" + body;
  for (const auto& x : suffix) out += ", " + x;
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.str();
}

}  // namespace dtensor
