// What save and load share (internal): the world-wide error agreement, the string gather rank 0
// builds the index from, and which region of each tensor a rank holds and whether it writes it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/device_mesh/device_mesh.h"

namespace dtensor::checkpoint::detail {

// Save and load are collective over the world: a 1-D CPU mesh over every rank, on which
// check_on_all_ranks agrees on errors.
DeviceMesh world_mesh();

// Runs `fn`; whatever it throws on any rank (a dtensor::Error or another std::exception) is
// raised on every rank of `world` as the lowest failing rank's message (check_on_all_ranks).
void run_on_all_ranks(const DeviceMesh& world, const std::function<void()>& fn);

// Every rank's string, in rank order, on every rank (two all_gathers on the world).
std::vector<std::string> all_gather_strings(const std::string& mine);

// Whether every rank that passed a value passed the same one (its min and max over the world
// agree; true when none did), and whether any rank passed flag = true: the same answer on every
// rank (two all_reduces on the world).
struct Agreement {
  bool same = true;
  bool any = false;
};
Agreement agree(std::optional<uint64_t> value, bool flag = false);

// The part of a tensor this rank holds: its local shard's global offset and shape (the whole
// tensor for a self-mesh DTensor). `holds` is false for a rank outside the mesh; `writes` is
// true on one holder of each chunk within the tensor's mesh: the rank at coordinate 0 of every
// mesh dim that does not shard it (every holder of a self-mesh DTensor, whose mesh is just
// itself). Copies of a mesh over part of the world hold the same chunks; save's plan keeps one
// writer among them.
struct Region {
  Shape offset, shape;
  bool holds = false;
  bool writes = false;
};
Region local_region(const DTensor& t);

// Checks what save and load both require: names non-empty and unique, DTensors defined, no
// Partial placements. Throws "[op] ..." naming the tensor.
void validate_state(const StateDict& state, std::string_view op);

// Save and load move data: a DTensor on the meta device is refused ("[op] tensor 'x' is on the
// meta device ...", pointing to plan.h's planners, which run on meta).
void check_has_data(const StateDict& state, std::string_view op);

// Every rank must save the same names, in the same order, with the same global shapes, dtypes
// and layouts: a stable hash of them is compared over the world. Throws "[op] the ranks save
// different states ..." (collective; call it inside run_on_all_ranks).
void check_same_state_everywhere(const StateDict& state, std::string_view op);

// Which tensors of `state` this rank writes its region of (collective): one writer per distinct
// chunk however the tensor is replicated, the lowest world rank among the candidates
// (local_region's writers of every copy of the tensor's mesh). Under the fake backend, which
// cannot gather the candidates, each copy's writer keeps its chunks.
std::vector<bool> plan_writes(const DeviceMesh& world, const StateDict& state);

// A directory path without trailing slashes ("ckpt/" -> "ckpt").
std::string normalize_dir(const std::string& dir, std::string_view op);

}  // namespace dtensor::checkpoint::detail
