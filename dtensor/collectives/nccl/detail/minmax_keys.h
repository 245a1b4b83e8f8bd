// Order keys for floating max / min over NCCL that propagate NaN.
//
// NCCL reduces floating max and min with fmax / fmin, which return the other operand when one
// is NaN, so a NaN on one rank disappears from the result: amax of a sharded tensor holding a
// NaN, or clip_grad_norm_'s inf-norm, would come out finite where the single-device op and the
// MPI backend (mpi_types.cc's MaxF / MinF) give NaN. NCCL's integer max / min have no such
// hole, so the NCCL backend reduces floats as integer keys instead:
//   key(x) = x's bits as a signed integer, with the bits below the sign flipped when it is
//            negative,
// which orders keys as the values (-inf < ... < -0 < +0 < ... < +inf), NaN first made the
// extreme the op picks: a positive NaN lies above +inf (max), a negative one below -inf (min).
// 16-bit types widen to 32-bit keys (NCCL has no 16-bit integer type). Header-only and
// host / device, so the CPU tests check the keys that the CUDA kernels use.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

// Bits: the float's storage (uint16_t, uint32_t, uint64_t); Key: int32_t, or int64_t for
// 64-bit floats. inf_bits: the bits of +inf (a larger magnitude is a NaN).
template <typename Key, typename Bits>
DT_HOST_DEVICE inline Key minmax_key(Bits bits, Bits inf_bits, bool is_max) {
  static_assert(std::is_unsigned_v<Bits> && std::is_signed_v<Key> && sizeof(Key) >= sizeof(Bits));
  constexpr Bits kSign = static_cast<Bits>(Bits(1) << (sizeof(Bits) * 8 - 1));
  const Bits magnitude = static_cast<Bits>(bits & static_cast<Bits>(~kSign));
  if (magnitude > inf_bits) bits = is_max ? magnitude : static_cast<Bits>(bits | kSign);
  const Key k = static_cast<std::make_signed_t<Bits>>(bits);  // sign-extended to Key
  return k >= 0 ? k : static_cast<Key>(k ^ static_cast<Key>(kSign - 1));
}

// The float bits back from a key (the flip undoes itself; the widened bits are dropped).
template <typename Bits, typename Key>
DT_HOST_DEVICE inline Bits minmax_bits(Key k) {
  constexpr Key kLow = static_cast<Key>((Bits(1) << (sizeof(Bits) * 8 - 1)) - 1);
  return static_cast<Bits>(k >= 0 ? k : static_cast<Key>(k ^ kLow));
}

// +inf's bits per type.
inline constexpr uint16_t kInfBitsHalf = 0x7C00;
inline constexpr uint16_t kInfBitsBFloat16 = 0x7F80;
inline constexpr uint32_t kInfBitsFloat = 0x7F800000u;
inline constexpr uint64_t kInfBitsDouble = 0x7FF0000000000000ull;

}  // namespace dtensor::detail
