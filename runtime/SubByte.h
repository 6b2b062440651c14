//===- SubByte.h - ONNX's packed 2- and 4-bit integers ----------*- C++ -*-===//
//
// ONNX packs int4/uint4 two values a byte and int2/uint2 four, low bits
// first; kiln holds them one value a byte, sign- or zero-extended.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SUBBYTE_H
#define KILN_RUNTIME_SUBBYTE_H

#include <cstddef>
#include <cstdint>

namespace kiln::subbyte {

/// Bytes that hold `count` packed values of `bits` bits.
inline size_t packedSize(size_t count, unsigned bits) {
  size_t perByte = 8 / bits;
  return (count + perByte - 1) / perByte;
}

/// Value `i` of `packed`, extended to a byte.
inline uint8_t unpack(const uint8_t *packed, size_t i, unsigned bits,
                      bool isSigned) {
  size_t perByte = 8 / bits;
  unsigned v = packed[i / perByte] >> (i % perByte * bits) & ((1u << bits) - 1);
  if (isSigned && v >> (bits - 1))
    v |= 0xffu << bits;
  return static_cast<uint8_t>(v);
}

/// Packs `count` values (one a byte) into `packed` (packedSize bytes,
/// zeroed).
inline void pack(const uint8_t *values, size_t count, unsigned bits,
                 uint8_t *packed) {
  size_t perByte = 8 / bits;
  for (size_t i = 0; i < count; ++i)
    packed[i / perByte] |= static_cast<uint8_t>((values[i] & ((1u << bits) - 1))
                                                << (i % perByte * bits));
}

} // namespace kiln::subbyte

#endif // KILN_RUNTIME_SUBBYTE_H
