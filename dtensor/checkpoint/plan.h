// Checkpoint planning (PyTorch DCP's SavePlanner / LoadPlanner: create_local_plan and
// create_global_plan decide who writes and reads which chunks before any I/O). checkpoint::save
// and checkpoint::load run these same plans; calling them alone touches no tensor data and
// allocates no tensor memory, so they run on meta DTensors and under the fake backend: a dry run
// reads a checkpoint's bytes per rank and its file count without writing one (issue 46).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtensor/checkpoint/checkpoint.h"

namespace dtensor::checkpoint {

// One chunk a rank writes: the region of tensor `fqn` at `offset` of shape `shape`, as the
// safetensors entry `entry` of the rank's file.
struct WriteItem {
  std::string fqn;
  std::string file;   // "rank-00003.safetensors"
  std::string entry;  // "<fqn>#<offset...>"
  Shape offset, shape;
  DType dtype = DType::kFloat32;
  int64_t bytes = 0;  // the chunk's data (numel * element size)
};

struct SavePlan {
  int rank = 0;                  // this world rank
  std::vector<WriteItem> items;  // what this rank writes, in the state's order
  int64_t bytes = 0;             // their data bytes (safetensors headers not counted)
  // The checkpoint's data bytes over every rank: each distinct chunk is written once and the
  // chunks tile each tensor, so this is the sum of the tensors' global sizes.
  int64_t total_bytes = 0;
  // Data bytes each world rank writes, and how many rank files the save writes (ranks writing
  // at least one chunk; index.json not counted). Only a real backend knows the other ranks'
  // plans: under the fake backend `rank_bytes` is empty and `files` is -1.
  std::vector<int64_t> rank_bytes;
  int files = -1;
};

// The plan checkpoint::save(state, ...) runs on this rank: the same checks first (names unique,
// no Partial, every rank passing the same state; raised on every rank) and the same writers —
// one per distinct chunk, the lowest world rank holding it. Collective over the whole world
// like save (a few small all_gathers and all_reduces of metadata). Under the fake backend the
// other ranks are not there to ask: a chunk of a tensor on a mesh over part of the world (the
// tp submesh of a (dp, tp) mesh) is then planned on this rank when it is its copy's writer, as
// if no copy on a lower rank held it — exact for rank 0, an upper bound for the others (a
// local tensor is planned on rank 0 alone, which holds it like every rank).
SavePlan plan_save(const StateDict& state);

// One chunk of the checkpoint a rank reads (whole, to verify its CRC-32) for one target.
struct ReadItem {
  std::string fqn;
  ChunkInfo chunk;      // the saved chunk: file, entry, its offset and shape, checksum
  Shape offset, shape;  // the part of it this rank's shard takes (global coordinates)
  DType dtype = DType::kFloat32;
  int64_t bytes = 0;  // the chunk's data bytes read
};

struct LoadPlan {
  std::vector<ReadItem> items;  // in the state's order, then the index's chunk order
  int64_t bytes = 0;            // data bytes this rank reads
  int files = 0;                // distinct files this rank opens (index.json not counted)
};

// The reads checkpoint::load(state, ...) runs on this rank against a checkpoint's `index`
// (read_index(dir), or one built by hand): every name of `state` must be in it with the
// target's global shape and dtype, and its chunks must cover this rank's shard; otherwise
// throws "[checkpoint::load] tensor 'x' ..." (the same on every rank, which all see the same
// index and state). No communication; Partial targets are refused as by load.
LoadPlan plan_load(const StateDict& state, const std::map<std::string, TensorInfo>& index);
// The same against the index of the checkpoint at `dir` (reads index.json, no other file).
LoadPlan plan_load(const StateDict& state, const std::string& dir);

}  // namespace dtensor::checkpoint
