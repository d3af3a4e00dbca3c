"""
One decoder-only GPT with every architectural flag of the studies, in one file.

Read it top to bottom: the config, then the base transformer (RMSNorm, MLP, attention, block,
GPT: pre-norm, RoPE, causal SDPA attention with grouped-query heads, ReLU^2 MLP, tied embeddings,
zero-initialised output projections), then one section per family of long-context variants:
  - positional encodings: RoPE and its extension scalings (PI, NTK, YaRN, Llama 3), partial
    RoPE, HoPE, ExPE, ALiBi, NoPE, learned absolute positions, SWAN's per-layer mix, log-n scaling
  - attention kernels: sliding windows and ALiBi without a T x T matrix, and the one mask rule
    that every kernel and the attention probes share
  - chunk-based sparse attention (landmark retrieval of past chunks)
Last, the model as a run sees it: the checkpoint format every script shares, the model rebuilt
from a checkpoint, and its loss on a token split (train.py's validation, evaluate.py, tools/export.py).
Block Linear layers are QATLinear (quant.py): fake-quantised in the forward pass when bits < 16.
No path builds a T x T matrix except inside SDPA's own kernels.
"""
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import cli
from cli import UserError, atomic_write, flag
from quant import QATEmbedding, QATLinear, check_bits, parse_clip

# The positional encodings, named once: every other file (extend.py, tools/export.py, the analysis, the test of
# sweep.sh's lists) reads these. POS_KINDS: per-layer kinds (expe: with expe_on=qk); ROTARY_POS: those that
# rotate q and k (RoPE scaling acts on them); MODEL_WIDE_POS (below): added to the embedding.
POS_KINDS = ("rope", "nope", "alibi", "hope", "expe")
ROTARY_POS = ("rope", "hope")
SINUSOIDAL_RMS = 0.02  # rms of the added sinusoidal table: the token embedding's init std (Vaswani et al. scale
# the embedding by sqrt(d_model) to meet their amplitude-1 table; here the tied wte stays small, so the table shrinks)
MODEL_WIDE_POS = ("learned", "sinusoidal")  # absolute, added to the embedding; expe with expe_on=embed too
ROPE_SCALINGS = ("none", "pi", "ntk", "dynamic_ntk", "yarn", "llama3")  # ABF is a new rope_theta, no scaling
QK_NORMS = ("none", "layer", "head")
NORM_ORDERS = ("pre", "post")


