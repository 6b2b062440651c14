//===- DeviceKinds.cpp - what the runtime knows of each device kind -------===//

#include "runtime/DeviceKinds.h"

namespace kiln::device {

namespace {
std::string listed(const std::vector<std::string> &items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i)
    text += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return text;
}
} // namespace

const std::vector<KindInfo> &kinds() {
  // kind, name, numbered, callerMemory, cuda, autoOrdinal
  static const std::vector<KindInfo> table = {
      {Kind::Cpu, "cpu", false, true, false, false},
      {Kind::Sim, "sim", true, false, false, false},
      {Kind::Cuda, "cuda", true, false, true, true},
  };
  return table;
}

const KindInfo &info(Kind kind) {
  for (const KindInfo &k : kinds())
    if (k.kind == kind)
      return k;
  return kinds().front(); // unreachable: every Kind has its row
}

const char *kindName(Kind kind) { return info(kind).name; }

std::optional<Kind> parseKind(const std::string &text) {
  for (const KindInfo &k : kinds())
    if (text == k.name)
      return k.kind;
  return std::nullopt;
}

std::string kindList() {
  std::vector<std::string> names;
  for (const KindInfo &k : kinds())
    names.push_back(k.name);
  return listed(names);
}

std::string nameForms(std::optional<bool> cuda) {
  std::vector<std::string> forms;
  for (const KindInfo &k : kinds()) {
    if (cuda && k.cuda != *cuda)
      continue;
    forms.push_back(std::string(k.name) + (k.numbered ? ":N" : ""));
    if (k.autoOrdinal)
      forms.push_back(std::string(k.name) + ":auto");
  }
  return listed(forms);
}

} // namespace kiln::device
