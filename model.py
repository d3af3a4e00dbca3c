"""
One decoder-only GPT with every architectural flag of the studies, in one file.

Base: pre-norm RMSNorm, RoPE, causal SDPA attention with grouped-query heads, ReLU^2 MLP,
tied embeddings, zero-initialised output projections. Block Linear layers are QATLinear
(quant.py): fake-quantised in the forward pass when config.bits < 16.
"""
import math
from dataclasses import dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from quant import QATEmbedding, QATLinear


@dataclass
class GPTConfig:
    vocab_size: int = 4096     # tokenizer vocabulary (including the end-of-text token)
    block_size: int = 256      # training context length (positions beyond it are evaluation-only)
    n_layer: int = 4           # transformer blocks
    n_head: int = 4            # query heads
    n_kv_head: int = 4         # key/value heads; n_head % n_kv_head == 0 (GQA; 1 = MQA)
    n_embd: int = 128          # residual width; head_dim = n_embd // n_head
    mlp: str = "relu2"         # relu2 (ReLU squared, modded-nanogpt) | swiglu | gelu
    mlp_ratio: float = 4.0     # hidden width / n_embd (swiglu uses 2/3 of it to keep the count)
    tie_embeddings: bool = True  # share the token embedding with the output head
    rope_theta: float = 10000.0  # RoPE base b: inv_freq_i = b^(-2i/d)
    rope_scaling: str = "none"   # context extension: none | pi | ntk | dynamic_ntk | yarn | llama3
    rope_factor: float = 1.0     # extension scale s = L'/L
    rope_original_len: int = 0   # pretraining length L the scaling is relative to (0 = block_size)
    yarn_beta_fast: float = 32.0  # YaRN ramp: pairs with more than beta_fast rotations in L are kept
    yarn_beta_slow: float = 1.0   # YaRN ramp: pairs with fewer than beta_slow rotations are interpolated
    bits: int = 16             # QAT bit-width of block Linear weights, 2..8; 16 = full precision
    clip: str = "absmax"       # per-row clip rule of the quantisation grid: absmax | quantile:Q | std:K
    quant_embed: bool = False  # also fake-quantise the token embedding and output head

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.n_kv_head < 1 or self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head={self.n_kv_head} must divide n_head={self.n_head}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"head_dim={self.n_embd // self.n_head} must be even for RoPE")
        if self.mlp not in ("relu2", "swiglu", "gelu"):
            raise ValueError(f"unknown mlp {self.mlp!r}: relu2 | swiglu | gelu")
        if self.bits not in (2, 3, 4, 5, 6, 7, 8, 16):
            raise ValueError(f"bits={self.bits} not in 2..8 or 16")
        from quant import parse_clip
        parse_clip(self.clip)

    @classmethod
    def from_dict(cls, d):
        """Build from a saved dict, ignoring unknown keys is NOT allowed: a checkpoint from a
        different model version must fail loudly rather than load the wrong architecture."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown model config keys {sorted(unknown)}")
        return cls(**d)


# Size presets by non-embedding parameter count (about 12 * n_layer * n_embd^2):
# name -> (n_layer, n_embd, n_head). Head dim 32 for the tiny ones, 64 from 3M up.
SIZES = {
    "0.1M": (2, 64, 2),
    "0.5M": (3, 128, 4),
    "1M": (5, 128, 4),
    "3M": (4, 256, 4),
    "5M": (6, 256, 4),
    "8M": (7, 320, 5),
    "15M": (8, 384, 6),
    "30M": (10, 512, 8),
    "50M": (10, 640, 10),
    "100M": (14, 768, 12),
    "175M": (14, 1024, 16),
    "250M": (16, 1152, 18),
    "350M": (18, 1280, 20),
}


def rope_inv_freq(head_dim, theta, method="none", factor=1.0, original_len=None,
                  beta_fast=32.0, beta_slow=1.0, seq_len=None,
                  low_freq_factor=1.0, high_freq_factor=4.0):
    """RoPE inverse frequencies inv_freq_i = theta^(-2i/d), i in [0, d/2), optionally rescaled
    for context extension. Returns (inv_freq [d/2] float64 tensor, attention_factor).

    method: none | pi | ntk | dynamic_ntk | yarn | llama3 (formulas: REFERENCE.md section 6).
    attention_factor multiplies cos and sin (so the logits scale by its square); 1 except yarn."""
    d = head_dim
    i = torch.arange(0, d, 2, dtype=torch.float64)
    base = lambda b: b ** (-i / d)
    if method == "none" or factor == 1.0:
        return base(theta), 1.0
    s = float(factor)
    L = original_len
    if method == "pi":  # position interpolation, arXiv 2306.15595
        return base(theta) / s, 1.0
    if method == "ntk":  # NTK-aware base change (bloc97)
        return base(theta * s ** (d / (d - 2))), 1.0
    if method == "dynamic_ntk":  # no change within the original length
        l = seq_len if seq_len is not None else L
        if l is None or L is None or l <= L:
            return base(theta), 1.0
        return base(theta * ((s * l / L) - (s - 1)) ** (d / (d - 2))), 1.0
    if method == "yarn":  # arXiv 2309.00071: ramp between PI and unchanged, plus temperature
        inv = base(theta)
        dim = lambda r: d * math.log(L / (2 * math.pi * r)) / (2 * math.log(theta))
        low = max(math.floor(dim(beta_fast)), 0)
        high = min(math.ceil(dim(beta_slow)), d - 1)
        if low == high:
            high += 0.001  # avoid a zero-width ramp
        gamma = ((i / 2 - low) / (high - low)).clamp(0, 1)  # pair index i/2
        # gamma = 1 for low-frequency pairs (interpolated), 0 for high-frequency pairs (kept)
        inv_new = (inv / s) * gamma + inv * (1 - gamma)
        return inv_new, 0.1 * math.log(s) + 1.0
    if method == "llama3":  # Llama 3.1 frequency-dependent blend
        inv = base(theta)
        wavelen = 2 * math.pi / inv
        low_wl, high_wl = L / low_freq_factor, L / high_freq_factor
        smooth = ((L / wavelen) - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = (1 - smooth) * inv / s + smooth * inv
        out = torch.where(wavelen > low_wl, inv / s, blended)
        out = torch.where(wavelen < high_wl, inv, out)
        return out, 1.0
    raise ValueError(f"unknown RoPE scaling method {method!r}")


def apply_rope(x, cos, sin):
    """Rotate pairs (x_i, x_{i+d/2}) by angle pos * inv_freq_i (GPT-NeoX half-split layout).
    x: [B, H, T, D]; cos, sin: [T, D/2]."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = cfg.n_embd // cfg.n_head
        q = dict(bits=cfg.bits, clip=cfg.clip)
        self.c_q = QATLinear(cfg.n_embd, cfg.n_head * self.head_dim, **q)
        self.c_k = QATLinear(cfg.n_embd, cfg.n_kv_head * self.head_dim, **q)
        self.c_v = QATLinear(cfg.n_embd, cfg.n_kv_head * self.head_dim, **q)
        self.c_proj = QATLinear(cfg.n_head * self.head_dim, cfg.n_embd, **q)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.c_k(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.c_v(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=self.n_kv_head != self.n_head)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.kind = cfg.mlp
        hidden = int(cfg.mlp_ratio * cfg.n_embd)
        q = dict(bits=cfg.bits, clip=cfg.clip)
        if self.kind == "swiglu":
            hidden = int(2 * hidden / 3)
            self.c_gate = QATLinear(cfg.n_embd, hidden, **q)
        self.c_fc = QATLinear(cfg.n_embd, hidden, **q)
        self.c_proj = QATLinear(hidden, cfg.n_embd, **q)

    def forward(self, x):
        h = self.c_fc(x)
        if self.kind == "relu2":
            h = F.relu(h).square()
        elif self.kind == "gelu":
            h = F.gelu(h)
        else:
            h = F.silu(self.c_gate(x)) * h
        return self.c_proj(h)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1, self.attn = RMSNorm(cfg.n_embd), Attention(cfg)
        self.ln_2, self.mlp = RMSNorm(cfg.n_embd), MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.ln_1(x), cos, sin)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        eq = dict(bits=config.bits if config.quant_embed else 16, clip=config.clip)
        self.wte = QATEmbedding(config.vocab_size, config.n_embd, **eq)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = RMSNorm(config.n_embd)
        self.lm_head = None if config.tie_embeddings else QATLinear(config.n_embd, config.vocab_size, **eq)
        self.set_rope()
        self.init_weights()

    def init_weights(self):
        for m in self.blocks.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=m.in_features ** -0.5)
        for name, p in self.blocks.named_parameters():
            if name.endswith("c_proj.weight"):  # zero-init residual outputs: each block starts as identity
                nn.init.zeros_(p)
        nn.init.normal_(self.wte.weight, std=0.02)  # small, so the tied head starts near uniform
        if self.lm_head is not None:
            nn.init.zeros_(self.lm_head.weight)  # untied head starts exactly uniform (modded-nanogpt)

    def set_rope(self):
        """(Re)compute RoPE frequencies from the config (call again after changing rope_* fields)."""
        c = self.config
        self.rope_kwargs = dict(method=c.rope_scaling, factor=c.rope_factor,
                                original_len=c.rope_original_len or c.block_size,
                                beta_fast=c.yarn_beta_fast, beta_slow=c.yarn_beta_slow)
        inv, attn_factor = rope_inv_freq(c.n_embd // c.n_head, c.rope_theta, **self.rope_kwargs)
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        self.rope_attn_factor = attn_factor

    def rope_cos_sin(self, T, device):
        inv = self.inv_freq
        if self.config.rope_scaling == "dynamic_ntk":  # frequencies depend on the current length
            c = self.config
            inv = rope_inv_freq(c.n_embd // c.n_head, c.rope_theta, seq_len=T, **self.rope_kwargs)[0]
        t = torch.arange(T, device=device, dtype=torch.float32)
        ang = torch.outer(t, inv.float().to(device))
        return torch.cos(ang) * self.rope_attn_factor, torch.sin(ang) * self.rope_attn_factor

    def num_params(self, non_embedding=False):
        """Parameter count; non_embedding excludes the token embedding and an untied head."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel()
            if self.lm_head is not None:
                n -= self.lm_head.weight.numel()
        return n

    def forward(self, idx, targets=None, reduction="mean"):
        """idx [B, T] token ids -> (logits [B, T, V] float32, loss or None).
        reduction='none' returns the per-token loss [B, T] (targets < 0 are ignored)."""
        B, T = idx.shape
        cos, sin = self.rope_cos_sin(T, idx.device)
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        x = self.ln_f(x)
        # tied head: reuse the (possibly fake-quantised) embedding matrix
        logits = (self.lm_head(x) if self.lm_head is not None else F.linear(x, self.wte.effective_weight())).float()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=-1, reduction=reduction)
            if reduction == "none":
                loss = loss.view(B, T)
        return logits, loss
