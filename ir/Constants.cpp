//===- Constants.cpp - bytes in and out of constant attributes ------------===//
//
// Weights live in MLIR as dense resource blobs (printed once, in the file's
// resource section, never as giant text); small constants as dense elements.
// This is the one place that turns either into raw bytes and back.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace {
constexpr int64_t kInlineLimit = 64; // elements
}

std::vector<char> kiln::getConstantBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t count = type.getNumElements();
  Type element = type.getElementType();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return {};
    ArrayRef<char> data = blob->getData();
    return std::vector<char>(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return {};
  if (element.isInteger(1)) {
    std::vector<char> out;
    for (bool b : dense.getValues<bool>())
      out.push_back(b ? 1 : 0);
    return out;
  }
  if (element.isInteger() && element.getIntOrFloatBitWidth() < 8) {
    // A value a byte, sign- or zero-extended (toSignless).
    std::vector<char> out;
    for (const APInt &v : dense.getValues<APInt>())
      out.push_back(static_cast<char>(
          element.isUnsignedInteger() ? v.getZExtValue() : v.getSExtValue()));
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (!dense.isSplat())
    return std::vector<char>(raw.begin(), raw.end());
  std::vector<char> out;
  out.reserve(raw.size() * count);
  for (int64_t i = 0; i < count; ++i)
    out.insert(out.end(), raw.begin(), raw.end());
  return out;
}

ElementsAttr kiln::makeConstantAttr(RankedTensorType type, ArrayRef<char> bytes,
                                    StringRef name) {
  auto plain = RankedTensorType::get(type.getShape(), type.getElementType());
  if (plain.getNumElements() > kInlineLimit)
    return DenseResourceElementsAttr::get(
        plain, name,
        HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignof(double)));
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> values(bytes.begin(), bytes.end());
    return DenseElementsAttr::get(plain, values);
  }
  return DenseElementsAttr::getFromRawBuffer(plain, bytes);
}

LogicalResult kiln::parseShapeBinding(StringRef text, std::string &name,
                                      SmallVectorImpl<int64_t> &dims) {
  auto [n, spec] = text.rsplit('=');
  if (n.empty() || !text.contains('='))
    return failure();
  name = n.str();
  dims.clear();
  if (spec == "scalar")
    return success();
  SmallVector<StringRef> parts;
  spec.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t d;
    if (part == "?") {
      dims.push_back(ShapedType::kDynamic);
      continue;
    }
    if (part.getAsInteger(10, d) || d < 0)
      return failure();
    dims.push_back(d);
  }
  return success();
}
