#!/usr/bin/env python3
"""The benchmark's models: the four kiln was tuned on ("core") and a broad
set of well-known architectures it was not ("broad", which includes core).

    python tests/bench/zoo.py [--models broad] [--exporter torchscript,dynamo]
                              [--out DIR]

checks each model the way the benchmark relies on: built with a fixed seed,
BatchNorm statistics calibrated, its output depends on its input, it
exports with each exporter, and onnxruntime runs the export and agrees with
eager. It prints one line per model and exporter and exits 1 if any check
fails.

Every model is random-init with seed 0 (nothing can be downloaded), and
then made a fair reference:
  - BatchNorm: random init leaves running mean 0 and variance 1, so
    activations shrink or blow up layer by layer and several torchvision
    classifiers output their bias whatever the input. Each model with
    BatchNorm runs CALIBRATION batches of random inputs in train mode with a
    cumulative average (momentum None), which gives every BN the statistics
    its input really has.
  - Layers that torchvision initialises to zero (ViT's head, some heads'
    weights) are re-initialised from a normal distribution, or the output
    would not depend on the input at all.
  - check() asserts that two different inputs give outputs at least
    MIN_INPUT_EFFECT apart (relative L2).
The helpers live in tests/models/export_models.py, whose resnet18 and
mobilenet_v2 (the models tests/models checks) are prepared the same way.
"""
import argparse
import math
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import kiln_testing as kt  # noqa: E402 (rel_l2)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CALIBRATION = (4, 4)  # batches, batch size
MIN_INPUT_EFFECT = 1e-2


class Spec:
    """One benchmark model: how to build it and feed it.

    inputs: [(name, shape without the batch, dtype, high)]: float inputs are
    standard normal, integer inputs uniform in [0, high). opset: the
    TorchScript exporter's. iters: timed runs per round (about a second of
    the slowest system at batch 1)."""

    def __init__(self, family, build, inputs, opset=17, iters=10, outputs=("y",)):
        self.family, self.build, self.inputs = family, build, inputs
        self.opset, self.iters, self.outputs = opset, iters, outputs

    def example(self, batch, seed):
        gen = torch.Generator().manual_seed(seed)
        xs = []
        for _, shape, dtype, high in self.inputs:
            if dtype.is_floating_point:
                xs.append(torch.randn(batch, *shape, generator=gen, dtype=dtype))
            else:
                xs.append(torch.randint(0, high, (batch, *shape), generator=gen, dtype=dtype))
        return tuple(xs)

    @property
    def input_names(self):
        return [name for name, _, _, _ in self.inputs]


# ------------------------------------------------------------ hand-built models

class Recurrent(nn.Module):
    """A sequence tagger: 2 recurrent layers over 64 steps of 128 features,
    a linear head per step (LSTM: unidirectional; GRU: bidirectional)."""

    def __init__(self, cell):
        super().__init__()
        bidirectional = cell is nn.GRU
        self.rnn = cell(128, 256, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(512 if bidirectional else 256, 32)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


class DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, past_k, past_v):
        n, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (a.reshape(n, t, h, d // h).transpose(1, 2) for a in (q, k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d // h), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x, k, v


class GPTStep(nn.Module):
    """One decode step of a GPT-style decoder (pre-norm, learned positions,
    tied to nothing): 8 layers, d 512, 8 heads, vocab 16384, a past of 127
    keys and values per layer; returns the next token's logits and the
    presents (past with this step appended)."""

    LAYERS, D, HEADS, VOCAB, PAST = 8, 512, 8, 16384, 127

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(self.VOCAB, self.D)
        self.wpe = nn.Embedding(self.PAST + 1, self.D)
        self.blocks = nn.ModuleList(DecoderBlock(self.D, self.HEADS) for _ in range(self.LAYERS))
        self.ln = nn.LayerNorm(self.D)
        self.head = nn.Linear(self.D, self.VOCAB, bias=False)

    def forward(self, ids, past_k, past_v):
        x = self.wte(ids) + self.wpe.weight[self.PAST]
        ks, vs = [], []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past_k[:, i], past_v[:, i])
            ks.append(k)
            vs.append(v)
        return self.head(self.ln(x)), torch.stack(ks, 1), torch.stack(vs, 1)


def conv_bn(cin, cout, k=3, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """A U-Net: 3 levels of two conv-BN-ReLU and a max pool, a bottleneck,
    and 3 levels of a stride-2 transposed conv, a skip concat and two
    conv-BN-ReLU; 2 output classes per pixel."""

    def __init__(self, width=32):
        super().__init__()
        w = [width, 2 * width, 4 * width, 8 * width]
        double = lambda i, o: nn.Sequential(conv_bn(i, o), conv_bn(o, o))
        self.enc = nn.ModuleList([double(3, w[0]), double(w[0], w[1]), double(w[1], w[2])])
        self.mid = double(w[2], w[3])
        self.up = nn.ModuleList(nn.ConvTranspose2d(w[i + 1], w[i], 2, 2) for i in (2, 1, 0))
        self.dec = nn.ModuleList(double(2 * w[i], w[i]) for i in (2, 1, 0))
        self.out = nn.Conv2d(w[0], 2, 1)

    def forward(self, x):
        skips = []
        for enc in self.enc:
            x = enc(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], 1))
        return self.out(x)


