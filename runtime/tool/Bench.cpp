//===- Bench.cpp - comparing, timing and profiling runs -------------------===//

#include "runtime/tool/RunTool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace kiln;
using namespace kiln::tool;

double kiln::tool::median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/// Whether `other`'s outputs are `outputs`, bit for bit, else the largest
/// relative L2 difference over the f32 outputs (or the first output that
/// differs, when none of those is f32, or a shape that differs).
std::string kiln::tool::compareOutputs(const std::vector<kiln::Tensor> &outputs,
                                       const std::vector<kiln::Tensor> &other) {
  if (outputs.size() != other.size())
    return "outputs differ: " + std::to_string(other.size()) +
           " outputs against " + std::to_string(outputs.size());
  const size_t none = outputs.size();
  size_t firstDiffering = none, worstF32 = none;
  double worst = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::Tensor &a = outputs[i], &b = other[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return "output_" + std::to_string(i) +
             " differs: " + kiln::describe(b.dtype(), b.shape()) + " against " +
             kiln::describe(a.dtype(), a.shape());
    if (!a.nbytes() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0)
      continue;
    if (firstDiffering == none)
      firstDiffering = i;
    if (a.dtype() != kiln::DType::F32)
      continue;
    const float *x = a.data<float>(), *y = b.data<float>();
    double diff = 0, norm = 0;
    for (int64_t e = 0; e < a.numElements(); ++e) {
      diff += (double(y[e]) - x[e]) * (double(y[e]) - x[e]);
      norm += double(x[e]) * x[e];
    }
    double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    if (worstF32 == none || !(rel <= worst)) { // a NaN is the worst
      worst = rel;
      worstF32 = i;
    }
  }
  if (firstDiffering == none)
    return "outputs bit-identical";
  if (worstF32 == none)
    return "outputs differ: output_" + std::to_string(firstDiffering) +
           " (compared bit for bit)";
  char text[96];
  std::snprintf(text, sizeof text,
                "outputs differ: largest rel L2 %.2e (output_%zu)", worst,
                worstF32);
  return text;
}

/// Throws unless `inputs` (read for the main artifact) fit `other`, the
/// artifact at `path`, naming what it takes.
void kiln::tool::checkInputsFit(const kiln::Module &other,
                                const std::string &path,
                                const std::vector<kiln::Tensor> &inputs) {
  const std::vector<kiln::TensorInfo> &infos = other.inputs();
  if (infos.size() != inputs.size())
    throw kiln::Error("--versus " + path + ": " + describeInputs(other) +
                      "; given " + std::to_string(inputs.size()) + " tensors");
  for (size_t i = 0; i < inputs.size(); ++i)
    checkInput(inputs[i], "--versus " + path, infos[i]);
}

std::vector<std::vector<double>>
kiln::tool::timeRuns(const std::vector<const Module *> &modules,
                     const std::vector<Tensor> &inputs, long runs) {
  using Clock = std::chrono::steady_clock;
  for (const Module *module : modules)
    for (int i = 0; i < 3; ++i)
      module->run(inputs);
  std::vector<std::vector<double>> millis(modules.size());
  for (long r = 0; r < runs; ++r)
    for (size_t j = 0; j < modules.size(); ++j) {
      size_t m = (j + static_cast<size_t>(r)) % modules.size();
      Clock::time_point start = Clock::now();
      modules[m]->run(inputs);
      std::chrono::duration<double, std::milli> elapsed = Clock::now() - start;
      millis[m].push_back(elapsed.count());
    }
  return millis;
}

std::string
kiln::tool::benchReport(const std::vector<std::vector<double>> &millis,
                        const std::vector<std::string> &paths,
                        const Module &first) {
  char line[512];
  const std::vector<double> &base = millis[0];
  std::snprintf(
      line, sizeof line, "latency over %zu runs: median %.3f ms, min %.3f ms\n",
      base.size(), median(base), *std::min_element(base.begin(), base.end()));
  std::string text = line;
  for (size_t m = 1; m < millis.size(); ++m) {
    std::vector<double> ratios;
    for (size_t r = 0; r < base.size(); ++r)
      ratios.push_back(millis[m][r] / base[r]);
    std::sort(ratios.begin(), ratios.end());
    std::snprintf(line, sizeof line,
                  "versus %s: median %.3f ms, min %.3f ms; run by run %.3fx "
                  "(quartiles %.3f-%.3f)\n",
                  paths[m].c_str(), median(millis[m]),
                  *std::min_element(millis[m].begin(), millis[m].end()),
                  median(ratios), ratios[ratios.size() / 4],
                  ratios[(3 * ratios.size()) / 4]);
    text += line;
  }
  // Per device (roles may share one), for plans on several roles or a GPU.
  std::vector<DeviceInfo> roles = first.devices();
  bool onGpu = std::any_of(roles.begin(), roles.end(), [](const auto &role) {
    return role.boundName.rfind("cuda:", 0) == 0;
  });
  if (roles.size() < 2 && !onGpu)
    return text;
  std::vector<size_t> peaks = first.peakBytes();
  std::vector<std::string> seen;
  text += "peak device memory:";
  for (size_t r = 0; r < roles.size(); ++r) {
    if (std::find(seen.begin(), seen.end(), roles[r].boundName) != seen.end())
      continue;
    seen.push_back(roles[r].boundName);
    text += std::string(seen.size() > 1 ? "," : "") + " " + roles[r].boundName +
            " " + std::to_string(peaks[r]) + " bytes";
  }
  return text + "\n";
}

std::string kiln::tool::profileRun(const Module &module,
                                   const std::vector<Tensor> &inputs,
                                   const std::string &path) {
  std::vector<ProfileEvent> events;
  module.run(inputs, events);
  std::ofstream out(path, std::ios::binary);
  out << chromeTrace(events) << "\n";
  out.close();
  if (!out)
    throw Error("cannot write the profile to " + path);
  double total = 0;
  for (const ProfileEvent &e : events)
    total += e.durationUs;
  std::stable_sort(
      events.begin(), events.end(),
      [](const auto &a, const auto &b) { return a.durationUs > b.durationUs; });
  char line[512];
  std::snprintf(line, sizeof line,
                "profile: %zu steps, %.3f ms in steps, written to %s\n",
                events.size(), total / 1000, path.c_str());
  std::string text = line;
  for (size_t i = 0; i < events.size() && i < 10; ++i) {
    std::snprintf(line, sizeof line, "  %9.3f ms %5.1f%%  %-10s %-8s %s\n",
                  events[i].durationUs / 1000,
                  total > 0 ? 100 * events[i].durationUs / total : 0.0,
                  events[i].name.c_str(), events[i].device.c_str(),
                  events[i].nodes.c_str());
    text += line;
  }
  return text;
}
