#include "dtensor/compile/detail/replay_pool.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <thread>
#include <utility>

namespace dtensor::compiler {

namespace {
constexpr Device kCpu{};

// The flight this thread runs (FlightScope) and the recording it records into: a recorded task's
// allocation it frees is freed within its task.
thread_local const void* t_flight_recording = nullptr;
thread_local int64_t t_flight = -1;

// A storage over pool memory: Storage treats it as the library's (detail/storage_pool.h).
Storage pooled_storage(void* data, size_t nbytes, dtensor::detail::PooledMemory* slot) {
  return Storage::from_blob(data, nbytes, kCpu, &dtensor::detail::pooled_free, slot);
}

// An object shared by the pool and the storages it handed out, freed by the last of them.
class Shared {
 public:
  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // Storages alive (the pool's reference not counted).
  int64_t alive() const { return refs_.load(std::memory_order_acquire) - 1; }
  virtual ~Shared() = default;

 private:
  std::atomic<int64_t> refs_{1};
};
}  // namespace

// One replay's CPU allocations on the replaying thread, each with the allocator's own memory,
// and when each was freed: before which allocation of the replay, and on which thread.
class Recording final : public Shared {
 public:
  struct Entry final : dtensor::detail::PooledMemory {
    Recording* owner = nullptr;
    size_t nbytes = 0;
    // The replay's allocations made when it was freed on the replaying thread during the
    // replay; -1 while alive, or freed on another thread or after the replay.
    std::atomic<int64_t> end{-1};
    std::atomic<bool> carried{false};  // freed by the next replay
    int64_t flight = -1;               // a scheduled move's task's allocation
    std::atomic<bool> in_task{false};  // freed within that task
    void give_back(void* data) override { owner->freed(*this, data); }
  };
  // A scheduled move's task: the replay's allocations made when it was issued and landed.
  struct FlightLog {
    int64_t issued = -1, landed = -1;
    std::deque<Entry> entries;
  };
  explicit Recording(uint32_t flights) : flights_(flights), thread_(std::this_thread::get_id()) {}
  void issued(uint32_t f) {
    if (f < flights_.size()) flights_[f].issued = made();
  }
  void landed(uint32_t f) {
    if (f < flights_.size()) flights_[f].landed = made();
  }
  int64_t made() const { return made_.load(std::memory_order_relaxed); }
  // The next replay records `next` (on this thread): an allocation of this one it frees is
  // carried over, its end size() + next's allocations by then; nullptr ends the link.
  void follow(Recording* next) {
    if (follower_ != nullptr) follower_->unref();
    follower_ = next;
    if (next != nullptr) next->ref();
  }
  // The same allocation sizes in the same order.
  bool same_sizes(const Recording& o) const {
    const auto same = [](const std::deque<Entry>& a, const std::deque<Entry>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].nbytes != b[i].nbytes) return false;
      }
      return true;
    };
    if (!same(entries_, o.entries_) || flights_.size() != o.flights_.size()) return false;
    for (size_t f = 0; f < flights_.size(); ++f) {
      const FlightLog &a = flights_[f], &b = o.flights_[f];
      if (a.issued != b.issued || a.landed != b.landed || !same(a.entries, b.entries)) return false;
    }
    return true;
  }
  Storage allocate(size_t nbytes) {
    Entry& e = entries_.emplace_back();
    made_.store(static_cast<int64_t>(entries_.size()), std::memory_order_relaxed);
    return make(e, nbytes);
  }
  // Flight f's next allocation (on the thread running its task).
  Storage allocate_flight(uint32_t f, size_t nbytes) {
    if (f >= flights_.size()) return Storage();
    Entry& e = flights_[f].entries.emplace_back();
    e.flight = f;
    return make(e, nbytes);
  }
  // The end of the replay: frees from now on are not the plan's.
  void finish() { finished_.store(true, std::memory_order_relaxed); }
  MemoryPlan plan() const;

 private:
  Storage make(Entry& e, size_t nbytes) {
    e.owner = this;
    e.nbytes = nbytes;
    ref();
    return pooled_storage(dtensor::detail::cpu_allocate(nbytes), nbytes, &e);
  }
  void freed(Entry& e, void* data) {
    if (e.flight >= 0 && t_flight_recording == this && t_flight == e.flight) {
      e.in_task.store(true, std::memory_order_relaxed);
    } else if (std::this_thread::get_id() == thread_) {
      if (!finished_.load(std::memory_order_relaxed)) {
        e.end.store(made(), std::memory_order_relaxed);
      } else if (follower_ != nullptr) {
        e.end.store(made() + follower_->made(), std::memory_order_relaxed);
        e.carried.store(true, std::memory_order_relaxed);
      }
    }
    dtensor::detail::cpu_free(
        data, reinterpret_cast<void*>(dtensor::detail::cpu_allocation_size(e.nbytes)));
    unref();
  }
  std::deque<Entry> entries_;  // stable addresses: the storages' ctx
  // Per flight (sized at the start: the communication thread writes its flight's entries while
  // the replaying thread writes the ticks of others).
  std::vector<FlightLog> flights_;
  std::atomic<int64_t> made_{0};
  std::atomic<bool> finished_{false};
  std::thread::id thread_;
  Recording* follower_ = nullptr;  // read and written on thread_ only
};

