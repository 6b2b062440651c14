//===- Profile.cpp - the steps of a profiled run --------------------------===//
//
// Module::run with a profile times every step (synchronised, so GPU work is
// inside its slice) and chromeTrace() writes the Trace Event Format that
// chrome://tracing and Perfetto read: complete events ("ph": "X") in
// microseconds, one thread track per device.
//
//===----------------------------------------------------------------------===//

#include "runtime/ModuleImpl.h"

#include <nlohmann/json.hpp>

#include <map>

namespace kiln {

void Profiler::record(const plan::Step &step, const std::string &device,
                      std::chrono::steady_clock::time_point begin) {
  auto end = std::chrono::steady_clock::now();
  using Us = std::chrono::duration<double, std::micro>;
  ProfileEvent event{step.isCopy ? "copy" : step.kernel, step.nodes, device,
                     Us(begin - start).count(), Us(end - begin).count()};
  std::lock_guard<std::mutex> lock(mutex);
  events.push_back(std::move(event));
}

std::string chromeTrace(const std::vector<ProfileEvent> &events) {
  nlohmann::json trace = nlohmann::json::array();
  std::map<std::string, int> tracks; // device -> tid
  for (const ProfileEvent &e : events) {
    auto [it, added] = tracks.emplace(e.device, tracks.size() + 1);
    if (added)
      trace.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", 1},
                       {"tid", it->second},
                       {"args", {{"name", e.device}}}});
    nlohmann::json args = {{"device", e.device}};
    if (!e.nodes.empty())
      args["nodes"] = e.nodes;
    trace.push_back({{"name", e.name},
                     {"cat", e.name == "copy" ? "copy" : "kernel"},
                     {"ph", "X"},
                     {"ts", e.startUs},
                     {"dur", e.durationUs},
                     {"pid", 1},
                     {"tid", it->second},
                     {"args", args}});
  }
  return nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump(
      1);
}

} // namespace kiln
