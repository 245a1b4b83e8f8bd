#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"
#include "dtensor/tensor/storage.h"

using namespace dtensor;

namespace {
int g_deleted = 0;
void count_delete(void* p, void* ctx) {
  ++g_deleted;
  *static_cast<int*>(ctx) = 42;
}
}  // namespace

TEST_CASE("storage: allocate is 64-byte aligned, any size including zero", "[storage]") {
  const size_t n = GENERATE(0, 1, 63, 64, 65, 1000, 1 << 20);
  Storage s = Storage::allocate(n, Device());
  CHECK(s.defined());
  CHECK(s.nbytes() == n);
  CHECK(s.device() == Device());
  CHECK(s.data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(s.data()) % 64 == 0);
  if (n > 0) {
    std::memset(s.data(), 0xab, n);  // writable over its whole size (ASan checks the bound)
    CHECK(static_cast<unsigned char*>(s.data())[n - 1] == 0xab);
  }
}

TEST_CASE("storage: sharing and from_blob deleters", "[storage]") {
  Storage empty;
  CHECK_FALSE(empty.defined());
  CHECK(empty.data() == nullptr);
  CHECK(empty.nbytes() == 0);

  Storage a = Storage::allocate(128, Device());
  Storage b = a;
  CHECK(a.is_same(b));
  CHECK(a.use_count() == 2);
  CHECK_FALSE(a.is_same(Storage::allocate(128, Device())));

  int buf[4] = {1, 2, 3, 4};
  int ctx = 0;
  g_deleted = 0;
  {
    Storage s = Storage::from_blob(buf, sizeof(buf), Device(), &count_delete, &ctx);
    CHECK(s.data() == buf);
    Storage t = s;
    CHECK(g_deleted == 0);
  }
  CHECK(g_deleted == 1);
  CHECK(ctx == 42);
  {
    Storage s = Storage::from_blob(buf, sizeof(buf), Device());  // caller keeps ownership
  }
  CHECK(buf[3] == 4);
  REQUIRE_THROWS_AS(Storage::from_blob(nullptr, 16, Device()), Error);
  CHECK(Storage::from_blob(nullptr, 0, Device()).defined());
}

TEST_CASE("storage: memory_stats counts allocator bytes, release_data and reallocate_data",
          "[storage]") {
  const MemoryStats before = memory_stats();
  reset_peak_memory_stats();
  CHECK(memory_stats().allocations == 0);
  {
    Storage s = Storage::allocate(1000, Device());  // rounded to 1024
    CHECK(memory_stats().current_bytes == before.current_bytes + 1024);
    s.release_data();
    CHECK_FALSE(s.has_data());
    CHECK(s.data() == nullptr);
    CHECK(s.nbytes() == 1000);
    CHECK(memory_stats().current_bytes == before.current_bytes);
    s.reallocate_data();
    REQUIRE(s.has_data());
    std::memset(s.data(), 1, 1000);
    CHECK(memory_stats().current_bytes == before.current_bytes + 1024);
    CHECK(memory_stats().peak_bytes == before.current_bytes + 1024);
    CHECK(memory_stats().allocations == 2);
    s.release_data();  // destroyed released: nothing freed twice
  }
  CHECK(memory_stats().current_bytes == before.current_bytes);
  int ctx = 0;
  char buf[8];
  Storage blob = Storage::from_blob(buf, 8, Device(), nullptr, &ctx);
  CHECK_THROWS_WITH(blob.release_data(), Catch::Contains("[Storage::release_data]"));
}

