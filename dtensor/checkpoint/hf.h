// Hugging Face model directories in and out (issue 43): the files transformers' save_pretrained
// writes and from_pretrained reads — config.json, and the weights as one "model.safetensors"
// or a sharded set "model-0000k-of-0000n.safetensors" listed by "model.safetensors.index.json"
// — read straight into a module's (possibly sharded) parameters, and written back from them.
// Generic: any module, matched by its parameter names (nn::Module::named_parameters), with an
// optional rename for other conventions. Guide: docs/guides/hugging_face_checkpoints.md.
//
// load_hf and save_hf are collective over the WHOLE world, like checkpoint::save / load (every
// rank calls them with the same module structure and options), and raise the same
// dtensor::Error on every rank when anything fails, naming the tensor and the file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/nn/module.h"

namespace dtensor::checkpoint {

// Maps a name of one convention to the other: for load_hf a file's entry name to the module's
// parameter name, for save_hf a parameter name to the entry name written. An empty result
// drops the tensor: load_hf ignores such an entry (e.g. the "rotary_emb.inv_freq" buffers that
// old Llama checkpoints carry), save_hf does not write such a parameter. Unset: names are kept.
using HfRename = std::function<std::string(const std::string& name)>;

// A rename from a table: names in `table` map to their value, every other name to itself.
HfRename hf_rename_map(std::map<std::string, std::string> table);

struct HfLoadOptions {
  // As torch.nn.Module.load_state_dict(strict=True): a parameter the directory lacks, or an
  // entry matching no parameter, is an error. With strict = false both are reported in the
  // result and the parameters present are loaded.
  bool strict = true;
  // Entry name in the files -> the module's parameter name (see HfRename).
  HfRename rename;
};

// load_state_dict's _IncompatibleKeys: parameter names the directory lacks, entry names (as in
// the files) that matched no parameter. Both empty after a strict load.
struct HfLoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// Reads the weights of the Hugging Face directory `dir` into the parameters of `module` in
// place (each keeps its mesh and placements). The weights are "model.safetensors" when it
// exists (as from_pretrained prefers it), otherwise the files the "weight_map" of
// "model.safetensors.index.json" names. Each rank reads only the bytes of its own shard of each
// parameter, with positioned reads: a shard that is a range of whole rows (Shard(0), or the
// whole tensor) is one read; any other (Shard(1), ...) is one read per run of contiguous
// elements (one per row of a column shard), never bytes outside the shard. Entries in F32,
// BF16, F16 or F64 load into any floating parameter, converted as Tensor::copy_ does (PyTorch's
// load_state_dict copy_); other dtypes must equal the parameter's. Shapes must equal exactly.
// A tied parameter (nn::Module::parameter_aliases: tie_parameter's names, a tied Llama's
// "lm_head.weight") is loaded once, from its canonical entry or, when the file lacks that,
// from its alias's entry, as transformers' from_pretrained accepts either. A file holding both
// (some tied checkpoints carry lm_head.weight too): the alias entry must equal the
// canonical one in shape, dtype rules and values; transformers unties a pair whose values
// differ, a tied module cannot, so that is an error naming both entries. Never unexpected.
// Every rank checks everything first — the index and every header (a truncated or corrupt
// file), missing and unexpected names, shapes, dtypes — and reads every shard into staging
// memory; only when every rank succeeded are the parameters written, so after an error no
// parameter changed. Errors: "[load_hf] ...", naming the tensor and the file.
HfLoadResult load_hf(nn::Module& module, const std::string& dir, const HfLoadOptions& options = {});
// The same for named DTensors (a StateDict's names play the parameter names).
HfLoadResult load_hf(const StateDict& state, const std::string& dir,
                     const HfLoadOptions& options = {});

struct HfSaveOptions {
  // Written as "config.json" when non-empty (the caller's text, as it is: e.g. read_hf_config
  // of the directory the model came from, or a config a model class writes).
  std::string config_json;
  // Each weight file holds at most this many bytes of tensor data, except that a tensor larger
  // than this gets a file of its own; tensors go to files in the order of their entry names,
  // as transformers 5's save_pretrained splits (huggingface_hub's
  // split_torch_state_dict_into_shards over the names sorted), so the files and the index are
  // the ones it writes. One file: "model.safetensors"; several:
  // "model-00001-of-0000n.safetensors" ... and "model.safetensors.index.json". The default is
  // save_pretrained's max_shard_size "50GB".
  uint64_t max_shard_bytes = 50'000'000'000;
  // The dtype floating parameters are written in (e.g. kBFloat16); unset: each parameter's own.
  // Integer and bool parameters are written as they are (as model.to(dtype) leaves them).
  std::optional<DType> dtype;
  // The module's parameter name -> the entry name written (see HfRename).
  HfRename rename;
};

// Writes the parameters of `module` as the Hugging Face directory `dir` (created with its
// parents when missing; a tied parameter once, under its canonical name, as save_pretrained
// omits its _tied_weights_keys; other files in it, a tokenizer for instance, are left alone),
// in the layout save_pretrained(safe_serialization=True) writes, so that transformers'
// from_pretrained loads it unchanged: safetensors files with "__metadata__" {"format": "pt"},
// the index {"metadata": {"total_parameters", "total_size"}, "weight_map"} when sharded, and
// config.json. Weight files of an earlier save there ("model.safetensors", its index, shards
// "model-*-of-*.safetensors") that this save does not write are removed, so that a reader never
// mixes two saves. No gather: rank 0 creates each file with its header at its full size, then
// every rank writes the bytes of the shards it owns at their positions (one writer per distinct
// shard however a parameter is replicated, as checkpoint::save), and fsyncs. Like
// save_pretrained, the directory is written in place (not atomically: use checkpoint::save for
// training checkpoints). Partial placements are refused. Errors: "[save_hf] ...".
void save_hf(const nn::Module& module, const std::string& dir, const HfSaveOptions& options = {});
// The same for named DTensors (their names are the parameter names).
void save_hf(const StateDict& state, const std::string& dir, const HfSaveOptions& options = {});

// The text of "<dir>/config.json" (no communication): parse it with the JSON library of your
// choice, e.g. models::LlamaConfig. Throws "[read_hf_config] ..." when it cannot be read.
std::string read_hf_config(const std::string& dir);

}  // namespace dtensor::checkpoint
