#!/usr/bin/env python3
"""Exports the real models kiln is checked on, with random weights from a
fixed seed (nothing is downloaded), with a symbolic batch axis "N".

    python tests/models/export_models.py OUTDIR
        [--models resnet18,mobilenet_v2,bert] [--exporter torchscript|dynamo]

Writes OUTDIR/<model>.<exporter>.onnx (dynamo: weights embedded). The
TorchScript exporter uses opset 13, except for bert: torch 2.15's
nn.MultiheadAttention calls scaled_dot_product_attention, which that exporter
supports from opset 14 on.
"""
import argparse
import math
import os

import torch
import torchvision


class Bert(torch.nn.Module):
    """BERT-style encoder: token embedding 30522x256, 4 post-norm encoder
    layers (d_model 256, 4 heads, ffn 1024, gelu, batch_first), a 2-way head
    on token 0."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(30522, 256)
        layer = torch.nn.TransformerEncoderLayer(
            256, 4, 1024, activation="gelu", batch_first=True, dropout=0.0)
        self.enc = torch.nn.TransformerEncoder(layer, 4,
                                               enable_nested_tensor=False)
        self.head = torch.nn.Linear(256, 2)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids))[:, 0])


def example(name, batch, seed=1):
    """An input for `name` with `batch` rows."""
    gen = torch.Generator().manual_seed(seed)
    if name == "bert":
        return torch.randint(0, 30522, (batch, 128), generator=gen)
    return torch.randn(batch, 3, 224, 224, generator=gen)


def input_shape(name, batch):
    """kilnc's --input-shape for `name` at `batch`."""
    if name == "bert":
        return "ids=%dx128" % batch
    return "x=%dx3x224x224" % batch


def build(name):
    torch.manual_seed(0)
    if name == "bert":
        return Bert().eval(), example(name, 2)
    if name == "resnet18":
        model, shape = torchvision.models.resnet18(weights=None), (1, 3, 224, 224)
    elif name == "mobilenet_v2":
        model, shape = torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)
    else:
        raise SystemExit("unknown model %s" % name)
    # Random init gives BatchNorm a scale of 1 and a shift of 0; random
    # ones make a wrong BatchNorm show. Its statistics come from
    # calibration: made up ones (as these once were) let activations grow
    # layer by layer until mobilenet_v2's ReLU6es saturated and its output
    # no longer depended on its input (relative change 1.4e-7 between two
    # inputs; 0.32 calibrated).
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    calibrate_batchnorm(model, lambda batch, seed: (example(name, batch, seed),))
    return model.eval(), torch.randn(*shape)


def calibrate_batchnorm(model, make_inputs, batches=4, batch=4):
    """Gives every BatchNorm of `model` the statistics its input really has:
    runs `batches` batches of make_inputs(batch, seed) in train mode,
    averaged cumulatively (momentum None). Random init leaves mean 0 and
    variance 1, which shrinks or blows up activations layer by layer; some
    classifiers then output their bias whatever the input. Leaves `model`
    in eval mode."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    if bns:
        model.train()
        with torch.no_grad():
            for i in range(batches):
                model(*make_inputs(batch, 100 + i))
    model.eval()


def reinit_zero_weights(model, seed=1):
    """Draws every all-zero weight of `model` (rank 2 and up: torchvision
    zero-initialises some heads, ViT's among them) from N(0, 1/fan_in), or
    the output would not depend on the input."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p[0].numel()))


def input_effect(model, make_inputs):
    """How much `model`'s (first) output moves between two random inputs:
    relative L2 of the difference. A fair reference has it well above 0."""
    with torch.no_grad():
        a, b = (model(*make_inputs(3, seed)) for seed in (1, 2))
    a, b = (t[0] if isinstance(t, (tuple, list)) else t for t in (a, b))
    return float((b.double() - a.double()).norm() / a.double().norm().clamp_min(1e-30))


def export(name, exporter, path):
    model, _ = build(name)
    # A batch of 2: the dynamo exporter would specialize a batch of 1.
    x = example(name, 2, seed=0)
    arg = "ids" if name == "bert" else "x"
    if exporter == "torchscript":
        torch.onnx.export(model, (x,), path, input_names=[arg],
                          output_names=["y"],
                          opset_version=14 if name == "bert" else 13,
                          dynamo=False,
                          dynamic_axes={arg: {0: "N"}, "y": {0: "N"}})
    else:
        batch = torch.export.Dim("N", min=1, max=1024)
        torch.onnx.export(model, (x,), path, input_names=[arg],
                          output_names=["y"], dynamo=True, external_data=False,
                          dynamic_shapes={arg: {0: batch}})
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--models", default="resnet18,mobilenet_v2,bert")
    parser.add_argument("--exporter", default="torchscript",
                        choices=["torchscript", "dynamo"])
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name in args.models.split(","):
        export(name, args.exporter,
               os.path.join(args.outdir, "%s.%s.onnx" % (name, args.exporter)))