// The memory of a plan: one block, a slot per planned allocation.
class Arena final : public Shared {
 public:
  struct Slot final : dtensor::detail::PooledMemory {
    Arena* owner = nullptr;
    bool carried = false;
    std::atomic<bool> live{false};
    void give_back(void* /*data*/) override {
      live.store(false, std::memory_order_release);
      if (!carried) owner->transient_live_.fetch_sub(1, std::memory_order_acq_rel);
      owner->unref();
    }
  };
  Arena(const MemoryPlan& plan, Storage block)
      : block_(std::move(block)), slots_(plan.slots.size()) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].owner = this;
      slots_[i].carried = plan.slots[i].carried;
    }
  }
  const Storage& block() const { return block_; }
  // Storages alive that the plan does not carry into the next replay (a replay starts on this
  // arena only when there are none).
  int64_t transient_live() const { return transient_live_.load(std::memory_order_acquire); }
  // The bytes of the carried storages alive now (held between replays, as in eager mode).
  int64_t carried_live_bytes(const MemoryPlan& plan) const {
    int64_t bytes = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].carried && slots_[i].live.load(std::memory_order_relaxed)) {
        bytes += static_cast<int64_t>(dtensor::detail::cpu_allocation_size(plan.slots[i].nbytes));
      }
    }
    return bytes;
  }
  // Planned allocation i's storage, or an undefined one when an allocation whose memory it
  // reuses is still alive.
  Storage give(const MemoryPlan& plan, size_t i) {
    const MemoryPlan::Slot& p = plan.slots[i];
    for (uint32_t k = 0; k < p.preds_count; ++k) {
      if (slots_[plan.preds[p.preds_begin + k]].live.load(std::memory_order_acquire)) {
        return Storage();
      }
    }
    Slot& s = slots_[i];
    s.live.store(true, std::memory_order_relaxed);
    if (!s.carried) transient_live_.fetch_add(1, std::memory_order_relaxed);
    ref();
    // new contents: the version counter starts afresh with the storage
    return pooled_storage(static_cast<char*>(block_.data()) + p.offset, p.nbytes, &s);
  }

 private:
  Storage block_;
  std::vector<Slot> slots_;
  std::atomic<int64_t> transient_live_{0};
};