class DetectionHead(nn.Module):
    """A one-stage detector's head on a small backbone (RetinaNet-style):
    five stride-2 conv-BN-ReLU stages, a feature pyramid over the last three
    (1x1 laterals, nearest Resize x2 and add, 3x3 smoothing), a head shared
    by the levels (two 3x3 convs, then 9 anchors x 20 classes and 9 x 4 box
    deltas), every level's predictions flattened and concatenated."""

    ANCHORS, CLASSES = 9, 20

    def __init__(self, width=128):
        super().__init__()
        chans = [3, 32, 64, 128, 256, 256]
        self.stages = nn.ModuleList(conv_bn(chans[i], chans[i + 1], 3, 2) for i in range(5))
        self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in chans[3:])
        self.smooth = nn.ModuleList(nn.Conv2d(width, width, 3, 1, 1) for _ in chans[3:])
        self.tower = nn.Sequential(nn.Conv2d(width, width, 3, 1, 1), nn.ReLU(),
                                   nn.Conv2d(width, width, 3, 1, 1), nn.ReLU())
        self.cls = nn.Conv2d(width, self.ANCHORS * self.CLASSES, 3, 1, 1)
        self.box = nn.Conv2d(width, self.ANCHORS * 4, 3, 1, 1)

    def forward(self, x):
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lateral, feats[2:])]
        p = [lat[2]]
        for l in (lat[1], lat[0]):
            p.insert(0, l + F.interpolate(p[0], scale_factor=2.0, mode="nearest"))
        outs = []
        for s, level in zip(self.smooth, p):
            t = self.tower(s(level))
            n = t.shape[0]
            cls = self.cls(t).permute(0, 2, 3, 1).reshape(n, -1, self.CLASSES)
            box = self.box(t).permute(0, 2, 3, 1).reshape(n, -1, 4)
            outs.append(torch.cat([cls, box], 2))
        return torch.cat(outs, 1)


# -------------------------------------------------------------------- the set

def _tv(name, **kwargs):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kwargs)
    return build


def _vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=6,
                             hidden_dim=384, mlp_dim=1536)


def _core(name):
    def build():
        if name == "mlp":
            import make_mlp
            return make_mlp.MLP()
        import export_models
        return export_models.build(name)[0]
    return build


IMAGE = [("x", (3, 224, 224), torch.float32, None)]

CORE = {
    "resnet18": Spec("plain residual", _core("resnet18"), IMAGE),
    "mobilenet_v2": Spec("inverted residual", _core("mobilenet_v2"), IMAGE),
    "bert": Spec("transformer encoder", _core("bert"),
                 [("ids", (128,), torch.int64, 30522)], opset=14),
    "mlp": Spec("MLP", _core("mlp"), [("x", (784,), torch.float32, None)], iters=50),
}

