//===- Run.cpp - run a loaded plan ----------------------------------------===//
//
// See Module.cpp for the whole story: every run gets its own buffers (inputs
// staged onto their devices), then runs inline on the calling thread (one
// device, no copies) or on the devices' worker streams; outputs are read
// back to host tensors. On a cuda device work is enqueued on CUDA streams
// and synchronised once per run. In a multi-device run a step that enqueues
// GPU work records an event after it and signals its outputs at once; a
// step that reads them makes its own stream wait for that event (a GPU-side
// wait, across devices too), or, on a host device, waits for it on the
// host. The run keeps every step's streams and scratch until it has waited
// for all of them at its end.
//
//===----------------------------------------------------------------------===//

#include "runtime/ModuleImpl.h"

#include <algorithm>
#include <cstring>

namespace kiln {

namespace {
// What a run's final wait for the GPU says it waited for.
const char *const kRunningThePlan =
    "running the plan (kernels run asynchronously: with "
    "CUDA_LAUNCH_BLOCKING=1 the failing one reports itself)";
} // namespace

void Module::Impl::execute(size_t index, const std::vector<void *> &buffers,
                           const plan::Shapes &shapes,
                           std::vector<void *> &args,
                           transfer::Streams &streams,
                           std::vector<device::Buffer> &scratch,
                           Profiler *profiler) const {
  if (!profiler) {
    executeStep(index, buffers, shapes, args, streams, scratch);
    return;
  }
  const plan::Step &step = plan.steps[index];
  auto begin = std::chrono::steady_clock::now();
  executeStep(index, buffers, shapes, args, streams, scratch);
  streams.synchronize(step.describe(index));
  profiler->record(step, roleDevice[step.role]->name(), begin);
}

void Module::Impl::executeStep(size_t index, const std::vector<void *> &buffers,
                               const plan::Shapes &shapes,
                               std::vector<void *> &args,
                               transfer::Streams &streams,
                               std::vector<device::Buffer> &scratch) const {
  const plan::Step &step = plan.steps[index];
  if (step.isCopy) {
    size_t src = step.args[0], dst = step.args[1];
    transfer::copy(buffers[dst], &deviceOf(dst), buffers[src], &deviceOf(src),
                   shapes.nbytes[src], streams);
    return;
  }
  Device &device = *roleDevice[step.role];
  cuda::Context *context = device.cuda();
  if (!context) {
    args.clear();
    for (size_t id : step.args)
      args.push_back(buffers[id]);
    if (step.dims) // the kernel reads its arguments' dims after them
      args.push_back(const_cast<int64_t *>(shapes.stepDims[index].data()));
    step.fn(args.data());
    return;
  }
  std::vector<cuda::CUdeviceptr> slots;
  for (size_t id : step.args)
    slots.push_back(transfer::devicePointer(buffers[id]));
  for (size_t bytes : step.cuda->scratch) {
    if (!bytes) {
      slots.push_back(0);
      continue;
    }
    scratch.emplace_back(device, bytes);
    slots.push_back(transfer::devicePointer(scratch.back().data()));
  }
  cuda::CUstream stream = streams.of(device);
  const std::vector<cuda::CUfunction> &fns = functions[index];
  for (size_t l = 0; l < fns.size(); ++l) {
    const plan::CudaKernel::Launch &launch = step.cuda->launches[l];
    // A GEMM or conv with an entry point runs its stand-in (loadKernels).
    if (launch.library() && fns[l])
      context->launch(fns[l], launch.threads, slots, stream,
                      step.describe(index) + ": launching '" + launch.entry +
                          "' (the stand-in for " +
                          (launch.gemm ? "cuBLAS" : "cuDNN") + ")");
    else if (launch.gemm)
      context->gemm(*launch.gemm, slots, stream,
                    step.describe(index) + ": launch " + std::to_string(l));
    else if (launch.conv)
      context->conv(*launch.conv, slots, stream,
                    step.describe(index) + ": launch " + std::to_string(l));
    else
      context->launch(fns[l], launch.threads, slots, stream,
                      step.describe(index) + ": launching '" + launch.entry +
                          "'");
  }
}

void Module::Impl::runStep(size_t index, const std::vector<void *> &buffers,
                           const plan::Shapes &shapes, RunEvents &events,
                           Profiler *profiler) const {
  const plan::Step &step = plan.steps[index];
  const std::vector<size_t> &waits = schedule[index].waits;
  bool skip;
  {
    std::unique_lock<std::mutex> lock(events.mutex);
    events.changed.wait(lock, [&] {
      return std::all_of(waits.begin(), waits.end(),
                         [&](size_t id) { return events.ready[id] != 0; });
    });
    skip = events.error != nullptr; // the run failed: signal, do not run
  }
  std::exception_ptr error;
  // Kept by the run (below), which waits for the GPU before freeing them.
  auto streams = std::make_unique<transfer::Streams>();
  std::vector<device::Buffer> scratch;
  GpuEvent done;
  if (!skip) {
    try {
      std::string what = step.describe(index);
      Device *gpu = step.isCopy
                        ? transfer::streamDevice(&deviceOf(step.args[1]),
                                                 &deviceOf(step.args[0]))
                        : roleDevice[step.role];
      if (gpu && !gpu->cuda())
        gpu = nullptr;
      // Order this step after the GPU work that writes its inputs.
      std::vector<GpuEvent> after;
      {
        std::lock_guard<std::mutex> lock(events.mutex);
        for (size_t i = 0; i < step.numInputs; ++i)
          if (GpuEvent e = events.written[plan.values[step.args[i]].root];
              e.event)
            after.push_back(e);
      }
      for (const GpuEvent &e : after) {
        if (gpu)
          gpu->cuda()->wait(streams->of(*gpu), e.event, what);
        else
          e.context->waitHost(e.event, what);
      }
      std::vector<void *> args;
      execute(index, buffers, shapes, args, *streams, scratch, profiler);
      if (gpu)
        done = {gpu->cuda(), gpu->cuda()->record(streams->of(*gpu), what)};
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Notified under the lock: once `pending` reaches 0 the caller may destroy
  // `events`, and this thread touches it no more after unlocking.
  std::lock_guard<std::mutex> lock(events.mutex);
  if (error && !events.error)
    events.error = error;
  events.streams.push_back(std::move(streams));
  events.scratch.push_back(std::move(scratch));
  if (done.event)
    events.recorded.push_back(done);
  for (size_t i = step.numInputs; i < step.args.size(); ++i) {
    events.written[plan.values[step.args[i]].root] = done;
    events.ready[step.args[i]] = 1;
  }
  --events.pending;
  events.changed.notify_all();
}

void Module::Impl::runOnStreams(const std::vector<void *> &buffers,
                                const plan::Shapes &shapes,
                                Profiler *profiler) const {
  RunEvents events;
  events.ready.assign(plan.values.size(), 0);
  events.written.assign(plan.values.size(), GpuEvent());
  events.pending = plan.steps.size();
  size_t queued = 0;
  try {
    std::lock_guard<std::mutex> lock(enqueueMutex);
    for (; queued < plan.steps.size(); ++queued)
      schedule[queued].stream->enqueue(
          [this, &buffers, &shapes, &events, queued, profiler] {
            runStep(queued, buffers, shapes, events, profiler);
          });
  } catch (...) {
    // Let what was queued finish at once: it skips its work and waits on
    // nothing that will never come.
    std::lock_guard<std::mutex> lock(events.mutex);
    if (!events.error)
      events.error = std::current_exception();
    events.pending -= plan.steps.size() - queued;
    std::fill(events.ready.begin(), events.ready.end(), 1);
    events.changed.notify_all();
  }
  std::unique_lock<std::mutex> lock(events.mutex);
  events.changed.wait(lock, [&] { return events.pending == 0; });
  // Every step has run or enqueued its work: wait for all of it, then let
  // the events, scratch and streams go.
  for (const auto &streams : events.streams) {
    try {
      streams->synchronize(kRunningThePlan);
    } catch (...) {
      if (!events.error)
        events.error = std::current_exception();
    }
  }
  for (const GpuEvent &e : events.recorded)
    e.context->destroyEvent(e.event);
  events.scratch.clear();
  events.streams.clear();
  if (events.error)
    std::rethrow_exception(events.error);
}

void Module::Impl::stageInputs(const std::vector<Tensor> &inputs,
                               const plan::Shapes &shapes,
                               std::vector<void *> &buffers,
                               std::vector<device::Buffer> &storage,
                               transfer::Streams &streams) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t id = plan.inputValues[i];
    Device &device = deviceOf(id);
    if (device.usesHostMemory()) {
      buffers[id] = const_cast<void *>(inputs[i].raw());
      continue;
    }
    storage.emplace_back(device, shapes.nbytes[id]);
    transfer::copy(storage.back().data(), &device, inputs[i].raw(), nullptr,
                   shapes.nbytes[id], streams);
    buffers[id] = storage.back().data();
  }
}

std::vector<void *>
Module::Impl::hostBuffers(const std::vector<Tensor> &inputs) const {
  std::vector<void *> buffers(plan.values.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    buffers[plan.inputValues[i]] = const_cast<void *>(inputs[i].raw());
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (plan.values[id].kind == ValueKind::Constant)
      buffers[id] = const_cast<void *>(constants[id]);
  // Views of those (e.g. a reshaped axes input) share their data.
  resolveViews(buffers);
  return buffers;
}

void Module::Impl::resolveViews(std::vector<void *> &buffers) const {
  // A view follows its base in the value order.
  for (size_t id = 0; id < plan.values.size(); ++id)
    if (plan.values[id].kind == ValueKind::Alias && !buffers[id])
      buffers[id] = buffers[plan.values[id].aliasOf];
}

void Module::Impl::viewBuffers(std::vector<void *> &buffers, size_t id) const {
  for (size_t view : plan.views[id]) {
    buffers[view] = buffers[id];
    viewBuffers(buffers, view);
  }
}

std::vector<Tensor> Module::Impl::runStepByStep(
    const std::vector<Tensor> &inputs,
    const std::vector<std::vector<int64_t>> &inputShapes,
    Profiler *profiler) const {
  // The steps run one after another on the calling thread, in plan order.
  // Each step's shapes are resolved once the data its dims function reads
  // exists (copied to the host first when it lives on a device), then its
  // outputs are allocated on their devices and it runs. GPU work stays queued
  // while the next step enqueues on the same stream; anything else (a host
  // step, another device's stream, a dims function reading data) waits for it.
  const plan::Plan &p = plan;
  plan::Shapes shapes = plan::startShapes(p, inputShapes);
  std::vector<void *> buffers(p.values.size(), nullptr);
  std::vector<device::Buffer> storage, scratch; // device memory of this call
  storage.reserve(p.values.size());
  // The steps' outputs, each released once the last step touching it has
  // run (releaseAfter), or after the GPU work queued since then is done.
  std::vector<device::Buffer> temps(p.values.size());
  std::vector<size_t> released;
  // Declared after the memory it uses: if anything throws, it waits for the
  // GPU before the memory goes back.
  transfer::Streams streams;
  stageInputs(inputs, shapes, buffers, storage, streams);
  for (size_t id = 0; id < p.values.size(); ++id)
    if (p.values[id].kind == ValueKind::Constant)
      buffers[id] = const_cast<void *>(constants[id]);
  resolveViews(buffers);
  Device *queuedOn = nullptr; // whose stream holds work not waited for
  std::vector<void *> args;
  for (size_t index = 0; index < p.steps.size(); ++index) {
    const plan::Step &step = p.steps[index];
    Device *gpu = step.isCopy ? transfer::streamDevice(&deviceOf(step.args[1]),
                                                       &deviceOf(step.args[0]))
                              : roleDevice[step.role];
    if (gpu && !gpu->cuda())
      gpu = nullptr;
    if (queuedOn && (gpu != queuedOn || !step.dimsData.empty())) {
      streams.synchronize(step.describe(index) + ": waiting for its inputs");
      queuedOn = nullptr;
      for (size_t root : released)
        temps[root].reset();
      released.clear();
    }
    // The data its dims function reads, brought to the host for it.
    std::vector<std::pair<size_t, Tensor>> readBack;
    for (size_t i : step.dimsData) {
      size_t id = step.args[i];
      if (deviceOf(id).usesHostMemory() || !buffers[id])
        continue;
      readBack.emplace_back(id,
                            Tensor::empty(p.values[id].dtype, shapes.of[id]));
      transfer::copy(readBack.back().second.raw(), nullptr, buffers[id],
                     &deviceOf(id), shapes.nbytes[id], streams);
    }
    if (!readBack.empty()) {
      streams.synchronize(step.describe(index) +
                          ": reading the data its shapes depend on");
      std::vector<void *> onHost = buffers;
      for (auto &[id, tensor] : readBack)
        onHost[id] = tensor.raw();
      plan::resolveStep(p, shapes, index, onHost);
    } else {
      plan::resolveStep(p, shapes, index, buffers);
    }
    for (size_t i = step.numInputs; i < step.args.size(); ++i) {
      size_t id = step.args[i];
      temps[id] = device::Buffer(deviceOf(id), shapes.nbytes[id]);
      buffers[id] = temps[id].data();
      viewBuffers(buffers, id);
    }
    execute(index, buffers, shapes, args, streams, scratch, profiler);
    queuedOn = gpu;
    // A step queued on a stream may still read its inputs: what it was the
    // last to touch waits for the next synchronisation.
    for (size_t root : releaseAfter[index])
      if (queuedOn)
        released.push_back(root);
      else
        temps[root].reset();
  }
  if (queuedOn) // host outputs may come from copies still queued
    streams.synchronize(kRunningThePlan);
  std::vector<Tensor> outputs;
  for (size_t id : p.outputValues) {
    outputs.push_back(Tensor::empty(p.values[id].dtype, shapes.of[id]));
    transfer::copy(outputs.back().raw(), nullptr, buffers[id], &deviceOf(id),
                   outputs.back().nbytes(), streams);
  }
  streams.synchronize(kRunningThePlan);
  return outputs;
}

namespace {
// The inputs, those on cuda devices brought to the host: the plan moves
// data to its devices itself.
const std::vector<Tensor> &onHost(const std::vector<Tensor> &inputs,
                                  std::vector<Tensor> &copies) {
  if (std::all_of(inputs.begin(), inputs.end(),
                  [](const Tensor &t) { return t.isHost(); }))
    return inputs;
  copies = inputs;
  for (Tensor &t : copies)
    if (!t.isHost())
      t = t.to("cpu");
  return copies;
}
} // namespace

std::vector<Tensor> Module::run(const std::vector<Tensor> &inputs) const {
  std::vector<Tensor> copies;
  return impl_->run(onHost(inputs, copies), nullptr);
}

std::vector<Tensor> Module::run(const std::vector<Tensor> &inputs,
                                std::vector<ProfileEvent> &profile) const {
  Profiler profiler(profile);
  std::vector<Tensor> copies;
  return impl_->run(onHost(inputs, copies), &profiler);
}

std::vector<Tensor> Module::Impl::run(const std::vector<Tensor> &inputs,
                                      Profiler *profiler) const {
  const Impl &m = *this;
  const plan::Plan &p = m.plan;
  if (inputs.size() != p.inputInfo.size())
    throw Error("expected " + std::to_string(p.inputInfo.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  std::vector<std::vector<int64_t>> inputShapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo &want = p.inputInfo[i];
    const std::vector<int64_t> &have = inputs[i].shape();
    bool fits =
        inputs[i].dtype() == want.dtype && have.size() == want.shape.size();
    for (size_t d = 0; fits && d < have.size(); ++d)
      fits = want.shape[d] < 0 || want.shape[d] == have[d];
    if (!fits)
      throw Error("input #" + std::to_string(i) + " '" + want.name +
                  "' must be " + describe(want.dtype, want.shape) + ", got " +
                  describe(inputs[i].dtype(), have));
    if (!inputs[i].raw() && inputs[i].nbytes())
      throw Error("input #" + std::to_string(i) + " '" + want.name +
                  "' has no storage");
    inputShapes.push_back(have);
  }
  if (m.stepByStep)
    return m.runStepByStep(inputs, inputShapes, profiler);
  plan::Shapes resolved;
  bool perRun = p.dynamic || p.readsData;
  if (perRun) {
    // The data dims functions read: graph inputs and constants, on the
    // host (checked at load).
    resolved = plan::resolveShapes(p, inputShapes, m.hostBuffers(inputs));
  }
  const plan::Shapes &shapes = perRun ? resolved : m.staticShapes;
  std::vector<void *> buffers(p.values.size(), nullptr);
  std::vector<device::Buffer> storage, scratch; // device memory of this call
  storage.reserve(p.values.size());
  std::vector<Tensor> outputs(p.outputValues.size());
  std::vector<bool> copyOut(p.outputValues.size(), false);
  for (size_t i = 0; i < p.outputValues.size(); ++i) {
    size_t id = p.outputValues[i];
    const plan::Value &v = p.values[id];
    outputs[i] = Tensor::empty(v.dtype, shapes.of[id]);
    // A host temp computed straight into the output tensor, unless an
    // earlier output already claimed it.
    if (v.kind == ValueKind::Temp && m.deviceOf(id).usesHostMemory() &&
        !buffers[id])
      buffers[id] = outputs[i].raw();
    else
      copyOut[i] = true;
  }
  // Declared after the memory it uses (device buffers, output tensors): if
  // anything throws, it waits for the GPU before the memory goes back.
  transfer::Streams streams;
  m.stageInputs(inputs, shapes, buffers, storage, streams);
  for (size_t id = 0; id < p.values.size(); ++id) {
    const plan::Value &v = p.values[id];
    if (v.kind == ValueKind::Alias) {
      buffers[id] = buffers[v.aliasOf];
    } else if (v.kind == ValueKind::Constant) {
      buffers[id] = const_cast<void *>(m.constants[id]);
    } else if (v.kind == ValueKind::Temp && !buffers[id] &&
               !m.allocatesLazily) {
      storage.emplace_back(m.deviceOf(id), shapes.nbytes[id]);
      buffers[id] = storage.back().data();
    }
  }
  // Lazily (host memory), temps are allocated when first touched
  // and go back to the device's cache after their last step, for the steps
  // after it to reuse. Those outputs are views of live to the copies below:
  // held here, not in the block, where they went back to the cache before
  // being copied out (another thread's run could take and overwrite them).
  std::vector<device::Buffer> temps;
  if (m.runsInline) {
    temps.resize(p.values.size());
    std::vector<void *> args;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      for (size_t id : p.steps[i].args) {
        size_t root = p.values[id].root;
        if (!buffers[root]) {
          temps[root] = device::Buffer(m.deviceOf(root), shapes.nbytes[root]);
          buffers[root] = temps[root].data();
        }
        buffers[id] = buffers[root];
      }
      m.execute(i, buffers, shapes, args, streams, scratch, profiler);
      if (m.allocatesLazily)
        for (size_t root : m.releaseAfter[i])
          temps[root].reset();
    }
    for (size_t id : p.outputValues) // views of temps no step reads
      buffers[id] = buffers[p.values[id].root];
  } else {
    streams.synchronize("staging the inputs");
    m.runOnStreams(buffers, shapes, profiler);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (copyOut[i])
      transfer::copy(outputs[i].raw(), nullptr, buffers[p.outputValues[i]],
                     &m.deviceOf(p.outputValues[i]), outputs[i].nbytes(),
                     streams);
  streams.synchronize(kRunningThePlan);
  return outputs;
}

} // namespace kiln