// Interval packing (Recording::plan): each item (bytes, alive over the allocations [start, end)
// of a replay, the timeline a circle of `period` allocations) gets an offset, no two items alive
// at once overlapping, the arena (the highest end) as small as found. An item placed in an order
// goes to the smallest gap that holds it among the placed items alive at the same time (or the
// lowest such gap; or above them all). Several fixed orders and both gap choices are tried; then,
// while the arena exceeds the most bytes alive at once (no packing needs less), orders near the
// best fixed one (sizes scaled by pseudo-random factors), and a local search that moves one item
// of the best order a few places (a fixed pseudo-random sequence) and keeps the move when the
// arena does not grow. Both stop at a budget of work (conflicts visited, kPackWork): a plan is
// made synchronously during a replay (its peers wait in their collectives), so it costs at most
// a fraction of a second at any size, and is the same every time. On the tests' model at 4 ranks
// the fixed orders lose 576 B (1%) over the live peak and the search reaches it.
class Packer {
 public:
  using Item = PackInterval;
  Packer(std::vector<Item> items, int64_t period) : items_(std::move(items)) {
    const size_t m = items_.size();
    conflicts_.resize(m);
    for (size_t a = 0; a < m; ++a) {
      for (size_t b = a + 1; b < m; ++b) {
        for (const int64_t shift : {-period, int64_t{0}, period}) {
          if (items_[b].start + shift < items_[a].end && items_[a].start < items_[b].end + shift) {
            conflicts_[a].push_back(static_cast<uint32_t>(b));
            conflicts_[b].push_back(static_cast<uint32_t>(a));
            break;
          }
        }
      }
    }
  }
  // Packs, searching until the arena is `bound` (or the budget runs out); returns it.
  int64_t pack(int64_t bound) {
    using Less = bool (*)(const Item&, const Item&);
    const Less orders[] = {
        // largest first, longer-lived first among equals
        [](const Item& x, const Item& y) {
          return x.size != y.size ? x.size > y.size : x.end - x.start > y.end - y.start;
        },
        // longest-lived first
        [](const Item& x, const Item& y) {
          return x.end - x.start != y.end - y.start ? x.end - x.start > y.end - y.start
                                                    : x.size > y.size;
        },
        // the largest area (bytes x lifetime) first
        [](const Item& x, const Item& y) {
          return x.size * (x.end - x.start) > y.size * (y.end - y.start);
        },
        // allocation order (what a plain allocator sees)
        [](const Item& x, const Item& y) { return x.start < y.start; },
    };
    const size_t m = items_.size();
    work_ = 0;
    int64_t best_arena = -1;
    bool best_fit = true;
    std::vector<uint32_t> best_order;
    std::vector<int64_t> best_offsets;
    const auto keep_if_better = [&](int64_t arena, bool fit) {
      if (best_arena >= 0 && arena >= best_arena) return;
      best_arena = arena;
      best_fit = fit;
      best_order = order_;
      best_offsets = offsets_;
    };
    // A whole packing's work; the first one is made whatever its cost, the others within the
    // budget.
    int64_t pack_cost = static_cast<int64_t>(m);
    for (const std::vector<uint32_t>& c : conflicts_) pack_cost += static_cast<int64_t>(c.size());
    for (const Less less : orders) {
      identity_order();
      std::stable_sort(order_.begin(), order_.end(),
                       [&](uint32_t a, uint32_t b) { return less(items_[a], items_[b]); });
      for (const bool fit : {true, false}) {
        if (best_arena < 0 || work_ + pack_cost <= kPackWork) keep_if_better(place_all(fit), fit);
      }
    }
    fixed_arena_ = best_arena;
    // Orders near largest-first and largest-area-first, while they take at most a sixteenth of
    // the budget (more would leave the local search, which does better on the tests' model, too
    // little).
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    std::vector<double> key(m);
    for (int attempt = 0;
         attempt < kPackingAttempts && best_arena > bound && work_ + pack_cost <= kPackWork / 16;
         ++attempt) {
      for (size_t k = 0; k < m; ++k) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const double r = static_cast<double>(seed >> 11) / static_cast<double>(uint64_t{1} << 53);
        const auto lifetime = static_cast<double>(items_[k].end - items_[k].start);
        key[k] =
            static_cast<double>(items_[k].size) * (0.5 + r) * (attempt % 2 == 0 ? 1 : lifetime);
      }
      identity_order();
      std::sort(order_.begin(), order_.end(),
                [&](uint32_t a, uint32_t b) { return key[a] > key[b]; });
      keep_if_better(place_all(true), true);
    }
    order_ = std::move(best_order);
    offsets_ = std::move(best_offsets);
    for (size_t q = 0; q < m; ++q) position_[order_[q]] = static_cast<uint32_t>(q);
    if (best_arena > bound && m > 1) best_arena = search(best_fit, best_arena, bound);
    return best_arena;
  }
  // Per item (in the constructor's order), its offset.
  const std::vector<int64_t>& offsets() const { return offsets_; }
  // The fixed orders' arena (before the search), and the work pack() did.
  int64_t fixed_arena() const { return fixed_arena_; }
  int64_t work() const { return work_; }

 private:
  // The work budget of a plan, in conflicts visited and sorted (about 0.3-0.5 s on one core),
  // and at most this many perturbed orders and local search moves, each by at most kSearchReach
  // places.
  static constexpr int64_t kPackWork = 40'000'000;
  static constexpr int kPackingAttempts = 256;
  static constexpr int kSearchSteps = 40000;
  static constexpr int64_t kSearchReach = 16;
  void identity_order() {
    order_.resize(items_.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = static_cast<uint32_t>(k);
  }
  // Item k's offset at position q of order_ against its conflicts placed before it.
  int64_t fit(uint32_t k, size_t q, bool best_fit) {
    const int64_t size = items_[k].size;
    work_ += static_cast<int64_t>(conflicts_[k].size()) + 1;
    placed_.clear();
    for (const uint32_t j : conflicts_[k]) {
      if (position_[j] < q) placed_.emplace_back(offsets_[j], items_[j].size);
    }
    work_ += static_cast<int64_t>(placed_.size());  // sorted
    std::sort(placed_.begin(), placed_.end());
    int64_t at = -1, at_gap = std::numeric_limits<int64_t>::max(), top = 0;
    for (const auto& [offset, bytes] : placed_) {
      const int64_t gap = offset - top;
      if (gap >= size && gap < at_gap && (best_fit || at < 0)) {
        at = top;
        at_gap = gap;
      }
      top = std::max(top, offset + bytes);
    }
    return at < 0 ? top : at;
  }
  // Places every item in order_; returns the arena.
  int64_t place_all(bool best_fit) {
    const size_t m = items_.size();
    position_.resize(m);
    offsets_.resize(m);
    for (size_t q = 0; q < m; ++q) position_[order_[q]] = static_cast<uint32_t>(q);
    int64_t arena = 0;
    for (size_t q = 0; q < m; ++q) {
      const uint32_t k = order_[q];
      offsets_[k] = fit(k, q, best_fit);
      arena = std::max(arena, offsets_[k] + items_[k].size);
    }
    return arena;
  }
  // The highest end of the items (a max tree over them), after item k's offset changed.
  void set_end(uint32_t k) {
    size_t i = leaves_ + k;
    ends_[i] = offsets_[k] + items_[k].size;
    for (i /= 2; i >= 1; i /= 2) ends_[i] = std::max(ends_[2 * i], ends_[2 * i + 1]);
  }
  // Local search from the packing of order_ (offsets_): a move that does not grow the arena is
  // kept (crossing plateaus), one that grows it is undone. A move re-places, in order, the moved
  // range and then only the items one of whose conflicts changed offset; its changes are logged
  // and undone (no copy of the whole state per move). Returns the arena.
  int64_t search(bool best_fit, int64_t arena, int64_t bound) {
    const size_t m = items_.size();
    leaves_ = 1;
    while (leaves_ < m) leaves_ *= 2;
    ends_.assign(2 * leaves_, 0);
    for (uint32_t k = 0; k < m; ++k) set_end(k);
    std::vector<uint32_t> mark(m, 0);  // the move that queued item k last
    std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> queue;  // positions
    std::vector<std::pair<uint32_t, int64_t>> undo;  // (item, its offset before the move)
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (uint32_t step = 1; step <= kSearchSteps && arena > bound && work_ < kPackWork; ++step) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      const auto from = static_cast<size_t>((seed >> 33) % m);
      const auto shift = static_cast<int64_t>((seed >> 20) % (2 * kSearchReach + 1)) - kSearchReach;
      const auto to = static_cast<size_t>(
          std::clamp<int64_t>(static_cast<int64_t>(from) + shift, 0, static_cast<int64_t>(m) - 1));
      if (to == from) continue;
      const size_t lo = std::min(from, to), hi = std::max(from, to);
      move(from, to);
      // The moved item and the items it passed that conflict with it: the others keep the
      // conflicts placed before them, so they move only when one of those does.
      const uint32_t moved = order_[to];
      mark[moved] = step;
      queue.push(static_cast<uint32_t>(to));
      work_ += static_cast<int64_t>(conflicts_[moved].size());
      for (const uint32_t j : conflicts_[moved]) {
        if (position_[j] >= lo && position_[j] <= hi) {
          mark[j] = step;
          queue.push(position_[j]);
        }
      }
      undo.clear();
      bool grew = false;
      while (!queue.empty()) {
        const uint32_t q = queue.top();
        queue.pop();
        const uint32_t k = order_[q];
        const int64_t at = fit(k, q, best_fit);
        if (at == offsets_[k]) continue;
        undo.emplace_back(k, offsets_[k]);
        offsets_[k] = at;
        set_end(k);
        if (ends_[1] > arena) {
          grew = true;  // as the items re-placed so far stay
          break;
        }
        for (const uint32_t j : conflicts_[k]) {
          if (position_[j] > q && mark[j] != step) {
            mark[j] = step;
            queue.push(position_[j]);
          }
        }
      }
      if (!grew) {
        arena = ends_[1];
        continue;
      }
      while (!queue.empty()) queue.pop();
      for (auto u = undo.rbegin(); u != undo.rend(); ++u) {
        offsets_[u->first] = u->second;
        set_end(u->first);
      }
      move(to, from);
    }
    return arena;
  }
  // Moves order_[from] to position `to` (the items between shift by one).
  void move(size_t from, size_t to) {
    const uint32_t k = order_[from];
    if (from < to) {
      std::copy(order_.begin() + static_cast<std::ptrdiff_t>(from) + 1,
                order_.begin() + static_cast<std::ptrdiff_t>(to) + 1,
                order_.begin() + static_cast<std::ptrdiff_t>(from));
    } else {
      std::copy_backward(order_.begin() + static_cast<std::ptrdiff_t>(to),
                         order_.begin() + static_cast<std::ptrdiff_t>(from),
                         order_.begin() + static_cast<std::ptrdiff_t>(from) + 1);
    }
    order_[to] = k;
    for (size_t q = std::min(from, to); q <= std::max(from, to); ++q) {
      position_[order_[q]] = static_cast<uint32_t>(q);
    }
  }
  std::vector<Item> items_;
  std::vector<std::vector<uint32_t>> conflicts_;  // per item, the items alive at the same time
  // The packing in progress: the order, per item its position in it and its offset.
  std::vector<uint32_t> order_, position_;
  std::vector<int64_t> offsets_;
  // search(): the items' ends, a max tree over `leaves_` leaves (ends_[1]: the arena).
  std::vector<int64_t> ends_;
  size_t leaves_ = 1;
  std::vector<std::pair<int64_t, int64_t>> placed_;  // fit()'s (offset, size) of the conflicts
  int64_t work_ = 0, fixed_arena_ = 0;
};

