"""
Quantisation for the QAT study: the fake-quant grid with a straight-through estimator, the QAT
layers, a round-to-nearest PTQ baseline, bit packing for the integer export, and the
weight-to-grid distance probe. Imports torch only: model.py builds on it, tools/export.py packs with it.

Symmetric per-output-row grid: for bit-width b, qmax = 2^(b-1) - 1, scale_r = clip_r / qmax,
q = clamp(round(w / scale), -qmax, qmax), w_hat = q * scale (per-channel symmetric quantisation,
e.g. arXiv 2106.08295 section 2). b = 16 means full precision (no quantisation). Scales are
rounded to bf16 values (see row_scale), and training, export, PTQ and the probe all use this one grid.
"""
import copy
import dataclasses
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VALID_BITS = (2, 3, 4, 5, 6, 7, 8, 16)  # 16 = full precision, no quantisation


# -----------------------------------------------------------------------------
# The grid

def check_bits(bits, full=False):
    """The one bit-width check: 2..8, and 16 (full precision) where full=True. Raises ValueError."""
    if bits not in VALID_BITS or (bits == 16 and not full):
        raise ValueError(f"bits {bits} not supported: use 2..8" + (", or 16 for full precision" if full else ""))


def parse_clip(clip):
    """'absmax' | 'quantile:Q' (0<Q<=1) | 'std:K' (K>0) -> (kind, value). Raises ValueError."""
    if clip == "absmax":
        return "absmax", None
    kind, _, val = clip.partition(":")
    try:
        v = float(val)
    except ValueError:
        raise ValueError(f"malformed clip rule {clip!r}: use absmax, quantile:Q or std:K") from None
    if kind == "quantile" and 0 < v <= 1:
        return kind, v
    if kind == "std" and v > 0 and math.isfinite(v):
        return kind, v
    raise ValueError(f"malformed clip rule {clip!r}: use absmax, quantile:Q (0<Q<=1) or std:K (K>0)")


