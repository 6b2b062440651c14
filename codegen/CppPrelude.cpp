//===- CppPrelude.cpp - what every C++ kernel file starts with -----------===//
//
// Includes and helpers of the generated C++ (the parts in
// codegen/cpu/prelude/: NaN-propagating max/min, f32 exp/erf that
// vectorize, the scratch block cache, OpenMP pinning, the GEMMs, Winograd
// and direct convolutions, pools), and the narrow float conversions.
//
//===----------------------------------------------------------------------===//

#include "codegen/CEmitter.h"
#include "codegen/CppEmitter.h"
#include "codegen/cpu/Tuning.h"

using namespace kiln;

namespace {
// The parts of codegen/cpu/prelude/, as one literal (Embed.cmake).
constexpr const char *kPrelude =
#include "codegen/cpu/prelude/Prelude.inc"
    ;

static_assert(kPackedColumns == 16,
              "kiln_sgemm_packed in kPrelude reads panels of 16 columns");
} // namespace

std::string kiln::kernelPrelude() {
  return kPrelude +
         ("namespace {\n" + narrowFloatFunctions("inline", kCppStyle) +
          "} // namespace\n");
}