PackedIntervals pack_intervals(std::vector<PackInterval> items, int64_t period, int64_t bound) {
  Packer packer(std::move(items), period);
  PackedIntervals out;
  out.arena = packer.pack(bound);
  out.offsets = packer.offsets();
  out.fixed_arena = packer.fixed_arena();
  out.work = packer.work();
  return out;
}

MemoryPlan Recording::plan() const {
  MemoryPlan plan;
  const size_t n = entries_.size();
  const auto period = static_cast<int64_t>(n);
  plan.slots.resize(n);
  std::vector<Packer::Item> items;
  std::vector<size_t> index;  // per item, its slot
  // An allocation alive over [start, end) of the replay's allocations (a start before the
  // replay's first one counts from the previous replay's end), unless it outlived the next
  // replay's allocation of it (or that replay), or was freed by another thread (end < 0).
  const auto add = [&](size_t slot, const Entry& e, int64_t start, int64_t end) {
    plan.slots[slot].nbytes = e.nbytes;
    if (end < 0) return;
    end = std::max(end, start + 1);
    if (start < 0) {
      start += period;
      end += period;
    }
    if (end > period + start) return;
    plan.slots[slot].carried = e.carried.load(std::memory_order_relaxed);
    items.push_back(
        {static_cast<int64_t>(dtensor::detail::cpu_allocation_size(e.nbytes)), start, end});
    index.push_back(slot);
  };
  for (size_t i = 0; i < n; ++i) {
    add(i, entries_[i], static_cast<int64_t>(i), entries_[i].end.load(std::memory_order_relaxed));
  }
  // A scheduled move's task allocates on the communication thread at any time between its issue
  // and its wait: each of its allocations is alive from the moment it was issued (so from
  // before the replay's allocation `issued`, as a value the replay frees right after the issue
  // may still be alive when the task allocates) until the wait (freed by the task) or its free
  // on the replaying thread; every such allocation of one task overlaps every other.
  for (size_t f = 0; f < flights_.size(); ++f) {
    const FlightLog& log = flights_[f];
    MemoryPlan::Flight& flight = plan.flights.emplace_back();
    flight.issued = log.issued;
    flight.landed = log.landed;
    flight.first = static_cast<uint32_t>(plan.slots.size());
    flight.count = static_cast<uint32_t>(log.entries.size());
    plan.slots.resize(plan.slots.size() + log.entries.size());
    for (size_t u = 0; u < log.entries.size(); ++u) {
      const Entry& e = log.entries[u];
      const bool known = log.issued >= 0 && log.landed >= log.issued;
      add(flight.first + u, e, log.issued - 1,
          !known                                      ? -1
          : e.in_task.load(std::memory_order_relaxed) ? log.landed
                                                      : e.end.load(std::memory_order_relaxed));
    }
  }
  plan.land_order.resize(plan.flights.size());
  for (size_t f = 0; f < plan.flights.size(); ++f) plan.land_order[f] = static_cast<uint32_t>(f);
  std::stable_sort(plan.land_order.begin(), plan.land_order.end(), [&](uint32_t x, uint32_t y) {
    return plan.flights[x].landed < plan.flights[y].landed;
  });
  // The most bytes alive at once (the bound any packing needs), those alive past the replay's
  // end alive from the next replay's start too (the timeline is a circle of n allocations).
  std::vector<int64_t> delta(n + 2, 0);
  for (const Packer::Item& it : items) {
    delta[static_cast<size_t>(it.start)] += it.size;
    delta[static_cast<size_t>(std::min<int64_t>(it.end, period))] -= it.size;
    if (it.end > period) {
      delta[0] += it.size;
      delta[static_cast<size_t>(it.end - period)] -= it.size;
    }
  }
  int64_t live = 0;
  for (int64_t d : delta) plan.live_peak = std::max(plan.live_peak, live += d);
  Packer packer(std::move(items), period);
  plan.arena_bytes = std::max<int64_t>(packer.pack(plan.live_peak), 0);
  const std::vector<int64_t>& offsets = packer.offsets();
  for (size_t k = 0; k < index.size(); ++k) plan.slots[index[k]].offset = offsets[k];
  // The order the predecessors follow: each task's allocations just before the replay's first
  // allocation after its issue. Whenever two allocations share bytes without overlapping in
  // time, the earlier one in this order is given before the later one is asked for (a task's
  // allocation after its issue, a replay's allocation after the wait of a task whose memory it
  // reuses: ReplayPool checks both).
  std::vector<uint32_t> order;
  order.reserve(plan.slots.size());
  size_t f = 0;
  for (size_t i = 0; i <= n; ++i) {
    for (; f < plan.flights.size() && plan.flights[f].issued <= static_cast<int64_t>(i); ++f) {
      for (uint32_t u = 0; u < plan.flights[f].count; ++u)
        order.push_back(plan.flights[f].first + u);
    }
    if (i < n) order.push_back(static_cast<uint32_t>(i));
  }
  for (; f < plan.flights.size(); ++f) {
    for (uint32_t u = 0; u < plan.flights[f].count; ++u) order.push_back(plan.flights[f].first + u);
  }
  // Each planned allocation's predecessors: the allocations that last held some of its bytes
  // before it (in allocation order). A replay gives it only when they are all dead; as every
  // allocation it gave before was checked so, every earlier one sharing its bytes is then dead.
  // The carried allocations hold their bytes when a replay starts.
  std::map<int64_t, std::pair<int64_t, uint32_t>> owner;  // start -> (end, allocation)
  for (const uint32_t i : order) {
    const MemoryPlan::Slot& s = plan.slots[i];
    if (s.offset < 0 || !s.carried) continue;
    owner.emplace(s.offset,
                  std::make_pair(s.offset + static_cast<int64_t>(
                                                dtensor::detail::cpu_allocation_size(s.nbytes)),
                                 static_cast<uint32_t>(i)));
  }
  for (const uint32_t i : order) {
    MemoryPlan::Slot& s = plan.slots[i];
    if (s.offset < 0) continue;
    const int64_t lo = s.offset,
                  hi = lo + static_cast<int64_t>(dtensor::detail::cpu_allocation_size(s.nbytes));
    s.preds_begin = static_cast<uint32_t>(plan.preds.size());
    auto it = owner.upper_bound(lo);
    if (it != owner.begin()) --it;
    while (it != owner.end() && it->first < hi) {
      const int64_t a = it->first, b = it->second.first;
      const uint32_t who = it->second.second;
      if (b <= lo) {
        ++it;
        continue;
      }
      if (std::find(plan.preds.begin() + s.preds_begin, plan.preds.end(), who) ==
          plan.preds.end()) {
        plan.preds.push_back(who);
      }
      it = owner.erase(it);
      if (a < lo) owner.emplace(a, std::make_pair(lo, who));
      if (b > hi) it = owner.emplace(hi, std::make_pair(b, who)).first;
    }
    owner.emplace(lo, std::make_pair(hi, static_cast<uint32_t>(i)));
    s.preds_count = static_cast<uint32_t>(plan.preds.size()) - s.preds_begin;
  }
  return plan;
}

