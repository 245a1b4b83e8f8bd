// Generator: the (seed, offset) state of a Philox stream, and the process-wide default
// generators (one for the CPU, one per CUDA device when CUDA is compiled in).
//
// A random op over a tensor of N elements with W words per element (dtensor/rng/distributions.h)
// reserves N * W words rounded up to a multiple of 4: it reads the offset, generates from it,
// and the offset advances. Because the reservation depends only on the GLOBAL numel, every
// rank holding a shard of the same tensor advances identically, without communication.
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/tensor/device.h"

namespace dtensor {

// PyTorch's default seed, so an unseeded program is reproducible too.
inline constexpr uint64_t kDefaultRngSeed = 67280421310721ull;

// A generator's full state.
struct GeneratorState {
  uint64_t seed = kDefaultRngSeed;  // the Philox key
  uint64_t offset = 0;              // in Philox words, always a multiple of 4 after reserve()
  // Same seed and offset.
  bool operator==(const GeneratorState&) const = default;
};

// Thread-safe (one mutex per generator): concurrent draws never tear the state. But the order
// in which threads draw decides which numbers each gets, and that order differs between ranks,
// so DTensor random ops (whose shards must agree across ranks) follow a thread rule on the
// default generators: between two settings of the state (manual_seed, set_state, set_offset,
// an RNGStateGuard restoring), only one thread may draw from a default generator for DTensor
// ops; a second thread raises "[rand] ... another thread ...". Give each thread its own
// Generator (the `gen` argument), or re-seed on the new thread. Copying copies the state.
class Generator {
 public:
  // A generator at offset 0 with `seed`; copies copy the state.
  explicit Generator(uint64_t seed = kDefaultRngSeed, Device device = Device());
  Generator(const Generator& other);
  Generator& operator=(const Generator& other);

  // Its device, seed, offset (Philox words) and (seed, offset) state.
  Device device() const { return device_; }
  uint64_t seed() const;
  uint64_t offset() const;
  GeneratorState state() const;
  // Sets the seed and resets the offset to 0 (torch.Generator.manual_seed).
  void manual_seed(uint64_t seed);
  // Sets the offset (in words; any value, reserve() rounds what it hands out next).
  void set_offset(uint64_t offset);
  void set_state(const GeneratorState& s);

  // Returns the current offset and advances it by `words` rounded up to a multiple of 4
  // (the offset itself is first rounded up to a multiple of 4).
  uint64_t reserve(uint64_t words);
  // Same, returning the seed read under the same lock: what a random op passes to
  // fill_random(..., seed, offset, ...).
  GeneratorState reserve_state(uint64_t words);

  // Internal (the thread rule above; OffsetBasedRNGTracker calls it for default generators):
  // records the calling thread as this generator's DTensor drawer, or throws "[op] ..." when
  // another thread drew since the state was last set.
  void claim_thread(std::string_view op);

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
  Device device_;
  uint64_t thread_ = 0;  // token of the thread that drew for DTensor ops; 0: none since set
};

// The default generator of `device`: the CPU one, or CUDA device `index`'s (created on first
// use with the last manual_seed value). Throws for a CUDA device when CUDA is not compiled in
// or the index is not a visible device.
Generator& default_generator(Device device = Device());

// Sets the seed of every default generator (CPU and each CUDA device, including ones not
// created yet) and resets their offsets to 0.
void manual_seed(uint64_t seed);

// The seed the default generators were last given (kDefaultRngSeed before any manual_seed).
uint64_t initial_seed();

// Saves the state of generators and restores it on destruction (scope exit, exceptions too).
// With no arguments: the CPU generator and every CUDA device's, as torch.random.fork_rng does.
class RNGStateGuard {
 public:
  RNGStateGuard();
  // The default generators of `devices` (the CPU one is always included).
  explicit RNGStateGuard(std::initializer_list<Device> devices);
  // One specific generator (it must outlive the guard).
  explicit RNGStateGuard(Generator& gen);
  ~RNGStateGuard();
  RNGStateGuard(const RNGStateGuard&) = delete;
  RNGStateGuard& operator=(const RNGStateGuard&) = delete;

 private:
  std::vector<std::pair<Generator*, GeneratorState>> saved_;
};

// torch.random.fork_rng: runs `fn` and restores the default generators' states afterwards, so
// random ops inside do not change the random stream seen outside.
template <typename F>
decltype(auto) fork_rng(F&& fn) {
  RNGStateGuard guard;
  return std::forward<F>(fn)();
}

}  // namespace dtensor
