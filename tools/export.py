"""
Export a trained run's weights for deployment.

    python tools/export.py out/RUN                        # bit-packed b-bit artefact RUN/model_int<b>.pt
    python tools/export.py out/RUN --xz --keep fp16       # smaller: lzma-compressed, fp16 for the rest
    python tools/export.py out/FP_RUN --bits 4            # a full-precision run exports its PTQ twin
    python tools/export.py out/RUN --format hf --out DIR  # a transformers checkpoint (default DIR: RUN/hf)

The integer artefact (--format int) holds each quantised matrix as packed b-bit codes with bf16
per-row scales, on the very grid of training (quant.py), and every other tensor as fp32 (exact:
the reloaded model's loss equals the fake-quant loss) or fp16. The export reloads what it wrote,
evaluates it on the run's val split and records both in RUN/export.json (never in result.json,
the trainer's record).

The transformers checkpoint (--format hf) is a folder that AutoModelForCausalLM.from_pretrained and
AutoTokenizer.from_pretrained load with no custom code: config.json, model.safetensors (fp32; a
QAT run's deployed, dequantised weights) and the run's tokenizer as a fast tokenizer. Each run maps to
the existing architecture whose mathematics is exactly ours (Llama, Arcee, Apertus, Qwen3, Mellum,
GraniteSWA, Olmo 2, Olmo 3, Phi-3, SmolLM3); a flag that none of them computes is a one-line error, never an approximate
export. Before the folder is moved into place the export reloads it with transformers and checks its
logits and tokens against this model and tokenizer, then evaluates it on the val split.

This is a script above the library (train.py, model.py, quant.py); nothing imports it. transformers,
tokenizers and safetensors are needed by --format hf only (imported there).
"""
import dataclasses
import io
import json
import lzma
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from anywhere: the project's libraries
import cli
import data
import train
from cli import UserError, atomic_write, flag, parse, write_json, main as cli_main
from train import load_run
from model import POS_KINDS, GPT, GPTConfig, embedding_positions, evaluate, rope_dims, rope_inv_freq
from quant import check_bits, pack_codes, parse_clip, ptq_model, quant_targets, quantize, set_qat, unpack_codes

ARTEFACT_KIND = "gpt-int-artefact"


@dataclass
class ExportConfig:
    run: str = flag("", "run folder", positional=True)
    format: str = flag("int", "int: bit-packed b-bit artefact | hf: transformers checkpoint folder")
    out: str = flag("", "output file ('' = RUN/model_int<b>.pt[.xz]); hf: a folder ('' = RUN/hf)")
    bits: int = flag(0, "grid bit-width (0 = the run's QAT bits; needed for full-precision runs; hf: "
                        "optional, a full-precision run's PTQ twin)")
    clip: str = flag("", "grid clip rule ('' = the run's own)")
    keep: str = flag("fp32", "int: dtype of the tensors that are not quantised: fp32 (exact) | fp16")
    xz: bool = flag(False, "int: write the lzma-compressed bytes")
    device: str = flag("auto", "where the reloaded export is evaluated: auto | cpu | cuda | cuda:N")


# -----------------------------------------------------------------------------
# Integer artefact: one torch.save'd dict, loadable with weights_only=True:
#   kind, version, model_config, bits, clip, keep,
#   quant: {param name: {codes: packed uint8 stream, scale: bf16 [rows], shape: [rows, cols]}},
#   rest:  {param name: fp32 tensor (fp16 for matrices with keep='fp16')}

def artefact_bytes(model, bits, clip, keep="fp32"):
    """The artefact of model on the b-bit grid, serialised. Returns (bytes, sizes in bytes)."""
    quant = {}
    for name, m in quant_targets(model):
        q, s = quantize(m.weight, bits, clip)
        quant[f"{name}.weight"] = dict(codes=pack_codes(q, bits), scale=s.view(-1).to(torch.bfloat16).cpu(),
                                       shape=list(q.shape))
    rest = {k: v.detach().to("cpu", torch.float16 if keep == "fp16" and v.ndim >= 2 else torch.float32, copy=True)
            for k, v in model.state_dict().items() if k not in quant}
    art = dict(kind=ARTEFACT_KIND, version=1, model_config=dataclasses.asdict(model.config), bits=bits, clip=clip,
               keep=keep, quant=quant, rest=rest)
    buf = io.BytesIO()
    torch.save(art, buf)
    n = sum(v.numel() for v in model.state_dict().values())
    tensors = [t for e in quant.values() for t in (e["codes"], e["scale"])] + list(rest.values())
    sizes = dict(params=n, fp32=4 * n, fp16=2 * n, payload=sum(t.numel() * t.element_size() for t in tensors),
                 codes=sum(e["codes"].numel() for e in quant.values()), raw=len(buf.getvalue()))
    return buf.getvalue(), sizes