void ReplayPool::recycle(Tensor& t) {
  // Planned CPU memory goes back to the plan by itself (its storage's last reference).
  if (count_ < limit_ && t.defined() && (mode_ == Mode::kExact || !t.device().is_cpu()) &&
      t.storage().sole_owner()) {
    const Storage& s = t.storage();
    dtensor::detail::note_storage_kept(s);
    SizeClass& c = classes_[Key{s.nbytes(), s.device()}];
    c.kept.push_back(s);
    --c.drawn;
    ++count_;
    bytes_.fetch_add(static_cast<int64_t>(s.nbytes()), std::memory_order_relaxed);
  }
  // Destroyed and made again empty in place (assigning an empty Tensor would copy its unused
  // inline shape storage too).
  std::destroy_at(&t);
  std::construct_at(&t);
}

void ReplayPool::start() {
  next_ = 0;
  deviated_ = false;
  serving_ = false;
  if (limit_ == 0 || mode_ == Mode::kExact) return;
  landed_.assign(flight_count_, 0);
  land_checked_ = 0;
  if (mode_ == Mode::kRecord) {
    recording_ = new Recording(flight_count_);
    if (previous_ != nullptr) previous_->follow(recording_);
    return;
  }
  // A storage of the arena the plan does not carry is still alive: its memory is not the plan's.
  if (arena_ != nullptr && arena_->transient_live() > 0) drop_arena();
  if (plan_.arena_bytes == 0) return;  // nothing to plan
  if (arena_ == nullptr) {
    // The arena itself is the allocator's (not an outer replay's pool).
    dtensor::detail::StoragePool* outer = dtensor::detail::set_storage_pool(nullptr);
    Storage block = Storage::allocate(static_cast<size_t>(plan_.arena_bytes), kCpu);
    dtensor::detail::set_storage_pool(outer);
    arena_ = new Arena(plan_, std::move(block));
  } else {
    uncache_arena();
  }
  serving_ = true;
}

