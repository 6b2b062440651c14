//===- fuzz_onnx_pb.cpp - libFuzzer target for the TensorProto reader -----===//
//
// The runtime parses ONNX protobuf messages itself (runtime/TensorIO.cpp,
// no libprotobuf): TensorProto for `kiln-run x=x.pb`, SequenceProto for a
// sequence input, OptionalProto for an optional one. All three share the
// wire-format reader and parseTensorProto, and each must turn any bytes into
// a value or a kiln::Error. The same bytes go to all three: a TensorProto
// seed mutates into the others' fields (a SequenceProto holds TensorProtos
// as field 4, an OptionalProto as field 3), so one corpus covers them.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "kiln/tensor_io.h"

using namespace kiln;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemFile in("fuzz-pb-in"), out("fuzz-pb-out");
  in.assign(data, size);
  try {
    std::string name;
    Tensor tensor = readTensorProto(in.path(), &name);
    // What kiln-run then does with an input: nothing reads past nbytes().
    // Writing it as .npy touches every byte (ASan checks the extent) and
    // must read back unchanged.
    writeNpy(out.path(), tensor);
    if (!fuzz::sameTensor(tensor, readNpy(out.path(), tensor.dtype())))
      fuzz::invariant("a TensorProto's tensor does not survive writeNpy");
  } catch (const Error &) {
  }
  try {
    readSequenceProto(in.path());
  } catch (const Error &) {
  }
  try {
    readOptionalProto(in.path());
  } catch (const Error &) {
  }
  return 0;
}
