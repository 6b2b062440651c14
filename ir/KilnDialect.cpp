//===- KilnDialect.cpp - dialect, device attribute, structural ops -------===//
//
// The device rule lives here: every op but kiln.copy keeps all of its tensors
// on one #kiln.device, so a mismatch is a verifier error at compile time (the
// compile-time form of PyTorch's "Expected all tensors to be on the same
// device"), reported at the op's location, which is the ONNX node name.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "ir/KilnDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/KilnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || !isa<RankedTensorType>(type))
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

//===----------------------------------------------------------------------===//
// #kiln.device
//===----------------------------------------------------------------------===//

LogicalResult DeviceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef kind, int64_t ordinal) {
  const DeviceKind *known = lookupDeviceKind(kind);
  if (!known)
    return emitError() << "unknown device kind '" << kind << "' (expected "
                       << deviceNameForms() << ")";
  if (!known->numbered) {
    if (ordinal != -1)
      return emitError() << "device '" << kind << "' takes no ordinal";
    return success();
  }
  if (ordinal < 0)
    return emitError() << "device '" << kind << "' needs an ordinal, e.g. "
                       << kind << ":0";
  if (ordinal > kMaxDeviceOrdinal)
    return emitError() << "device ordinal " << ordinal
                       << " is out of range (at most " << kMaxDeviceOrdinal
                       << ")";
  return success();
}

std::string DeviceAttr::str() const {
  if (getOrdinal() < 0)
    return getKind().str();
  return (getKind() + ":" + Twine(getOrdinal())).str();
}

DeviceAttr DeviceAttr::parseName(MLIRContext *ctx, StringRef name,
                                 std::string &error) {
  auto [kind, rest] = name.split(':');
  int64_t ordinal = -1;
  bool hasOrdinal = name.contains(':');
  const DeviceKind *known = lookupDeviceKind(kind);
  bool ok = known && known->numbered == hasOrdinal &&
            (!hasOrdinal || (!rest.getAsInteger(10, ordinal) && ordinal >= 0));
  if (!ok) {
    error =
        ("invalid device '" + name + "' (expected " + deviceNameForms() + ")")
            .str();
    return {};
  }
  if (ordinal > kMaxDeviceOrdinal) {
    error = ("invalid device '" + name + "': ordinal out of range (at most " +
             Twine(kMaxDeviceOrdinal) + ")")
                .str();
    return {};
  }
  return get(ctx, kind, ordinal);
}

Attribute DeviceAttr::parse(AsmParser &parser, Type) {
  std::string kind;
  int64_t ordinal = -1;
  if (parser.parseLess() || parser.parseKeywordOrString(&kind))
    return {};
  if (succeeded(parser.parseOptionalColon()) && parser.parseInteger(ordinal))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), kind, ordinal);
}

void DeviceAttr::print(AsmPrinter &printer) const {
  printer << "<" << getKind();
  if (getOrdinal() >= 0)
    printer << ":" << getOrdinal();
  printer << ">";
}

DeviceAttr kiln::getDevice(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? dyn_cast_or_null<DeviceAttr>(tensor.getEncoding())
                : DeviceAttr();
}

const DeviceKind *kiln::kindOf(DeviceAttr device) {
  return device ? lookupDeviceKind(device.getKind()) : nullptr;
}

bool kiln::runsCppKernels(DeviceAttr device) {
  const DeviceKind *kind = kindOf(device);
  return kind && kind->backend == "cpp";
}

ConstantOp kiln::boundConstant(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto kernel = arg ? dyn_cast_or_null<KernelOp>(arg.getOwner()->getParentOp())
                    : KernelOp();
  if (!kernel || arg.getOwner() != &kernel.getBody().front())
    return {};
  return kernel.getOperand(arg.getArgNumber()).getDefiningOp<ConstantOp>();
}

bool kiln::hasDynamicShape(Operation *op) {
  auto dynamic = [](Type t) {
    auto type = dyn_cast<RankedTensorType>(t);
    return type && !type.hasStaticShape();
  };
  return llvm::any_of(op->getOperandTypes(), dynamic) ||
         llvm::any_of(op->getResultTypes(), dynamic);
}

uint64_t kiln::tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

bool kiln::isUnsignedInteger(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  return type.isUnsignedInteger();
}

