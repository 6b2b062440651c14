//===- RunTool.h - what kiln-run does, as a library ---------------*- C++
//-*-===//
//
// Tensor files for a module's ports (reading inputs by name or position,
// writing outputs), the summary lines of outputs, output comparison, and
// timing and profiling runs. kiln-run is a thin command line over these;
// tests and host programs call them directly. Runtime only: no LLVM.
// Every failure throws kiln::Error with a message naming the file or port.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOOL_RUNTOOL_H
#define KILN_RUNTIME_TOOL_RUNTOOL_H

#include "kiln/runtime.h"

#include <string>
#include <vector>

namespace kiln::tool {

/// "x f32[1,3]", "seq sequence of 3 f32[?]", "opt optional with no value".
std::string describePort(const PortInfo &port,
                         const std::vector<TensorInfo> &infos);
/// "the model's inputs are: x f32[1,3], ..." (or that it takes none).
std::string describeInputs(const Module &module);

/// Maps INPUT arguments (FILE, or NAME=FILE) to one file per input port,
/// in port order: named ones where they say, positional ones filling the
/// rest in order.
std::vector<std::string> assignInputFiles(const std::vector<std::string> &args,
                                          const Module &module);
/// `tensor` when it fits `info` (negative dims match anything), else an
/// error naming `file`.
Tensor checkInput(Tensor tensor, const std::string &file,
                  const TensorInfo &info);
/// Reads one file per input port (.npy or TensorProto .pb; a sequence as a
/// folder of 0.npy, 1.npy, ... or a SequenceProto .pb; an optional as an
/// OptionalProto .pb, or a .none file for one with no value) into the
/// module's flat list of tensors.
std::vector<Tensor> readInputs(const std::vector<std::string> &files,
                               const Module &module);
/// Element `i` as text: %g for floating point, exact integers otherwise.
std::string formatElement(const Tensor &tensor, int64_t i);
/// One line per output tensor ("output_<i> NAME DTYPE[SHAPE]: first
/// values ..."; a sequence's elements as output_<i>[e]; an optional with
/// no value as "output_<i> NAME: optional with no value").
std::vector<std::string> outputLines(const Module &module,
                                     const std::vector<Tensor> &outputs);
/// Writes output port i as DIR/output_<i>.npy (a tensor), a folder
/// DIR/output_<i>/ of 0.npy, 1.npy, ... (a sequence), or an empty file
/// DIR/output_<i>.none (an optional with no value); creates DIR.
void writeOutputs(const std::string &dir, const Module &module,
                  const std::vector<Tensor> &outputs);

double median(std::vector<double> values);
/// "outputs bit-identical", else the largest relative L2 difference over
/// the f32 outputs (a NaN counts as the largest), else the first output
/// that differs, or the count or shape that differs.
std::string compareOutputs(const std::vector<Tensor> &outputs,
                           const std::vector<Tensor> &other);
/// Throws unless `inputs` (read for another artifact) fit `other`, the
/// artifact at `path`, naming what it takes.
void checkInputsFit(const Module &other, const std::string &path,
                    const std::vector<Tensor> &inputs);
/// Milliseconds of `runs` runs of each module, after 3 warm-up runs each.
/// Every round runs each module once, the first in turn (so none is always
/// first): result[m][r] is module m's time in round r.
std::vector<std::vector<double>>
timeRuns(const std::vector<const Module *> &modules,
         const std::vector<Tensor> &inputs, long runs);
/// The lines kiln-run --bench prints for those times: the first module's
/// median and min, each other's median, min and its time over the first's,
/// run by run (median and quartiles), and for a plan on several device
/// roles or a GPU the first module's peak memory per device.
std::string benchReport(const std::vector<std::vector<double>> &millis,
                        const std::vector<std::string> &paths,
                        const Module &first);
/// One run with every step timed: a Chrome trace to `path`; returns the
/// summary and the ten slowest steps as text.
std::string profileRun(const Module &module, const std::vector<Tensor> &inputs,
                       const std::string &path);

} // namespace kiln::tool

#endif // KILN_RUNTIME_TOOL_RUNTOOL_H
