//===- kiln-translate.cpp - kernel-level MLIR to C++ or CUDA source -------===//
//
// mlir-translate with two translations, for lit tests of the emitters:
//   --kiln-to-cpp   every kiln.kernel as the CPU backend's C++
//   --kiln-to-cuda  every kiln.kernel as the CUDA backend's source, each
//                   followed by a comment listing its launches and scratch
// Kernels are named kiln_k0, kiln_k1, ... in program order, as in artifacts.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/cuda/CudaEmitter.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

static void registerDialects(DialectRegistry &registry) {
  registry.insert<kiln::KilnDialect, func::FuncDialect, linalg::LinalgDialect,
                  tensor::TensorDialect, arith::ArithDialect, math::MathDialect,
                  affine::AffineDialect>();
}

static LogicalResult eachKernel(
    Operation *root,
    llvm::function_ref<LogicalResult(kiln::KernelOp, std::string)> emit) {
  unsigned n = 0;
  WalkResult result = root->walk([&](kiln::KernelOp kernel) {
    return failed(emit(kernel, "kiln_k" + std::to_string(n++)))
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCpp(
      "kiln-to-cpp", "kiln kernels to the CPU backend's C++",
      [](Operation *root, raw_ostream &os) {
        return eachKernel(root, [&](kiln::KernelOp k, std::string symbol) {
          FailureOr<std::string> text = kiln::emitKernelCpp(k, symbol);
          if (succeeded(text))
            os << *text;
          return failure(failed(text));
        });
      },
      registerDialects);
  TranslateFromMLIRRegistration toCuda(
      "kiln-to-cuda", "kiln kernels to the CUDA backend's source",
      [](Operation *root, raw_ostream &os) {
        return eachKernel(root, [&](kiln::KernelOp k, std::string symbol) {
          FailureOr<kiln::CudaKernel> cuda = kiln::emitKernelCuda(k, symbol);
          if (failed(cuda))
            return failure();
          os << cuda->source << "// slots " << cuda->slots << ", scratch [";
          for (auto [i, bytes] : llvm::enumerate(cuda->scratch))
            os << (i ? ", " : "") << bytes;
          os << "], launches:";
          // A library launch, then "/" and its stand-in if it has one.
          for (const nlohmann::json &l : cuda->launches) {
            std::string library = l.contains("gemm") ? "gemm" + l["gemm"].dump()
                                  : l.contains("conv")
                                      ? "conv" + l["conv"].dump()
                                      : "";
            os << " " << library
               << (library.empty() || !l.contains("entry") ? "" : "/");
            if (l.contains("entry"))
              os << l["entry"].get<std::string>() << "("
                 << l["threads"].get<int64_t>() << ")";
          }
          os << "\n";
          return success();
        });
      },
      registerDialects);
  return failed(mlirTranslateMain(argc, argv, "kiln translation driver"));
}
