//===- Converters.cpp - the table of ONNX node converters -----------------===//
//
// One small function per ONNX op (or one generic one per op family), looked
// up by op type. Each family's file (frontend/ops/) adds its own rows;
// converters only build kiln graph ops, and shapes come from the ops' own
// inference, so a node whose inputs do not fit is reported at the node.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace kiln::onnx_import;

void kiln::onnx_import::addRows(
    ConverterTable &table,
    std::initializer_list<std::pair<llvm::StringLiteral, Converter>> rows) {
  for (const auto &[opType, convert] : rows)
    if (!table.try_emplace(opType, convert).second)
      llvm::report_fatal_error("two converters for ONNX op '" + opType + "'");
}

namespace {
const ConverterTable &table() {
  static const ConverterTable converters = [] {
    ConverterTable table;
    addAttentionConverters(table);
    addCol2ImConverters(table);
    addControlFlowConverters(table);
    addConvTransposeConverters(table);
    addDeformConvConverters(table);
    addEinsumConverters(table);
    addElementwiseConverters(table);
    addFlexAttentionConverters(table);
    addGeneratorsConverters(table);
    addIndexedConverters(table);
    addLayoutConverters(table);
    addLinearConverters(table);
    addLossesConverters(table);
    addMlConverters(table);
    addNonMaxSuppressionConverters(table);
    addNormalizationConverters(table);
    addQuantizeConverters(table);
    addRandomConverters(table);
    addRecurrentConverters(table);
    addReductionsConverters(table);
    addResizeConverters(table);
    addSelectionConverters(table);
    addShapesConverters(table);
    addSlicingConverters(table);
    addSpectralConverters(table);
    addStatefulConverters(table);
    addTrainingConverters(table);
    addWindowsConverters(table);
    return table;
  }();
  return converters;
}
} // namespace

Converter kiln::onnx_import::findConverter(StringRef opType) {
  auto it = table().find(opType);
  return it == table().end() ? nullptr : it->second;
}
