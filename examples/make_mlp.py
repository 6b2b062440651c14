#!/usr/bin/env python3
"""Exports the example MLP (Linear-ReLU-Linear-GELU-Linear, 784-1024-1024-10)
from PyTorch to ONNX, with random weights from a fixed seed.

    python examples/make_mlp.py OUT.onnx [--batch 64] [--dynamic-batch]
                                [--sizes 784,1024,1024,10]

examples/mlp.onnx was made with --dynamic-batch --sizes 784,256,256,10.
"""
import argparse

import torch


class MLP(torch.nn.Module):
    def __init__(self, sizes=(784, 1024, 1024, 10)):
        super().__init__()
        self.fc1 = torch.nn.Linear(sizes[0], sizes[1])
        self.fc2 = torch.nn.Linear(sizes[1], sizes[2])
        self.fc3 = torch.nn.Linear(sizes[2], sizes[3])

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


def export(path, batch=64, dynamic_batch=False, seed=0,
           sizes=(784, 1024, 1024, 10)):
    torch.manual_seed(seed)
    model = MLP(sizes).eval()
    x = torch.randn(batch, sizes[0])
    torch.onnx.export(
        model, (x,), path, input_names=["x"], output_names=["logits"],
        dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}} if dynamic_batch else None,
        opset_version=17, dynamo=False)
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dynamic-batch", action="store_true")
    parser.add_argument("--sizes", default="784,1024,1024,10",
                        help="layer widths, comma-separated (4 values)")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    export(args.out, args.batch, args.dynamic_batch, sizes=sizes)
