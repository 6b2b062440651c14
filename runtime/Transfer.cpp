//===- Transfer.cpp - moving bytes between host and devices ---------------===//

#include "runtime/Transfer.h"

#include "kiln/runtime.h"

#include <cstring>

namespace kiln::transfer {

using device::Device;

Streams::~Streams() {
  bool clean = true;
  for (auto &[context, stream] : held_) {
    try {
      context->synchronize(stream, "releasing a stream");
      context->releaseStream(stream);
    } catch (const Error &) {
      // A failed stream is not reused; its context reports the error to
      // whoever synchronises next.
      clean = false;
    }
  }
  // A staging block a failed stream may still read is not reused.
  if (clean)
    releaseStaged();
}

void Streams::releaseStaged() {
  for (const Staged &s : staged_)
    s.context->releasePinned(s.block, s.bytes);
  staged_.clear();
  stagedBytes_ = 0;
}

cuda::CUstream Streams::of(Device &device) {
  cuda::Context *context = device.cuda();
  if (!context)
    throw Error(device.name() + ": not a cuda device");
  for (const auto &[c, stream] : held_)
    if (c == context)
      return stream;
  held_.emplace_back(context, context->acquireStream());
  return held_.back().second;
}

void Streams::synchronize(const std::string &what) {
  for (const auto &[context, stream] : held_)
    context->synchronize(stream, what);
  releaseStaged();
}

Device *streamDevice(Device *to, Device *from) {
  if (to && to->cuda())
    return to;
  return from && from->cuda() ? from : nullptr;
}

void copy(void *dst, Device *to, const void *src, Device *from, size_t bytes,
          Streams &streams) {
  if (!bytes)
    return;
  cuda::Context *target = to ? to->cuda() : nullptr;
  cuda::Context *source = from ? from->cuda() : nullptr;
  Device *on = streamDevice(to, from);
  if (!on) {
    std::memcpy(dst, src, bytes);
  } else if (!source) {
    bool stage = bytes >= cuda::Context::kStageMin &&
                 streams.stagedBytes() + bytes <= cuda::Context::kStageMax;
    void *block = stage ? target->pinned(bytes) : nullptr;
    if (block) {
      std::memcpy(block, src, bytes);
      streams.stage(target, block, bytes);
      src = block;
    }
    target->toDevice(devicePointer(dst), src, bytes, streams.of(*on));
  } else if (!target) {
    source->toHost(dst, devicePointer(src), bytes, streams.of(*on));
  } else if (target == source) {
    target->withinDevice(devicePointer(dst), devicePointer(src), bytes,
                         streams.of(*on));
  } else {
    target->fromPeer(devicePointer(dst), *source, devicePointer(src), bytes,
                     streams.of(*on));
  }
}

} // namespace kiln::transfer
