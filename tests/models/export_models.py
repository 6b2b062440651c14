#!/usr/bin/env python3
"""Exports the real models kiln is checked on, with random weights from a
fixed seed (nothing is downloaded), with a symbolic batch axis "N".

    python tests/models/export_models.py OUTDIR [--models resnet18,mobilenet_v2]
        [--exporter torchscript|dynamo]

Writes OUTDIR/<model>.<exporter>.onnx (dynamo: weights embedded).
"""
import argparse
import os

import torch
import torchvision


def build(name):
    torch.manual_seed(0)
    if name == "resnet18":
        model, shape = torchvision.models.resnet18(weights=None), (1, 3, 224, 224)
    elif name == "mobilenet_v2":
        model, shape = torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)
    else:
        raise SystemExit("unknown model %s" % name)
    model.eval()
    # Random init gives BatchNorm trivial statistics; give it real ones so a
    # wrong BatchNorm would show.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model, torch.randn(*shape)


def export(name, exporter, path):
    model, x = build(name)
    if exporter == "torchscript":
        torch.onnx.export(model, (x,), path, input_names=["x"],
                          output_names=["y"], opset_version=13, dynamo=False,
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    else:
        batch = torch.export.Dim("N", min=1, max=1024)
        torch.onnx.export(model, (x,), path, input_names=["x"],
                          output_names=["y"], dynamo=True, external_data=False,
                          dynamic_shapes={"x": {0: batch}})
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--exporter", default="torchscript",
                        choices=["torchscript", "dynamo"])
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name in args.models.split(","):
        export(name, args.exporter,
               os.path.join(args.outdir, "%s.%s.onnx" % (name, args.exporter)))