def load_artefact(path):
    """Rebuild the GPT of an artefact: unpack codes, write w_hat = q * s into the weights, and turn
    fake quantisation off (the weights are on the grid already; for quantile/std clips
    re-quantising w_hat could even move it). Raises UserError on anything wrong."""
    if not os.path.isfile(path):
        raise UserError(f"no artefact at {path}")
    data = open(path, "rb").read()
    try:
        if data.startswith(b"\xfd7zXZ\x00"):
            data = lzma.decompress(data)
        art = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        raise UserError(f"corrupt or unreadable artefact {path}: {type(e).__name__}") from None
    if not isinstance(art, dict) or art.get("kind") != ARTEFACT_KIND:
        raise UserError(f"{path} is not a quantised artefact of this project")
    try:
        sd = {k: v.float() for k, v in art["rest"].items()}
        for k, e in art["quant"].items():
            sd[k] = unpack_codes(e["codes"], art["bits"], e["shape"]).float() * e["scale"].float()[:, None]
        model = GPT(GPTConfig.from_dict(art["model_config"]))
        model.load_state_dict(sd)
    except (ValueError, RuntimeError, TypeError, KeyError) as e:
        raise UserError(f"artefact does not match this model code: {cli.first_line(e)}") from None
    set_qat(model, False)
    return model.eval()


def export_int(model, cfg, xc, run_result):
    """Write, reload and evaluate the integer artefact -> the export record. Everything is checked
    (flags, device, the run's corpus) before the artefact is written."""
    bits = xc.bits or model.config.bits
    if bits == 16:
        raise UserError("nothing to export at 16 bits: pass --bits 2..8 (a full-precision run "
                        "exports its round-to-nearest PTQ twin)")
    clip = xc.clip or model.config.clip
    try:
        check_bits(bits)
        parse_clip(clip)
    except ValueError as e:
        raise UserError(str(e)) from None
    if xc.keep not in ("fp32", "fp16"):
        raise UserError(f"--keep {xc.keep!r}: fp32 | fp16")
    out = xc.out or os.path.join(xc.run, f"model_int{bits}.pt" + (".xz" if xc.xz else ""))
    device = cli.resolve_device(xc.device)
    corpus = data.corpus_of(cfg)
    raw, sizes = artefact_bytes(model, bits, clip, xc.keep)
    packed = lzma.compress(raw)
    sizes.update(xz=len(packed), file=len(packed if xc.xz else raw))
    atomic_write(out, packed if xc.xz else raw, "wb")
    ev = evaluate(load_artefact(out).to(device), corpus.val, corpus.token_bytes, model.config.block_size,
                        max_tokens=cfg.final_eval_tokens, device=device)  # the tokens of the recorded loss
    print(f"{out}: INT{bits} ({clip}) artefact {sizes['file']:,} bytes (torch.save {sizes['raw']:,}, "
          f"xz {sizes['xz']:,}; packed codes {sizes['codes']:,}) vs fp32 {sizes['fp32']:,} / "
          f"fp16 {sizes['fp16']:,} for {sizes['params']:,} parameters")
    line = f"reloaded val loss {ev['loss']:.6f}" + (f" ({ev['bpb']:.4f} bpb)" if ev["bpb"] else "")
    recorded = run_result.get("metrics", {}).get("val_loss")
    if model.config.bits == bits and model.config.clip == clip and recorded is not None:
        line += f"; recorded deployed (fake-quant) {recorded:.6f}, diff {ev['loss'] - recorded:+.2e}"
    print(line)
    return dict(format="int", file=os.path.basename(out), bits=bits, clip=clip, keep=xc.keep, bytes=sizes,
                val_loss=ev["loss"], val_bpb=ev["bpb"])


# -----------------------------------------------------------------------------
# transformers checkpoint (--format hf). What every family below shares with model.py, read off
# transformers' modeling_*.py: RMSNorm x * rsqrt(mean(x^2) + eps) * weight (our eps, 1e-6, goes
# into the config), RoPE in the GPT-NeoX half-split layout (rotate_half), attention scaled by
# 1/sqrt(head_dim), GQA by repeating kv heads, no biases, a sliding window of W keys (i-W, i]
# (masking_utils: kv_idx > q_idx - W), the tied head as tie_word_embeddings. What differs between
# families (MLP, QK-norm, norm order, NoPE layers, partial RoPE, window patterns, which layers a RoPE
# scaling applies to) picks the family; a combination that no family computes is refused.

ACTS = dict(swiglu="silu", relu2="relu2", gelu="gelu")  # ACT2FN names; "gelu" is the exact erf form, as F.gelu
HF_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"}
LOGIT_TOL = 1e-3  # max |logit difference| allowed between the reloaded export and this model (fp32)