Storage ReplayPool::take(size_t nbytes, Device device) {
  if (device.is_cpu()) {
    if (recording_ != nullptr) return recording_->allocate(nbytes);
    if (arena_ != nullptr && mode_ == Mode::kPlanned) return take_planned(nbytes);
  }
  return take_kept(nbytes, device);
}

Storage ReplayPool::take_planned(size_t nbytes) {
  const size_t i = next_++;
  if (!serving_.load(std::memory_order_relaxed)) return Storage();
  const size_t replay_slots = plan_.flights.empty() ? plan_.slots.size() : plan_.flights[0].first;
  if (i >= replay_slots || plan_.slots[i].nbytes != nbytes) {
    deviate();  // another allocation than planned: the rest of the replay is unplanned
    return Storage();
  }
  // The tasks planned to be waited for before this allocation were (their memory may be its).
  for (; land_checked_ < plan_.land_order.size() &&
         plan_.flights[plan_.land_order[land_checked_]].landed <= static_cast<int64_t>(i);
       ++land_checked_) {
    if (landed_[plan_.land_order[land_checked_]] == 0) {
      deviate();
      return Storage();
    }
  }
  if (plan_.slots[i].offset < 0) return Storage();  // the allocator's (it outlives the replay)
  Storage s = arena_->give(plan_, i);
  if (!s.defined()) deviate();  // memory the plan reuses is still in use
  return s;
}

