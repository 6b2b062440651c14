//===- Passes.td - kiln passes -------------------------------*- tablegen -*-===//

#ifndef KILN_PASSES
#define KILN_PASSES

include "mlir/Pass/PassBase.td"

def KilnInferShapes : Pass<"kiln-infer-shapes", "mlir::func::FuncOp"> {
  let summary = "refine result types from operand types, optionally binding input shapes";
  let description = [{
    Walks the function in order and replaces each compute op's result type
    with the one inferred from its operands where that is more precise
    (dynamic `?` dims become static), then updates the function signature.
    `input-shapes=name=64x784` first binds arguments (by their `kiln.name`)
    to concrete shapes, which is how a model with a symbolic batch size is
    specialized for ahead-of-time code generation.
  }];
  let options = [
    ListOption<"inputShapes", "input-shapes", "std::string",
               "NAME=D0xD1x... bindings for function arguments">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "group compute ops into kiln.kernel regions, fusing elementwise chains";
  let description = [{
    Every compute op ends up in exactly one kiln.kernel. Producer->consumer
    chains of elementwise ops share one kernel when the kernel can sit at the
    position of its last member without breaking dominance; other compute ops
    (matmul, gemm) get a kernel each. Splat constants used by an elementwise
    group are cloned into it instead of being passed in as inputs.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnLowerKernels : Pass<"kiln-lower-kernels", "mlir::func::FuncOp"> {
  let summary = "lower kernel bodies to linalg.generic on plain tensors and fuse them";
  let description = [{
    Rewrites the graph ops inside each kiln.kernel into the kernel-level
    primitives codegen understands (linalg.generic/fill, tensor.empty,
    arith/math scalars), one lowering per op family, then fuses the
    elementwise generics of a kernel into one loop nest.
  }];
  let dependentDialects = ["kiln::KilnDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::cf::ControlFlowDialect"];
}

def KilnPlacePins : Pass<"kiln-place-pins", "mlir::func::FuncOp"> {
  let summary = "place ops on devices by the rules of a JSON pins file";
  let description = [{
    Reads `rules` (a JSON file: {"rules": [{"op": "Gemm", "node": "/enc.*",
    "device": "sim:0"}, ...]}) and gives every op that a rule matches a
    `kiln.place` attribute with the rule's device. `op` matches the ONNX op
    type an op was imported from (or `kiln.NAME`, the kiln op), `node` is a
    regular expression that must match a whole ONNX node name; a rule with
    both needs both. The first matching rule wins. Rules that match nothing
    are reported as warnings.
  }];
  let options = [
    Option<"rules", "rules", "std::string", /*default=*/"\"\"",
           "the pins file (JSON)">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPlaceAuto : Pass<"kiln-place-auto", "mlir::func::FuncOp"> {
  let summary = "cost-based placement: the device per region that minimises estimated latency";
  let description = [{
    Gives every op without a `kiln.place` one, chosen among `devices` by
    their profiles: per-op time from FLOPs and bytes, transfers from link
    bandwidth and latency, one copy per value and destination, devices and
    copy streams working concurrently (list scheduling in program order),
    weights counted against capacity. Starts from the best single device and
    moves contiguous runs of ops while that lowers the estimate. Pinned ops
    stay where they are. The estimate is reported as a remark.
  }];
  let options = [
    ListOption<"devices", "devices", "std::string",
               "the devices to choose from, the first being the default">,
    ListOption<"profiles", "profiles", "std::string",
               "DEVICE=FILE.json profile overrides">,
    Option<"outputDevice", "output-device", "std::string", /*default=*/"\"\"",
           "where results must end up (default: the first device)">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPlaceData : Pass<"kiln-place-data", "mlir::ModuleOp"> {
  let summary = "data parallel: scatter inputs, replicate the model per device, gather outputs";
  let description = [{
    Rewrites @main into one replica per device of `devices`, each running a
    chunk of the batch the way nn.DataParallel does (torch.chunk sizes,
    `split-dims` NAME=D, default 0, -1 replicates an input), and gathers the
    outputs along the split dim on `output-device` (default: the first
    device). Replicas come from @main_chunk_<size> functions: the model
    specialised for each chunk size. Weights are shared, so each device gets
    one copy ahead of time.
  }];
  let options = [
    ListOption<"devices", "devices", "std::string",
               "one replica per device">,
    ListOption<"splitDims", "split-dims", "std::string",
               "NAME=D split dims (default 0; -1 replicates)">,
    Option<"outputDevice", "output-device", "std::string", /*default=*/"\"\"",
           "where outputs are gathered (default: the first device)">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPlacePipeline : Pass<"kiln-place-pipeline", "mlir::ModuleOp"> {
  let summary = "pipeline parallel: K balanced contiguous stages, micro-batches flowing through them";
  let description = [{
    Cuts the model into one contiguous stage per device of `devices`,
    minimising the slowest stage's estimated time under each device's
    capacity, and runs `microbatches` chunks of the batch (torch.chunk
    sizes, `split-dims` as for kiln-place-data) through the stages, gathered
    on `output-device`. Needs @main_chunk_<size> functions like
    kiln-place-data.
  }];
  let options = [
    ListOption<"devices", "devices", "std::string",
               "one stage per device, in order">,
    ListOption<"profiles", "profiles", "std::string",
               "DEVICE=FILE.json profile overrides">,
    Option<"microbatches", "microbatches", "unsigned", /*default=*/"1",
           "chunks of the batch that flow through the stages">,
    ListOption<"splitDims", "split-dims", "std::string",
               "NAME=D split dims (default 0; -1 replicates)">,
    Option<"outputDevice", "output-device", "std::string", /*default=*/"\"\"",
           "where outputs are gathered (default: the first device)">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPlaceFallback : Pass<"kiln-place-fallback", "mlir::func::FuncOp"> {
  let summary = "move ops their device cannot run, and shape computations, to a device that can";
  let description = [{
    For every op, its device is its `kiln.place` or else the device of its
    result type. When that device's profile does not support the op, the op
    moves to the first device of `devices` whose profile does; small
    integer-only computations (shape arithmetic: results of rank <= 1 with
    at most 8 elements, integer operands) move to the cpu when it is among
    `devices`. Every move is reported as a remark; an op no device can run
    is an error.
  }];
  let options = [
    ListOption<"devices", "devices", "std::string",
               "the devices in use, the first being the default">,
    ListOption<"profiles", "profiles", "std::string",
               "DEVICE=FILE.json profile overrides">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnInsertCopies : Pass<"kiln-insert-copies", "mlir::func::FuncOp"> {
  let summary = "turn placements into device types, with the fewest copies";
  let description = [{
    Moves every op to its `kiln.place` device (rewriting its result types)
    and removes the attribute. Where an op reads a value from another
    device, a kiln.copy is inserted right after the value is produced (as
    early as its input allows) and shared by every user on that device: at
    most one copy per value and destination. Constants are never copied:
    each device that uses one gets its own, so weights sit on every device
    that needs them ahead of time. Function results are copied to
    `output-device` (default: where the function returned them before).
  }];
  let options = [
    Option<"outputDevice", "output-device", "std::string", /*default=*/"\"\"",
           "the device every function result is delivered on">
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

#endif // KILN_PASSES