def refuse(flag, why):
    raise UserError(f"--format hf: {flag} has no exact transformers counterpart ({why}); nothing written")


def pos_flag(c, kind):
    """How the run asked for layers of positional kind `kind` (for the error message)."""
    if c.pos_pattern:
        return f"pos_pattern {c.pos_pattern!r}"
    return "swan true" if c.swan and kind == "nope" else f"pos {c.pos}"


# The per-layer positional kinds (model.POS_KINDS) that a transformers architecture computes; every other
# kind, and positions added to the embedding, is refused, so a new encoding is refused until it is mapped.
HF_POS = ("rope", "nope")
HF_POS_WHY = {"learned": "learned absolute positions added to the embedding",  # why, where we know
              "sinusoidal": "sinusoidal absolute positions added to the embedding",
              "expe-embed": "exact position values written into the embedding",
              "alibi": "ALiBi's linear distance biases", "hope": "RoPE without its low frequencies",
              "expe": "exact position values written into head dims"}


def hf_unsupported(c, plan):
    """Refuse the flags that no transformers architecture computes."""
    if embedding_positions(c):
        refuse(f"pos {c.pos}", HF_POS_WHY.get("expe-embed" if c.pos == "expe" else c.pos,
                                              f"{c.pos} positions added to the embedding"))
    kinds = {l.pos for l in plan}
    for kind in sorted(kinds - set(HF_POS), key=lambda k: POS_KINDS.index(k) if k in POS_KINDS else len(POS_KINDS)):
        refuse(pos_flag(c, kind), HF_POS_WHY.get(kind, f"{kind} positions, which no transformers architecture computes"))
    if c.logn_scale:
        refuse("logn_scale true", "SWAN's log-length query scaling; SmolLM3 has SWAN's layer pattern without it")
    if any(l.chunk for l in plan):
        refuse(f"chunk_layers {c.chunk_layers!r}", "landmark retrieval of past chunks")


def scaling(c):
    """The run's RoPE scaling method, 'none' when it leaves the frequencies unchanged."""
    return "none" if c.rope_scaling == "none" or c.rope_factor == 1 else c.rope_scaling


def rope_parameters(c, scaled=True):
    """transformers' rope_parameters for model.rope_inv_freq (modeling_rope_utils): pi = linear,
    dynamic_ntk = dynamic (L is max_position_embeddings, see hf_base), yarn with our ramp betas, the
    original length L and its default attention factor 0.1 ln s + 1 (= ours), llama3 with the low/high
    frequency factors 1 and 4 that model.py uses. Static NTK-aware scaling is plain RoPE with the
    base b s^(d/(d-2)), as in rope_inv_freq; at d = 2 both NTK forms change nothing."""
    p = dict(rope_type="default", rope_theta=c.rope_theta)
    method, s, L, d = scaling(c), c.rope_factor, c.rope_original_len or c.block_size, rope_dims(c)
    if not scaled or method == "none" or (d == 2 and method in ("ntk", "dynamic_ntk")):
        return p
    if method == "pi":
        p.update(rope_type="linear", factor=s)
    elif method == "ntk":
        p["rope_theta"] = c.rope_theta * s ** (d / (d - 2))
    elif method == "dynamic_ntk":
        p.update(rope_type="dynamic", factor=s)
    elif method == "yarn":
        p.update(rope_type="yarn", factor=s, original_max_position_embeddings=L, beta_fast=c.yarn_beta_fast,
                 beta_slow=c.yarn_beta_slow)
    else:
        p.update(rope_type="llama3", factor=s, original_max_position_embeddings=L, low_freq_factor=1.0,
                 high_freq_factor=4.0)
    return p


def windows(c, plan):
    """Sliding-window fields: which layers are windowed (layer_types) and W."""
    types = ["sliding_attention" if l.window else "full_attention" for l in plan]
    return dict(use_sliding_window="sliding_attention" in types, sliding_window=c.window or None, layer_types=types)


def whole_rope_every_layer(c, plan, family):
    if any(l.pos == "nope" for l in plan):
        refuse(pos_flag(c, "nope"), f"{family} has RoPE on every layer; NoPE layers are SmolLM3's (SwiGLU MLP, "
                                    f"pre-norm, no QK-norm, whole-head RoPE)")
    if rope_dims(c) < c.n_embd // c.n_head:
        refuse(f"rope_frac {c.rope_frac:g}", f"{family} rotates whole heads; partial RoPE is Phi-3's (SwiGLU MLP, "
                                             f"pre-norm, no QK-norm)")