void ReplayPool::issued(uint32_t f) {
  if (recording_ != nullptr) recording_->issued(f);
  if (mode_ != Mode::kPlanned || !serving_.load(std::memory_order_relaxed)) return;
  // Issued at another point than planned: its allocations' planned memory may still be in use.
  if (f >= plan_.flights.size() || plan_.flights[f].issued != static_cast<int64_t>(next_))
    deviate();
}

void ReplayPool::landed(uint32_t f) {
  if (recording_ != nullptr) recording_->landed(f);
  if (f < landed_.size()) landed_[f] = 1;
}

Storage ReplayPool::take_flight(uint32_t f, uint32_t index, size_t nbytes, Device device) {
  // recording_, mode_ and arena_ change only between replays (the replay waits for its tasks).
  if (!device.is_cpu()) return Storage();
  if (recording_ != nullptr) return recording_->allocate_flight(f, nbytes);
  if (mode_ != Mode::kPlanned || arena_ == nullptr || !serving_.load(std::memory_order_relaxed)) {
    return Storage();
  }
  if (f >= plan_.flights.size() || index >= plan_.flights[f].count ||
      plan_.slots[plan_.flights[f].first + index].nbytes != nbytes) {
    deviate();
    return Storage();
  }
  const size_t slot = plan_.flights[f].first + index;
  if (plan_.slots[slot].offset < 0) return Storage();
  Storage s = arena_->give(plan_, slot);
  if (!s.defined()) deviate();
  return s;
}

