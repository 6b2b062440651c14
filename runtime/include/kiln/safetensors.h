//===- kiln/safetensors.h - weights from .safetensors files -------*- C++
//-*-===//
//
// Reads the tensors of a safetensors file (the format of Hugging Face's
// `safetensors` package: a little-endian u64 header size, a JSON header of
// {"name": {"dtype", "shape", "data_offsets"}}, then the data) into host
// tensors keyed by name, for kilnc --weights and kiln::jit::compile. Keys can
// be remapped as they are read, so checkpoints saved from
// torch.nn.DataParallel ("module.fc1.weight") bind to "fc1.weight":
//
//   auto weights = kiln::load_safetensors("model.safetensors",
//                                         {/*strip_prefix=*/"module."});
//
// BF16 tensors are widened to f32 (exactly); the float8 types are refused.
// Every problem (missing or truncated file, bad header, unknown dtype, data
// out of bounds or of the wrong size, a rename of a key the file lacks, two
// keys that end up with one name) throws kiln::Error naming the file and key.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SAFETENSORS_H
#define KILN_SAFETENSORS_H

#include "kiln/runtime.h"

#include <map>
#include <string>

namespace kiln {

struct SafetensorsOptions {
  /// Removed from the start of every key that has it ("module."); keys
  /// without it are kept as they are.
  std::string strip_prefix = {};
  /// Applied after strip_prefix: old key -> new key. Naming a key the file
  /// does not have is an error.
  std::map<std::string, std::string> rename = {};
};

/// The file's tensors by (remapped) name; "__metadata__" is skipped.
std::map<std::string, Tensor>
load_safetensors(const std::string &path,
                 const SafetensorsOptions &options = {});

/// Writes `tensors` as a safetensors file (dtypes as load_safetensors reads
/// them). Throws kiln::Error when the file cannot be written.
void save_safetensors(const std::string &path,
                      const std::map<std::string, Tensor> &tensors);

} // namespace kiln

#endif // KILN_SAFETENSORS_H