def full_attention(c, plan, family):
    if any(l.window for l in plan):
        refuse(f"window {c.window}", f"{family} has no sliding windows; transformers' windowed families "
                                     f"(Qwen3, Mellum, GraniteSWA, Olmo 3, SmolLM3, Phi-3) have a SwiGLU MLP")


def one_rope(c, plan, family):
    """rope_parameters of a family with one RoPE for all its RoPE layers: scaled when the run scales
    them (rope_scaling_layers global scales only global ones), refused when it scales some only."""
    scaled = {l.scaled for l in plan if l.pos == "rope"}
    if len(scaled) == 2 and scaling(c) != "none":
        refuse(f"rope_scaling_layers {c.rope_scaling_layers}", f"{family} applies one RoPE to every layer; "
                                                               f"Olmo 3, Mellum and GraniteSWA scale global layers alone")
    return rope_parameters(c, scaled=True in scaled)


# One mapping function per family: (model_type, config fields) from the model config, the layer plan
# and the fields every family shares (hf_base).

def hf_llama(c, plan, base):
    """Llama: SwiGLU MLP, full attention, RoPE on all of every head, every rope_type."""
    return "llama", dict(base, rope_parameters=one_rope(c, plan, "Llama"))


def hf_arcee(c, plan, base):
    """Arcee (AFM): Llama with a non-gated MLP down(act(up x)): ReLU^2 (our default) or GELU."""
    whole_rope_every_layer(c, plan, "Arcee")
    full_attention(c, plan, "Arcee")
    return "arcee", dict(base, rope_parameters=one_rope(c, plan, "Arcee"))


def hf_apertus(c, plan, base):
    """Apertus: Arcee's non-gated MLP plus per-head QK-norm (RMSNorm over head_dim, one gain shared by
    the heads) before RoPE. Its config defaults to a llama3 scaling: rope_parameters is always written."""
    whole_rope_every_layer(c, plan, "Apertus")
    full_attention(c, plan, "Apertus")
    return "apertus", dict(base, rope_parameters=one_rope(c, plan, "Apertus"))


