// Distributed checkpoint (PyTorch DCP's counterpart): save and load named DTensors — model
// parameters, optimizer states, small scalars such as the step count and the RNG state — in
// the safetensors format, with resharding on load. Format and decisions: docs/CHECKPOINT.md.
//
// Both calls are collective over the WHOLE world (every world rank calls them with the same
// names in the same order, shapes and dtypes; checked) and raise the same dtensor::Error on
// every rank when anything fails, naming the file and the tensor.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::checkpoint {

// Fully-qualified name -> DTensor, in the caller's order ("model.layers.0.attn.q.weight",
// "optim.3.exp_avg", "optim.step", "rng.cpu"). A DTensor on a self mesh (a local tensor,
// self_mesh()) is taken to hold the same value on every rank: rank 0 writes it, every rank
// loads it whole.
using StateDict = std::vector<std::pair<std::string, DTensor>>;

struct SaveOptions {
  // Called on every rank after every file and the index are written and synced, just before
  // the commit (the rename): tests use it to simulate a crash there. An exception it throws
  // on any rank is raised on every rank, and nothing is committed.
  std::function<void()> before_commit;
};

// Writes `state` to directory `dir` (created; an existing checkpoint there is replaced
// atomically). Each rank writes the chunks it owns into its own file "rank-<r>.safetensors";
// a chunk held by several ranks is written once: by the rank at coordinate 0 of the mesh dims
// that do not shard it (Replicate), and, for a tensor on a mesh over part of the world (the tp
// submesh of a (dp, tp) mesh, one copy per dp group), by the lowest world rank among those
// candidates (one gather of them); empty chunks are not written. Rank 0 writes "index.json".
// The index and every file carry an id unique to this save (see load).
// Everything goes to "<dir>.tmp" first, each file is fsynced, and only when every rank is done
// does rank 0 swap it into place (renameat2 RENAME_EXCHANGE), so a crash at any point leaves
// the previous checkpoint at `dir` intact. Partial placements are refused ("[checkpoint::save]
// tensor 'x' has Partial placements ...: redistribute it to Replicate or Shard first"), since a
// partial value is not the tensor. Refuses a `dir` that exists and is not a checkpoint.
void save(const StateDict& state, const std::string& dir, const SaveOptions& options = {});

struct LoadOptions {
  // Called on every rank after the index is read and before any chunk is, on every read of
  // the checkpoint: tests use it to replace the checkpoint there (a collective save inside it
  // is allowed). An exception it throws on any rank is raised on every rank.
  std::function<void()> after_index;
};

// Reads every tensor of `state` from the checkpoint at `dir` into the DTensors of `state`, in
// place (their local tensors are overwritten; the DTensors keep their mesh and placements),
// whatever mesh, world size and placements the checkpoint was saved with. Each rank reads only
// the chunks that overlap its shard (positioned reads, never whole files) and verifies each
// chunk's CRC-32. Everything is read into staging buffers and checked first — a missing or
// truncated file, a corrupt header or checksum, an index that does not match its files, a name
// missing from the checkpoint, a global shape or dtype that differs — and only when every rank
// succeeded are the targets written, so after an error (raised on every rank) no target has
// changed. Entries of the checkpoint that `state` does not name are ignored. Partial targets
// are refused.
//
// A save may replace the checkpoint while it is read (another job saving to `dir`): every file
// must carry the save id of the index the rank read, and the ranks must have read the same
// index. When a rank meets another save's file, a file already deleted, or `dir` missing during
// the fallback commit, every rank reads the checkpoint again (up to 8 reads, pausing 10 ms,
// 20 ms, ... between them), so the targets receive one save whole — never a mix, never a false
// "corrupt". A checkpoint replaced during every read raises "[checkpoint::load] checkpoint
// 'DIR' is being replaced by a concurrent save ..." with no target modified.
void load(const StateDict& state, const std::string& dir, const LoadOptions& options = {});

// ---- the index ------------------------------------------------------------------------------

struct ChunkInfo {
  std::string file;    // a file name inside the checkpoint directory
  std::string entry;   // the safetensors entry holding the chunk
  Shape offset;        // global index of the chunk's first element
  Shape shape;         // the chunk's shape
  uint32_t crc32 = 0;  // of the entry's bytes
};

struct TensorInfo {
  Shape shape;  // global shape
  DType dtype = DType::kFloat32;
  std::vector<ChunkInfo> chunks;
};

// The parsed "index.json" of a checkpoint (read by the calling rank alone, no communication).
// Validates it: a format version this build reads (1 or 2), known dtypes, chunks inside the
// global shape and tiling it exactly (pairwise disjoint and their element counts add up), each
// chunk's entry named after its tensor and offset, file names that are plain names (no '/',
// not "." or "..": the index cannot point outside the directory). Throws
// "[checkpoint::read_index] ..." naming the file.
std::map<std::string, TensorInfo> read_index(const std::string& dir);

}  // namespace dtensor::checkpoint
