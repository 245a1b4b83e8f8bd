// einsum: the equation parser (shared by the local form, the meta function, the strategy
// generator and the backward) with its plan cache, and the local form, reduced to diagonal
// views, sum, permute, reshape and bmm (mm / bmm directly when already in their layout).
#include "dtensor/ops/matmul/detail/einsum.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>

#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// A character for an error message: 'x', or an escape for one that does not print ('\t').
std::string char_text(char c) {
  switch (c) {
    case '\t':
      return "'\\t'";
    case '\n':
      return "'\\n'";
    case '\r':
      return "'\\r'";
    default:
      break;
  }
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) return absl::StrFormat("'\\x%02x'", u);
  return std::string{'\'', c, '\''};
}

// One term of the equation as written: the letters before and after its ellipsis.
struct Term {
  std::string before, after;
  bool ellipsis = false;
  size_t letters() const { return before.size() + after.size(); }
  std::string text() const { return before + (ellipsis ? "..." : "") + after; }
};

Term parse_term(std::string_view op, std::string_view term, std::string_view equation,
                const char* what) {
  Term t;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      DT_CHECK(term.substr(i, 3) == "..." && !t.ellipsis,
               "[%s] %s '%s' of the equation '%s' has a '.' that is not part of one '...'", op,
               what, term, equation);
      t.ellipsis = true;
      i += 2;
      continue;
    }
    DT_CHECK(is_letter(c),
             "[%s] invalid character %s in the equation '%s' (expected letters a-z, A-Z, ',', "
             "'...', '->' and spaces)",
             op, char_text(c), equation);
    (t.ellipsis ? t.after : t.before) += c;
  }
  return t;
}

}  // namespace

std::string EinsumEquation::str() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ',';
    s += inputs[i];
  }
  return s + "->" + output;
}