def row_quantile(a, v):
    """Per-row quantile of a [rows, n] with linear interpolation (as torch.quantile), via a sort:
    torch.quantile refuses inputs over 16M elements, which a quantised embedding can exceed."""
    srt = a.sort(dim=1).values
    pos = v * (a.shape[1] - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return torch.lerp(srt[:, lo:lo + 1], srt[:, hi:hi + 1], pos - lo)


def row_clip(w, clip="absmax"):
    """Per-row clipping threshold clip_r, shape [rows, 1], float32, > 0 and <= the row's absmax (or 1).

    Degenerate rows: a clip at ~0 (a quantile of a mostly-zero row, say) would collapse the row's
    real weights onto a sliver of the grid, so a clip below 1e-6 of the row's absmax falls back to
    the absmax; an all-zero row gets clip 1 (every code is 0 whatever the scale). Because the clip
    never exceeds the absmax, a row's largest weight always maps to +-qmax: no row with a nonzero
    weight quantises to all zeros, at any bit-width and under any rule."""
    kind, v = parse_clip(clip)
    a = w.detach().float().abs()
    amax = a.amax(dim=1, keepdim=True)
    if kind == "absmax":
        c = amax
    elif kind == "quantile":
        c = row_quantile(a, v)
    else:  # std: k standard deviations around zero (symmetric grid)
        c = v * w.detach().float().pow(2).mean(dim=1, keepdim=True).sqrt()
    c = torch.minimum(c, amax)
    c = torch.where(c > 1e-6 * amax, c, amax)
    return torch.where(c > 0, c, torch.ones_like(c))


def to_bf16_grid(x):
    """Round positive finite float32 x to the nearest bf16 value (ties to even), kept as float32.
    Integer ops on the bits, not x.bfloat16().float(): torch.compile's inductor elides that round
    trip (it does not emulate precision casts), which would give compiled QAT another grid."""
    i = x.contiguous().view(torch.int32)
    i = (i + (0x7FFF + ((i >> 16) & 1))) & -0x10000
    return i.view(torch.float32)


def row_scale(w, bits, clip="absmax"):
    """Per-row step size s_r = clip_r / qmax, shape [rows, 1], float32 holding bf16 values.

    Why bf16-rounded: with 8 significant bits, q * s is exact in fp32 for |q| <= 127, so a
    dequantised row w_hat = q * s re-quantises to the same s and q (fake_quant is idempotent on
    its own output for absmax), and the artefact stores exact 2-byte scales. bf16 rather than
    fp16 because it keeps fp32's exponent range: fp16 scales underflow for rows with absmax below
    ~0.008 at 8 bits. The rounding moves the clip by < 0.4%; the row's max still rounds to +-qmax
    (|127 / (1 +- 2^-8)| rounds to 127)."""
    qmax = 2 ** (bits - 1) - 1
    return to_bf16_grid(row_clip(w, clip) / qmax)


def quantize(w, bits, clip="absmax"):
    """Integer codes q (int8, in [-qmax, qmax]) and per-row float32 scales [rows, 1]. w_hat = q * scale."""
    qmax = 2 ** (bits - 1) - 1
    s = row_scale(w, bits, clip)
    q = torch.clamp(torch.round(w.detach().float() / s), -qmax, qmax)
    return q.to(torch.int8), s


def fake_quant(w, bits, clip="absmax"):
    """Quantise-dequantise w (2-D, rows = output features) on the b-bit grid, with a
    straight-through estimator: the forward value is w_hat, the gradient w.r.t. w is identity.
    bits=16 returns w unchanged."""
    if bits >= 16:
        return w
    q, s = quantize(w, bits, clip)
    w_hat = (q.float() * s).to(w.dtype)
    # w_hat + (w - w.detach()) rather than w + (w_hat - w).detach(): the latter is off by an ulp,
    # this one is w_hat bit for bit, so an exported model's loss equals the fake-quant loss exactly
    return w_hat + (w - w.detach())


def qat_weight(m, w):
    """The weight a QAT module uses: fake-quantised while its qat_on buffer is 1.

    torch.where on a tensor switch, not a Python attribute: torch.compile constant-folds Python
    attributes, so a late-QAT switch would silently never happen (a pitfall seen in public QAT code).
    where() (not w + on * (fq - w)) keeps the value exactly w_hat; the gradient is identity either way."""
    if m.bits >= 16:
        return w
    return torch.where(m.qat_on > 0, fake_quant(w, m.bits, m.clip), w)


class QATLinear(nn.Linear):
    """nn.Linear whose weight is fake-quantised in the forward pass when QAT is on."""

    def __init__(self, in_features, out_features, bias=False, bits=16, clip="absmax"):
        super().__init__(in_features, out_features, bias=bias)
        self.bits, self.clip = bits, clip
        self.register_buffer("qat_on", torch.tensor(1.0 if bits < 16 else 0.0), persistent=False)

    def forward(self, x):
        return F.linear(x, qat_weight(self, self.weight), self.bias)


class QATEmbedding(nn.Embedding):
    """Token embedding with the same switchable fake quantisation (per row = per token);
    used when the embedding/head are quantised too (GPTConfig.quant_embed)."""

    def __init__(self, num_embeddings, embedding_dim, bits=16, clip="absmax"):
        super().__init__(num_embeddings, embedding_dim)
        self.bits, self.clip = bits, clip
        self.register_buffer("qat_on", torch.tensor(1.0 if bits < 16 else 0.0), persistent=False)

    def effective_weight(self):
        return qat_weight(self, self.weight)

    def forward(self, idx):
        return F.embedding(idx, self.effective_weight())


def set_qat(model, on):
    """Switch fake quantisation on/off in every QAT module (in place, compile-safe)."""
    for m in model.modules():
        if isinstance(m, (QATLinear, QATEmbedding)):
            m.qat_on.fill_(1.0 if on else 0.0)


SMALL_TWIN = 2 ** 24  # parameters up to which quant_targets builds its twin on the CPU


def quant_targets(model):
    """[(module name, module)] of the matrices the study quantises: the fake-quantised modules
    (bits < 16). For a full-precision model, the ones its INT-b twin would fake-quantise (block
    Linears; embedding/head when config.quant_embed), asked of model.py by building the twin, so the
    rule lives in one place: on the meta device (no memory) for a large model; a small one is
    cheaper built on the CPU (meta tensors' factory functions import torch._dynamo, ~2 s), with
    the RNG state put back (its init draws)."""
    qat = [(n, m) for n, m in model.named_modules() if isinstance(m, (QATLinear, QATEmbedding))]
    if model.config.bits < 16:
        return [(n, m) for n, m in qat if m.bits < 16]
    small = sum(p.numel() for p in model.parameters()) <= SMALL_TWIN
    with torch.random.fork_rng(devices=[]), torch.device("cpu" if small else "meta"):
        twin = type(model)(dataclasses.replace(model.config, bits=8))
    names = {n for n, m in twin.named_modules() if isinstance(m, (QATLinear, QATEmbedding)) and m.bits < 16}
    return [(n, m) for n, m in qat if n in names]


# -----------------------------------------------------------------------------
# Bit packing: offset codes u = q + qmax in [0, 2^b - 2] as b-bit fields, row-major,
# least significant bit first, in one uint8 stream (the last byte zero-padded)

PACK_CHUNK = 1 << 20  # values per chunk (a multiple of 8, so chunks pack to whole bytes)


def pack_codes(q, bits):
    """Signed codes q (any shape) -> uint8 tensor of ceil(numel * bits / 8) bytes."""
    check_bits(bits)
    qmax = 2 ** (bits - 1) - 1
    u = q.reshape(-1).to(torch.int16) + qmax
    if u.numel() and (u.min() < 0 or u.max() > 2 * qmax):
        raise ValueError(f"codes outside [-{qmax}, {qmax}] for {bits} bits")
    u = u.to(torch.uint8).cpu().numpy()
    out = []
    for i in range(0, max(len(u), 1), PACK_CHUNK):  # chunked: the bit array is 8x the chunk
        fields = np.unpackbits(u[i:i + PACK_CHUNK, None], axis=1, count=bits, bitorder="little")
        out.append(np.packbits(fields.reshape(-1), bitorder="little"))
    return torch.from_numpy(np.concatenate(out))


def unpack_codes(packed, bits, shape):
    """Inverse of pack_codes: uint8 stream -> int8 codes of the given shape."""
    check_bits(bits)
    n, qmax = math.prod(shape), 2 ** (bits - 1) - 1
    if packed.numel() != math.ceil(n * bits / 8):
        raise ValueError(f"{packed.numel()} bytes cannot hold {n} codes of {bits} bits")
    data, out, step = packed.cpu().numpy(), [], PACK_CHUNK * bits // 8
    for i in range(0, max(n, 1), PACK_CHUNK):
        m = min(PACK_CHUNK, n - i)
        fields = np.unpackbits(data[i // 8 * bits:i // 8 * bits + step], count=m * bits, bitorder="little")
        out.append(np.packbits(fields.reshape(m, bits), axis=1, bitorder="little")[:, 0])
    u = torch.from_numpy(np.concatenate(out).astype(np.int16))
    return (u - qmax).to(torch.int8).reshape(shape)


# -----------------------------------------------------------------------------
# PTQ baseline: round-to-nearest on the same grid, same matrices

@torch.no_grad()
def ptq_model(model, bits, clip="absmax"):
    """A copy of model with every quant_targets matrix replaced by its round-to-nearest w_hat on
    the b-bit grid, and fake quantisation off (the weights are already on the grid)."""
    check_bits(bits)
    model = copy.deepcopy(model)
    for _, m in quant_targets(model):
        q, s = quantize(m.weight, bits, clip)
        m.weight.copy_(q.float() * s)
    set_qat(model, False)
    return model


def frozen(model):
    """The model to evaluate, with nothing re-quantised at every batch: a QAT model becomes a copy
    whose fake-quantised modules are marked full precision, so their weights pass straight through
    (qat_weight's tensor switch computes the fake quantisation even when off), holding the weights
    on the grid (ptq_model at the model's own bits and clip) where fake quantisation is on, as they
    are where it is off. Every output is the same bit for bit: fake_quant's forward value is exactly
    w_hat. Any other model is returned as is."""
    targets = quant_targets(model) if getattr(model, "config", None) is not None and model.config.bits < 16 else []
    if not targets:
        return model
    on = targets[0][1].qat_on.item() > 0  # set_qat switches every module together
    twin = ptq_model(model, model.config.bits, model.config.clip) if on else copy.deepcopy(model)
    for _, m in quant_targets(twin):
        m.bits = 16
    return twin


def ptq_eval(model, eval_fn, bits_list=(8, 6, 4), clip="absmax"):
    """{"8": {"val_loss", "val_bpb", "clip"}, ...}: eval_fn(model) -> dict(loss, bpb) on each PTQ copy."""
    out = {}
    for b in bits_list:
        r = eval_fn(ptq_model(model, b, clip))
        out[str(b)] = dict(val_loss=r["loss"], val_bpb=r["bpb"], clip=clip)
    return out


# -----------------------------------------------------------------------------
# Weight-to-grid distance probe

@torch.no_grad()
def grid_distance(model, bits, clip="absmax"):
    """Mean |w/s - round(w/s)| over the model's quant_targets matrices on the b-bit grid (0 = on
    the grid, 0.25 = uniformly spread). overall is weighted by weight count. Weights clipped by a
    quantile/std rule count their distance to the nearest integer multiple of s."""
    check_bits(bits)
    mats = {f"{n}.weight": m.weight for n, m in quant_targets(model)}
    if not mats:
        raise ValueError("no quantisable matrices found")
    per, tot, cnt = {}, 0.0, 0
    for name, w in mats.items():
        x = w.detach().float() / row_scale(w, bits, clip)
        d = (x - torch.round(x)).abs()
        per[name] = d.mean().item()
        tot, cnt = tot + d.double().sum().item(), cnt + d.numel()
    return dict(overall=tot / cnt, per_layer=per)