FlightScope::FlightScope(ReplayPool* pool, uint32_t f) : pool_(pool), flight_(f) {
  if (pool_ == nullptr) return;
  previous_ = dtensor::detail::set_storage_pool(this);
  previous_recording_ = t_flight_recording;
  previous_flight_ = t_flight;
  t_flight_recording = pool_->recording_;
  t_flight = f;
}

FlightScope::~FlightScope() {
  if (pool_ == nullptr) return;
  dtensor::detail::set_storage_pool(previous_);
  t_flight_recording = previous_recording_;
  t_flight = previous_flight_;
}

Storage ReplayPool::take_kept(size_t nbytes, Device device) {
  // Counted even when none is kept: the next replay finds one (trim keeps what was asked for).
  SizeClass& c = classes_[Key{nbytes, device}];
  if (++c.drawn > c.most_drawn) c.most_drawn = c.drawn;
  if (c.kept.empty()) return Storage();
  Storage s = std::move(c.kept.back());
  c.kept.pop_back();
  --count_;
  bytes_.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  s.bump_version();  // new contents: nothing may take it for the dead value's memory
  dtensor::detail::note_storage_reused(s);
  return s;
}

void ReplayPool::shrink(const Key& key, SizeClass& c, size_t keep) {
  while (c.kept.size() > keep) {
    dtensor::detail::note_storage_reused(c.kept.back());  // then freed
    c.kept.pop_back();
    --count_;
    bytes_.fetch_sub(static_cast<int64_t>(key.nbytes), std::memory_order_relaxed);
  }
}

void ReplayPool::uncache_arena() {
  if (cached_ == 0) return;
  dtensor::detail::note_storage_reused(
      Storage::from_blob(arena_->block().data(), static_cast<size_t>(cached_), kCpu));
  bytes_.fetch_sub(cached_, std::memory_order_relaxed);
  cached_ = 0;
}

void ReplayPool::drop_arena() {
  if (arena_ == nullptr) return;
  uncache_arena();
  arena_->unref();
  arena_ = nullptr;
}

void ReplayPool::trim(bool complete) {
  for (auto& [key, c] : classes_) {
    shrink(key, c, static_cast<size_t>(c.most_drawn));
    c.drawn = c.most_drawn = 0;
  }
  if (recording_ != nullptr) {
    // Two replays are recorded: the plan is the first one's, with the frees of its allocations
    // the second made (carried over), when both made the same allocations.
    recording_->finish();
    if (previous_ != nullptr) previous_->follow(nullptr);
    if (complete && previous_ != nullptr) {
      if (previous_->same_sizes(*recording_)) {
        plan_ = previous_->plan();
        plan_ready_ = true;
        mode_ = Mode::kPlanned;  // the next replay makes the arena
      } else if (++plans_failed_ >= kMaxPlans) {
        mode_ = Mode::kExact;  // replays that differ from one to the next
      }
    }
    if (previous_ != nullptr) previous_->unref();
    previous_ = nullptr;
    if (complete && mode_ == Mode::kRecord) {
      previous_ = recording_;  // the next replay records the second
    } else {
      recording_->unref();
    }
    recording_ = nullptr;
    return;
  }
  if (mode_ != Mode::kPlanned) return;
  serving_ = false;
  if (deviated_) {
    ++deviations_;
    drop_arena();
    plan_ready_ = false;
    mode_ = ++plans_failed_ >= kMaxPlans ? Mode::kExact : Mode::kRecord;
    return;
  }
  // Between replays the arena is cached but for the carried values alive in it (held, as the
  // eager step holds them: the gradients).
  if (arena_ != nullptr && cached_ == 0) {
    cached_ = plan_.arena_bytes - arena_->carried_live_bytes(plan_);
    if (cached_ > 0) {
      dtensor::detail::note_storage_kept(
          Storage::from_blob(arena_->block().data(), static_cast<size_t>(cached_), kCpu));
      bytes_.fetch_add(cached_, std::memory_order_relaxed);
    }
  }
}

void ReplayPool::release() {
  begin_use();
  release_all();
  end_use();
}

void ReplayPool::release_all() {
  for (auto& [key, c] : classes_) shrink(key, c, 0);
  drop_arena();
}

ReplayPool::~ReplayPool() {
  dtensor::detail::unregister_storage_pool(this);  // no release may reach it from now on
  release_all();
  if (recording_ != nullptr) recording_->unref();
  if (previous_ != nullptr) {
    previous_->follow(nullptr);
    previous_->unref();
  }
}

}  // namespace dtensor::compiler
