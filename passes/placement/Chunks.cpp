//===- Chunks.cpp - run a model as chunks of its batch, on many devices ---===//
//
// Shared by data parallel and pipeline placement: both cut the batch into
// torch.chunk pieces and run the model once per piece, specialised for its
// size (@main_chunk_<size>, imported by kilnc), with each op on a device the
// strategy chooses, then gather the outputs along the split dim.
//
//===----------------------------------------------------------------------===//

#include "passes/placement/Chunks.h"

#include "llvm/ADT/Hashing.h"

#include <map>

using namespace mlir;
using namespace kiln;

static std::string argName(func::FuncOp main, unsigned i) {
  auto n = main.getArgAttrOfType<StringAttr>(i, "kiln.name");
  return n ? n.str() : "input_" + std::to_string(i);
}

FailureOr<SmallVector<DeviceAttr>>
kiln::parseDevices(Location loc, ArrayRef<std::string> names) {
  SmallVector<DeviceAttr> devices;
  for (const std::string &name : names) {
    std::string error;
    DeviceAttr d = DeviceAttr::parseName(loc.getContext(), name, error);
    if (!d)
      return emitError(loc) << error;
    devices.push_back(d);
  }
  return devices;
}

std::vector<int64_t> kiln::chunkSizes(int64_t n, int64_t parts) {
  std::vector<int64_t> sizes;
  if (n <= 0 || parts <= 0)
    return sizes;
  int64_t each = (n + parts - 1) / parts;
  for (int64_t start = 0; start < n; start += each)
    sizes.push_back(std::min(each, n - start));
  return sizes;
}

FailureOr<std::pair<SmallVector<int64_t>, int64_t>>
kiln::splitDimsOf(func::FuncOp main, ArrayRef<std::string> entries) {
  Location loc = main.getLoc();
  SmallVector<int64_t> dims(main.getNumArguments(), 0);
  for (StringRef entry : entries) {
    auto [name, dim] = entry.split('=');
    int64_t d;
    if (dim.getAsInteger(10, d) || d < -1)
      return emitError(loc) << "split dim '" << entry
                            << "' must be NAME=D (D = -1: replicate)";
    bool found = false;
    for (unsigned i = 0; i < dims.size(); ++i)
      if (argName(main, i) == name) {
        dims[i] = d;
        found = true;
      }
    if (!found)
      return emitError(loc)
             << "split dim '" << entry << "' names no model input";
  }
  int64_t batch = -1;
  for (auto [i, t] : llvm::enumerate(main.getArgumentTypes())) {
    auto type = cast<RankedTensorType>(t);
    if (dims[i] < 0)
      continue;
    if (dims[i] >= type.getRank())
      return emitError(loc) << "input '" << argName(main, i) << "' of type "
                            << type << " has no dim " << dims[i] << " to split";
    int64_t n = type.getDimSize(dims[i]);
    if (ShapedType::isDynamic(n))
      return emitError(loc) << "input '" << argName(main, i)
                            << "' has a symbolic split dim; bind it with "
                               "--input-shape";
    if (batch >= 0 && n != batch)
      return emitError(loc) << "input '" << argName(main, i) << "' has " << n
                            << " along its split dim, others " << batch;
    batch = n;
  }
  if (batch < 0)
    return emitError(loc) << "no input to split for data parallelism";
  return std::make_pair(dims, batch);
}

