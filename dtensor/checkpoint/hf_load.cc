// load_hf: find the weight files of a Hugging Face directory and read their headers, match
// their entries to the target parameters (rename, strict), check shapes and dtypes, read each
// rank's shards into staging memory, agree over the world, then write the parameters.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <map>
#include <memory>
#include <utility>

#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/hf_format.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "load_hf";

// Lists at most this many names in a missing / unexpected error (load_state_dict lists all;
// a model with thousands of parameters would make an unreadable message).
constexpr size_t kMaxListed = 8;

// The weight files of a directory, opened, with their parsed headers.
struct WeightFiles {
  struct Opened {
    detail::File file;
    detail::SafetensorsHeader header;
  };
  std::vector<std::unique_ptr<Opened>> files;
  // Entry name -> (its file, its header entry), in name order.
  std::map<std::string, std::pair<const Opened*, const detail::SafetensorsEntry*>> entries;
};

WeightFiles::Opened& open_weights(WeightFiles& w, const std::string& path) {
  auto o = std::make_unique<WeightFiles::Opened>();
  o->file = detail::File::open_read(path, kOp);
  o->header = detail::read_safetensors_header(o->file, kOp);
  w.files.push_back(std::move(o));
  return *w.files.back();
}

// model.safetensors when it exists (from_pretrained looks for it first), else the files the
// index names, each entry checked to be in the file the index says.
WeightFiles find_weights(const std::string& dir) {
  WeightFiles w;
  const std::string single = absl::StrCat(dir, "/", detail::kHfWeightsFile);
  const std::string index_path = absl::StrCat(dir, "/", detail::kHfIndexFile);
  if (detail::path_exists(single)) {
    const WeightFiles::Opened& o = open_weights(w, single);
    for (const auto& [name, e] : o.header.entries) w.entries[name] = {&o, &e};
    return w;
  }
  DT_CHECK(detail::path_exists(index_path),
           "[%s] '%s' holds no Hugging Face weights: neither %s nor %s is there", kOp, dir,
           detail::kHfWeightsFile, detail::kHfIndexFile);
  const std::map<std::string, std::string> weight_map =
      detail::hf_weight_map_from_json(detail::read_text_file(index_path, kOp), index_path, kOp);
  std::map<std::string, const WeightFiles::Opened*> by_file;
  for (const auto& [name, file] : weight_map) {
    auto it = by_file.find(file);
    if (it == by_file.end()) {
      it = by_file.emplace(file, &open_weights(w, absl::StrCat(dir, "/", file))).first;
    }
    const WeightFiles::Opened& o = *it->second;
    const auto e = o.header.entries.find(name);
    DT_CHECK(e != o.header.entries.end(),
             "[%s] index '%s' places tensor '%s' in file '%s', which has no such entry", kOp,
             index_path, name, o.file.path());
    w.entries[name] = {&o, &e->second};
  }
  return w;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) {
    shown.push_back(absl::StrCat("'", names[i], "'"));
  }
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > kMaxListed) {
    absl::StrAppend(&out, " and ", names.size() - kMaxListed, " more");
  }
  return out;
}

// Other names of tied targets (nn::Module::parameter_aliases): alias -> canonical name.
using Aliases = std::map<std::string, std::string>;

// Which entry loads each target (by index into `state`), after the rename; what is missing
// and unexpected. An entry named as an alias of a target is never unexpected: it loads the
// target when the file lacks the canonical name, and is otherwise kept in also_entry_of to be
// checked against it (an alias of something that is not a target is ignored).
struct Matching {
  std::vector<std::string> entry_of;       // per target; empty: missing
  std::vector<std::string> also_entry_of;  // per target: its alias's entry, besides entry_of
  HfLoadResult result;
};

Matching match(const StateDict& state, const Aliases& aliases, const WeightFiles& w,
               const HfLoadOptions& options, const std::string& dir) {
  std::map<std::string, size_t> target;
  for (size_t i = 0; i < state.size(); ++i) target.emplace(state[i].first, i);
  Matching m;
  m.entry_of.resize(state.size());
  m.also_entry_of.resize(state.size());
  std::vector<std::string> unexpected_where;
  for (const auto& [name, loc] : w.entries) {
    const std::string fqn = options.rename ? options.rename(name) : name;
    if (fqn.empty()) continue;
    if (const auto a = aliases.find(fqn); a != aliases.end()) {
      const auto t = target.find(a->second);
      if (t != target.end()) m.also_entry_of[t->second] = name;
      continue;
    }
    const auto t = target.find(fqn);
    if (t == target.end()) {
      m.result.unexpected_keys.push_back(name);
      unexpected_where.push_back(absl::StrCat(name, "' in '", loc.first->file.path()));
      continue;
    }
    std::string& slot = m.entry_of[t->second];
    DT_CHECK(slot.empty(), "[%s] entries '%s' and '%s' of '%s' both load parameter '%s'", kOp, slot,
             name, dir, fqn);
    slot = name;
  }
  for (size_t i = 0; i < state.size(); ++i) {
    if (m.entry_of[i].empty()) std::swap(m.entry_of[i], m.also_entry_of[i]);
    if (m.entry_of[i].empty()) m.result.missing_keys.push_back(state[i].first);
  }
  if (options.strict) {
    const auto& missing = m.result.missing_keys;
    DT_CHECK(missing.empty() && unexpected_where.empty(),
             "[%s] the weights in '%s' do not match the parameters (strict): %d missing%s%s; "
             "%d unexpected%s%s",
             kOp, dir, missing.size(), missing.empty() ? "" : ": ", quoted_list(missing),
             unexpected_where.size(), unexpected_where.empty() ? "" : ": ",
             quoted_list(unexpected_where));
  }
  return m;
}

