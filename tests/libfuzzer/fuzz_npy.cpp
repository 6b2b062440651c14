//===- fuzz_npy.cpp - libFuzzer target for the runtime's .npy reader ------===//
//
// kiln-run reads every input tensor a user hands it with readNpy, so any
// byte sequence must give a tensor or a kiln::Error, never a crash, a read
// out of bounds or an allocation the file does not justify.
//
// Beyond "no crash", a tensor that reads back must survive writeNpy and
// readNpy unchanged: the writer emits the narrow types (bfloat16, float8,
// int4, ...) under their ml_dtypes names, and a reader that accepted a file
// its own writer cannot reproduce would lose data in `kiln-run
// --output-dir`.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "kiln/tensor_io.h"

using namespace kiln;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemFile in("fuzz-npy-in"), out("fuzz-npy-out");
  in.assign(data, size);
  // numpy stores ml_dtypes arrays as untyped void ('|V1', '<V2'): the
  // reader types them by the model input. Try both widths it accepts.
  for (DType untyped : {DType::U8, DType::BF16}) {
    Tensor tensor;
    try {
      tensor = readNpy(in.path(), untyped);
    } catch (const Error &) {
      continue; // a clear refusal is the expected outcome for most inputs
    }
    writeNpy(out.path(), tensor);
    Tensor again = readNpy(out.path(), tensor.dtype());
    if (!fuzz::sameTensor(tensor, again))
      fuzz::invariant("writeNpy/readNpy round trip changed a " +
                      describe(tensor.dtype(), tensor.shape()) + " tensor");
  }
  return 0;
}