LogicalResult kiln::rewriteAsChunks(ModuleOp module, func::FuncOp main,
                                    ArrayRef<int64_t> dims, int64_t batch,
                                    ArrayRef<int64_t> sizes, PlaceInChunk place,
                                    DeviceAttr output) {
  MLIRContext *ctx = module.getContext();
  Location loc = main.getLoc();
  Block &body = main.getBody().front();
  // The new body: scatter, replicas, gather.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Type> resultTypes(ret.getOperandTypes());
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    op.erase();
  OpBuilder b = OpBuilder::atBlockEnd(&body);
  SmallVector<SmallVector<Value>> gathered(resultTypes.size());
  auto named = [&](const std::string &name) {
    return NameLoc::get(StringAttr::get(ctx, name), loc);
  };
  // Scatter first, so that every device's copy can start at once and no
  // replica waits behind another on the default device's stream.
  SmallVector<IRMapping> maps(sizes.size());
  SmallVector<func::FuncOp> replicas;
  int64_t offset = 0;
  for (auto [r, size] : llvm::enumerate(sizes)) {
    std::string name = "main_chunk_" + std::to_string(size);
    auto replica = module.lookupSymbol<func::FuncOp>(name);
    if (!replica)
      return emitError(loc)
             << "chunked placement needs @" << name
             << ", the model specialised for a batch of " << size;
    Block &rbody = replica.getBody().front();
    if (rbody.getNumArguments() != body.getNumArguments())
      return emitError(replica.getLoc())
             << "@" << name << " does not have @main's inputs";
    replicas.push_back(replica);
    for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
      Value in = arg;
      if (dims[i] >= 0) {
        auto type = cast<RankedTensorType>(arg.getType());
        SmallVector<int64_t> starts(type.getRank(), 0),
            steps(type.getRank(), 1), shape(type.getShape());
        starts[dims[i]] = offset;
        shape[dims[i]] = size;
        in = b.create<SliceOp>(
            named("data-parallel/scatter/" + argName(main, i) + "/" +
                  std::to_string(r)),
            RankedTensorType::get(shape, type.getElementType(),
                                  type.getEncoding()),
            arg, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(shape),
            b.getDenseI64ArrayAttr(steps));
      }
      if (cast<RankedTensorType>(in.getType()).getShape() !=
          cast<RankedTensorType>(rbody.getArgument(i).getType()).getShape())
        return emitError(replica.getLoc())
               << "@" << name << " input #" << i << " has type "
               << rbody.getArgument(i).getType() << ", the chunk is "
               << in.getType();
      maps[r].map(rbody.getArgument(i), in);
    }
    offset += size;
  }
  for (auto [r, replica] : llvm::enumerate(replicas)) {
    Block &rbody = replica.getBody().front();
    for (Operation &op : rbody.without_terminator()) {
      Operation *clone = b.clone(op, maps[r]);
      if (isPlaceable(clone))
        clone->setAttr(kPlaceAttr, place(r, replica, &op));
    }
    for (auto [i, v] : llvm::enumerate(rbody.getTerminator()->getOperands()))
      gathered[i].push_back(maps[r].lookup(v));
  }
  SmallVector<Value> results;
  for (auto [i, parts] : llvm::enumerate(gathered)) {
    auto want = cast<RankedTensorType>(resultTypes[i]);
    // Gather along the first split input's dim, like DataParallel's `dim`.
    int64_t dim = *llvm::find_if(dims, [](int64_t d) { return d >= 0; });
    if (dim >= want.getRank() || want.getDimSize(dim) != batch)
      return emitError(loc)
             << "output #" << i << " of type " << want << " has no batch dim "
             << dim << " to gather the replicas along";
    Value joined = parts.front();
    if (parts.size() > 1) {
      auto concat =
          b.create<ConcatOp>(named("data-parallel/gather/" + std::to_string(i)),
                             want, parts, b.getI64IntegerAttr(dim));
      concat->setAttr(kPlaceAttr, output);
      joined = concat;
    }
    results.push_back(joined);
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);

  // One constant per distinct weight, then drop the chunk functions.
  std::map<std::pair<std::string, llvm::hash_code>, std::vector<ConstantOp>>
      seen;
  for (ConstantOp c : llvm::make_early_inc_range(body.getOps<ConstantOp>())) {
    std::vector<char> bytes = getConstantBytes(c.getValue());
    std::string type;
    llvm::raw_string_ostream(type) << c.getType();
    auto &same =
        seen[{type, llvm::hash_combine_range(bytes.begin(), bytes.end())}];
    ConstantOp match;
    for (ConstantOp other : same)
      if (getConstantBytes(other.getValue()) == bytes)
        match = other;
    if (match) {
      c.replaceAllUsesWith(match.getResult());
      c.erase();
    } else {
      same.push_back(c);
    }
  }
  for (func::FuncOp f :
       llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (f.getSymName().starts_with("main_chunk_"))
      f.erase();
  return success();
}
