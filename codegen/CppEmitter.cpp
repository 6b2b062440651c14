//===- CppEmitter.cpp - kernels as C++ functions for the CPU --------------===//
//
// One function per kernel, `extern "C" void SYMBOL(void **buffers)`; every
// linalg op becomes a loop nest over its loop ranges in the generic's
// dimension order, and local tensors live on the heap. A kernel with dynamic
// dims also gets `extern "C" const char *SYMBOL_dims(int64_t *dims, void
// *const *inputs)`, which computes its outputs' dims from its inputs' dims
// and data (shapes given as tensors) and checks that they agree,
// and reads all of them from `buffers[N]` (N: the number of arguments).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CEmitter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace kiln;

std::string kiln::cppType(Type t) { return cTypeName(t, kCppStyle); }

namespace {

constexpr const char *kPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

namespace {
// NaN-propagating max/min, as arith.maximumf/minimumf (and torch) define them.
template <typename T> inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
} // namespace
)";

class CppEmitter : public CEmitter {
public:
  CppEmitter(KernelOp kernel, raw_ostream &os)
      : CEmitter(kernel, kCppStyle), os(os) {}
  LogicalResult emit(StringRef symbol);
  LogicalResult emitDims(StringRef symbol);

private:
  raw_ostream &decls() override { return os; }
  raw_ostream &body() override { return os; }
  void declareBuffer(RankedTensorType type, const std::string &name,
                     const std::string &count) override {
    std::string n =
        type.hasStaticShape()
            ? std::to_string(std::max<int64_t>(type.getNumElements(), 1))
            : "std::max<int64_t>(" + count + ", 1)";
    os << llvm::formatv("  std::unique_ptr<{0}[]> {1}_owner(new {0}[{2}]);\n"
                        "  {0} *__restrict {1} = {1}_owner.get();\n",
                        typeName(type.getElementType()), name, n);
  }
  void emitFill(RankedTensorType, const std::string &count,
                const std::string &out, const std::string &value) override {
    os << llvm::formatv(
        "  for (int64_t i = 0; i < {0}; ++i)\n    {1}[i] = {2};\n", count, out,
        value);
  }
  void emitCopy(const std::string &to, const std::string &from,
                RankedTensorType type, const std::string &count) override {
    os << llvm::formatv("  std::memcpy({0}, {1}, sizeof({2}) * {3});\n", to,
                        from, typeName(type.getElementType()), count);
  }
  LogicalResult emitGenericLoops(linalg::GenericOp op) override;

  raw_ostream &os;
};

LogicalResult CppEmitter::emitGenericLoops(linalg::GenericOp op) {
  declareOperands(op); // before the loops
  SmallVector<std::string> ranges;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    ranges.push_back(loopRange(op, d));
    if (ranges.back().empty())
      return op.emitOpError()
             << "has a dynamic loop the kernel emitter cannot size";
  }
  os << "  // linalg.generic: " << iteratorList(op) << "\n";
  std::string indent = "  ";
  for (auto [dim, size] : llvm::enumerate(ranges)) {
    os << indent
       << llvm::formatv("for (int64_t d{0} = 0; d{0} < {1}; ++d{0})", dim,
                        size);
    os << (dim + 1 == ranges.size() ? " {\n" : "\n");
    indent += "  ";
  }
  if (ranges.empty())
    os << indent << "{\n";
  if (failed(emitGenericBody(op, indent)))
    return failure();
  os << "  }\n";
  return success();
}

LogicalResult CppEmitter::emitDims(StringRef symbol) {
  os << "extern \"C\" const char *" << symbol
     << "_dims(int64_t *dims, void *const *inputs) {\n";
  if (failed(emitDimsBody(symbol.str())))
    return failure();
  os << "}\n";
  return success();
}

LogicalResult CppEmitter::emit(StringRef symbol) {
  Block &block = kernel.getBody().front();
  os << "// kiln kernel " << symbol << ", from " << kernel.getLoc() << "\n";
  os << "extern \"C\" void " << symbol << "(void **buffers) {\n";
  if (hasDynamicShape(kernel))
    os << "  const int64_t *dims = static_cast<const int64_t *>(buffers["
       << block.getNumArguments() + kernel.getNumResults() << "]);\n";
  size_t slot = 0;
  SmallVector<std::string> inputs, outputs;
  for (BlockArgument arg : block.getArguments()) {
    std::string type =
        typeName(cast<RankedTensorType>(arg.getType()).getElementType());
    std::string name = "in" + std::to_string(arg.getArgNumber());
    os << llvm::formatv("  const {0} *__restrict {1} = static_cast<const {0} "
                        "*>(buffers[{2}]);\n",
                        type, name, slot++);
    inputs.push_back(name);
  }
  for (auto [j, type] : llvm::enumerate(kernel.getResultTypes())) {
    std::string name = "out" + std::to_string(j);
    os << llvm::formatv(
        "  {0} *__restrict {1} = static_cast<{0} *>(buffers[{2}]);\n",
        typeName(cast<RankedTensorType>(type).getElementType()), name, slot++);
    outputs.push_back(name);
  }
  if (failed(emitOps(inputs, outputs)))
    return failure();
  os << "}\n";
  return success();
}
} // namespace

std::string kiln::kernelPrelude() { return kPrelude; }

FailureOr<std::string> kiln::emitKernelCpp(KernelOp kernel, StringRef symbol) {
  if (failed(checkElementTypes(kernel, kCppStyle, "C++")))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  CppEmitter emitter(kernel, os);
  if (failed(emitter.emit(symbol)))
    return failure();
  // The dims function, from a fresh emitter (its own scalar names).
  if (hasDynamicShape(kernel) &&
      failed(CppEmitter(kernel, os).emitDims(symbol)))
    return failure();
  return text;
}
