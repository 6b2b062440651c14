//===- fuzz_safetensors.cpp - libFuzzer target for load_safetensors ------===//
//
// kilnc --weights and kiln::jit::compile read checkpoints downloaded from
// anywhere: the u64 header size, the JSON header and every entry's dtype,
// shape and data_offsets are untrusted. load_safetensors documents that
// every problem throws kiln::Error naming the file and key; anything else
// (a crash, an nlohmann exception escaping) is a bug.
//
// A file that loads is saved again and reloaded: the tensors must match
// (BF16 comes back as the f32 it was widened to, which is exact).
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "kiln/safetensors.h"

using namespace kiln;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemFile in("fuzz-st-in");
  static const std::string out = fuzz::outputPath("out.safetensors");
  in.assign(data, size);
  std::map<std::string, Tensor> tensors;
  try {
    // strip_prefix exercises the key remapping (and its collision check:
    // "module.a" and "a" both become "a").
    tensors = load_safetensors(in.path(), {/*strip_prefix=*/"module."});
  } catch (const Error &) {
    return 0;
  }
  save_safetensors(out, tensors);
  std::map<std::string, Tensor> again = load_safetensors(out);
  if (again.size() != tensors.size())
    fuzz::invariant("save/load_safetensors changed the number of tensors");
  for (const auto &[name, tensor] : tensors) {
    auto it = again.find(name);
    if (it == again.end() || !fuzz::sameTensor(tensor, it->second))
      fuzz::invariant("save/load_safetensors changed tensor '" + name + "'");
  }
  return 0;
}