Type kiln::toSignless(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return RankedTensorType::get(tensor.getShape(),
                                 toSignless(tensor.getElementType()),
                                 tensor.getEncoding());
  if (auto integer = dyn_cast<IntegerType>(type)) {
    unsigned width = integer.getWidth();
    if (width > 1 && width < 8)
      return IntegerType::get(type.getContext(), 8);
    if (!integer.isSignless())
      return IntegerType::get(type.getContext(), width);
  }
  return type;
}

bool kiln::isNarrowFloat(Type type) {
  return isa<BFloat16Type, Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type,
             Float8E5M2FNUZType>(type);
}

RankedTensorType kiln::withDevice(Type type, Attribute device) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(),
                               device);
}

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

LogicalResult kiln::OpTrait::verifySameDevice(Operation *op) {
  DeviceAttr first;
  std::string firstWhat;
  auto check = [&](Type type, const Twine &what) -> LogicalResult {
    if (!isa<RankedTensorType>(type))
      return success();
    DeviceAttr device = getDevice(type);
    if (!device)
      return op->emitOpError() << what << " has no #kiln.device encoding";
    if (!first) {
      first = device;
      firstWhat = what.str();
      return success();
    }
    if (device != first)
      return op->emitOpError()
             << "expects all tensors on one device, but " << firstWhat
             << " is on " << first.str() << " and " << what << " is on "
             << device.str() << "; only kiln.copy moves data between devices";
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand #" + Twine(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result #" + Twine(i))))
      return failure();
  return success();
}

bool kiln::isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>();
}

//===----------------------------------------------------------------------===//
// Structural ops
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  auto type = getResult().getType();
  auto valueType = cast<ShapedType>(getValue().getType());
  if (valueType.getShape() != type.getShape() ||
      valueType.getElementType() != type.getElementType())
    return emitOpError() << "value of type " << valueType
                         << " does not match result type " << type;
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult CopyOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getShape() != out.getShape() ||
      in.getElementType() != out.getElementType())
    return emitOpError() << "changes only the device, but " << in << " and "
                         << out << " differ in shape or element type";
  if (!getDevice(in) || !getDevice(out))
    return emitOpError() << "needs #kiln.device encodings on both sides";
  return success();
}

OpFoldResult CopyOp::fold(FoldAdaptor) {
  // A copy to the device the value is already on is a no-op.
  if (getInput().getType() == getResult().getType())
    return getInput();
  // copy(copy(x)) back to where x was.
  if (auto producer = getInput().getDefiningOp<CopyOp>())
    if (producer.getInput().getType() == getResult().getType())
      return producer.getInput();
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  // To the shape it already has.
  if (getInput().getType() == getResult().getType())
    return getInput();
  // reshape(reshape(x)) with a static result: one reshape of x.
  auto producer = getInput().getDefiningOp<ReshapeOp>();
  if (producer && getResult().getType().hasStaticShape()) {
    getInputMutable().assign(producer.getInput());
    setShape(getResult().getType().getShape());
    return getResult();
  }
  return {};
}

void KernelOp::build(OpBuilder &builder, OperationState &state,
                     TypeRange resultTypes, ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *region = state.addRegion();
  auto *block = new Block();
  region->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), state.location);
}

// Kernel bodies are signless once lowered: ui8 outside mirrors i8 inside.
static bool sameModuloEncoding(Type a, Type b) {
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  return ta && tb && ta.getShape() == tb.getShape() &&
         toSignless(ta.getElementType()) == toSignless(tb.getElementType());
}

LogicalResult KernelOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size() << " inputs but "
                         << body.getNumArguments() << " block arguments";
  for (auto [i, input, arg] : llvm::enumerate(getInputs(), body.getArguments()))
    if (!sameModuloEncoding(input.getType(), arg.getType()))
      return emitOpError() << "block argument #" << i << " of type "
                           << arg.getType() << " does not mirror input type "
                           << input.getType();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values but has " << getNumResults() << " results";
  for (auto [i, value, result] :
       llvm::enumerate(yield.getValues(), getResults()))
    if (!sameModuloEncoding(value.getType(), result.getType()))
      return emitOpError() << "yielded value #" << i << " of type "
                           << value.getType() << " does not match result type "
                           << result.getType();
  return success();
}

#define GET_OP_CLASSES
#include "ir/KilnOps.cpp.inc"
