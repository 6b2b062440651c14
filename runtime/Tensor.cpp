//===- Tensor.cpp - host tensors and dtypes -------------------------------===//

#include "kiln/runtime.h"

#include "runtime/Cuda.h"
#include "runtime/Device.h"
#include "runtime/HostMemory.h"
#include "runtime/Transfer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace kiln {

namespace {
struct DTypeEntry {
  DType dtype;
  const char *name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::F32, "f32", 4},
    {DType::F64, "f64", 8},
    {DType::F16, "f16", 2},
    {DType::I8, "i8", 1},
    {DType::I16, "i16", 2},
    {DType::I32, "i32", 4},
    {DType::I64, "i64", 8},
    {DType::U8, "u8", 1},
    {DType::Bool, "bool", 1},
    {DType::U16, "u16", 2},
    {DType::U32, "u32", 4},
    {DType::U64, "u64", 8},
    {DType::BF16, "bf16", 2},
    {DType::F8E4M3FN, "f8e4m3fn", 1},
    {DType::F8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::F8E5M2, "f8e5m2", 1},
    {DType::F8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::I4, "i4", 1},
    {DType::U4, "u4", 1},
    {DType::I2, "i2", 1},
    {DType::U2, "u2", 1},
};
} // namespace

const char *dtypeName(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.name;
  return "?";
}

size_t dtypeSize(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.size;
  return 0;
}

DType parseDType(const std::string &name) {
  for (const DTypeEntry &e : kDTypes)
    if (name == e.name)
      return e.dtype;
  throw Error("unknown dtype '" + name + "'");
}

namespace {
// A binary float of 1 sign, `e` exponent and `m` mantissa bits with bias
// `bias`. IEEE-like formats (f16, bf16, f8e5m2) use the top exponent for
// Inf/NaN; "fn" formats (f8e4m3fn) only the all-ones pattern for NaN;
// "fnuz" formats have NaN at 0x80 and no infinity or negative zero.
enum class Special { Ieee, Fn, Fnuz };
double decodeFloat(uint32_t bits, int e, int m, int bias, Special special) {
  uint32_t sign = bits >> (e + m) & 1, exponent = bits >> m & ((1u << e) - 1),
           mantissa = bits & ((1u << m) - 1);
  uint32_t topExponent = (1u << e) - 1;
  if (special == Special::Fnuz && sign && !exponent && !mantissa)
    return NAN;
  if (special == Special::Ieee && exponent == topExponent)
    return mantissa ? NAN : sign ? -INFINITY : INFINITY;
  if (special == Special::Fn && exponent == topExponent &&
      mantissa == (1u << m) - 1)
    return NAN;
  double value = exponent ? std::ldexp(1.0 + std::ldexp(double(mantissa), -m),
                                       int(exponent) - bias)
                          : std::ldexp(double(mantissa), 1 - bias - m);
  return sign ? -value : value;
}
} // namespace

double elementAsDouble(DType dtype, const void *data, size_t i) {
  auto at = [&](auto type) {
    return static_cast<const decltype(type) *>(data)[i];
  };
  switch (dtype) {
  case DType::F32:
    return at(float());
  case DType::F64:
    return at(double());
  case DType::F16:
    return decodeFloat(at(uint16_t()), 5, 10, 15, Special::Ieee);
  case DType::BF16:
    return decodeFloat(at(uint16_t()), 8, 7, 127, Special::Ieee);
  case DType::F8E4M3FN:
    return decodeFloat(at(uint8_t()), 4, 3, 7, Special::Fn);
  case DType::F8E4M3FNUZ:
    return decodeFloat(at(uint8_t()), 4, 3, 8, Special::Fnuz);
  case DType::F8E5M2:
    return decodeFloat(at(uint8_t()), 5, 2, 15, Special::Ieee);
  case DType::F8E5M2FNUZ:
    return decodeFloat(at(uint8_t()), 5, 2, 16, Special::Fnuz);
  case DType::I8:
  case DType::I4:
  case DType::I2:
    return at(int8_t());
  case DType::I16:
    return at(int16_t());
  case DType::I32:
    return at(int32_t());
  case DType::I64:
    return static_cast<double>(at(int64_t()));
  case DType::U8:
  case DType::U4:
  case DType::U2:
  case DType::Bool:
    return at(uint8_t());
  case DType::U16:
    return at(uint16_t());
  case DType::U32:
    return at(uint32_t());
  case DType::U64:
    return static_cast<double>(at(uint64_t()));
  }
  return NAN;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  std::string s = dtypeName(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i] < 0 ? "?" : std::to_string(shape[i]));
  return s + "]";
}

int64_t Tensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

Tensor Tensor::empty(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  for (int64_t d : t.shape_)
    if (d < 0)
      throw Error("negative dimension in " + describe(dtype, t.shape_));
  size_t bytes = t.nbytes();
  void *p = host::allocate(bytes);
  if (!p)
    throw Error("out of memory allocating " + describe(dtype, t.shape_));
  std::memset(p, 0, bytes);
  t.data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), std::free);
  return t;
}

Tensor Tensor::fromBytes(DType dtype, std::vector<int64_t> shape,
                         const void *data, size_t nbytes) {
  Tensor t = empty(dtype, std::move(shape));
  if (nbytes != t.nbytes())
    throw Error(describe(dtype, t.shape()) + " needs " +
                std::to_string(t.nbytes()) + " bytes, got " +
                std::to_string(nbytes));
  if (nbytes)
    std::memcpy(t.raw(), data, nbytes);
  return t;
}

void *Tensor::onDevice() const {
  throw Error(describe(dtype_, shape_) + " is on " + device_ +
              ": read it with .to(\"cpu\")");
}

namespace {
// Copies `t`'s bytes to host memory at `dst`.
void readInto(const Tensor &t, void *dst, device::Device *home) {
  size_t bytes = t.nbytes();
  if (!bytes)
    return;
  if (!home) {
    std::memcpy(dst, t.raw(), bytes);
    return;
  }
  transfer::Streams streams;
  transfer::copy(dst, nullptr, t.devicePointer(), home, bytes, streams);
  streams.synchronize("cannot copy a tensor to the host");
}
} // namespace

Tensor Tensor::to(const std::string &name) const {
  device::Name target = device::parseBindable(name);
  if (target.text == device_)
    return *this;
  auto *home = static_cast<device::Device *>(home_.get());
  if (!device::info(target.kind).cuda) {
    Tensor t = Tensor::empty(dtype_, shape_);
    readInto(*this, t.raw(), home);
    t.device_ = target.text;
    return t;
  }
  std::shared_ptr<device::Device> there = device::tensorDevice(target.text);
  if (there->name() == device_)
    return *this; // cuda:auto picked where it already is
  size_t bytes = std::max<size_t>(nbytes(), 1);
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.data_ = std::shared_ptr<uint8_t>(
      static_cast<uint8_t *>(there->allocate(bytes)),
      [there, bytes](uint8_t *p) { there->release(p, bytes); });
  t.device_ = there->name();
  t.home_ = there;
  if (nbytes()) {
    std::vector<uint8_t> staging;
    const void *source = isHost() ? raw() : nullptr;
    if (!source) {
      staging.resize(nbytes());
      readInto(*this, staging.data(), home);
      source = staging.data();
    }
    transfer::Streams streams;
    transfer::copy(t.data_.get(), there.get(), source, nullptr, nbytes(),
                   streams);
    streams.synchronize("cannot copy a tensor to " + t.device_);
  }
  return t;
}

} // namespace kiln
