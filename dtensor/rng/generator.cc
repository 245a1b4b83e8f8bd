#include "dtensor/rng/generator.h"

#include <array>
#include <atomic>
#include <memory>

#include "dtensor/config.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/thread_token.h"

namespace dtensor {

Generator::Generator(uint64_t seed, Device device) : device_(device) {
  state_.seed = seed;
}

Generator::Generator(const Generator& other) : state_(other.state()), device_(other.device_) {}

Generator& Generator::operator=(const Generator& other) {
  if (this != &other) {
    const GeneratorState s = other.state();
    std::lock_guard<std::mutex> lock(mu_);
    state_ = s;
    device_ = other.device_;
    thread_ = 0;
  }
  return *this;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.seed;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.offset;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = 0;
  state_.seed = seed;
  state_.offset = 0;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = 0;
  state_.offset = offset;
}

void Generator::set_state(const GeneratorState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = 0;
  state_ = s;
}

uint64_t Generator::reserve(uint64_t words) {
  return reserve_state(words).offset;
}

GeneratorState Generator::reserve_state(uint64_t words) {
  // A replay would draw the same numbers again: random ops cannot be captured yet.
  detail::refuse_in_capture("a random op (it draws from a Generator)", /*even_inside=*/true);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t start = (state_.offset + 3) & ~uint64_t{3};
  state_.offset = start + ((words + 3) & ~uint64_t{3});
  return GeneratorState{state_.seed, start};
}

void Generator::claim_thread(std::string_view op) {
  const uint64_t me = detail::this_thread_token();
  std::lock_guard<std::mutex> lock(mu_);
  DT_CHECK(thread_ == 0 || thread_ == me,
           "[%s] the default %s generator was used by another thread for DTensor random ops "
           "since it was last seeded: the ranks would draw in different orders and Replicate or "
           "sharded values would differ across ranks. Use one Generator per thread (the gen "
           "argument), or call manual_seed on this thread first",
           op, device_.str());
  thread_ = me;
}

namespace {

constexpr int kMaxCudaDevices = 64;

struct DefaultGenerators {
  std::mutex mu;  // guards creation of the CUDA generators and `seed`
  uint64_t seed = kDefaultRngSeed;
  Generator cpu{kDefaultRngSeed, Device()};
  std::array<std::unique_ptr<Generator>, kMaxCudaDevices> cuda;
};

DefaultGenerators& defaults() {
  static DefaultGenerators* d = new DefaultGenerators();  // never destroyed: usable at exit
  return *d;
}

}  // namespace

Generator& default_generator(Device device) {
  DefaultGenerators& d = defaults();
  if (device.is_cpu()) return d.cpu;
  DT_CHECK(DTENSOR_HAVE_CUDA,
           "[default_generator] device %s requested but dtensor was built without CUDA",
           device.str());
  const int n = cuda_device_count();
  DT_CHECK(device.index >= 0 && device.index < n && device.index < kMaxCudaDevices,
           "[default_generator] device %s is not visible (%d CUDA devices)", device.str(), n);
  std::lock_guard<std::mutex> lock(d.mu);
  auto& slot = d.cuda[device.index];
  if (!slot) slot = std::make_unique<Generator>(d.seed, device);
  return *slot;
}

void manual_seed(uint64_t seed) {
  DefaultGenerators& d = defaults();
  std::lock_guard<std::mutex> lock(d.mu);
  d.seed = seed;
  d.cpu.manual_seed(seed);
  for (auto& g : d.cuda) {
    if (g) g->manual_seed(seed);
  }
}

uint64_t initial_seed() {
  DefaultGenerators& d = defaults();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.seed;
}

RNGStateGuard::RNGStateGuard() {
  Generator& cpu = default_generator(Device());
  saved_.emplace_back(&cpu, cpu.state());
  const int n = cuda_device_count();
  for (int i = 0; i < n && i < kMaxCudaDevices; ++i) {
    Generator& g = default_generator(Device(DeviceType::kCUDA, i));
    saved_.emplace_back(&g, g.state());
  }
}

RNGStateGuard::RNGStateGuard(std::initializer_list<Device> devices) {
  Generator& cpu = default_generator(Device());
  saved_.emplace_back(&cpu, cpu.state());
  for (const Device& dev : devices) {
    if (dev.is_cpu()) continue;
    Generator& g = default_generator(dev);
    saved_.emplace_back(&g, g.state());
  }
}

RNGStateGuard::RNGStateGuard(Generator& gen) {
  saved_.emplace_back(&gen, gen.state());
}

RNGStateGuard::~RNGStateGuard() {
  for (auto& [gen, state] : saved_) gen->set_state(state);
}

}  // namespace dtensor