def hf_qwen3(c, plan, base):
    """Qwen3: per-head QK-norm, SwiGLU, pre-norm; sliding windows on any layers (layer_types)."""
    whole_rope_every_layer(c, plan, "Qwen3")
    rope = one_rope(c, plan, "Qwen3")
    return "qwen3", dict(base, head_dim=c.n_embd // c.n_head, rope_parameters=rope, **windows(c, plan))


def hf_olmo(c, plan, base):
    """Olmo 2: post-norm x + norm(f(x)), QK-norm over the whole q and k projections, SwiGLU, full
    attention. Olmo 3 adds sliding-window layers and RoPE parameters per layer type, so a scaling
    can apply to the global layers alone (rope_scaling_layers global) or to all."""
    whole_rope_every_layer(c, plan, "Olmo 2/3")
    if not any(l.window for l in plan):
        return "olmo2", dict(base, rope_parameters=one_rope(c, plan, "Olmo 2"))
    rope = dict(full_attention=rope_parameters(c),
                sliding_attention=rope_parameters(c, scaled=c.rope_scaling_layers == "all"))
    w = windows(c, plan)
    return "olmo3", dict(base, sliding_window=w["sliding_window"], layer_types=w["layer_types"], rope_parameters=rope)


def hf_phi3(c, plan, base):
    """Phi-3: SwiGLU (fused gate_up_proj), pre-norm, fused qkv_proj, partial RoPE (the leading
    partial_rotary_factor of each head, half-split within them, as apply_rope), one window for all
    layers or none. It accepts only default and longrope RoPE: a static scaling is written as longrope
    with the same per-pair divisor for short and long inputs, plain / scaled inverse frequency from
    model.rope_inv_freq (so PI, NTK, YaRN and Llama 3 are all exact), and our attention factor."""
    if any(l.pos == "nope" for l in plan):
        refuse(pos_flag(c, "nope"), "Phi-3 has RoPE on every layer and SmolLM3 (NoPE layers) no partial RoPE")
    if len({l.window for l in plan}) > 1:
        refuse(f"window {c.window} on some layers", "Phi-3 windows every layer or none")
    if scaling(c) == "dynamic_ntk" and plan[0].scaled:
        refuse("rope_scaling dynamic_ntk with rope_frac < 1", "Phi-3 has no dynamic RoPE")
    hd, r = c.n_embd // c.n_head, rope_dims(c)
    frac = r / hd
    while int(hd * frac) < r:  # transformers takes int(head_dim * factor) rotated dims: never one short
        frac = math.nextafter(frac, 2.0)
    L = c.rope_original_len or c.block_size
    rope = dict(rope_type="default", rope_theta=c.rope_theta, partial_rotary_factor=frac)
    if scaling(c) != "none" and plan[0].scaled:
        kw = dict(factor=c.rope_factor, original_len=L, beta_fast=c.yarn_beta_fast, beta_slow=c.yarn_beta_slow)
        inv, attention = rope_inv_freq(r, c.rope_theta, c.rope_scaling, **kw)
        divisor = (rope_inv_freq(r, c.rope_theta)[0] / inv).tolist()
        rope.update(rope_type="longrope", short_factor=divisor, long_factor=divisor, factor=c.rope_factor,
                    attention_factor=float(attention), original_max_position_embeddings=L)
    return "phi3", dict(base, rope_parameters=rope, original_max_position_embeddings=L,
                        sliding_window=c.window if plan[0].window else None)


def per_type_rope(c, plan):
    """{layer type: rope_parameters} for the families with RoPE per layer type: each type scaled when
    its layers are (rope_scaling_layers global scales the full-attention layers alone)."""
    kinds = {"full_attention": [l for l in plan if not l.window], "sliding_attention": [l for l in plan if l.window]}
    return {k: rope_parameters(c, scaled=any(l.scaled for l in ls)) for k, ls in kinds.items()}


def hf_mellum(c, plan, base):
    """Mellum: Qwen3 (per-head QK-norm, SwiGLU, pre-norm, windows on any layers) with RoPE parameters
    per layer type, so a scaling of the global layers alone is exact; every MLP dense (mlp_layer_types),
    no experts. The per-head QK-norm cells of the paper longctx grid, SWA and main recipe, map here."""
    whole_rope_every_layer(c, plan, "Mellum")
    w = windows(c, plan)
    return "mellum", dict(base, head_dim=c.n_embd // c.n_head, layer_types=w["layer_types"],
                          sliding_window=w["sliding_window"], rope_parameters=per_type_rope(c, plan),
                          mlp_layer_types=["dense"] * c.n_layer, num_mtp_layers=0)


SINK_OFF = -1e4  # GraniteSWA's sink logit that changes nothing: sigmoid(lse - SINK_OFF) is 1.0 in fp32 and bf16


def hf_granite_swa(c, plan, base):
    """GraniteSWA: Llama (no QK-norm, SwiGLU, pre-norm) with windows on any layers, a RoPE base per
    layer (layer_rope_theta) and a learnable attention sink per head, written at SINK_OFF so that it
    scales nothing. A per-layer base is all a static NTK scaling changes, so the no-QK-norm cells of
    the paper longctx grid, SWA and main recipe (NTK on the global layers alone), map here; any other
    scaling of some layers only is refused."""
    whole_rope_every_layer(c, plan, "GraniteSWA")
    if scaling(c) not in ("none", "ntk"):
        refuse(f"rope_scaling {c.rope_scaling} with rope_scaling_layers {c.rope_scaling_layers}",
               "with no QK-norm, GraniteSWA scales layers apart by their RoPE base only (static NTK)")
    hd = c.n_embd // c.n_head
    w = windows(c, plan)
    return "granite_swa", dict(base, layer_types=w["layer_types"], sliding_window=w["sliding_window"],
                               rope_parameters=rope_parameters(c, scaled=False), attention_multiplier=hd ** -0.5,
                               layer_rope_theta=[rope_parameters(c, scaled=l.scaled)["rope_theta"] for l in plan],
                               embedding_multiplier=1.0, residual_multiplier=1.0, logits_scaling=1.0)


def hf_smollm3(c, plan, base):
    """SmolLM3: Llama with NoPE layers (no_rope_layers) and sliding windows on any layers, hence
    SWAN-GPT without log-n scaling (RoPE on windowed layers, NoPE on global ones)."""
    return "smollm3", dict(base, rope_parameters=one_rope(c, plan, "SmolLM3"),
                           no_rope_layers=[int(l.pos == "rope") for l in plan], **windows(c, plan))


def hf_family(c, plan):
    """The mapping function for this config. The MLP, the QK-norm and the norm order decide (no family
    can change them); then partial RoPE, NoPE layers and windows within the SwiGLU families."""
    if c.norm_order == "post":
        if c.qk_norm != "layer" or c.mlp != "swiglu":
            refuse(f"norm_order post with qk_norm {c.qk_norm} and mlp {c.mlp}", "the post-norm families, Olmo 2 "
                   "and Olmo 3, have QK-norm over the whole projection (qk_norm layer) and a SwiGLU MLP")
        return hf_olmo
    if c.qk_norm == "layer":
        refuse("qk_norm layer with norm_order pre", "QK-norm over the whole projection comes with post-norm "
               "(Olmo 2/3); per-head QK-norm (qk_norm head) is Qwen3's or Apertus'")
    if c.mlp != "swiglu":
        return hf_apertus if c.qk_norm == "head" else hf_arcee
    some_scaled = scaling(c) != "none" and len({l.scaled for l in plan if l.pos == "rope"}) == 2
    if c.qk_norm == "head":
        return hf_mellum if some_scaled else hf_qwen3
    if rope_dims(c) < c.n_embd // c.n_head:
        return hf_phi3
    if some_scaled and not any(l.pos == "nope" for l in plan):
        return hf_granite_swa
    if any(l.pos == "nope" or l.window for l in plan):
        return hf_smollm3
    return hf_llama


def hf_base(model, eot):
    """Config fields every family shares. max_position_embeddings is the training length, except for
    dynamic NTK, which transformers reads as the pretraining length L it scales from."""
    c = model.config
    L = c.rope_original_len or c.block_size
    return dict(vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=model.blocks[0].mlp.c_fc.out_features,
                num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head,
                hidden_act=ACTS[c.mlp], rms_norm_eps=model.ln_f.eps, tie_word_embeddings=c.tie_embeddings,
                max_position_embeddings=L if scaling(c) == "dynamic_ntk" else c.block_size,
                pad_token_id=None, bos_token_id=eot, eos_token_id=eot)


def hf_config(model, eot):
    """(model_type, config fields) of the architecture that computes exactly this model, or UserError."""
    c, plan = model.config, model.plan
    hf_unsupported(c, plan)
    return hf_family(c, plan)(c, plan, hf_base(model, eot))


def hf_state_dict(model, model_type):
    """Our tensors under the family's parameter names: Llama's layout, where Olmo 2/3 norm the
    sublayer outputs, Apertus names its pre-norms differently and Phi-3 fuses q/k/v and gate/up."""
    c = model.config
    norms = dict(olmo2=("post_attention_layernorm", "post_feedforward_layernorm"),
                 apertus=("attention_layernorm", "feedforward_layernorm"))
    n1, n2 = norms.get(model_type.replace("olmo3", "olmo2"), ("input_layernorm", "post_attention_layernorm"))
    sd = {"model.embed_tokens.weight": model.wte.weight, "model.norm.weight": model.ln_f.weight,
          "lm_head.weight": (model.lm_head or model.wte).weight}  # tied: the same tensor twice
    for i, b in enumerate(model.blocks):
        p, a, m = f"model.layers.{i}.", b.attn, b.mlp
        sd.update({p + n1 + ".weight": b.ln_1.weight, p + n2 + ".weight": b.ln_2.weight,
                   p + "self_attn.o_proj.weight": a.c_proj.weight, p + "mlp.down_proj.weight": m.c_proj.weight})
        if model_type == "phi3":
            sd[p + "self_attn.qkv_proj.weight"] = torch.cat([a.c_q.weight, a.c_k.weight, a.c_v.weight])
        else:
            sd.update({p + f"self_attn.{n}_proj.weight": getattr(a, f"c_{n}").weight for n in "qkv"})
        if c.qk_norm != "none":
            sd.update({p + "self_attn.q_norm.weight": a.q_norm.weight, p + "self_attn.k_norm.weight": a.k_norm.weight})
        if model_type == "granite_swa":  # a sink that scales nothing (hf_granite_swa)
            sd[p + "self_attn.sinks"] = torch.full((c.n_head,), SINK_OFF)
        if c.mlp != "swiglu":
            sd[p + "mlp.up_proj.weight"] = m.c_fc.weight
        elif model_type == "phi3":  # chunk(2) gives gate, then up
            sd[p + "mlp.gate_up_proj.weight"] = torch.cat([m.c_gate.weight, m.c_fc.weight])
        else:
            sd.update({p + "mlp.gate_proj.weight": m.c_gate.weight, p + "mlp.up_proj.weight": m.c_fc.weight})
    return {k: v.detach().to("cpu", torch.float32) for k, v in sd.items()}


def hf_tokenizer(enc):
    """The tiktoken encoding as a fast (tokenizers) byte-level BPE with the same ids: the vocabulary
    in GPT-2's byte-to-unicode alphabet; a merge for every split of a token into two tokens, ranked by
    the merged token (tiktoken merges the adjacent pair whose concatenation has the lowest rank);
    ignore_merges, so a pre-token that is itself a token stays whole (as tiktoken does); the same
    split regex; the special tokens at their own ids."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    table = bytes_to_unicode()
    text = lambda b: "".join(table[x] for x in b)
    ranks = enc._mergeable_ranks
    merges = sorted((ranks[t], ranks[t[:k]], ranks[t[k:]]) for t in ranks for k in range(1, len(t))
                    if t[:k] in ranks and t[k:] in ranks)
    by_rank = {r: t for t, r in ranks.items()}
    vocab = {**{text(t): r for t, r in ranks.items()}, **enc._special_tokens}
    bpe = models.BPE(vocab, [(text(by_rank[a]), text(by_rank[b])) for _, a, b in merges], ignore_merges=True)
    tok = Tokenizer(bpe)
    # Oniguruma (tokenizers' regex engine, Ruby syntax) reads tiktoken's possessive interval {1,3}+ as
    # a repeated interval; possessiveness is a no-op there (nothing follows it in its alternative)
    pattern = re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", enc._pat_str)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in enc._special_tokens])
    return tok


TOKENIZER_SAMPLE = ("Hello, world! It's 2024: 1234567 + 89 = 1234656.\n\n\tIndented  double  spaces   and trailing   \n"
                    "Unicode: naïve café, Ærøskøbing, Ελληνικά, русский, 日本語のテキスト, 한국어, emoji 🎉🚀, "
                    "ſtraße ﬁnal.\r\nWindows line\r\n   \n\n\nWe'LL see; they've gone, I'd say 'quoted' \"double\".\n"
                    "<|endoftext|>A new document after the special token<|endoftext|>\n" + " " * 7 + "x" + "\n" * 4)


def check_tokenizer(hf_tok, enc, texts):
    """The exported tokenizer must give tiktoken's ids (special token included) and decode back."""
    for t in texts:
        want = enc.encode(t, allowed_special="all")
        got = hf_tok(t, add_special_tokens=False)["input_ids"]
        if got != want or hf_tok.decode(got) != t:
            k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise UserError(f"--format hf: the exported tokenizer disagrees with {enc.name} at token {k} of a "
                            f"{len(t)}-character text; nothing written")


class HFAsGPT(torch.nn.Module):
    """A transformers causal LM behind GPT's forward signature, so model.evaluate scores it."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, idx, targets=None, reduction="mean"):
        logits = self.hf(input_ids=idx, use_cache=False).logits.float()
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1, reduction=reduction)
        return logits, loss.view(targets.shape) if reduction == "none" else loss


def hf_out_dir(xc):
    out = xc.out or os.path.join(xc.run, "hf")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"--out {out} is a file; --format hf writes a folder")
    if os.path.isdir(out) and set(os.listdir(out)) - HF_FILES:
        raise UserError(f"--out {out} holds files that an hf export does not write: not overwritten")
    return out


def replace_dir(tmp, out):
    """Move the finished folder tmp to out, replacing an earlier export there."""
    old = f"{out}.old{os.getpid()}"
    if os.path.isdir(out):
        os.rename(out, old)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def import_transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local: never reach for the network
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


def write_hf(model, enc, folder):
    """Save model (its weights as they are, fp32) and the tiktoken encoding enc as a transformers
    folder: config.json, model.safetensors, tokenizer.json, tokenizer_config.json. -> model_type"""
    transformers = import_transformers()
    model_type, fields = hf_config(model, enc.eot_token)
    config = transformers.AutoConfig.for_model(model_type, **fields)
    hf = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    hf.load_state_dict(hf_state_dict(model, model_type), strict=True)  # every name and shape, or an error
    hf.save_pretrained(folder)
    eot = next(s for s, i in enc._special_tokens.items() if i == enc.eot_token)
    transformers.PreTrainedTokenizerFast(tokenizer_object=hf_tokenizer(enc), bos_token=eot, eos_token=eot,
                                         clean_up_tokenization_spaces=False).save_pretrained(folder)
    for_older_readers(folder)
    return model_type


def write_cause(e):
    """The OSError behind a failed write: Python's own, or the one that the Rust writers of
    safetensors and tokenizers name only in their message ("... (os error 28)")."""
    m = re.search(r"os error (\d+)", str(e))
    return cli.os_error(e) or (OSError(int(m[1]), os.strerror(int(m[1]))) if m else None)


def for_older_readers(folder):
    """transformers 5 writes RoPE as rope_parameters and the tokenizer class as TokenizersBackend,
    which transformers 4 (and tools built on it) do not read: they would fall back to default RoPE.
    Add the 4.x keys with the same values (rope_theta, rope_scaling, Phi-3's partial_rotary_factor)
    and name the tokenizer class both read. transformers 5 reads rope_scaling first, so the values
    must be, and are, the same. Olmo 3's per-layer-type RoPE has no 4.x form and is left as it is."""
    path = os.path.join(folder, "config.json")
    cfg = json.load(open(path))
    rope = cfg["rope_parameters"]
    if "rope_type" in rope:
        extra = {k: v for k, v in rope.items() if k not in ("rope_theta", "partial_rotary_factor")}
        cfg.update(rope_theta=rope["rope_theta"], rope_scaling=extra if rope["rope_type"] != "default" else None)
        if "partial_rotary_factor" in rope:
            cfg["partial_rotary_factor"] = rope["partial_rotary_factor"]
        atomic_write(path, json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    path = os.path.join(folder, "tokenizer_config.json")
    atomic_write(path, json.dumps({**json.load(open(path)), "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2) + "\n")


def export_hf(model, cfg, xc, run_result):
    """Write a transformers checkpoint folder, reload it with transformers, check it against this
    model and tokenizer, evaluate it -> the export record."""
    if xc.keep != "fp32" or xc.xz:
        raise UserError("--keep and --xz apply to --format int; --format hf writes fp32 weights")
    if cfg.tokenizer == "none":
        raise UserError("--format hf writes the run's tokenizer, but this run has none (--tokenizer none)")
    bits, clip = xc.bits or model.config.bits, xc.clip or model.config.clip
    try:
        check_bits(bits, full=True)
        parse_clip(clip)
    except ValueError as e:
        raise UserError(str(e)) from None
    deployed = ptq_model(model, bits, clip) if bits < 16 else model  # the weights the deployed model uses
    enc = data.get_tokenizer(cfg.tokenizer, cfg.vocab_size)
    model_type, _ = hf_config(deployed, enc.eot_token)  # refuses before anything heavy happens
    out = hf_out_dir(xc)
    device = cli.resolve_device(xc.device)
    corpus = data.corpus_of(cfg)
    transformers = import_transformers()
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        try:
            write_hf(deployed, enc, tmp)
        except Exception as e:  # a full disk: one line naming the folder and about what it needs
            cause = write_cause(e)
            if cause is None:
                raise
            raise cli.write_error(out, cause, sum(p.numel() * 4 for p in deployed.parameters())) from None
        # what the users of the folder will load, checked before it is moved into place
        hf = transformers.AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).to(device).eval()
        check_tokenizer(transformers.AutoTokenizer.from_pretrained(tmp), enc,
                        [TOKENIZER_SAMPLE, enc.decode(corpus.val[:20000].tolist())])
        diff = logit_diff(deployed, hf, corpus.val, model.config.block_size, device)
        arch = type(hf).__name__
        if not diff <= LOGIT_TOL:
            raise UserError(f"--format hf: transformers' {arch} disagrees with this model (max |logit diff| "
                            f"{diff:.2e} > {LOGIT_TOL:g}); nothing written")
        ev = evaluate(HFAsGPT(hf), corpus.val, corpus.token_bytes, model.config.block_size,
                            max_tokens=cfg.final_eval_tokens, device=device)
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = sum(p.numel() for p in hf.parameters())
    print(f"{out}: {arch} (transformers {transformers.__version__}), {n:,} fp32 parameters, tokenizer of "
          f"{len(enc._mergeable_ranks) + len(enc._special_tokens):,} tokens; max |logit diff| vs this model {diff:.1e}")
    line = f"reloaded val loss {ev['loss']:.6f}" + (f" ({ev['bpb']:.4f} bpb)" if ev["bpb"] else "")
    recorded = run_result.get("metrics", {}).get("val_loss")
    if bits == model.config.bits and clip == model.config.clip and recorded is not None:
        what = "deployed (fake-quant)" if bits < 16 else "full-precision"
        line += f"; recorded {what} {recorded:.6f}, diff {ev['loss'] - recorded:+.2e}"
    print(line)
    return dict(format="hf", architecture=arch, model_type=model_type, path=out, bits=bits, clip=clip,
                transformers=transformers.__version__, max_abs_logit_diff=diff, val_loss=ev["loss"], val_bpb=ev["bpb"])


@torch.no_grad()
def logit_diff(model, hf, tokens, block, device):
    """max |logits of hf - logits of model| over up to two val windows of the training length."""
    T = min(block, len(tokens) // 2)
    x = torch.as_tensor(tokens[:2 * T].astype("int64")).view(2, T).to(device)
    model = model.to(device).eval()
    return (hf(input_ids=x, use_cache=False).logits.float() - model(x)[0]).abs().max().item()


def export(xc):
    model, cfg, _ = load_run(xc.run)  # a finished run: its result.json exists
    result = train.read_result(xc.run)
    if xc.format not in ("int", "hf"):
        raise UserError(f"unknown --format {xc.format!r}: int | hf")
    if xc.format == "hf":
        record = export_hf(model, cfg, xc, result)
        write_json(os.path.join(xc.run, "export.json"), record)
        return record
    if xc.out:  # never over an input such as the run's checkpoint
        cli.check_out_file(xc.out, "--out", lambda p: os.path.basename(p).startswith("model_int"),
                           "artefact (model_int*)")
    record = export_int(model, cfg, xc, result)
    write_json(os.path.join(xc.run, "export.json"), record)
    return record


def main(argv=None):
    cli_main(lambda: export(parse(ExportConfig, argv, __doc__)))


if __name__ == "__main__":
    main()
