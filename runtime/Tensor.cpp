//===- Tensor.cpp - host tensors and dtypes -------------------------------===//

#include "kiln/runtime.h"

#include "runtime/Cuda.h"
#include "runtime/Device.h"

#include <algorithm>
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
    {DType::F32, "f32", 4}, {DType::F64, "f64", 8}, {DType::F16, "f16", 2},
    {DType::I8, "i8", 1},   {DType::I16, "i16", 2}, {DType::I32, "i32", 4},
    {DType::I64, "i64", 8}, {DType::U8, "u8", 1},   {DType::Bool, "bool", 1},
    {DType::U16, "u16", 2}, {DType::U32, "u32", 4}, {DType::U64, "u64", 8},
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
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    throw Error("out of memory allocating " + describe(dtype, t.shape_));
  std::memset(p, 0, rounded ? rounded : 64);
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
// A stream of `context` for one synchronous copy, returned to its pool
// whatever happens.
struct ScopedStream {
  explicit ScopedStream(cuda::Context &context)
      : context(context), stream(context.acquireStream()) {}
  ~ScopedStream() { context.releaseStream(stream); }
  cuda::Context &context;
  cuda::CUstream stream;
};

// Copies `t`'s bytes to host memory at `dst`.
void readInto(const Tensor &t, void *dst, device::Device *home) {
  size_t bytes = t.nbytes();
  if (!bytes)
    return;
  if (!home) {
    std::memcpy(dst, t.raw(), bytes);
    return;
  }
  cuda::Context &context = *home->cuda();
  ScopedStream s(context);
  context.toHost(dst,
                 static_cast<cuda::CUdeviceptr>(
                     reinterpret_cast<uintptr_t>(t.devicePointer())),
                 bytes, s.stream);
  context.synchronize(s.stream, "cannot copy a tensor to the host");
}
} // namespace

Tensor Tensor::to(const std::string &name) const {
  device::Name target = device::parseBindable(name);
  if (target.text == device_)
    return *this;
  auto *home = static_cast<device::Device *>(home_.get());
  if (target.kind != device::Kind::Cuda) {
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
    cuda::Context &context = *there->cuda();
    ScopedStream s(context);
    context.toDevice(static_cast<cuda::CUdeviceptr>(
                         reinterpret_cast<uintptr_t>(t.data_.get())),
                     source, nbytes(), s.stream);
    context.synchronize(s.stream, "cannot copy a tensor to " + t.device_);
  }
  return t;
}

} // namespace kiln
