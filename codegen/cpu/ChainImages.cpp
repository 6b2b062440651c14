//===- ChainImages.cpp - CPU kernels chained to run image by image --------===//
//
// At batch 8, a kernel's output is tens of MB: the kernel after it reads
// it back from memory, where at batch 1 it found it in cache. A kernel
// whose passes each work on every image on its own already runs its body
// image by image (codegen/CppImages.cpp); this pass makes such kernels
// longer. After kernel lowering, for each CPU kernel B in order, every
// kernel K whose results only B uses merges into B when both run image by
// image on their own (kiln::separableImageBytes): K's body, then B's, in
// one kernel at B's place, with K's results now B's locals. An image's
// intermediates then stay in cache from one pass to the next, and the
// locals shrink to one image. Chains grow as B merges into its own
// consumer in turn. The canonicalizer that runs next folds the dims of
// K's former results to those of their inits.
//
// A kernel that runs row by row (softmax, layer norm; codegen/CppRows.cpp)
// joins no chain: merged with others it would run op by op (BERT's
// attention did, 1.4x slower; docs/performance-log.md step 28). A chain whose
// batch is small enough to stay in cache runs on the whole batch at once,
// as its kernels did.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Passes.h"

#include "codegen/CppEmitter.h"

#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCHAINIMAGES
#include "codegen/cpu/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Whether `kernel` may join a chain: it runs as C++, image by image, and
/// not row by row.
bool chains(KernelOp kernel) {
  return kernel->getNumResults() > 0 &&
         runsCppKernels(getDevice(kernel->getResult(0).getType())) &&
         separableImageBytes(kernel) > 0 && !runsRowByRow(kernel);
}

/// Whether `consumer` alone uses `producer`'s results.
bool feedsOnly(KernelOp producer, KernelOp consumer) {
  return llvm::is_contained(producer->getUsers(), consumer) &&
         llvm::all_of(producer->getUsers(),
                      [&](Operation *user) { return user == consumer; });
}

/// One kernel at `consumer`'s place running `producers`' bodies (in program
/// order), then `consumer`'s.
void merge(ArrayRef<KernelOp> producers, KernelOp consumer) {
  llvm::SetVector<Value> inputs;
  SmallVector<Type> argTypes;
  auto addInput = [&](Value input, BlockArgument arg) {
    if (inputs.insert(input))
      argTypes.push_back(arg.getType());
  };
  auto merged = [&](Value input) {
    return llvm::is_contained(producers, input.getDefiningOp<KernelOp>());
  };
  for (KernelOp producer : producers)
    for (auto [input, arg] :
         llvm::zip(producer.getInputs(), producer.getBody().getArguments()))
      addInput(input, arg);
  for (auto [input, arg] :
       llvm::zip(consumer.getInputs(), consumer.getBody().getArguments()))
    if (!merged(input))
      addInput(input, arg);

  OpBuilder builder(consumer);
  SmallVector<Location> locs;
  for (KernelOp producer : producers)
    locs.push_back(producer.getLoc());
  locs.push_back(consumer.getLoc());
  auto kernel = builder.create<KernelOp>(builder.getFusedLoc(locs),
                                         consumer->getResultTypes(),
                                         inputs.getArrayRef());
  kernel->setAttrs(consumer->getAttrs());
  Block &body = kernel.getBody().front();
  for (auto [arg, type] : llvm::zip(body.getArguments(), argTypes))
    arg.setType(type);

  IRMapping mapping;
  builder.setInsertionPointToStart(&body);
  SmallVector<KernelOp> all(producers);
  all.push_back(consumer);
  SmallVector<Value> yielded;
  for (KernelOp from : all) {
    Block &old = from.getBody().front();
    for (auto [input, arg] : llvm::zip(from.getInputs(), old.getArguments()))
      mapping.map(arg, merged(input)
                           ? mapping.lookup(input)
                           : body.getArgument(llvm::find(inputs, input) -
                                              inputs.begin()));
    for (Operation &op : old.without_terminator())
      builder.clone(op, mapping);
    auto yield = cast<YieldOp>(old.getTerminator());
    for (auto [result, value] :
         llvm::zip(from->getResults(), yield.getValues()))
      mapping.map(result, mapping.lookup(value));
  }
  for (Value result : consumer->getResults())
    yielded.push_back(mapping.lookup(result));
  builder.create<YieldOp>(consumer.getLoc(), yielded);
  consumer->replaceAllUsesWith(kernel);
  consumer->erase();
  for (KernelOp producer : llvm::reverse(producers))
    producer->erase();
}

struct ChainImages : kiln::impl::KilnChainImagesBase<ChainImages> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<KernelOp> kernels;
    func.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
    for (KernelOp consumer : kernels) {
      if (!chains(consumer))
        continue;
      SmallVector<KernelOp> producers;
      for (Value input : consumer.getInputs()) {
        auto producer = input.getDefiningOp<KernelOp>();
        if (producer && !llvm::is_contained(producers, producer) &&
            feedsOnly(producer, consumer) && chains(producer))
          producers.push_back(producer);
      }
      if (producers.empty())
        continue;
      llvm::sort(producers,
                 [](KernelOp a, KernelOp b) { return a->isBeforeInBlock(b); });
      merge(producers, consumer);
    }
  }
};
} // namespace
