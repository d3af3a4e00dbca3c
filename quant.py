"""
Quantisation for QAT: fake quantisation with a straight-through estimator.

Symmetric per-output-row grid (REFERENCE.md section 3): for bit-width b,
qmax = 2^(b-1) - 1, scale_r = clip_r / qmax, q = clamp(round(w / scale), -qmax, qmax),
w_hat = q * scale. b = 16 means full precision (no quantisation).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VALID_BITS = (2, 3, 4, 5, 6, 7, 8, 16)


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


def row_clip(w, clip="absmax"):
    """Per-row clipping threshold clip_r, shape [rows, 1]. Never zero (a zero row keeps a tiny scale)."""
    kind, v = parse_clip(clip)
    a = w.detach().float().abs()
    if kind == "absmax":
        c = a.amax(dim=1, keepdim=True)
    elif kind == "quantile":
        c = torch.quantile(a, v, dim=1, keepdim=True)
    else:  # std: k standard deviations around zero (symmetric grid)
        c = v * w.detach().float().pow(2).mean(dim=1, keepdim=True).sqrt()
        c = torch.minimum(c, a.amax(dim=1, keepdim=True))
    # a clip of 0 would make scale 0 and a NaN grid; fall back to the row's absmax, then to eps
    c = torch.where(c > 0, c, a.amax(dim=1, keepdim=True))
    return c.clamp_min(1e-12)


def row_scale(w, bits, clip="absmax"):
    """Per-row step size s_r = clip_r / qmax, shape [rows, 1] in float32."""
    qmax = 2 ** (bits - 1) - 1
    return row_clip(w, clip) / qmax


def quantize(w, bits, clip="absmax"):
    """Integer codes q (int8, in [-qmax, qmax]) and per-row float32 scales. w_hat = q * scale."""
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
    return w + (w_hat - w).detach()


class QATLinear(nn.Linear):
    """nn.Linear whose weight is fake-quantised in the forward pass when QAT is on.

    QAT is switched by the `qat_on` buffer (a 0/1 tensor), not by a Python attribute:
    torch.compile constant-folds Python attributes, so a late-QAT switch would silently
    never happen (REFERENCE.md section 3, pitfall)."""

    def __init__(self, in_features, out_features, bias=False, bits=16, clip="absmax"):
        super().__init__(in_features, out_features, bias=bias)
        self.bits, self.clip = bits, clip
        self.register_buffer("qat_on", torch.tensor(1.0 if bits < 16 else 0.0), persistent=False)

    def forward(self, x):
        w = self.weight
        if self.bits < 16:
            # w + on * (fq(w) - w): value switches with the tensor, gradient stays identity
            w = w + self.qat_on.to(w.dtype) * (fake_quant(w, self.bits, self.clip) - w)
        return F.linear(x, w, self.bias)


class QATEmbedding(nn.Embedding):
    """Token embedding with the same switchable fake quantisation (per row = per token);
    used when the embedding/head are quantised too (GPTConfig.quant_embed)."""

    def __init__(self, num_embeddings, embedding_dim, bits=16, clip="absmax"):
        super().__init__(num_embeddings, embedding_dim)
        self.bits, self.clip = bits, clip
        self.register_buffer("qat_on", torch.tensor(1.0 if bits < 16 else 0.0), persistent=False)

    def effective_weight(self):
        w = self.weight
        if self.bits < 16:
            w = w + self.qat_on.to(w.dtype) * (fake_quant(w, self.bits, self.clip) - w)
        return w

    def forward(self, idx):
        return F.embedding(idx, self.effective_weight())


def set_qat(model, on):
    """Switch fake quantisation on/off in every QAT module (in place, compile-safe)."""
    for m in model.modules():
        if isinstance(m, (QATLinear, QATEmbedding)):
            m.qat_on.fill_(1.0 if on else 0.0)