namespace {

// parse_einsum without the size checks: the equation resolved against the operands' ranks.
EinsumEquation resolve_equation(std::string_view op, std::string_view equation,
                                absl::Span<const int64_t> ranks) {
  DT_CHECK(!ranks.empty(), "[%s] expected at least one operand for the equation '%s'", op,
           equation);
  // Spaces only, as torch: a tab or a newline is an invalid character (parse_term).
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const bool explicit_out = arrow != std::string::npos;
  const std::string rhs = explicit_out ? eq.substr(arrow + 2) : std::string();
  DT_CHECK(rhs.find("->") == std::string::npos && lhs.find('-') == std::string::npos &&
               lhs.find('>') == std::string::npos,
           "[%s] the equation '%s' may hold one '->' only, between the operands and the output", op,
           equation);

  std::vector<Term> terms;
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    const std::string_view piece = std::string_view(lhs).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    terms.push_back(parse_term(op, piece, equation, "operand term"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  DT_CHECK(terms.size() == ranks.size(),
           "[%s] the equation '%s' has %d operand terms but %d operands were given", op, equation,
           terms.size(), ranks.size());

  // Ellipsis dims: operand i's cover rank - letters dims, aligned from the right.
  std::array<bool, 128> used{};
  size_t ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t rank = ranks[i];
    const int64_t letters = static_cast<int64_t>(terms[i].letters());
    if (terms[i].ellipsis) {
      DT_CHECK(letters <= rank,
               "[%s] operand %d has %d dims but the equation gives it %d letters and '...' "
               "('%s')",
               op, i, rank, letters, terms[i].text());
      ell = std::max(ell, static_cast<size_t>(rank - letters));
    } else {
      DT_CHECK(letters == rank,
               "[%s] operand %d has %d dims but the equation gives it %d letters ('%s')", op, i,
               rank, letters, terms[i].text());
    }
    for (char c : terms[i].before + terms[i].after) used[static_cast<unsigned char>(c)] = true;
  }
  Term out_term;
  if (explicit_out) out_term = parse_term(op, rhs, equation, "output");
  for (char c : out_term.before + out_term.after) used[static_cast<unsigned char>(c)] = true;

  EinsumEquation e;
  // Letters for the ellipsis dims: the first ones (a-z, then A-Z) the equation does not use.
  for (const char* abc : {"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}) {
    for (const char* p = abc; *p != '\0' && e.ellipsis.size() < ell; ++p) {
      if (!used[static_cast<unsigned char>(*p)]) e.ellipsis += *p;
    }
  }
  DT_CHECK(e.ellipsis.size() == ell,
           "[%s] the equation '%s' uses too many letters: its '...' covers %d dims and only %d "
           "of the 52 letters are free to name them",
           op, equation, ell, e.ellipsis.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t covered = static_cast<size_t>(ranks[i]) - terms[i].letters();
    e.inputs.push_back(terms[i].before +
                       e.ellipsis.substr(ell - (terms[i].ellipsis ? covered : 0)) + terms[i].after);
  }

  if (explicit_out) {
    e.output = out_term.before + (out_term.ellipsis ? e.ellipsis : std::string()) + out_term.after;
    for (size_t k = 0; k < e.output.size(); ++k) {
      const char c = e.output[k];
      DT_CHECK(e.output.find(c) == k, "[%s] output letter '%c' appears more than once in '%s'", op,
               c, equation);
      bool found = false;
      for (const std::string& in : e.inputs) found |= in.find(c) != std::string::npos;
      DT_CHECK(found, "[%s] output letter '%c' does not appear in any operand of '%s'", op, c,
               equation);
    }
  } else {
    // Implicit output: the ellipsis dims, then the letters written exactly once, sorted.
    std::array<int, 128> count{};
    for (const Term& t : terms) {
      for (char c : t.before + t.after) ++count[static_cast<unsigned char>(c)];
    }
    e.output = e.ellipsis;
    for (int c = 0; c < 128; ++c) {
      if (count[c] == 1) e.output += static_cast<char>(c);
    }
  }

  return e;
}

// The size of every letter of `e` (-1 for letters not used) into size[128], checking that the
// sizes of a shared letter are equal or 1. shape_of(i): operand i's sizes.
template <typename ShapeOf>
void letter_sizes_into(const EinsumEquation& e, ShapeOf shape_of, std::string_view op,
                       int64_t* size) {
  std::fill(size, size + 128, -1);
  std::array<size_t, 128> from;  // the operand the size came from (error messages)
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const std::string& in = e.inputs[i];
    const Shape& shape = shape_of(i);
    DT_CHECK(in.size() == shape.size(),
             "[%s] operand %d has %d dims but the equation gives it %d letters ('%s')", op, i,
             shape.size(), in.size(), in);
    for (size_t d = 0; d < in.size(); ++d) {
      const unsigned char c = static_cast<unsigned char>(in[d]);
      const int64_t s = shape[d];
      if (size[c] < 0 || size[c] == 1) {
        if (size[c] < 0 || s != 1) from[c] = i;
        size[c] = s;
      } else if (s != size[c] && s != 1) {
        const bool ell = e.ellipsis.find(in[d]) != std::string::npos;
        DT_FAIL(
            "[%s] %s '%c' has size %d in operand %d and %d in operand %d (sizes must be "
            "equal or 1)",
            op, ell ? "ellipsis dim" : "letter", in[d], size[c], from[c], s, i);
      }
    }
  }
}

// parse_einsum's size checks: a repeated letter takes a diagonal (its sizes within the operand
// must be equal); a shared letter's sizes are equal or 1.
template <typename ShapeOf>
void check_sizes(std::string_view op, const EinsumEquation& e, ShapeOf shape_of) {
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const std::string& in = e.inputs[i];
    const Shape& shape = shape_of(i);
    if (shape.size() != in.size()) continue;  // letter_sizes_into names it
    for (size_t d = 0; d < in.size(); ++d) {
      const size_t first = in.find(in[d]);
      DT_CHECK(shape[first] == shape[d],
               "[%s] letter '%c' is repeated in operand %d with sizes %d and %d (a diagonal "
               "needs equal sizes)",
               op, in[d], i, shape[first], shape[d]);
    }
  }
  int64_t size[128];
  letter_sizes_into(e, shape_of, op, size);
}

// The process-wide table of plans, keyed by the equation text, a NUL and one byte per rank (a
// valid equation holds no NUL). Never freed: plans' texts are op args the caches keep.
struct PlanTable {
  std::mutex mu;
  absl::flat_hash_map<std::string, std::unique_ptr<const EinsumPlan>> plans;
};

PlanTable& plan_table() {
  static auto* table = new PlanTable();
  return *table;
}

// The thread-local table in front of it (pointers into the process-wide one).
struct LocalPlans {
  absl::flat_hash_map<std::string, const EinsumPlan*> plans;
  std::string key;  // scratch: its capacity is kept between calls
};

}  // namespace

