// The meta device (issue 46 item 2): tensors with sizes, strides and a dtype but no data, as
// PyTorch's device="meta". Creation allocates nothing, views are metadata, writes into a meta
// tensor only check their arguments, and reading one is refused.
#include <catch2/catch.hpp>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/tensor.h"

using namespace dtensor;

TEST_CASE("meta: the device parses, prints and compares", "[meta]") {
  CHECK(Device("meta") == Device(kMeta));
  CHECK(Device("meta").is_meta());
  CHECK(Device(kMeta, 3).index == 0);
  CHECK(Device(kMeta).str() == "meta");
  CHECK(device_type_name(kMeta) == "meta");
  CHECK_FALSE(Device().is_meta());
  CHECK_THROWS_WITH(Device("metal"), Catch::Contains("'meta'"));
}

TEST_CASE("meta: storage keeps its byte size, holds no memory, is not counted", "[meta]") {
  const MemoryStats before = memory_stats();
  {
    const Storage s = Storage::allocate(size_t{1} << 40, Device(kMeta));  // 1 TiB
    CHECK(s.defined());
    CHECK(s.nbytes() == size_t{1} << 40);
    CHECK(s.data() == nullptr);
    CHECK_FALSE(s.has_data());
    CHECK_FALSE(s.sole_owner());
    s.release_data();  // FSDP's resize to zero and back: nothing to do
    s.reallocate_data();
    CHECK(s.data() == nullptr);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.allocations == before.allocations);
}

TEST_CASE("meta: creation functions allocate nothing", "[meta]") {
  const TensorOptions meta(DType::kFloat32, Device(kMeta));
  const MemoryStats before = memory_stats();
  // 64 GiB each: only possible without storage.
  const Shape big{1 << 16, 1 << 18};
  const Tensor e = empty(big, meta);
  const Tensor z = zeros(big, meta);
  const Tensor o = ones(big, meta);
  const Tensor f = full(big, Scalar(2.5), meta);
  const Tensor c = z.clone();
  for (const Tensor& t : {e, z, o, f, c, zeros_like(e), empty_like(o)}) {
    CHECK(t.device().is_meta());
    CHECK(t.sizes() == big);
    CHECK(t.dtype() == DType::kFloat32);
    CHECK(t.nbytes() == (size_t{1} << 36));
    CHECK(t.storage().nbytes() == (size_t{1} << 36));
    CHECK(t.data_ptr() == nullptr);
  }
  const MemoryStats after = memory_stats();
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.allocations == before.allocations);
}

TEST_CASE("meta: views are metadata and share the storage", "[meta]") {
  const Tensor t = empty({4, 6, 8}, TensorOptions(DType::kFloat64, Device(kMeta)));
  const Tensor v = t.transpose(0, 2).narrow(1, 2, 3);
  CHECK(v.sizes() == Shape{8, 3, 4});
  CHECK(v.strides() == Shape{1, 8, 48});
  CHECK(v.storage_offset() == 16);
  CHECK(v.storage().is_same(t.storage()));
  CHECK(v.device().is_meta());
  CHECK(t.view({24, 8}).sizes() == Shape{24, 8});
  CHECK(t.reshape({-1}).sizes() == Shape{192});
  CHECK(v.reshape({-1}).device().is_meta());  // a copying reshape stays meta
  CHECK(t.unsqueeze(0).expand({2, 4, 6, 8}).sizes() == Shape{2, 4, 6, 8});
  CHECK(t.select(1, 5).sizes() == Shape{4, 8});
}

TEST_CASE("meta: writes check their arguments only, reads are refused", "[meta]") {
  Tensor m = empty({2, 3}, TensorOptions(DType::kFloat32, Device(kMeta)));
  const Tensor real = ones({2, 3});
  m.copy_(real);  // into meta: a no-op
  m.copy_(ones({3}));
  m.fill_(Scalar(1.0));
  m.zero_();
  CHECK(m.device().is_meta());
  CHECK_THROWS_WITH(m.copy_(ones({4})), Catch::Contains("cannot be broadcast"));
  CHECK_THROWS_WITH(m.expand({2, 3}).unsqueeze(0).expand({2, 2, 3}).fill_(Scalar(1.0)),
                    Catch::Contains("more than one element"));
  Tensor dst = zeros({2, 3});
  CHECK_THROWS_WITH(dst.copy_(m),
                    Catch::Contains("[copy_] [meta] src of shape [2, 3] has no data"));
  CHECK_THROWS_WITH(m.to(Device()), Catch::Contains("[meta]"));
  CHECK_THROWS_WITH(
      m.to_vector<float>(),
      Catch::Contains("[Tensor::to_vector] [meta] tensor of shape [2, 3] has no data"));
  CHECK_THROWS_WITH(m.narrow(1, 0, 1).narrow(0, 0, 1).item<float>(),
                    Catch::Contains("[Tensor::item] [meta] tensor of shape [1, 1] has no data"));
  CHECK_THROWS_WITH(m.at<float>({0, 0}), Catch::Contains("[meta]"));
  CHECK_THROWS_WITH(m.data<float>(), Catch::Contains("[meta] tensors have no data"));
  CHECK(m.to(DType::kFloat64).device().is_meta());  // a dtype conversion stays meta
}

TEST_CASE("meta: meta_memory_stats counts what the CPU allocator would hold", "[meta]") {
  const MemoryStats real0 = memory_stats();
  reset_peak_meta_memory_stats();
  const MemoryStats m0 = meta_memory_stats();
  {
    const Tensor a = empty({1000}, TensorOptions(DType::kFloat32, Device(kMeta)));  // 4,000 B
    const Tensor b = empty({10}, TensorOptions(DType::kFloat64, Device(kMeta)));    // 80 B
    const MemoryStats m1 = meta_memory_stats();
    // The CPU allocator's 64-byte rounding: 4,032 and 128.
    CHECK(m1.current_bytes - m0.current_bytes == 4032 + 128);
    CHECK(m1.allocations == 2);
    const Tensor v = a.narrow(0, 0, 10);  // a view allocates nothing
    CHECK(meta_memory_stats().current_bytes == m1.current_bytes);
  }
  {
    // FSDP's resize to zero and back: out of the count and back in.
    const Tensor g = empty({1000}, TensorOptions(DType::kFloat32, Device(kMeta)));
    const int64_t held = meta_memory_stats().current_bytes;
    g.storage().release_data();
    g.storage().release_data();  // twice: once out
    CHECK(meta_memory_stats().current_bytes == held - 4032);
    g.storage().reallocate_data();
    g.storage().reallocate_data();
    CHECK(meta_memory_stats().current_bytes == held);
    g.storage().release_data();  // destroyed released: not subtracted twice
  }
  const MemoryStats m2 = meta_memory_stats();
  CHECK(m2.current_bytes == m0.current_bytes);
  CHECK(m2.peak_bytes - m0.current_bytes == 4032 + 128);
  CHECK(memory_stats().current_bytes == real0.current_bytes);
}