BROAD = dict(CORE, **{
    "resnet50": Spec("plain residual", _tv("resnet50"), IMAGE, iters=5),
    "resnext50_32x4d": Spec("grouped conv (32 groups)", _tv("resnext50_32x4d"), IMAGE, iters=5),
    "regnet_x_400mf": Spec("grouped conv", _tv("regnet_x_400mf"), IMAGE),
    "regnet_y_400mf": Spec("grouped conv + SE", _tv("regnet_y_400mf"), IMAGE),
    "densenet121": Spec("dense concat, BN-ReLU before conv", _tv("densenet121"), IMAGE,
                        iters=5),
    "mobilenet_v3_small": Spec("inverted residual + SE + hardswish",
                               _tv("mobilenet_v3_small"), IMAGE, iters=20),
    "mobilenet_v3_large": Spec("inverted residual + SE + hardswish",
                               _tv("mobilenet_v3_large"), IMAGE),
    "efficientnet_b0": Spec("inverted residual + SE + SiLU", _tv("efficientnet_b0"), IMAGE),
    "mnasnet1_0": Spec("inverted residual", _tv("mnasnet1_0"), IMAGE),
    "squeezenet1_1": Spec("fire modules (concat)", _tv("squeezenet1_1"), IMAGE, iters=20),
    "shufflenet_v2_x1_0": Spec("channel shuffle", _tv("shufflenet_v2_x1_0"), IMAGE, iters=20),
    "googlenet": Spec("inception (concat)",
                      _tv("googlenet", aux_logits=False, init_weights=True), IMAGE),
    "convnext_tiny": Spec("ConvNeXt: 7x7 depthwise, LayerNorm, GELU", _tv("convnext_tiny"),
                          IMAGE, iters=5),
    "vit_s16_6l": Spec("ViT (6 layers, d384)", _vit_small, IMAGE),
    "swin_t": Spec("shifted-window attention", _tv("swin_t"), IMAGE, iters=5),
    "lstm": Spec("LSTM", lambda: Recurrent(nn.LSTM),
                 [("x", (64, 128), torch.float32, None)], iters=10),
    "gru": Spec("GRU (bidirectional)", lambda: Recurrent(nn.GRU),
                [("x", (64, 128), torch.float32, None)], iters=10),
    "gpt_step": Spec("GPT-style decoder step with a KV cache", GPTStep,
                     [("ids", (1,), torch.int64, GPTStep.VOCAB),
                      ("past_k", (GPTStep.LAYERS, GPTStep.HEADS, GPTStep.PAST,
                                  GPTStep.D // GPTStep.HEADS), torch.float32, None),
                      ("past_v", (GPTStep.LAYERS, GPTStep.HEADS, GPTStep.PAST,
                                  GPTStep.D // GPTStep.HEADS), torch.float32, None)],
                     iters=20, outputs=("y", "present_k", "present_v")),
    "unet": Spec("U-Net (transposed convs, skip concats)", UNet,
                 [("x", (3, 128, 128), torch.float32, None)], iters=5),
    "detection_head": Spec("detection head (FPN, Resize, concat)", DetectionHead,
                           [("x", (3, 256, 256), torch.float32, None)], iters=10),
})

GROUPS = {"core": list(CORE), "broad": list(BROAD)}


def expand(names):
    """Model names with the group names in `names` expanded, in order."""
    out = []
    for n in names:
        for m in GROUPS.get(n, [n]):
            if m not in out:
                out.append(m)
    return out


# ---------------------------------------------------------------- preparing

def build(name):
    """BROAD[name]'s module in eval mode, with its seed-0 weights,
    calibrated and without all-zero weights (see the module doc)."""
    import export_models
    spec = BROAD[name]
    torch.manual_seed(0)
    model = spec.build()
    if name not in CORE:  # export_models.build prepares its own
        export_models.reinit_zero_weights(model)
        export_models.calibrate_batchnorm(model, spec.example, *CALIBRATION)
    return model.eval()


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def export(name, model, path, exporter="torchscript"):
    """Exports `model` to `path` with the batch of every input and output
    symbolic ("N"), from an example batch of 2 (the dynamo exporter would
    specialise a batch of 1)."""
    spec = BROAD[name]
    xs = spec.example(2, seed=0)
    names = spec.input_names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            axes = {n: {0: "N"} for n in names + list(spec.outputs)}
            torch.onnx.export(model, xs, path, input_names=names, output_names=list(spec.outputs),
                              opset_version=spec.opset, dynamo=False, dynamic_axes=axes)
        elif exporter == "dynamo":
            batch = torch.export.Dim("N", min=1, max=1024)
            torch.onnx.export(model, xs, path, input_names=names,
                              output_names=list(spec.outputs), dynamo=True,
                              external_data=False,
                              dynamic_shapes={n: {0: batch} for n in names})
        else:
            raise ValueError("unknown exporter %s" % exporter)


def check(name, exporters, out_dir):
    """The checks of the module doc for one model; returns failure lines."""
    import onnxruntime as ort
    spec = BROAD[name]
    model = build(name)
    failures = []
    import export_models
    effect = export_models.input_effect(model, spec.example)
    x1 = spec.example(3, seed=1)
    with torch.no_grad():
        y1 = first(model(*x1)).numpy()
    line = "%-20s %-42s input effect %.2f" % (name, spec.family, effect)
    if not effect >= MIN_INPUT_EFFECT:
        failures.append("%s: the output barely depends on the input (%.1e)" % (name, effect))
    for exporter in exporters:
        path = os.path.join(out_dir, "%s.%s.onnx" % (name, exporter))
        try:
            export(name, model, path, exporter)
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            feeds = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), x1)}
            err = kt.rel_l2(sess.run(None, feeds)[0], y1)
            line += ", %s: ort %.1e" % (exporter, err)
            if err > 1e-4:
                failures.append("%s %s: onnxruntime differs from eager (%.1e)" % (
                    name, exporter, err))
        except Exception as e:  # the report says which model and exporter
            msg = str(e).strip().splitlines()
            line += ", %s: FAILED" % exporter
            failures.append("%s %s: %s: %s" % (name, exporter, type(e).__name__,
                                              msg[-1][:200] if msg else ""))
    print(line, flush=True)
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="broad",
                   help="comma-separated models or groups (%s; default broad)" % ", ".join(GROUPS))
    p.add_argument("--exporter", default="torchscript,dynamo",
                   help="comma-separated exporters to check (default: both)")
    p.add_argument("--out", default=None, help="where the exports go (default: a temp folder)")
    args = p.parse_args()
    import tempfile
    names = expand([m for m in args.models.split(",") if m])
    unknown = [n for n in names if n not in BROAD]
    if unknown:
        p.error("unknown model %s (known: %s)" % (", ".join(unknown), ", ".join(BROAD)))
    out = args.out or tempfile.mkdtemp(prefix="kiln-zoo-")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    failures = []
    for name in names:
        failures += check(name, [e for e in args.exporter.split(",") if e], out)
    for f in failures:
        print("FAIL " + f)
    print("%d models, %d failures" % (len(names), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