@dataclass
class GPTConfig:
    vocab_size: int = 4096      # set from the tokenizer, not a flag
    block_size: int = flag(256, "training context length (positions beyond it are evaluation-only)")
    n_layer: int = flag(4, "transformer blocks (train.py: default from --size)")
    n_head: int = flag(4, "query heads (train.py: default from --size)")
    n_kv_head: int = flag(0, "key/value heads, dividing n_head: GQA (1 = MQA; 0 = n_head)")
    n_embd: int = flag(128, "residual width; head_dim = n_embd // n_head (train.py: default from --size)")
    mlp: str = flag("relu2", "relu2 (ReLU squared, modded-nanogpt) | swiglu | gelu")
    mlp_ratio: float = flag(4.0, "hidden width / n_embd (swiglu uses 2/3 of it to keep the count)")
    tie_embeddings: bool = flag(True, "share the token embedding with the output head")
    # quantisation-aware training (quant.py)
    bits: int = flag(16, "QAT bit-width of the block Linear weights, 2..8; 16 = full precision")
    clip: str = flag("absmax", "per-row clip rule of the quantisation grid: absmax | quantile:Q | std:K")
    quant_embed: bool = flag(False, "also fake-quantise the token embedding and output head")
    # long-context architecture; lists are comma-separated strings
    qk_norm: str = flag("none", "RMSNorm of q, k: none | layer (whole projection, Olmo 2/3) | head (Qwen3)")
    norm_order: str = flag("pre", "pre: x + f(norm(x)) | post: x + norm(f(x)) (Olmo 2)")
    window: int = flag(0, "sliding window (tokens) of the windowed layers; 0 = every layer global")
    global_every: int = flag(0, "with window: the last layer of each group of k is global (4 = 3:1)")
    layer_pattern: str = flag("", "explicit per-layer spans w | g, e.g. 'w,w,w,g' (overrides global_every)")
    pos: str = flag("rope", f"positions: {' | '.join(POS_KINDS + MODEL_WIDE_POS)} (absolute, added to wte)")
    pos_pattern: str = flag("", "per-layer kinds overriding pos, e.g. 'rope,rope,rope,nope'")
    swan: bool = flag(False, "SWAN-GPT (arXiv 2504.08719): RoPE on windowed layers, NoPE on global layers")
    logn_scale: bool = flag(False, "SWAN: q *= max(1, ln(pos+1) / ln L_train) in global layers; read at forward time")
    rope_theta: float = flag(10000.0, "RoPE base b: inv_freq_i = b^(-2i/d) (ABF raises it)")
    rope_frac: float = flag(1.0, "partial RoPE: fraction of each head's dims rotated (rounded to even)")
    rope_scaling: str = flag("none", "context extension: none | pi | ntk | dynamic_ntk | yarn | llama3")
    rope_factor: float = flag(1.0, "extension scale s = L'/L")
    rope_original_len: int = flag(0, "pretraining length L the scaling is relative to (0 = block_size)")
    rope_scaling_layers: str = flag("all", "rope_scaling applies to: all | global (Olmo 3: windowed keep plain RoPE)")
    yarn_beta_fast: float = flag(32.0, "YaRN ramp: pairs with more than beta_fast rotations in L are kept")
    yarn_beta_slow: float = flag(1.0, "YaRN ramp: pairs with fewer than beta_slow rotations are interpolated")
    hope_cutoff: int = flag(0, "HoPE (arXiv 2410.21216): pairs of wavelength > cutoff unrotated (0 = block_size)")
    expe_on: str = flag("embed", "ExPE (arXiv 2509.19569) writes into: embed (the token embedding, as published) | qk (every q, k head)")
    expe_dims: int = flag(2, "ExPE: leading dims of the embedding (or of each q, k head) := S + slope * position")
    expe_start: float = flag(1.0, "ExPE offset S")
    expe_slope: float = flag(0.0, "ExPE slope per token (0 = 1 / block_size: grows by 1 over the training length)")
    chunk_layers: str = flag("", "chunk sparse attention (arXiv 2510.17196) in layers: '' | all | indices '1,3'")
    chunk_size: int = flag(64, "tokens per retrievable chunk; also chunk layers' local window when window = 0")
    chunk_topk: int = flag(2, "past chunks each query retrieves (hard top-k, in training as in evaluation)")
    # the three principles of arXiv 2510.17196, each removable for the ablation
    chunk_encoder: str = flag("mlp_cls", "landmark encoder: mlp_cls (ReLU^2 MLP + CLS pooling) | linear (mean of a linear map)")
    chunk_bypass: bool = flag(True, "retrieved output on its own residual path; false: summed with local attention before its c_proj")
    chunk_dense_train: bool = flag(False, "train with dense retrieval (softmax over every past chunk), top-k only at evaluation")
    sdpa_backend: str = flag("auto", "SDPA kernel per call kind: auto (torch chooses) | flash | cudnn | efficient | math "
                             "| per kind, e.g. 'causal:flash,gqa:cudnn,mask:efficient' (gpu_check's sdpa row prints "
                             "the fastest it measured; kinds: causal, gqa, mask)")

    def __post_init__(self):
        if self.n_kv_head == 0:
            self.n_kv_head = self.n_head
        if min(self.vocab_size, self.block_size, self.n_layer, self.n_head, self.n_embd) < 1 or self.mlp_ratio <= 0:
            raise ValueError("vocab_size, block_size, n_layer, n_head, n_embd and mlp_ratio must be positive")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.n_kv_head < 1 or self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head={self.n_kv_head} must divide n_head={self.n_head}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"head_dim={self.n_embd // self.n_head} must be even for RoPE")
        if self.mlp not in ("relu2", "swiglu", "gelu"):
            raise ValueError(f"unknown mlp {self.mlp!r}: relu2 | swiglu | gelu")
        check_bits(self.bits, full=True)
        parse_clip(self.clip)
        self._check_long_context()

    def _check_long_context(self):
        for name, allowed in (("qk_norm", QK_NORMS), ("norm_order", NORM_ORDERS),
                              ("pos", POS_KINDS + MODEL_WIDE_POS), ("rope_scaling_layers", ("all", "global")),
                              ("expe_on", ("embed", "qk")), ("chunk_encoder", ("mlp_cls", "linear")),
                              ("rope_scaling", ROPE_SCALINGS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}: {' | '.join(allowed)}")
        parse_sdpa_backend(self.sdpa_backend)
        if not self.rope_theta > 1:
            raise ValueError(f"rope_theta={self.rope_theta} must be > 1")
        if self.rope_factor < 1 or self.rope_original_len < 0 or min(self.yarn_beta_fast, self.yarn_beta_slow) <= 0:
            raise ValueError(f"rope_factor={self.rope_factor} must be >= 1, rope_original_len="
                             f"{self.rope_original_len} >= 0 and the yarn betas > 0")
        if not 0 <= self.window <= self.block_size:
            raise ValueError(f"window={self.window} must be in [0, block_size={self.block_size}]")
        if self.global_every < 0 or (self.global_every and not self.window):
            raise ValueError(f"global_every={self.global_every} needs window > 0 (and must be >= 0)")
        if not 0 < self.rope_frac <= 1 or rope_dims(self) == 0:
            raise ValueError(f"rope_frac={self.rope_frac} must be in (0, 1] and rotate at least one pair")
        if self.hope_cutoff < 0:
            raise ValueError(f"hope_cutoff={self.hope_cutoff} must be >= 0 (0 = block_size)")
        room = self.n_embd if self.expe_on == "embed" else self.n_embd // self.n_head
        if not 0 <= self.expe_dims <= room:
            raise ValueError(f"expe_dims={self.expe_dims} must be in [0, {'n_embd' if self.expe_on == 'embed' else 'head_dim'}={room}]")
        if self.swan and (self.pos != "rope" or self.pos_pattern):
            raise ValueError("swan sets the positional encoding per layer: leave pos=rope and pos_pattern empty")
        plan = layer_plan(self)  # validates the per-layer patterns
        if self.swan and not (self.window and any(l.window == 0 for l in plan)):
            raise ValueError("swan needs window > 0 and at least one global layer (global_every or layer_pattern)")
        if (self.pos == "expe" or "expe" in {l.pos for l in plan}) and self.expe_dims == 0:
            raise ValueError("pos expe needs expe_dims >= 1")
        if self.expe_on == "embed" and "expe" in {l.pos for l in plan}:
            raise ValueError("a per-layer expe (pos_pattern) writes into q and k: set expe_on=qk")
        if any(l.chunk for l in plan) and not (0 < self.chunk_size < self.block_size and self.chunk_topk >= 1):
            raise ValueError(f"chunk attention needs 0 < chunk_size={self.chunk_size} < block_size="
                             f"{self.block_size} and chunk_topk={self.chunk_topk} >= 1")

    @classmethod
    def from_dict(cls, d):
        """Build from a saved dict. Unknown keys are an error: a checkpoint from another model
        version must fail loudly rather than load the wrong architecture."""
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown model config keys {sorted(unknown)}")
        return cls(**d)


# Size presets by non-embedding parameter count (about 12 * n_layer * n_embd^2):
# name -> (n_layer, n_embd, n_head). Head dim 32 for the tiny ones, 64 from 3M up.
SIZES = {
    # the tiny QAT study's CPU family (sweep.sh, SCALE=tiny): 2 layers, width 16-48, head dim 8-24
    "6K": (2, 16, 2),
    "10K": (2, 20, 2),
    "14K": (2, 24, 2),
    "25K": (2, 32, 2),
    "39K": (2, 40, 2),
    "55K": (2, 48, 2),
    "0.1M": (2, 64, 2),
    "0.5M": (3, 128, 4),
    "1M": (5, 128, 4),
    "3M": (4, 256, 4),
    "5M": (6, 256, 4),
    "8M": (7, 320, 5),
    "15M": (8, 384, 6),
    "20M": (9, 448, 7),
    "30M": (10, 512, 8),
    "50M": (10, 640, 10),
    "100M": (14, 768, 12),
    "175M": (14, 1024, 16),
    "250M": (16, 1152, 18),
    "350M": (18, 1280, 20),
}


class Layer(NamedTuple):
    """What one block's attention does: window (0 = global causal), positional kind, chunk
    retrieval, whether rope_scaling applies to it, and its index in the stack (for an encoding
    with a per-layer parameter: GPT.position_table reads it)."""
    window: int
    pos: str
    chunk: bool
    scaled: bool
    index: int = 0


def embedding_positions(c):
    """True when the positions enter through the embedding (learned, sinusoidal, ExPE as published)."""
    return c.pos in MODEL_WIDE_POS or (c.pos == "expe" and c.expe_on == "embed")


def _split(s):
    return [t.strip() for t in s.split(",")] if s.strip() else []


def layer_plan(c):
    """Per-layer Layer list from the config's window / pattern / pos / swan / chunk flags.
    Raises ValueError for patterns that do not match n_layer or name unknown kinds."""
    n = c.n_layer
    if c.layer_pattern:
        spans = _split(c.layer_pattern)
        if len(spans) != n or set(spans) - {"w", "g"}:
            raise ValueError(f"layer_pattern {c.layer_pattern!r} must list n_layer={n} entries of w | g")
        if "w" in spans and not c.window:
            raise ValueError(f"layer_pattern {c.layer_pattern!r} has windowed layers but window=0")
    else:  # Olmo 3 / Gemma: the last layer of each group of global_every is global
        spans = ["g" if not c.window or (c.global_every and (i + 1) % c.global_every == 0) else "w"
                 for i in range(n)]
    if c.pos_pattern:
        pos = _split(c.pos_pattern)
        if len(pos) != n or set(pos) - set(POS_KINDS):
            raise ValueError(f"pos_pattern {c.pos_pattern!r} must list n_layer={n} entries of "
                             f"{' | '.join(POS_KINDS)}")
    elif c.swan:  # SWAN-GPT: RoPE where the window bounds the distances, NoPE where it does not
        pos = ["rope" if s == "w" else "nope" for s in spans]
    else:  # absolute positions are in the embedding; its layers see no other positional signal
        pos = ["nope" if embedding_positions(c) else c.pos] * n
    chunk = set(range(n)) if c.chunk_layers.strip() == "all" else set()
    if c.chunk_layers.strip() not in ("", "all"):
        try:
            chunk = {int(t) for t in _split(c.chunk_layers)}
        except ValueError:
            raise ValueError(f"chunk_layers {c.chunk_layers!r}: use 'all' or layer indices like '1,3'") from None
        if not chunk <= set(range(n)):
            raise ValueError(f"chunk_layers {c.chunk_layers!r}: indices must be in [0, n_layer={n})")
    plan = []
    for i in range(n):
        # chunk layers are local (windowed) + retrieval whatever their span
        w = (c.window or c.chunk_size) if i in chunk else (c.window if spans[i] == "w" else 0)
        plan.append(Layer(w, pos[i], i in chunk, c.rope_scaling_layers == "all" or w == 0, i))
    return plan


# -----------------------------------------------------------------------------
# The base transformer

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


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


class Attention(nn.Module):
    def __init__(self, cfg, layer=None):
        super().__init__()
        self.layer = layer or layer_plan(cfg)[0]
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = cfg.n_embd // cfg.n_head
        q = dict(bits=cfg.bits, clip=cfg.clip)
        self.c_q = QATLinear(cfg.n_embd, cfg.n_head * self.head_dim, **q)
        self.c_k = QATLinear(cfg.n_embd, cfg.n_kv_head * self.head_dim, **q)
        self.c_v = QATLinear(cfg.n_embd, cfg.n_kv_head * self.head_dim, **q)
        self.c_proj = QATLinear(cfg.n_head * self.head_dim, cfg.n_embd, **q)
        self.qk_norm = cfg.qk_norm
        if cfg.qk_norm != "none":  # layer: one gain over all heads' dims; head: one gain over head_dim, shared
            nq, nk = (cfg.n_head, cfg.n_kv_head) if cfg.qk_norm == "layer" else (1, 1)
            self.q_norm, self.k_norm = RMSNorm(nq * self.head_dim), RMSNorm(nk * self.head_dim)
        if self.layer.pos == "alibi":
            self.register_buffer("slopes", alibi_slopes(cfg.n_head), persistent=False)
        self.retr = ChunkRetrieval(cfg) if self.layer.chunk else None
        self.bypass = cfg.chunk_bypass
        # ExPE on the embedding: the positions ride the residual stream into every layer's q and k, so
        # those projections and the attention run in fp32 (a bf16 input rounds S + slope * n to steps
        # of 8 tokens at 1k), as the q/k variant attends in fp32
        self.fp32_qk = cfg.pos == "expe" and cfg.expe_on == "embed"

    def qkv(self, x, pe):
        """Projections with QK-norm and positions: (q, k, v, q0, k0) as [B, heads, T, D], where q, k
        carry the layer's positional encoding (and log-n scaling) and q0, k0 are position-free."""
        B, T, _ = x.shape
        q, k, v = self.c_q(x), self.c_k(x), self.c_v(x)
        if self.qk_norm == "layer":  # Olmo 2/3: before splitting heads
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        if self.qk_norm == "head":  # Qwen3 / Gemma 3
            q, k = self.q_norm(q), self.k_norm(k)
        q0, k0 = q, k
        pos, table = self.layer.pos, pe["layers"][self.layer.index]
        if pos in ROTARY_POS:
            cos, sin = table
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        elif pos == "expe":
            q, k = apply_expe(q, table), apply_expe(k, table)
        if self.layer.window == 0 and pe["logn"] is not None:  # windowed layers never see more keys
            q = q * pe["logn"].to(q.dtype)
        return q, k, v, q0, k0

    def forward(self, x, pe):
        """-> (attention output [B, T, E], retrieval branch output or None)."""
        B, T, _ = x.shape
        if self.fp32_qk:
            with torch.autocast(x.device.type, enabled=False):
                q, k, v, q0, k0 = self.qkv(x.float(), pe)
        else:
            q, k, v, q0, k0 = self.qkv(x, pe)
        if self.layer.pos == "expe" or self.fp32_qk:  # fp32 under any autocast: ExPE's positions in bf16 go up in steps (8 tokens at 1k)
            with torch.autocast(x.device.type, enabled=False):
                y = attend(q.float(), k.float(), v.float(), self.layer.window)
        else:
            y = attend(q, k, v, self.layer.window, getattr(self, "slopes", None))
        y = y.transpose(1, 2).reshape(B, T, -1)
        if self.retr is not None and not self.bypass:  # ablation of principle 2: one shared output path
            r = self.retr(x, q0, k0, v, project=False)
            return self.c_proj(y if r is None else y + r), None
        return self.c_proj(y), (self.retr(x, q0, k0, v) if self.retr is not None else None)

    def maps(self, x, pe):
        """For probes: yield (branch, start, A) for the one sequence x [1, T, E]. A [H, n, T] holds
        the attention probabilities of queries start..start+n-1 over every key, computed from this
        layer's own q, k, mask and ALiBi slopes (what the kernels compute without storing it);
        branch "attn", and "retrieval" for a chunk layer's retrieval branch."""
        q, k, _, q0, k0 = self.qkv(x, pe)
        q, k = q[0].float(), k[0].float().repeat_interleave(self.n_head // self.n_kv_head, 0)
        H, T, _ = q.shape
        n = max(1, MAX_SCORES // 4 // (H * T))
        slopes = getattr(self, "slopes", None)
        for s in range(0, T, n):
            A = attention_probs(q[:, s:s + n], k, s, self.layer.window, slopes)
            yield "attn", s, F.pad(A, (0, T - A.shape[-1]))
        if self.retr is not None:
            for s, A in self.retr.maps(x, q0, k0, n):
                yield "retrieval", s, A


class Block(nn.Module):
    def __init__(self, cfg, layer=None):
        super().__init__()
        self.post = cfg.norm_order == "post"
        self.ln_1, self.attn = RMSNorm(cfg.n_embd), Attention(cfg, layer)
        self.ln_2, self.mlp = RMSNorm(cfg.n_embd), MLP(cfg)

    def attn_input(self, x):
        return x if self.post else self.ln_1(x)

    def forward(self, x, pe):
        y, r = self.attn(self.attn_input(x), pe)
        if self.post:  # Olmo 2: x + norm(f(x)); the retrieval branch bypasses the norm
            x = x + self.ln_1(y) if r is None else x + self.ln_1(y) + r
            return x + self.ln_2(self.mlp(x))
        x = x + y if r is None else x + y + r
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        set_sdpa_backend(config.sdpa_backend)
        self.plan = layer_plan(config)
        eq = dict(bits=config.bits if config.quant_embed else 16, clip=config.clip)
        self.wte = QATEmbedding(config.vocab_size, config.n_embd, **eq)
        # classic learned absolute positions (baseline): only block_size of them exist
        self.wpe = QATEmbedding(config.block_size, config.n_embd, **eq) if config.pos == "learned" else None
        self.blocks = nn.ModuleList(Block(config, layer) for layer in self.plan)
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
        if self.wpe is not None:
            nn.init.normal_(self.wpe.weight, std=0.02)
        if self.lm_head is not None:
            nn.init.zeros_(self.lm_head.weight)  # untied head starts exactly uniform (modded-nanogpt)

    def num_params(self, non_embedding=False):
        """Parameter count; non_embedding excludes the token (and learned position) embedding and an
        untied head."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel()
            if self.wpe is not None:
                n -= self.wpe.weight.numel()
            if self.lm_head is not None:
                n -= self.lm_head.weight.numel()
        return n

    def embed(self, idx):
        x = self.wte(idx)
        if self.wpe is not None:
            T = idx.shape[1]
            if T > self.config.block_size:
                raise ValueError(f"pos=learned has only block_size={self.config.block_size} positions; "
                                 f"cannot run {T} tokens")
            x = x + self.wpe(torch.arange(T, device=idx.device))
        c = self.config
        if c.pos == "sinusoidal":  # at the token embedding's init scale (rms 0.02, as wte and wpe), not
            # amplitude 1: after the pre-norm an amplitude-1 table swamps the 0.02 tokens (text loss 4.58)
            x = x + (SINUSOIDAL_RMS * 2 ** 0.5 * sinusoidal_table(idx.shape[1], c.n_embd, idx.device)).to(x.dtype)
        elif c.pos == "expe" and c.expe_on == "embed":
            x = expe_embed(x, expe_values(idx.shape[1], c, idx.device))
        return x

    def forward(self, idx, targets=None, reduction="mean", rows=None):
        """idx [B, T] token ids -> (logits [B, T, V] float32, loss or None).
        reduction='none' returns the per-token loss [B, T] (targets < 0 are ignored).
        rows [B, n] (no targets): the logits [B, n, V] of those positions only, so that scoring a few
        answer tokens at long T never builds [B, T, V] logits."""
        B, T = idx.shape
        x = self.embed(idx)
        pe = self.positions(T, idx.device)
        for block in self.blocks:
            x = block(x, pe)
        x = self.ln_f(x)
        if rows is not None:
            x = x.gather(1, rows[..., None].expand(-1, -1, x.shape[-1]))
        # tied head: reuse the (possibly fake-quantised) embedding matrix
        logits = (self.lm_head(x) if self.lm_head is not None else F.linear(x, self.wte.effective_weight())).float()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=-1, reduction=reduction)
            if reduction == "none":
                loss = loss.view(B, T)
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx):
        """For probes (evaluate.py): run one sequence idx [1, T] and yield (layer, branch, start, A)
        from every layer's Attention.maps, in query blocks, so no T x T map is ever held."""
        x = self.embed(idx)
        pe = self.positions(idx.shape[1], idx.device)
        for i, block in enumerate(self.blocks):
            for branch, start, A in block.attn.maps(block.attn_input(x), pe):
                yield i, branch, start, A
            x = block(x, pe)

    # -------------------------------------------------------------------------
    # positional tables shared by the layers of one forward pass

    def set_rope(self):
        """(Re)compute RoPE frequencies from the config (call again after changing rope_* fields)."""
        c = self.config
        self.rope_dims = rope_dims(c)
        self.rope_kwargs = dict(method=c.rope_scaling, factor=c.rope_factor,
                                original_len=c.rope_original_len or c.block_size,
                                beta_fast=c.yarn_beta_fast, beta_slow=c.yarn_beta_slow)
        inv, attn_factor = rope_inv_freq(self.rope_dims, c.rope_theta, **self.rope_kwargs)
        plain = rope_inv_freq(self.rope_dims, c.rope_theta)[0]
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        self.register_buffer("inv_freq_plain", plain.float(), persistent=False)
        # HoPE keeps the pairs that complete a rotation within the cutoff (judged on the trained frequencies)
        keep = 2 * math.pi / plain <= (c.hope_cutoff or c.block_size)
        self.register_buffer("hope_keep", keep.float(), persistent=False)
        self.rope_attn_factor = attn_factor

    @property
    def hope_pairs_removed(self):
        """Rotary pairs per head that HoPE leaves unrotated (of rope_dims / 2; run record: train.py)."""
        return int((self.hope_keep == 0).sum())

    def rope_cos_sin(self, T, device, hope=False, scaled=True):
        """cos, sin [T, rope_dims/2]. hope: HoPE's dropped pairs get angle 0 (cos 1, sin 0:
        position-independent); scaled=False: plain RoPE, ignoring rope_scaling."""
        c = self.config
        inv, factor = self.inv_freq, self.rope_attn_factor
        if not scaled:
            inv, factor = self.inv_freq_plain, 1.0
        elif c.rope_scaling == "dynamic_ntk":  # frequencies depend on the current length
            inv = rope_inv_freq(self.rope_dims, c.rope_theta, seq_len=T, **self.rope_kwargs)[0]
        inv = inv.float().to(device)
        if hope:
            inv = inv * self.hope_keep.to(device)
        t = torch.arange(T, device=device, dtype=torch.float32)
        ang = torch.outer(t, inv)
        return torch.cos(ang) * factor, torch.sin(ang) * factor

    def position_table(self, layer, T, device):
        """The table layer's encoding reads in Attention.qkv for T positions (None: it reads none):
        cos/sin for RoPE and HoPE, the values for ExPE on q and k. An encoding with a per-layer
        parameter reads layer.index here, and adds it to the sharing key in positions."""
        if layer.pos in ROTARY_POS:
            return self.rope_cos_sin(T, device, hope=layer.pos == "hope", scaled=layer.scaled)
        if layer.pos == "expe":
            return expe_values(T, self.config, device)
        return None

    def positions(self, T, device):
        """Per-forward position tables: pe["layers"][i] is layer i's table (layers with the same
        kind and scaling share one, computed once a forward), pe["logn"] the log-n query factors
        (None within the training length)."""
        c = self.config
        shared, layers = {}, []
        for layer in self.plan:
            key = (layer.pos, layer.scaled)
            if key not in shared:
                shared[key] = self.position_table(layer, T, device)
            layers.append(shared[key])
        pe = {"layers": layers, "logn": None}
        L = c.rope_original_len or c.block_size
        if c.logn_scale and T > L:  # SWAN: keep attention entropy from growing with length
            n = torch.arange(1, T + 1, device=device, dtype=torch.float32)
            pe["logn"] = (torch.log(n) / math.log(L)).clamp_min(1.0)[:, None]
        return pe


def flops_per_token(n_params, n_layer, n_embd, seq_len, vocab_size=0):
    """Training FLOPs (forward + backward) per token: 6 per weight of every matmul, i.e. the
    n_params non-embedding parameters plus the output head's vocab_size * n_embd (a matmul even
    when tied to the embedding; the embedding lookup itself is free), plus the attention scores and
    their weighted sum, 12 * n_layer * n_embd * seq_len (PaLM, arXiv 2204.02311 appendix B, as
    nanoGPT's estimate_mfu; the full T x T count, although causal kernels skip the masked half).
    Norm gains count as weights (negligible); fake quantisation counts nothing. A forward pass
    alone (evaluation) is a third of it. Pure arithmetic: the GPU check's MFU and sweep.sh --cost
    use this one formula."""
    return 6 * (n_params + vocab_size * n_embd) + 12 * n_layer * n_embd * seq_len


# -----------------------------------------------------------------------------
# Positional encodings

def rope_dims(c):
    """Rotated dims per head (partial RoPE: the leading rope_frac of each head, rounded to even)."""
    return 2 * round(c.rope_frac * (c.n_embd // c.n_head) / 2)


def rope_inv_freq(head_dim, theta, method="none", factor=1.0, original_len=None,
                  beta_fast=32.0, beta_slow=1.0, seq_len=None,
                  low_freq_factor=1.0, high_freq_factor=4.0):
    """RoPE inverse frequencies inv_freq_i = theta^(-2i/d), i in [0, d/2) (RoFormer, arXiv
    2104.09864, eq. 15), optionally rescaled for context extension. Returns (inv_freq [d/2]
    float64 tensor, attention_factor); attention_factor multiplies cos and sin (so the logits scale
    by its square): 1 except yarn. original_len is the pretraining length L (dynamic_ntk, yarn and
    llama3 need it); s = factor = L'/L. The conventions follow transformers' modeling_rope_utils.
    ABF (arXiv 2309.16039) is no scaling: a new theta."""
    if method not in ROPE_SCALINGS:
        raise ValueError(f"unknown RoPE scaling method {method!r}: {' | '.join(ROPE_SCALINGS)}")
    d = head_dim
    i = torch.arange(0, d, 2, dtype=torch.float64)
    base = lambda b: b ** (-i / d)
    # d = 2 has one pair of frequency 1 whatever the base: the NTK base changes are no-ops
    if method == "none" or factor == 1.0 or (d == 2 and method in ("ntk", "dynamic_ntk")):
        return base(theta), 1.0
    s = float(factor)
    L = original_len
    if L is None and method in ("dynamic_ntk", "yarn", "llama3"):
        raise ValueError(f"RoPE scaling {method} needs original_len (the pretraining length)")
    if method == "pi":  # position interpolation (arXiv 2306.15595): every frequency / s
        return base(theta) / s, 1.0
    if method == "ntk":  # NTK-aware base change (bloc97): b' = b s^(d / (d - 2))
        return base(theta * s ** (d / (d - 2))), 1.0
    if method == "dynamic_ntk":  # at length l > L: b' = b ((s l / L) - (s - 1))^(d / (d - 2)); none within L
        l = seq_len if seq_len is not None else L
        if l <= L:
            return base(theta), 1.0
        return base(theta * ((s * l / L) - (s - 1)) ** (d / (d - 2))), 1.0
    if method == "yarn":  # arXiv 2309.00071 eqs. 17-23: ramp between PI and unchanged, plus temperature
        inv = base(theta)
        dim = lambda r: d * math.log(L / (2 * math.pi * r)) / (2 * math.log(theta))  # pair with r rotations in L
        low = max(math.floor(dim(beta_fast)), 0)
        high = min(math.ceil(dim(beta_slow)), d - 1)
        if low == high:
            high += 0.001  # avoid a zero-width ramp
        gamma = ((i / 2 - low) / (high - low)).clamp(0, 1)  # pair index i/2
        # gamma = 1 for low-frequency pairs (interpolated), 0 for high-frequency pairs (kept)
        inv_new = (inv / s) * gamma + inv * (1 - gamma)
        return inv_new, 0.1 * math.log(s) + 1.0  # mscale: logits scale by its square
    if method == "llama3":  # Llama 3.1 (arXiv 2407.21783) frequency-dependent blend
        inv = base(theta)
        wavelen = 2 * math.pi / inv
        low_wl, high_wl = L / low_freq_factor, L / high_freq_factor
        smooth = ((L / wavelen) - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = (1 - smooth) * inv / s + smooth * inv
        out = torch.where(wavelen > low_wl, inv / s, blended)
        out = torch.where(wavelen < high_wl, inv, out)
        return out, 1.0


def apply_rope(x, cos, sin):
    """Rotate pairs (x_i, x_{i+r/2}) of the leading r = 2 * cos.shape[-1] dims by angle pos * inv_freq_i
    (GPT-NeoX half-split layout; the remaining dims pass through: partial RoPE).
    x: [B, H, T, D]; cos, sin: [T, r/2]."""
    d = cos.shape[-1]
    x1, x2, rest = x[..., :d], x[..., d:2 * d], x[..., 2 * d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)


def alibi_slopes(n_head):
    """ALiBi (arXiv 2108.12409) head slopes as the paper's reference code (get_slopes) defines them.
    For H a power of two: the geometric sequence m_h = 2^(-8h/H), h = 1..H. Otherwise: the slopes of
    the largest power of two P < H, then every other slope of 2P (its 1st, 3rd, 5th, ...) for the
    remaining H - P heads, so the extra heads interleave with the first P instead of stretching the
    sequence (2^(-8h/H) would give H = 6 slopes 2^(-4/3)..., not the reference's)."""
    P = 2 ** int(math.log2(n_head))
    geometric = lambda n: [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    return torch.tensor(geometric(P) + geometric(2 * P)[0::2][:n_head - P])


def expe_values(T, c, device):
    """ExPE's position signal [T, expe_dims]: S + theta * n for n = 0..T-1 (theta = expe_slope, or
    1 / block_size when 0), in float32."""
    n = torch.arange(T, device=device, dtype=torch.float32)[:, None]
    return (c.expe_start + (c.expe_slope or 1 / c.block_size) * n).expand(T, c.expe_dims)


def expe_embed(x, values):
    """ExPE as published (arXiv 2509.19569): the first dims of every token's embedding x [B, T, E]
    are overwritten by the position signal values [T, e]; the other dims keep the token."""
    B, T, _ = x.shape
    return torch.cat([values.to(x.dtype).expand(B, T, values.shape[-1]), x[..., values.shape[-1]:]], -1)


def sinusoidal_table(T, d, device):
    """Sinusoidal absolute positions (Vaswani et al. 2017, arXiv 1706.03762), [T, d]:
    PE[n, 2i] = sin(n / 10000^(2i/d)), PE[n, 2i+1] = cos(n / 10000^(2i/d)); added to the embedding."""
    n = torch.arange(T, device=device, dtype=torch.float32)[:, None]
    ang = n / 10000.0 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
    return torch.stack([torch.sin(ang), torch.cos(ang)], -1).flatten(-2)[:, :d]


def apply_expe(x, values):
    """ExPE's q/k variant (expe_on=qk; the paper writes into the embedding: expe_embed): overwrite the
    leading dims of every q and k head with the fixed position signal values [T, e] (S + slope * n),
    a per-layer kind; the logit gains e * (S + slope*n)(S + slope*m) / sqrt(D),
    for a query at n linear in the key position m. No trained parameters."""
    B, H, T, _ = x.shape  # float32 (the layer attends in fp32): bf16 would round S + slope * n
    return torch.cat([values.float().expand(B, H, T, values.shape[-1]), x[..., values.shape[-1]:].float()], -1)


# -----------------------------------------------------------------------------
# Attention kernels: q [B, H, T, D], k and v [B, Hkv, T, D] -> [B, H, T, D], causal.
# MAX_SCORES bounds the attention scores one SDPA call may hold (query block x keys x heads x batch).

MAX_SCORES = 2 ** 25
GATHER_DEVICE_FRAC = 1 / 64  # CUDA: one block of chunk retrieval's gathered keys (or values), of the device's memory


def gather_budget(device):
    """Elements of gathered keys one chunk-retrieval block may hold: MAX_SCORES / 2 on CPU; on CUDA
    GATHER_DEVICE_FRAC of the device's memory in fp32 (blocks are recomputed in the backward pass,
    so only one is alive at a time: bigger blocks mean fewer, larger kernels)."""
    if device.type != "cuda":
        return MAX_SCORES // 2
    return int(torch.cuda.get_device_properties(device).total_memory * GATHER_DEVICE_FRAC) // 4


def visible(i, j, window=0):
    """The one mask rule of every kernel and probe: query position i sees key position j when
    j <= i (causal) and, in a windowed layer, j > i - window."""
    ok = j <= i
    return ok & (j > i - window) if window else ok


def attend(q, k, v, window=0, slopes=None):
    """Causal attention over all keys (window 0) or the last `window` keys; slopes: ALiBi."""
    if window and window < q.shape[2]:
        return band_attention(q, k, v, window, slopes)
    if slopes is not None:
        return alibi_attention(q, k, v, slopes)
    # SDPA's causal kernel never materialises T x T (flash-style on CPU and CUDA)
    return sdpa(q, k, v, is_causal=True)


def kernel_dtype(x):
    """The dtype SDPA will run x in: autocast's where it is on for x's device, else x's own."""
    dev = x.device.type
    return torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype


SDPA_KINDS = ("causal", "gqa", "mask")  # unmasked causal MHA | unmasked causal with grouped K/V | boolean mask
SDPA_BACKENDS = dict(flash="FLASH_ATTENTION", cudnn="CUDNN_ATTENTION", efficient="EFFICIENT_ATTENTION",
                     math="MATH")  # -> torch.nn.attention.SDPBackend member
_SDPA_POLICY = {}  # call kind -> backend name; empty: torch's own dispatch (set_sdpa_backend)


def parse_sdpa_backend(spec):
    """'auto' -> {}; 'flash' -> every kind on flash; 'causal:flash,mask:efficient' -> those kinds
    (the others left to torch). ValueError on anything else."""
    if spec == "auto":
        return {}
    if ":" not in spec and spec in SDPA_BACKENDS:
        spec = ",".join(f"{kind}:{spec}" for kind in SDPA_KINDS)
    out = {}
    for part in spec.split(","):
        kind, _, name = part.strip().partition(":")
        if kind not in SDPA_KINDS or name not in SDPA_BACKENDS:
            raise ValueError(f"bad sdpa_backend part {part.strip()!r}: auto | {' | '.join(SDPA_BACKENDS)} "
                             f"| kind:backend,... with kinds {', '.join(SDPA_KINDS)}")
        out[kind] = name
    return out


def set_sdpa_backend(spec):
    """Process-wide (the last model built sets it): a setting, not per-module state, so that the
    chunk layers' recomputation in the backward pass takes the same kernel as the forward."""
    _SDPA_POLICY.clear()
    _SDPA_POLICY.update(parse_sdpa_backend(spec))


def sdpa_only(name):
    """A context where SDPA may use only the named backend (SDPA_BACKENDS)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[name]))


def sdpa_call_kind(q, k, kw):
    """The call's kind for sdpa_backend, None for a float32 call (ALiBi, ExPE layers, fp32 runs):
    those stay with torch's dispatch (flash and cuDNN take no float32)."""
    if kernel_dtype(q) == torch.float32:
        return None
    return "mask" if kw.get("attn_mask") is not None else "gqa" if k.shape[1] != q.shape[1] else "causal"


def sdpa(q, k, v, **kw):
    """F.scaled_dot_product_attention kept on the fused kernels. K/V [B, Hkv, T, D] are expanded to
    the query heads (repeat_interleave: query head h reads key head h // (H / Hkv), as enable_gqa
    does) unless flash attention takes the call with grouped heads itself: 16-bit and no mask. Flash
    refuses masks and float32; the memory-efficient kernel that takes them has no grouped-query
    support (torch 2.11), so enable_gqa there falls to the math kernel and its T x T scores."""
    H, Hkv = q.shape[1], k.shape[1]
    if Hkv != H and (kw.get("attn_mask") is not None or kernel_dtype(q) == torch.float32):
        k, v = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
    name = _SDPA_POLICY.get(sdpa_call_kind(q, k, kw))
    if name is None:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=k.shape[1] != H, **kw)
    with sdpa_only(name):  # only this kernel: a call it cannot take raises, not a silent fallback
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=k.shape[1] != H, **kw)


def attention_probs(q, k, start=0, window=0, slopes=None):
    """Explicit softmax(q k^T / sqrt(D) + ALiBi bias) of queries at positions start..start+n-1
    (q [H, n, D]) over keys 0..start+n-1 (k [H, >= start+n, D]) under visible(): the probabilities
    the kernels above compute implicitly. -> [H, n, start + n]."""
    H, n, D = q.shape
    e = start + n
    with torch.autocast(q.device.type, enabled=False):  # fp32 scores under any autocast (bf16: errors ~3e-3)
        s = (q.float() @ k[:, :e].float().transpose(1, 2)) * D ** -0.5
        i = torch.arange(start, e, device=q.device)[:, None]
        j = torch.arange(e, device=q.device)[None]
        if slopes is not None:
            s = s - slopes.to(s.device).view(H, 1, 1) * (i - j).to(s.dtype)
        return torch.softmax(s.masked_fill(~visible(i, j, window), float("-inf")), -1)


def sdpa_alibi(q, k, v, slopes, x, **kw):
    """SDPA with ALiBi folded into an extra q/k column, because the fast kernels take a boolean
    mask but a float bias sends them to the slow T x T path: q gains m_h * sqrt(D), k gains x_j (key
    position relative to any per-row constant), so the logit gains m_h * x_j, which is the bias
    -m_h (i - j) up to a per-row constant that softmax ignores. Zero columns pad q, k and v to a head
    dim that is a multiple of 8 (D + 1 = 65 at D = 64 has no fused CUDA kernel; CPU flash wants
    equal head dims). Runs in float32: positions x in bf16 would be rounded (steps of 16 at 4k)."""
    B, H, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    pad = -(-(D + 1) // 8) * 8 - D - 1
    m = (slopes.to(q.device) * D ** 0.5).view(1, H, 1, 1).expand(B, H, Tq, 1)
    xk = x.float().view(1, 1, Tk, 1).expand(k.shape[0], Hkv, Tk, 1)
    with torch.autocast(q.device.type, enabled=False):
        qa = F.pad(torch.cat([q.float(), m], -1), (0, pad))
        ka = F.pad(torch.cat([k.float(), xk], -1), (0, pad))
        y = sdpa(qa, ka, F.pad(v.float(), (0, pad + 1)), scale=D ** -0.5, **kw)
    return y[..., :D].to(q.dtype)


def band_attention(q, k, v, W, slopes=None):
    """Sliding-window attention, query i sees keys (i-W, i]. Queries go in blocks of W; each block
    attends to the previous and its own key block (2W keys) through a W x 2W band mask, so memory
    is O(T x W) and no T x T mask exists."""
    B, H, T, D = q.shape
    Hkv, nb = k.shape[1], -(-T // W)
    q = F.pad(q, (0, 0, 0, nb * W - T))                      # pad the queries to whole blocks
    k, v = (F.pad(t, (0, 0, W, nb * W - T)) for t in (k, v))  # plus one block of (masked) keys in front
    qb = q.view(B, H, nb, W, D).transpose(1, 2)              # [B, nb, H, W, D]
    kb, vb = (t.unfold(2, 2 * W, W).permute(0, 2, 1, 4, 3) for t in (k, v))  # [B, nb, Hkv, 2W, D]
    r, c = torch.arange(W, device=q.device)[:, None], torch.arange(2 * W, device=q.device)[None]
    band = visible(W + r, c, W)                              # row r is position W + r of the key block
    per_call = max(1, MAX_SCORES // (B * H * W * 2 * W))     # blocks per SDPA call
    out = []
    for s in range(0, nb, per_call):
        n = min(nb, s + per_call) - s
        mask = band.expand(n, 1, W, 2 * W)
        if s == 0:  # block 0: the key block in front is padding
            mask = torch.cat([(band & (c >= W))[None, None], mask[1:]])
        args = (qb[:, s:s + n].reshape(B * n, H, W, D), kb[:, s:s + n].reshape(B * n, Hkv, 2 * W, D),
                vb[:, s:s + n].reshape(B * n, Hkv, 2 * W, D))
        mask = mask.repeat(B, 1, 1, 1)
        if slopes is None:
            y = sdpa(*args, attn_mask=mask)
        else:  # key position relative to the query block's start: |x| < W
            y = sdpa_alibi(*args, slopes, c[0] - W, attn_mask=mask)
        out.append(y.view(B, n, H, W, D))
    return torch.cat(out, 1).transpose(1, 2).reshape(B, H, nb * W, D)[:, :, :T]


def alibi_attention(q, k, v, slopes):
    """Global causal attention with ALiBi. Queries go in blocks of n rows attending to keys [0, end)
    with an n x end boolean mask, so memory is O(n x T) at a time, never T x T (compute stays
    quadratic, as in any global layer). The first block is square: SDPA's causal kernel."""
    B, H, T, D = q.shape
    n = max(1, MAX_SCORES // (B * T))
    out = []
    for s in range(0, T, n):
        e = min(T, s + n)
        x = torch.arange(e, device=q.device) - s  # key position relative to the block start
        i, j = torch.arange(s, e, device=q.device)[:, None], torch.arange(e, device=q.device)[None]
        causal = dict(is_causal=True) if s == 0 else dict(attn_mask=visible(i, j))
        out.append(sdpa_alibi(q[:, :, s:e], k[:, :, :e], v[:, :, :e], slopes, x, **causal))
    return torch.cat(out, 2)


# -----------------------------------------------------------------------------
# Chunk-based sparse attention

class ChunkRetrieval(nn.Module):
    """Retrieval branch of chunk-based sparse attention (arXiv 2510.17196; landmarks arXiv 2305.16300).

    Each complete chunk of chunk_size tokens gets one landmark key from a small non-linear encoder:
    ReLU^2 MLP over the chunk's hidden states, attention-pooled by a learned CLS query. Each query
    scores the landmarks of the complete chunks strictly before its own chunk (causal), keeps the
    top-k (hard, sparse, in training as in evaluation), attends within each selected chunk and mixes
    the k results by the softmax of their landmark scores (the landmarks' gradient path). The output
    has its own zero-initialised projection and is added to the residual stream on its own
    ("bypassing residual path"). Retrieval uses the position-free (pre-RoPE) q and k, so it is the
    same at any distance. Memory: keys of the selected chunks are gathered per query block,
    O(block x k x chunk_size x head_dim); no T x T matrix."""

    def __init__(self, cfg):
        super().__init__()
        self.C, self.K = cfg.chunk_size, cfg.chunk_topk
        self.linear_encoder, self.dense_train = cfg.chunk_encoder == "linear", cfg.chunk_dense_train
        self.n_head, self.head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
        q = dict(bits=cfg.bits, clip=cfg.clip)
        self.c_enc = QATLinear(cfg.n_embd, cfg.n_embd, **q)                    # chunk encoder MLP
        self.cls = nn.Parameter(torch.zeros(cfg.n_embd))                        # CLS pooling query (1-D)
        self.c_lm = QATLinear(cfg.n_embd, cfg.n_head * self.head_dim, **q)     # landmark key per head
        self.c_proj = QATLinear(cfg.n_head * self.head_dim, cfg.n_embd, **q)   # own output (zero-init)

    def landmarks(self, x):
        """x [B, T, E] -> one landmark key per complete chunk and head, [B, H, T // C, D]."""
        B, T, E = x.shape
        nc = T // self.C
        h = self.c_enc(x[:, :nc * self.C])
        if self.linear_encoder:  # ablation of principle 1: a linear map, mean-pooled, no CLS
            pooled = h.view(B, nc, self.C, E).mean(2)
        else:
            h = F.relu(h).square().view(B, nc, self.C, E)
            a = torch.softmax(h @ self.cls * E ** -0.5, dim=2)  # CLS attention over the chunk's tokens
            pooled = (a.unsqueeze(-1) * h).sum(2)
        return self.c_lm(pooled).view(B, nc, self.n_head, self.head_dim).transpose(1, 2)

    def forward(self, x, q, k, v, project=True):
        """x: attention input [B, T, E]; q [B, H, T, D], k/v [B, Hkv, T, D] without positions.
        Returns the branch output [B, T, E] (project=False: the heads [B, T, H * D] before this
        branch's c_proj), or None when no query has a complete past chunk."""
        B, H, T, D = q.shape
        C, nc = self.C, T // self.C
        if T <= C:
            return None
        lm = self.landmarks(x)
        kc, vc = (t[:, :, :nc * C].reshape(B, t.shape[1], nc, C, D) for t in (k, v))
        kept = nc if self.dense_train and self.training else min(self.K, nc)  # chunks gathered per query
        per_block = max(1, gather_budget(q.device) // (B * H * kept * C * D))  # bounds the gathered keys
        out = [q.new_zeros(B, H, C, D)]  # chunk 0 has nothing to retrieve
        for s in range(C, T, per_block):
            args = (self._block, q[:, :, s:s + per_block], s, lm, kc, vc)
            # training: the gathered K/V (~20 GB a layer at 50M, 64 x 1024) are recomputed in the
            # backward pass instead of saved, so one block's worth is alive at a time
            out.append(checkpoint(*args, use_reentrant=False) if torch.is_grad_enabled() else args[0](*args[1:]))
        y = torch.cat(out, 2).transpose(1, 2).reshape(B, T, H * D)
        return self.c_proj(y) if project else y

    def _block(self, q, s, lm, kc, vc):
        """Retrieval output [B, H, n, D] of queries s..s+n-1."""
        w, att, _, vg = self._retrieve(q, s, lm, kc, vc)
        return torch.einsum("bhnk,bhnkd->bhnd", w, torch.einsum("bhnkc,bhnkcd->bhnkd", att, vg))

    def _retrieve(self, q, s, lm, kc, vc):
        """Queries s..s+n-1 -> (w [B, H, n, K] weights of the selected chunks, att [B, H, n, K, C]
        attention within each, idx [B, H, n, K] the chunks, vg their values)."""
        B, H, n, D = q.shape
        nc = lm.shape[2]
        own = torch.arange(s, s + n, device=q.device) // self.C
        past = torch.arange(nc, device=q.device)[None] < own[:, None]  # [n, nc]: complete and strictly earlier
        score = (q @ lm.transpose(-1, -2) * D ** -0.5).masked_fill(~past, float("-inf"))
        # hard selection [B, H, n, K]; the dense-training ablation keeps every past chunk while training
        top, idx = score.topk(nc if self.dense_train and self.training else min(self.K, nc), dim=-1)
        ok = torch.isfinite(top)  # fewer than K past chunks early in the sequence
        m = top[..., :1].detach()
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        w = torch.where(ok, torch.exp(torch.where(ok, top, m) - m), torch.zeros_like(top))
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)  # softmax over the selected landmarks
        b = torch.arange(B, device=q.device).view(B, 1, 1, 1)
        h = (torch.arange(H, device=q.device) // (H // kc.shape[1])).view(1, H, 1, 1)
        kg, vg = kc[b, h, idx], vc[b, h, idx]  # [B, H, n, K, C, D]
        att = torch.softmax(torch.einsum("bhnd,bhnkcd->bhnkc", q, kg) * D ** -0.5, dim=-1)
        return w, att, idx, vg

    def maps(self, x, q, k, n):
        """For probes: yield (start, A [H, n, T]), the retrieval branch's weight on every key
        (landmark weight x attention within the chunk) for queries from the second chunk on."""
        _, H, T, D = q.shape
        C, nc = self.C, T // self.C
        if T <= C:
            return
        lm = self.landmarks(x)
        kf = k[:, :, :nc * C].reshape(1, k.shape[1], nc, C, D).float()
        for s in range(0, T, n):
            A = q.new_zeros(H, min(n, T - s), T, dtype=torch.float32)
            if s + A.shape[1] > C:
                a = max(s, C)
                with torch.autocast(q.device.type, enabled=False):  # fp32 scores, as attention_probs
                    w, att, idx, _ = self._retrieve(q[:, :, a:s + A.shape[1]].float(), a, lm.float(), kf, kf)
                keys = (idx[0, ..., None] * C + torch.arange(C, device=q.device)).flatten(-2)
                A[:, a - s:].scatter_add_(-1, keys, (w[0, ..., None] * att[0]).flatten(-2).float())
            yield s, A


# -----------------------------------------------------------------------------
# The model as a run sees it: its checkpoint (the one format train.py writes and every script
# reads), rebuilt from it, described in the run record, scored on the val split


CKPT_SCHEMA = dict(model=dict, model_config=dict, train_config=dict, step=int, optimizers=list, rng=dict)


def save_checkpoint(path, model, opts, step, cfg, mcfg, extra=None):
    """Atomically write model + optimiser + step + RNG + configs (torch.load weights_only-safe)."""
    ckpt = dict(kind="gpt-run", model=model.state_dict(), optimizers=[o.state_dict() for o in opts],
                step=step, train_config=asdict(cfg), model_config=asdict(mcfg),
                rng=dict(torch=torch.get_rng_state()), extra=extra or {})
    atomic_write(path, lambda f: torch.save(ckpt, f), "wb")


def load_checkpoint(path):
    """Load a run checkpoint safely (weights_only=True). Raises UserError on anything wrong."""
    if not os.path.isfile(path):
        raise UserError(f"no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UserError(f"corrupt or unreadable checkpoint {path}: {type(e).__name__}") from None
    if not isinstance(ckpt, dict) or ckpt.get("kind") != "gpt-run":
        raise UserError(f"{path} is not a checkpoint of this project")
    bad = [k for k, t in CKPT_SCHEMA.items() if not isinstance(ckpt.get(k), t)]
    if bad or ckpt["step"] < 0 or not isinstance(ckpt.get("extra", {}), dict):
        what = f"no valid {bad[0]!r}" if bad else "a negative step or a malformed 'extra'"
        raise UserError(f"{path} is not a complete checkpoint of this project ({what})")
    return ckpt


def checkpoint_file(which):
    """final | warmdown | a --save_at fraction (0.25) -> the file name in a run folder."""
    if which in ("final", "warmdown"):
        return "ckpt.pt" if which == "final" else "ckpt_warmdown.pt"
    try:
        return f"ckpt_{float(which):g}.pt"
    except ValueError:
        raise UserError(f"--ckpt {which!r}: final | warmdown | a --save_at fraction like 0.25") from None


def model_from_checkpoint(ckpt, **overrides):
    """Rebuild the GPT of a checkpoint; overrides change config fields (e.g. rope scaling). A
    checkpoint this code cannot read and overrides that make an invalid model are different errors."""
    try:
        config = GPTConfig.from_dict(ckpt["model_config"])
    except (ValueError, TypeError, AttributeError) as e:
        raise UserError(f"checkpoint does not match this model code: {cli.first_line(e)}") from None
    try:
        config = replace(config, **overrides)
    except (ValueError, TypeError) as e:
        raise UserError(f"invalid model settings {', '.join(sorted(overrides))}: {cli.first_line(e)}") from None
    model = GPT(config)
    try:
        model.load_state_dict(ckpt["model"])
    except (RuntimeError, TypeError, AttributeError) as e:
        raise UserError(f"checkpoint does not match this model code: {cli.first_line(e)}") from None
    return model


def hope_record(model):
    """HoPE (arXiv 2410.21216) in the run record: how many of the rotary pairs per head it leaves
    unrotated at the cutoff it used, or None without a HoPE layer."""
    m = getattr(model, "module", model)
    c = m.config
    if not any(l.pos == "hope" for l in m.plan):
        return None
    return dict(pairs=m.rope_dims // 2, removed=m.hope_pairs_removed, cutoff=c.hope_cutoff or c.block_size,
                head_dim=c.n_embd // c.n_head)


@torch.no_grad()
def evaluate(model, tokens, token_bytes, block_size, batch_tokens=0, max_tokens=0, device="cpu",
             dist_info=None, prefix_tokens=0):
    """Loss (nats/token) and bits per UTF-8 byte on consecutive, non-overlapping windows of
    `tokens` (the first max_tokens of them; 0 = all): deterministic, so runs can be compared to a few
    thousandths of a nat. batch_tokens per forward pass (0 = cli.eval_batch_tokens; a window's loss
    does not depend on the batch it is in). Windows are split across DDP ranks and summed.
    token_bytes None: no bits per byte. prefix_tokens > 0 also returns "prefix": the loss of the
    windows that max_tokens=prefix_tokens would take, from the same forward passes."""
    dist_info = dist_info or cli.Dist()
    n_win = eval_windows(len(tokens), block_size, max_tokens)
    n_pre = eval_windows(len(tokens), block_size, prefix_tokens) if prefix_tokens else 0
    width = min(block_size, len(tokens) - 1)
    rows = max(1, cli.eval_batch_tokens(device, vocab_of(model, token_bytes), batch_tokens) // width)
    was_training = model.training
    model.eval()
    tot = torch.zeros(5, dtype=torch.float64, device=device)  # sum loss, tokens, bytes; prefix: sum loss, tokens
    wins = list(range(dist_info.rank, n_win, dist_info.world))
    for i in range(0, len(wins), rows):
        chunk = wins[i:i + rows]
        xy = np.stack([tokens[w * width: w * width + width + 1] for w in chunk]).astype(np.int64)
        if token_bytes is not None:  # counted on the host copy: no device round trip per batch
            tot[2] += float(token_bytes[xy[:, 1:]].sum())
        xy = torch.from_numpy(xy).to(device)
        with cli.autocast(device):
            _, loss = model(xy[:, :-1], xy[:, 1:], reduction="none")
        tot[0] += loss.double().sum()
        tot[1] += loss.numel()
        k = sum(w < n_pre for w in chunk)  # a rank's windows ascend: the prefix ones lead its batch
        if k:
            tot[3] += loss[:k].double().sum()
            tot[4] += loss[:k].numel()
    cli.all_reduce_sum(tot, dist_info)
    model.train(was_training)
    loss = (tot[0] / tot[1]).item()
    bpb = (tot[0] / (math.log(2) * tot[2])).item() if tot[2] > 0 else None
    out = dict(loss=loss, bpb=bpb, tokens=int(tot[1].item()))
    if n_pre:
        out["prefix"] = dict(loss=(tot[3] / tot[4]).item(), tokens=int(tot[4].item()))
    return out


def vocab_of(model, token_bytes=None):
    """The model's vocabulary (its logits' width): its config's, else the corpus's (token_bytes has one
    entry per id), else a large one (a conservative batch)."""
    config = getattr(model, "config", None)
    if getattr(config, "vocab_size", None):
        return config.vocab_size
    return len(token_bytes) if token_bytes is not None else 2 ** 17


def eval_windows(n_tokens, block_size, max_tokens=0):
    """Windows evaluate() scores in a split of n_tokens: whole block_size windows of the first
    max_tokens + 1 tokens (0 = all), at least one (shorter, when the split is)."""
    n = n_tokens - 1 if not max_tokens else min(max_tokens, n_tokens - 1)
    return max(n // block_size, 1)
