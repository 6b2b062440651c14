//===- kilnc.cpp - the kiln ahead-of-time compiler ------------------------===//
//
//   kilnc MODEL.onnx -o OUT.kiln [--emit=mlir|cpp|artifact]
//         [--input-shape NAME=D0xD1...] [--print-ir-after-all] [-O0..-O3]
//
//===----------------------------------------------------------------------===//

#include "tools/driver/Driver.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

using namespace llvm;

static cl::OptionCategory category("kilnc options");
static cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                                  cl::Required, cl::cat(category));
static cl::opt<std::string> output("o",
                                   cl::desc("output file (default: "
                                            "MODEL.kiln, or - for text)"),
                                   cl::value_desc("file"), cl::cat(category));
static cl::opt<kiln::EmitKind> emit(
    "emit", cl::desc("what to produce"), cl::init(kiln::EmitKind::Artifact),
    cl::values(clEnumValN(kiln::EmitKind::MLIR, "mlir", "kernel-level MLIR"),
               clEnumValN(kiln::EmitKind::Cpp, "cpp", "generated C++ kernels"),
               clEnumValN(kiln::EmitKind::Artifact, "artifact",
                          "a .kiln artifact (default)")),
    cl::cat(category));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("bind a model input's symbolic dims, e.g. x=64x784 "
                         "(repeatable)"),
                cl::value_desc("NAME=D0xD1..."), cl::cat(category));
static cl::opt<std::string> device("device", cl::desc("device to compile for"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<bool> printIR("print-ir-after-all",
                             cl::desc("print the IR after every pass"),
                             cl::cat(category));
static cl::opt<unsigned> optLevel("O", cl::desc("C++ optimization level 0-3"),
                                  cl::Prefix, cl::init(3), cl::cat(category));
static cl::opt<std::string>
    targetCpu("target-cpu",
              cl::desc("CPU to generate code for (-march); 'native' records "
                       "the host's features, checked at load"),
              cl::init("native"), cl::cat(category));
static cl::opt<std::string> keepTemps("keep-temps",
                                      cl::desc("keep generated C++ and objects "
                                               "in this folder"),
                                      cl::value_desc("dir"), cl::cat(category));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "kiln ahead-of-time compiler\n");
  if (optLevel > 3) {
    errs() << "kilnc: error: -O" << optLevel << " is not one of -O0..-O3\n";
    return 1;
  }
  if (device != "cpu") {
    errs() << "kilnc: error: device '" << device
           << "' is not supported yet (this build targets cpu)\n";
    return 1;
  }
  kiln::CompileOptions options;
  options.input = input;
  options.emit = emit;
  options.output = output;
  if (options.output.empty())
    options.output = emit == kiln::EmitKind::Artifact
                         ? sys::path::stem(input).str() + ".kiln"
                         : "-";
  options.printIRAfterAll = printIR;
  options.inputShapes = inputShapes;
  options.device = device;
  options.progress = isatty(2) && options.output != "-";
  options.cxx.optLevel = optLevel;
  options.cxx.targetCpu = targetCpu;
  options.cxx.keepDir = keepTemps;
  return mlir::succeeded(kiln::compileModel(options)) ? 0 : 1;
}