// The large-block cache: a freed block of >= 128 KiB is kept (cached_bytes, not current_bytes)
// and handed back to the next allocation of that size; smaller blocks and other sizes are not
// affected; empty_cpu_cache gives them back. (Sanitizer builds keep nothing: only the counts are
// checked there.)
TEST_CASE("storage: freed large CPU blocks are reused per exact size", "[storage]") {
  empty_cpu_cache();
  const MemoryStats before = memory_stats();
  CHECK(before.cached_bytes == 0);
  const size_t big = size_t{3} << 20;
  void* first = nullptr;
  {
    Storage s = Storage::allocate(big, Device());
    first = s.data();
    std::memset(s.data(), 7, big);
    CHECK(memory_stats().current_bytes == before.current_bytes + static_cast<int64_t>(big));
  }
  CHECK(memory_stats().current_bytes == before.current_bytes);
  const bool caching = memory_stats().cached_bytes > 0;
  if (caching) {
    CHECK(memory_stats().cached_bytes == static_cast<int64_t>(big));
    {
      Storage other = Storage::allocate(big + 4096, Device());  // another size: not this block
      CHECK(other.data() != first);
      Storage again = Storage::allocate(big, Device());
      CHECK(again.data() == first);
      CHECK(memory_stats().cached_bytes == 0);
      CHECK(memory_stats().current_bytes ==
            before.current_bytes + static_cast<int64_t>(2 * big + 4096));
    }
    CHECK(memory_stats().cached_bytes == static_cast<int64_t>(2 * big + 4096));
  }
  {
    Storage small = Storage::allocate(1000, Device());  // below 128 KiB: never cached
  }
  CHECK(memory_stats().cached_bytes == (caching ? static_cast<int64_t>(2 * big + 4096) : 0));
  empty_cpu_cache();
  CHECK(memory_stats().cached_bytes == 0);
  CHECK(memory_stats().current_bytes == before.current_bytes);
}

TEST_CASE("storage: try_swap_data exchanges allocator memory only, for every view", "[storage]") {
  const Tensor a = full({4, 3}, 1.0);
  const Tensor b = full({4, 3}, 2.0);
  const Tensor a_view = a.narrow(0, 1, 2);  // shares a's storage
  const uint32_t va = a.storage().version();
  REQUIRE(a.storage().try_swap_data(b.storage()));
  CHECK(equal(a, full({4, 3}, 2.0)));
  CHECK(equal(b, full({4, 3}, 1.0)));
  CHECK(equal(a_view, full({2, 3}, 2.0)));
  CHECK(a.storage().version() == va + 1);
  // Refused, nothing changed: another size, the same storage, memory the caller owns.
  const Tensor c = full({5}, 3.0);
  CHECK(!a.storage().try_swap_data(c.storage()));
  CHECK(!a.storage().try_swap_data(a.storage()));
  std::vector<float> mine(12, 4.0f);
  const Storage blob = Storage::from_blob(mine.data(), 12 * sizeof(float), Device());
  CHECK(!a.storage().try_swap_data(blob));
  CHECK(!blob.try_swap_data(a.storage()));
  CHECK(equal(a, full({4, 3}, 2.0)));
  CHECK(mine[0] == 4.0f);
}

TEST_CASE("storage: sole_owner means one handle to allocator memory", "[storage]") {
  Tensor a = full({4, 3}, 1.0);
  CHECK(a.storage().sole_owner());
  {
    const Tensor view = a.narrow(0, 1, 2);  // a view shares the storage
    CHECK(!a.storage().sole_owner());
    CHECK(!view.storage().sole_owner());
  }
  CHECK(a.storage().sole_owner());
  const Tensor copy = a;  // so does a copy of the handle
  CHECK(!a.storage().sole_owner());
  // Memory the caller owns is never the library's to reuse, even through one handle.
  std::vector<float> mine(12, 4.0f);
  const Storage blob = Storage::from_blob(mine.data(), 12 * sizeof(float), Device());
  CHECK(!blob.sole_owner());
  CHECK(!Storage().sole_owner());
  // Memory released (FSDP's resharded parameters) is nothing to reuse.
  Tensor b = full({4, 3}, 1.0);
  b.storage().release_data();
  CHECK(!b.storage().sole_owner());
  b.storage().reallocate_data();
  CHECK(b.storage().sole_owner());
}