const EinsumPlan& resolve_einsum(std::string_view op, std::string_view equation,
                                 absl::Span<const int64_t> ranks) {
  thread_local LocalPlans local;
  std::string& key = local.key;
  key.assign(equation);
  key += '\0';
  for (size_t i = 0; i < ranks.size(); ++i) {
    // 52 letters name at most 52 distinct dims; a rank past 120 could only repeat letters.
    DT_CHECK(ranks[i] >= 0 && ranks[i] <= 120,
             "[%s] operand %d has %d dims, expected at most 120 for the equation '%s'", op, i,
             ranks[i], equation);
    key += static_cast<char>(ranks[i] + 1);
  }
  if (auto it = local.plans.find(key); it != local.plans.end()) return *it->second;

  PlanTable& table = plan_table();
  const EinsumPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(table.mu);
    if (auto it = table.plans.find(key); it != table.plans.end()) plan = it->second.get();
  }
  if (plan == nullptr) {
    auto fresh = std::make_unique<EinsumPlan>();
    fresh->eq = resolve_equation(op, equation, ranks);  // throws: nothing is cached
    fresh->text = fresh->eq.str();
    if (fresh->eq.inputs.size() > 2) {
      fresh->steps = einsum_steps(fresh->eq);
      for (const EinsumEquation& st : fresh->steps) fresh->step_texts.push_back(st.str());
    }
    std::lock_guard<std::mutex> lock(table.mu);
    plan = table.plans.try_emplace(key, std::move(fresh)).first->second.get();
  }
  if (local.plans.size() >= 4096) local.plans.clear();  // a bound; the plans stay valid
  local.plans.emplace(key, plan);
  return *plan;
}

void check_einsum_sizes(std::string_view op, const EinsumEquation& eq,
                        absl::Span<const Tensor> operands) {
  check_sizes(op, eq, [&](size_t i) -> const Shape& { return operands[i].sizes(); });
}

void check_einsum_sizes(std::string_view op, const EinsumEquation& eq,
                        absl::Span<const DTensor> operands) {
  check_sizes(op, eq, [&](size_t i) -> const Shape& { return operands[i].shape(); });
}

EinsumEquation parse_einsum(std::string_view op, std::string_view equation,
                            absl::Span<const Shape> shapes) {
  absl::InlinedVector<int64_t, 4> ranks;
  for (const Shape& s : shapes) ranks.push_back(static_cast<int64_t>(s.size()));
  const EinsumEquation& e = resolve_einsum(op, equation, ranks).eq;
  check_sizes(op, e, [&](size_t i) -> const Shape& { return shapes[i]; });
  return e;
}

std::vector<int64_t> einsum_letter_sizes(const EinsumEquation& e, absl::Span<const Shape> shapes,
                                         std::string_view op) {
  DT_CHECK(shapes.size() == e.inputs.size(),
           "[%s] the equation '%s' has %d operand terms but %d operands were given", op, e.str(),
           e.inputs.size(), shapes.size());
  std::vector<int64_t> size(128);
  letter_sizes_into(
      e, [&](size_t i) -> const Shape& { return shapes[i]; }, op, size.data());
  return size;
}

std::vector<EinsumEquation> einsum_steps(const EinsumEquation& e) {
  if (e.inputs.size() <= 2) return {e};
  std::vector<EinsumEquation> steps;
  std::string cur = e.inputs[0];
  for (size_t k = 1; k < e.inputs.size(); ++k) {
    EinsumEquation s;
    s.inputs = {cur, e.inputs[k]};
    if (k + 1 == e.inputs.size()) {
      s.output = e.output;
    } else {
      std::string needed = e.output;
      for (size_t j = k + 1; j < e.inputs.size(); ++j) needed += e.inputs[j];
      for (char c : cur + e.inputs[k]) {
        if (needed.find(c) != std::string::npos && s.output.find(c) == std::string::npos) {
          s.output += c;
        }
      }
    }
    cur = s.output;
    steps.push_back(std::move(s));
  }
  return steps;
}