// Shapes equal; floating entries load into floating targets (converted), other dtypes only
// into the same dtype.
void check_entry(const std::string& target, const DTensor& t, const std::string& entry,
                 const detail::SafetensorsEntry& e, const std::string& path) {
  DT_CHECK(e.shape == t.shape(),
           "[%s] entry '%s' of file '%s' has shape [%s] but parameter '%s' has shape [%s]", kOp,
           entry, path, absl::StrJoin(e.shape, ", "), target, absl::StrJoin(t.shape(), ", "));
  DT_CHECK(e.dtype == t.dtype() || (is_floating(e.dtype) && is_floating(t.dtype())),
           "[%s] entry '%s' of file '%s' is %s but parameter '%s' is %s: only a floating entry "
           "converts (into a floating parameter)",
           kOp, entry, path, dtype_name(e.dtype), target, dtype_name(t.dtype()));
}

// This rank's shard of target `t` read from its entry (undefined when the rank holds none):
// only the shard's runs of bytes (detail::for_each_run), each with one positioned read.
Tensor stage(const DTensor& t, const WeightFiles::Opened& f, const detail::SafetensorsEntry& e) {
  const detail::Region r = detail::local_region(t);
  if (!r.holds) return Tensor();
  Tensor buf = empty(r.shape, e.dtype);
  char* base = static_cast<char*>(buf.data_ptr());
  const int64_t es = static_cast<int64_t>(dtype_size(e.dtype));
  detail::for_each_run(e.shape, r.offset, r.shape, [&](int64_t at, int64_t in_box, int64_t n) {
    f.file.pread_all(base + in_box * es, static_cast<size_t>(n * es), e.begin + at * es);
  });
  return buf;
}

// When the file holds a tied target under both names: the alias entry (its shape and dtype
// checked as the target's) must hold the same values, compared on this rank's shard.
// transformers' from_pretrained unties the two when they differ (and warns); a module whose
// tie is structural (one table) cannot, so that file is refused.
void check_tied_copy(const std::string& target, const DTensor& t, const std::string& entry,
                     const std::string& alias, const WeightFiles& w, const Tensor& staged) {
  const auto& [file, e] = w.entries.at(alias);
  check_entry(target, t, alias, *e, file->file.path());
  if (!staged.defined()) return;
  const Tensor copy = stage(t, *file, *e);
  DT_CHECK(equal(copy.to(staged.dtype()), staged),
           "[%s] entries '%s' and '%s' are the tied parameter '%s' but hold different values "
           "(file '%s'): transformers would untie them, a tied module cannot; build the module "
           "untied (e.g. tie_word_embeddings = false) or drop one entry",
           kOp, entry, alias, target, file->file.path());
}

HfLoadResult load_impl(const StateDict& state, const Aliases& aliases, const std::string& dir_arg,
                       const HfLoadOptions& options) {
  const DeviceMesh world = detail::world_mesh();
  std::vector<Tensor> staged(state.size());
  HfLoadResult result;
  // Every check runs on every rank over the same files, and the lowest failing rank's message
  // is raised on all of them; a read that fails on one rank only is agreed the same way.
  detail::run_on_all_ranks(world, [&] {
    const std::string dir = detail::normalize_dir(dir_arg, kOp);
    detail::validate_state(state, kOp);
    const WeightFiles w = find_weights(dir);
    Matching m = match(state, aliases, w, options, dir);
    for (size_t i = 0; i < state.size(); ++i) {
      if (m.entry_of[i].empty()) continue;
      const auto& [file, entry] = w.entries.at(m.entry_of[i]);
      check_entry(state[i].first, state[i].second, m.entry_of[i], *entry, file->file.path());
    }
    for (size_t i = 0; i < state.size(); ++i) {
      if (m.entry_of[i].empty()) continue;
      const auto& [file, entry] = w.entries.at(m.entry_of[i]);
      staged[i] = stage(state[i].second, *file, *entry);
      if (!m.also_entry_of[i].empty()) {
        check_tied_copy(state[i].first, state[i].second, m.entry_of[i], m.also_entry_of[i], w,
                        staged[i]);
      }
    }
    result = std::move(m.result);
  });
  // Every rank staged everything: write the targets (copy_ converts the dtype, as PyTorch's
  // load_state_dict does).
  for (size_t i = 0; i < state.size(); ++i) {
    if (staged[i].defined()) Tensor(state[i].second.to_local()).copy_(staged[i]);
  }
  return result;
}

}  // namespace

HfLoadResult load_hf(const StateDict& state, const std::string& dir, const HfLoadOptions& options) {
  return load_impl(state, {}, dir, options);
}

HfLoadResult load_hf(nn::Module& module, const std::string& dir, const HfLoadOptions& options) {
  // A tied parameter is listed once by named_parameters, under its canonical name.
  Aliases aliases;
  for (auto& [alias, canonical] : module.parameter_aliases()) aliases.emplace(alias, canonical);
  return load_impl(module.named_parameters(), aliases, dir, options);
}

std::string read_hf_config(const std::string& dir) {
  return detail::read_text_file(
      absl::StrCat(detail::normalize_dir(dir, "read_hf_config"), "/", detail::kHfConfigFile),
      "read_hf_config");
}

}  // namespace dtensor::checkpoint
