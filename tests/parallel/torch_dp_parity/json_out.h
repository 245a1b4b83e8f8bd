// The JSON records probe.cc and nn_probe.cc write (compare.py reads them beside PyTorch's):
// one object per case with its placements, local shape, local values and global shape, or a
// value, or an error. Header-only, for the two probes (built by hand, see their comments).
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "dtensor/dtensor.h"

namespace probe_json {

inline std::ostringstream& out() {
  static std::ostringstream o;
  return o;
}
inline std::string num(double v) {
  char b[64];
  snprintf(b, 64, "%.17g", v);
  std::string s = b;
  return s == "nan" ? "NaN" : s == "inf" ? "Infinity" : s == "-inf" ? "-Infinity" : s;
}
// Python's list repr, "[3, 4]" (state_dict key shapes are compared as text).
inline std::string ints(const dtensor::Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}
inline void entry(const std::string& body) {
  static bool first = true;
  out() << (first ? "" : ",\n") << "{" << body << "}";
  first = false;
}
inline std::string quoted(std::string s) {
  for (auto& c : s)
    if (c == '"' || c == '\n' || c == '\\') c = '\'';
  return "\"" + s + "\"";
}
inline void rec_value(const std::string& name, const std::string& v) {
  entry("\"case\":" + quoted(name) + ",\"value\":" + quoted(v));
}
inline void rec_num(const std::string& name, double v) {
  entry("\"case\":" + quoted(name) + ",\"value\":" + num(v));
}
inline void rec_error(const std::string& name, const std::exception& e) {
  entry("\"case\":" + quoted(name) + ",\"error\":" + quoted(std::string(e.what()).substr(0, 200)));
}
// An undefined DTensor is the value "None" (PyTorch's .grad of a parameter without one).
// local: the placements are written as ["local"] (one process, PyTorch's plain tensors).
inline void rec(const std::string& name, const dtensor::DTensor& d, bool local = false) {
  if (!d.defined()) return rec_value(name, "None");
  const dtensor::Tensor l = dtensor::cast(d.to_local().contiguous(), dtensor::kFloat64);
  std::string pl = "[", vals = "[";
  for (size_t i = 0; i < d.placements().size() && !local; ++i)
    pl += (i ? "," : "") + quoted(d.placements()[i].str());
  if (local) pl += "\"local\"";
  for (double v : l.to_vector<double>()) vals += (vals.size() > 1 ? "," : "") + num(v);
  entry("\"case\":" + quoted(name) + ",\"placements\":" + pl + "],\"lshape\":" + ints(l.shape()) +
        ",\"local\":" + vals + "],\"gshape\":" + ints(d.shape()));
}
inline void write(const std::string& path) {
  std::ofstream(path) << "[" << out().str() << "]\n";
}

}  // namespace probe_json
