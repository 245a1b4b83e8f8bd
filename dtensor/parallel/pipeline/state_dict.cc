#include "dtensor/parallel/pipeline/state_dict.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

std::vector<std::pair<std::string, DTensor>> gather_full_state_dict(
    const std::vector<nn::ModulePtr>& stage_modules, const CommunicatorPtr& pp) {
  DT_CHECK(pp != nullptr, "[gather_full_state_dict] no pp group (this rank is not on the mesh)");
  std::vector<std::pair<std::string, DTensor>> out;
  for (size_t s = 0; s < stage_modules.size(); ++s) {
    const int owner = static_cast<int>(s % static_cast<size_t>(pp->size()));
    for (const auto& [fqn, param] : stage_modules[s]->named_parameters()) {
      Tensor full =
          owner == pp->rank()
              ? param.full_tensor().contiguous()
              : empty(param.shape(),
                      TensorOptions(param.dtype(), Device(param.device_mesh().device_type())));
      if (pp->size() > 1) {
        CollectiveLabel label("pipeline state dict");
        pp->broadcast(full, owner)->wait();
      }
      out.emplace_back(fqn, local_dtensor(full));
    }
  }
  return out;
}

namespace {

// One parameter of a stage, as every pp rank learns it from the stage's owner.
struct Entry {
  int64_t stage;
  std::string fqn;
  DType dtype;
  Shape shape;
  int owner = -1;  // the pp rank that announced it (holds the stage)
};

// `owner`'s entries, broadcast over pp: a word count, then the words (stage, dtype, ndim, shape,
// name length, the name's bytes packed 8 to a word) of each entry.
std::vector<Entry> broadcast_entries(std::vector<Entry> mine, int owner, Communicator& pp) {
  std::vector<int64_t> words;
  for (const Entry& e : mine) {
    words.insert(words.end(),
                 {e.stage, static_cast<int64_t>(e.dtype), static_cast<int64_t>(e.shape.size())});
    words.insert(words.end(), e.shape.begin(), e.shape.end());
    words.push_back(static_cast<int64_t>(e.fqn.size()));
    for (size_t i = 0; i < e.fqn.size(); i += 8) {
      int64_t w = 0;
      std::memcpy(&w, e.fqn.data() + i, std::min<size_t>(8, e.fqn.size() - i));
      words.push_back(w);
    }
  }
  CollectiveLabel label("pipeline state dict names");
  Tensor count = full({1}, static_cast<int64_t>(words.size()), TensorOptions(kInt64));
  pp.broadcast(count, owner)->wait();
  Tensor buf = zeros({count.data<int64_t>()[0]}, TensorOptions(kInt64));
  if (owner == pp.rank()) std::copy(words.begin(), words.end(), buf.data<int64_t>());
  pp.broadcast(buf, owner)->wait();
  if (owner == pp.rank()) return mine;
  std::vector<Entry> out;
  const int64_t* w = buf.data<int64_t>();
  for (int64_t k = 0, n = buf.numel(); k < n;) {
    Entry e{w[k], "", static_cast<DType>(w[k + 1]), {}};
    const int64_t ndim = w[k + 2];
    e.shape.assign(w + k + 3, w + k + 3 + ndim);
    k += 3 + ndim;
    const auto len = static_cast<size_t>(w[k++]);
    e.fqn.resize(len);
    std::memcpy(e.fqn.data(), w + k, len);
    k += static_cast<int64_t>((len + 7) / 8);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, DTensor>> gather_full_state_dict(
    const std::vector<std::shared_ptr<PipelineStage>>& my_stages, const CommunicatorPtr& pp) {
  DT_CHECK(pp != nullptr, "[gather_full_state_dict] no pp group (this rank is not on the mesh)");
  std::vector<Entry> mine;
  std::map<std::string, DTensor> params;
  for (const auto& st : my_stages) {
    for (const auto& [fqn, param] : st->module()->named_parameters()) {
      mine.push_back({st->stage_index(), fqn, param.dtype(), param.shape()});
      params.emplace(fqn, param);
    }
  }
  std::vector<Entry> all;
  for (int owner = 0; owner < pp->size(); ++owner) {
    std::vector<Entry> got =
        broadcast_entries(owner == pp->rank() ? mine : std::vector<Entry>(), owner, *pp);
    for (Entry& e : got) e.owner = owner;
    all.insert(all.end(), got.begin(), got.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Entry& a, const Entry& b) { return a.stage < b.stage; });
  // Each value is broadcast from the rank that announced it, which holds it: not from the rank
  // that stage % pp would name (a stage placed otherwise made .at() throw on that rank alone
  // while the others waited in the broadcast). A name announced twice (two stages, or two ranks
  // passing the same stage) would give one rank's value for both or send a duplicate entry;
  // `all` is the same on every rank, so every rank raises this together.
  std::map<std::string, const Entry*> first;
  for (const Entry& e : all) {
    const auto [it, fresh] = first.emplace(e.fqn, &e);
    DT_CHECK(fresh,
             "[gather_full_state_dict] parameter '%s' is announced by stage %lld on pp rank %d and "
             "by stage %lld on pp rank %d: names must be unique across the stages (does every "
             "rank pass only its own stages?)",
             e.fqn.c_str(), static_cast<long long>(it->second->stage), it->second->owner,
             static_cast<long long>(e.stage), e.owner);
  }
  const DeviceType device = my_stages.empty() ? kCPU : my_stages[0]->mesh().device_type();
  std::vector<std::pair<std::string, DTensor>> out;
  for (const Entry& e : all) {
    Tensor value = e.owner == pp->rank() ? params.at(e.fqn).full_tensor().contiguous()
                                         : empty(e.shape, TensorOptions(e.dtype, Device(device)));
    if (pp->size() > 1) {
      CollectiveLabel label("pipeline state dict");
      pp->broadcast(value, e.owner)->wait();
    }
    out.emplace_back(e.fqn, local_dtensor(value));
  }
  return out;
}

void load_full_state_dict(const std::vector<nn::ModulePtr>& modules,
                          const std::vector<std::pair<std::string, DTensor>>& full) {
  std::map<std::string, const DTensor*> by_name;
  for (const auto& [fqn, value] : full) by_name[fqn] = &value;
  std::vector<std::pair<DTensor, const DTensor*>> copies;
  for (const nn::ModulePtr& m : modules) {
    for (const auto& [fqn, param] : m->named_parameters()) {
      auto it = by_name.find(fqn);
      DT_CHECK(it != by_name.end(), "[load_full_state_dict] no value for parameter '%s'",
               fqn.c_str());
      const DTensor& v = *it->second;
      DT_CHECK(v.shape() == param.shape() && v.dtype() == param.dtype(),
               "[load_full_state_dict] '%s' is %s %s in the state dict but %s %s in the model",
               fqn.c_str(), std::string(dtype_name(v.dtype())).c_str(),
               shape_str(v.shape()).c_str(), std::string(dtype_name(param.dtype())).c_str(),
               shape_str(param.shape()).c_str());
      copies.emplace_back(param, &v);
    }
  }
  autograd::NoGradGuard no_grad;
  for (auto& [param, value] : copies) {
    // Every rank holds the whole value: each takes its own shard (no communication).
    const DTensor shard = distribute_tensor(value->full_tensor(), param.device_mesh(),
                                            param.placements(), std::nullopt);
    Tensor local = param.to_local();  // a handle on the parameter's storage
    local.copy_(shard.to_local());
  }
}

}  // namespace dtensor::pipelining