namespace {

struct Operand {
  Tensor t;
  std::string letters;
  bool has(char c) const { return letters.find(c) != std::string::npos; }
  int64_t size(char c) const { return t.size(static_cast<int64_t>(letters.find(c))); }
};

// x with the dims of each repeated letter merged into one: its diagonal, a strided view (the
// merged dim's stride is the sum of theirs).
Operand diagonal_view(const Tensor& x, const std::string& letters) {
  std::string unique;
  Shape sizes, strides;
  for (size_t d = 0; d < letters.size(); ++d) {
    const size_t pos = unique.find(letters[d]);
    if (pos == std::string::npos) {
      unique += letters[d];
      sizes.push_back(x.size(static_cast<int64_t>(d)));
      strides.push_back(x.stride(static_cast<int64_t>(d)));
    } else {
      strides[pos] += x.stride(static_cast<int64_t>(d));
    }
  }
  if (unique.size() == letters.size()) return {x, letters};
  return {Tensor(x.storage(), x.dtype(), sizes, strides, x.storage_offset()), unique};
}

// x summed over its letters that `keep` does not hold.
Operand sum_unkept(Operand x, const std::string& keep) {
  Shape dims;
  std::string rest;
  for (size_t d = 0; d < x.letters.size(); ++d) {
    if (keep.find(x.letters[d]) == std::string::npos) {
      dims.push_back(static_cast<int64_t>(d));
    } else {
      rest += x.letters[d];
    }
  }
  if (dims.empty()) return x;
  // sum widens int32 to int64 (as torch's); einsum keeps the operand dtype. The cast back
  // wraps: the result is the exact sum mod 2^32, as int32 arithmetic (the GEMM's) gives.
  Tensor s = sum(x.t, dims);
  if (s.dtype() != x.t.dtype()) s = s.to(x.t.dtype());
  return {std::move(s), rest};
}

// x's dims reordered to `order` (a permutation of x's letters).
Tensor permuted(const Operand& x, const std::string& order) {
  Shape perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(x.letters.find(c)));
  return permute(x.t, perm);
}

Tensor einsum_unary(const Tensor& x, const std::string& in, const std::string& out) {
  const Operand a = sum_unkept(diagonal_view(x, in), out);
  Tensor r = permuted(a, out).contiguous();
  // Nothing summed and the permuted (diagonal) view already contiguous ("ij->ij", "ij->ji" on
  // [1, n], "ii->i" on [1, 1]): r is x's storage. einsum is no view: copy.
  if (r.storage().is_same(x.storage())) r = r.clone();
  return r;
}

