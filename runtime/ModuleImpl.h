//===- ModuleImpl.h - a loaded module, shared by load and run -----*- C++
//-*-===//
//
// Module.cpp loads (file, code, plan, binding, constants, PTX); Run.cpp runs
// (buffers, inline or on streams, transfers, launches). See both for the
// story.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_MODULEIMPL_H
#define KILN_RUNTIME_MODULEIMPL_H

#include "kiln/runtime.h"
#include "runtime/Artifact.h"
#include "runtime/Cuda.h"
#include "runtime/Device.h"
#include "runtime/Plan.h"
#include "runtime/Transfer.h"

#include <chrono>
#include <condition_variable>
#include <dlfcn.h>
#include <exception>
#include <mutex>

namespace kiln {

using device::Device;
using plan::ValueKind;

/// The events of one run on streams: which values are ready, how many of its
/// steps have not finished, and the first error.
/// An event recorded after GPU work, on the context of its stream.
struct GpuEvent {
  cuda::Context *context = nullptr;
  cuda::CUevent event = nullptr;
};

struct RunEvents {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> ready; // per value: its producer has run (or enqueued)
  /// Per root value: the event after the GPU work that writes it, when its
  /// producer enqueued that work rather than finishing it.
  std::vector<GpuEvent> written;
  size_t pending = 0;
  std::exception_ptr error;
  /// What the steps' GPU work uses until the run waits for every stream at
  /// its end: the streams, the scratch buffers, the events.
  std::vector<std::unique_ptr<transfer::Streams>> streams;
  std::vector<std::vector<device::Buffer>> scratch;
  std::vector<GpuEvent> recorded;
};

/// Collects the steps of a profiled run, from any thread.
struct Profiler {
  explicit Profiler(std::vector<ProfileEvent> &events) : events(events) {}
  void record(const plan::Step &step, const std::string &device,
              std::chrono::steady_clock::time_point begin);

  std::mutex mutex;
  std::vector<ProfileEvent> &events;
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
};

struct Module::Impl {
  std::string path;
  Tensor file; // the whole artifact, 64-byte aligned
  void *library = nullptr;
  plan::Plan plan;
  /// The shapes of every run when the plan has no dynamic dims.
  plan::Shapes staticShapes;
  std::vector<std::unique_ptr<Device>> devices; // the distinct bound ones
  std::vector<Device *> roleDevice;             // per role
  std::vector<device::Buffer> uploads;          // constants on devices
  std::vector<const void *> constants;          // per value
  /// Per step on a cuda device: the entry point of each launch; for a GEMM
  /// or conv, its stand-in's when its library does not load, else null.
  std::vector<std::vector<cuda::CUfunction>> functions;
  /// Roles all on one device and no copies: run on the calling thread.
  bool runsInline = true;
  /// Shapes depend on data steps compute, or on data a dims function must
  /// read back from a device: resolve them step by step (runStepByStep).
  bool stepByStep = false;
  /// Per step: the temps (roots) no later step reads, which go back to
  /// their device's memory once it has run, for later steps to reuse.
  std::vector<std::vector<size_t>> releaseAfter;
  /// Inline runs in host memory allocate each temp when a step first
  /// touches it and release it after its last step (releaseAfter); other
  /// plans that know every shape up front allocate every temp before the
  /// run (a step-by-step run releases them as an inline one does).
  bool allocatesLazily = false;
  /// Per step (stream plans): its stream and the values it waits for.
  struct Scheduled {
    device::Stream *stream = nullptr;
    std::vector<size_t> waits;
  };
  std::vector<Scheduled> schedule;
  mutable std::mutex enqueueMutex;

  ~Impl() {
    uploads.clear();
    devices.clear(); // joins the streams before the code goes away
    if (library)
      dlclose(library);
  }
  Error fail(const std::string &message) const {
    return Error(path + ": " + message);
  }
  Device &deviceOf(size_t value) const {
    return *roleDevice[plan.values[value].role];
  }
  void loadCode(const artifact::Parsed::Span &code);
  void prepare(const artifact::Parsed &parsed);
  void loadKernels(const artifact::Parsed &parsed);
  /// Runs (on a cuda device: enqueues) step `index` on the buffers of a run;
  /// `args` is space for the kernel arguments; `scratch` receives the
  /// step's scratch buffers, to be released once `streams` are synchronised.
  /// With a `profiler`, the step is synchronised and recorded.
  void execute(size_t index, const std::vector<void *> &buffers,
               const plan::Shapes &shapes, std::vector<void *> &args,
               transfer::Streams &streams, std::vector<device::Buffer> &scratch,
               Profiler *profiler) const;
  void executeStep(size_t index, const std::vector<void *> &buffers,
                   const plan::Shapes &shapes, std::vector<void *> &args,
                   transfer::Streams &streams,
                   std::vector<device::Buffer> &scratch) const;
  std::vector<Tensor> run(const std::vector<Tensor> &inputs,
                          Profiler *profiler) const;
  /// Points the graph inputs' buffers at `inputs`' memory or, on devices
  /// without host memory, at copies in `storage` enqueued on `streams`.
  void stageInputs(const std::vector<Tensor> &inputs,
                   const plan::Shapes &shapes, std::vector<void *> &buffers,
                   std::vector<device::Buffer> &storage,
                   transfer::Streams &streams) const;
  /// Per value: the graph inputs' and the constants' memory, else null.
  std::vector<void *> hostBuffers(const std::vector<Tensor> &inputs) const;
  /// Points each view (alias value) without a buffer at its base's.
  void resolveViews(std::vector<void *> &buffers) const;
  /// The buffers of the views of value `id` (and theirs), which it has
  /// just been given.
  void viewBuffers(std::vector<void *> &buffers, size_t id) const;
  /// A run whose shapes are resolved as its steps run, one after another on
  /// the calling thread (stepByStep).
  std::vector<Tensor>
  runStepByStep(const std::vector<Tensor> &inputs,
                const std::vector<std::vector<int64_t>> &inputShapes,
                Profiler *profiler) const;
  void runOnStreams(const std::vector<void *> &buffers,
                    const plan::Shapes &shapes, Profiler *profiler) const;
  void runStep(size_t index, const std::vector<void *> &buffers,
               const plan::Shapes &shapes, RunEvents &events,
               Profiler *profiler) const;
};

} // namespace kiln

#endif // KILN_RUNTIME_MODULEIMPL_H