// a (letters la) times b (lb) into `out`: batch letters (in a, b and the output), a's row
// letters (a and output), b's column letters (b and output) and contracted letters (a and b
// only) become one bmm [B, M, K] @ [B, K, N].
Tensor einsum_binary(const Tensor& x, const std::string& la, const Tensor& y, const std::string& lb,
                     const std::string& out) {
  // Already mm's or bmm's layout ("mk,kn->mn", "bmk,bkn->bmn": distinct letters, equal sizes, no
  // broadcast): the kernel itself, no permute or reshape.
  if (la.size() == 2 && lb.size() == 2 && out.size() == 2) {
    const char m = la[0], k = la[1], n = lb[1];
    if (lb[0] == k && out[0] == m && out[1] == n && m != k && k != n && m != n &&
        x.size(1) == y.size(0)) {
      return mm(x, y);
    }
  } else if (la.size() == 3 && lb.size() == 3 && out.size() == 3) {
    const char b = la[0], m = la[1], k = la[2], n = lb[2];
    if (lb[0] == b && lb[1] == k && out[0] == b && out[1] == m && out[2] == n && b != m && b != k &&
        b != n && m != k && m != n && k != n && x.size(0) == y.size(0) && x.size(2) == y.size(1)) {
      return bmm(x, y);
    }
  }
  Operand a = diagonal_view(x, la), b = diagonal_view(y, lb);
  a = sum_unkept(std::move(a), b.letters + out);
  b = sum_unkept(std::move(b), a.letters + out);
  std::string batch, left, right, contract;
  for (char c : out) {
    if (a.has(c) && b.has(c)) {
      batch += c;
    } else if (a.has(c)) {
      left += c;
    } else {
      right += c;
    }
  }
  for (char c : a.letters) {
    if (b.has(c) && out.find(c) == std::string::npos) contract += c;
  }
  // Shared letters of size 1 on one side broadcast to the other side's size.
  auto size_of = [&](char c) {
    if (!a.has(c)) return b.size(c);
    if (!b.has(c)) return a.size(c);
    return a.size(c) == 1 ? b.size(c) : a.size(c);
  };
  auto broadcast = [&](Operand& o) {
    Shape target;
    for (char c : o.letters) target.push_back(size_of(c));
    if (target != o.t.sizes()) o.t = o.t.expand(target);
  };
  broadcast(a);
  broadcast(b);
  auto numel = [&](const std::string& s) {
    int64_t n = 1;
    for (char c : s) n *= size_of(c);
    return n;
  };
  const int64_t nb = numel(batch), m = numel(left), n = numel(right), k = numel(contract);
  const int64_t a_shape[] = {nb, m, k}, b_shape[] = {nb, k, n};
  const Tensor a3 = reshape(permuted(a, batch + left + contract), a_shape);
  const Tensor b3 = reshape(permuted(b, batch + contract + right), b_shape);
  Operand c{bmm(a3, b3), batch + left + right};
  Shape c_shape;
  for (char l : c.letters) c_shape.push_back(size_of(l));
  c.t = reshape(c.t, c_shape);
  return permuted(c, out).contiguous();
}

Tensor local_steps(const EinsumEquation& e, absl::Span<const EinsumEquation> steps,
                   absl::Span<const Tensor> operands) {
  DT_CHECK(operands.size() == e.inputs.size(),
           "[einsum] the equation '%s' has %d operand terms but %d operands were given", e.str(),
           e.inputs.size(), operands.size());
  if (e.inputs.size() == 1) return einsum_unary(operands[0], e.inputs[0], e.output);
  if (e.inputs.size() == 2) {
    return einsum_binary(operands[0], e.inputs[0], operands[1], e.inputs[1], e.output);
  }
  Tensor cur = operands[0];
  for (size_t k = 0; k < steps.size(); ++k) {
    const EinsumEquation& s = steps[k];
    cur = einsum_binary(cur, s.inputs[0], operands[k + 1], s.inputs[1], s.output);
  }
  return cur;
}

}  // namespace

Tensor einsum_local(const EinsumEquation& e, absl::Span<const Tensor> operands) {
  return local_steps(e, e.inputs.size() > 2 ? einsum_steps(e) : std::vector<EinsumEquation>(),
                     operands);
}

Tensor einsum_local(const EinsumPlan& plan, absl::Span<const Tensor> operands) {
  return local_steps(plan.eq, plan.steps, operands);
}

}  // namespace detail

Tensor einsum(std::string_view equation, absl::Span<const Tensor> operands) {
  absl::InlinedVector<int64_t, 4> ranks;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& x = operands[i];
    DT_CHECK(x.defined(), "[einsum] operand %d is an undefined tensor", i);
    DT_CHECK(x.dtype() == operands[0].dtype(),
             "[einsum] operand %d has dtype %s, expected %s (operands share one dtype)", i,
             dtype_name(x.dtype()), dtype_name(operands[0].dtype()));
    DT_CHECK(x.device() == operands[0].device(),
             "[einsum] operand %d is on %s, expected %s (operands share one device)", i,
             x.device().str(), operands[0].device().str());
    DT_CHECK(x.dtype() != kBool, "[einsum] operand %d has dtype bool, expected a numeric dtype", i);
    ranks.push_back(x.dim());
  }
  const detail::EinsumPlan& plan = detail::resolve_einsum("einsum", equation, ranks);
  detail::check_einsum_sizes("einsum", plan.eq, operands);
  return detail::einsum_local(plan, operands);
}

}  // namespace dtensor
