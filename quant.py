"""
Quantisation for the QAT study: the fake-quant grid (with a straight-through estimator), a real
b-bit integer export, a round-to-nearest PTQ baseline, and the weight-to-grid distance probe.

Symmetric per-output-row grid (REFERENCE.md section 3): for bit-width b,
qmax = 2^(b-1) - 1, scale_r = clip_r / qmax, q = clamp(round(w / scale), -qmax, qmax),
w_hat = q * scale. b = 16 means full precision (no quantisation). Scales are rounded to bf16
values (see row_scale), and training, export, PTQ and the probe all use this one grid.

    python quant.py export out/RUN [--out FILE] [--bits B] [--keep fp32|fp16] [--xz]
    python quant.py ptq out/RUN [--bits 8,6,4]
    python quant.py probe out/RUN_QAT [out/RUN_FP ...] --bits 6 [--ckpt warmdown|final]
"""
import argparse
import copy
import dataclasses
import io
import lzma
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VALID_BITS = (2, 3, 4, 5, 6, 7, 8, 16)
ARTEFACT_KIND = "gpt-int-artefact"


# -----------------------------------------------------------------------------
# The grid

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
    attributes, so a late-QAT switch would silently never happen (REFERENCE.md section 3, pitfall).
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


def quant_targets(model):
    """[(module name, module)] of the matrices the study quantises: the fake-quantised modules
    (bits < 16). For a full-precision model, the ones its INT-b twin would fake-quantise (block
    Linears; embedding/head when config.quant_embed), asked of model.py by building the twin on
    the meta device (no memory, no init), so the rule lives in one place."""
    qat = [(n, m) for n, m in model.named_modules() if isinstance(m, (QATLinear, QATEmbedding))]
    if model.config.bits < 16:
        return [(n, m) for n, m in qat if m.bits < 16]
    with torch.device("meta"):
        twin = type(model)(dataclasses.replace(model.config, bits=8))
    names = {n for n, m in twin.named_modules() if isinstance(m, (QATLinear, QATEmbedding)) and m.bits < 16}
    return [(n, m) for n, m in qat if n in names]


def check_bits(bits):
    if bits not in VALID_BITS or bits == 16:
        raise ValueError(f"bits={bits} not supported: use 2..8")


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


def ptq_eval(model, eval_fn, bits_list=(8, 6, 4), clip="absmax"):
    """{"8": {"val_loss", "val_bpb", "clip"}, ...}: eval_fn(model) -> dict(loss, bpb) on each PTQ copy."""
    out = {}
    for b in bits_list:
        r = eval_fn(ptq_model(model, b, clip))
        out[str(b)] = dict(val_loss=r["loss"], val_bpb=r["bpb"], clip=clip)
    return out


# -----------------------------------------------------------------------------
# Weight-to-grid distance probe (REFERENCE.md section 4)

@torch.no_grad()
def grid_distance(model_or_state_dict, bits, clip="absmax"):
    """Mean |w/s - round(w/s)| over the quantised matrices on the b-bit grid (0 = on the grid,
    0.25 = uniform). A model uses quant_targets; a bare state dict its 2-D 'blocks.*' tensors
    (the block Linears). overall is weighted by weight count. Weights clipped by a quantile/std
    rule count their distance to the nearest integer multiple of s, as in the reference formula."""
    check_bits(bits)
    if isinstance(model_or_state_dict, nn.Module):
        mats = {f"{n}.weight": m.weight for n, m in quant_targets(model_or_state_dict)}
    else:
        mats = {k: v for k, v in model_or_state_dict.items() if k.startswith("blocks.") and v.ndim == 2}
    if not mats:
        raise ValueError("no quantisable matrices found")
    per, tot, cnt = {}, 0.0, 0
    for name, w in mats.items():
        x = w.detach().float() / row_scale(w, bits, clip)
        d = (x - torch.round(x)).abs()
        per[name] = d.mean().item()
        tot, cnt = tot + d.double().sum().item(), cnt + d.numel()
    return dict(overall=tot / cnt, per_layer=per)


# -----------------------------------------------------------------------------
# Integer export: one torch.save'd dict, loadable with weights_only=True:
#   kind, version, model_config, bits, clip, keep,
#   quant: {param name: {codes: packed uint8 stream, scale: bf16 [rows], shape: [rows, cols]}},
#   rest:  {param name: fp32 tensor (fp16 for matrices with keep='fp16')}

def export_artefact(model, path, bits=None, clip=None, keep="fp32", xz=False):
    """Write model's quant_targets matrices as packed b-bit codes + bf16 row scales, and every
    other tensor (norms, unquantised embedding/head) as fp32 (exact: the reloaded loss equals the
    fake-quant loss) or, with keep='fp16', fp16 for matrices (smaller, loss then differs
    slightly). bits/clip default to the model's own grid; giving them for a full-precision model
    exports its PTQ twin. xz=True writes lzma-compressed bytes. Returns the sizes in bytes."""
    import train
    bits, clip = bits or model.config.bits, clip or model.config.clip
    check_bits(bits)
    parse_clip(clip)
    if keep not in ("fp32", "fp16"):
        raise ValueError(f"keep={keep!r}: fp32 | fp16")
    quant = {}
    for name, m in quant_targets(model):
        q, s = quantize(m.weight, bits, clip)
        quant[f"{name}.weight"] = dict(codes=pack_codes(q, bits), scale=s.view(-1).to(torch.bfloat16).cpu(),
                                       shape=list(q.shape))
    rest = {}
    for k, v in model.state_dict().items():
        if k not in quant:
            rest[k] = v.detach().to("cpu", torch.float16 if keep == "fp16" and v.ndim >= 2 else torch.float32,
                                    copy=True)
    art = dict(kind=ARTEFACT_KIND, version=1, model_config=dataclasses.asdict(model.config), bits=bits, clip=clip,
               keep=keep, quant=quant, rest=rest)
    buf = io.BytesIO()
    torch.save(art, buf)
    raw = buf.getvalue()
    packed = lzma.compress(raw)
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    train.atomic_write(path, packed if xz else raw, "wb")
    n = sum(v.numel() for v in model.state_dict().values())
    tensors = [t for e in quant.values() for t in (e["codes"], e["scale"])] + list(rest.values())
    return dict(params=n, fp32=4 * n, fp16=2 * n, payload=sum(t.numel() * t.element_size() for t in tensors),
                codes=sum(e["codes"].numel() for e in quant.values()), raw=len(raw), xz=len(packed),
                file=len(packed if xz else raw))


def load_artefact(path):
    """Rebuild the GPT of an artefact: unpack codes, write w_hat = q * s into the weights, and turn
    fake quantisation off (the weights are on the grid already; for quantile/std clips
    re-quantising w_hat could even move it). Raises train.UserError on anything wrong."""
    import train
    from model import GPT, GPTConfig
    if not os.path.isfile(path):
        raise train.UserError(f"no artefact at {path}")
    data = open(path, "rb").read()
    try:
        if data.startswith(b"\xfd7zXZ\x00"):
            data = lzma.decompress(data)
        art = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        raise train.UserError(f"corrupt or unreadable artefact {path}: {type(e).__name__}") from None
    if not isinstance(art, dict) or art.get("kind") != ARTEFACT_KIND:
        raise train.UserError(f"{path} is not a quantised artefact of this project")
    sd = {k: v.float() for k, v in art["rest"].items()}
    for k, e in art["quant"].items():
        sd[k] = unpack_codes(e["codes"], art["bits"], e["shape"]).float() * e["scale"].float()[:, None]
    try:
        model = GPT(GPTConfig.from_dict(art["model_config"]))
        model.load_state_dict(sd)
    except (ValueError, RuntimeError, TypeError) as e:
        raise train.UserError(f"artefact does not match this model code: {str(e).splitlines()[0]}") from None
    set_qat(model, False)
    return model.eval()


# -----------------------------------------------------------------------------
# Command line

def grid_args(bits_list, clip):
    """Validate CLI grid arguments -> (list of bits, clip). Raises UserError."""
    from train import UserError
    bits = [b.strip() for b in str(bits_list).split(",") if b.strip()]
    if not bits or not all(b.isdigit() and 2 <= int(b) <= 8 for b in bits):
        raise UserError(f"--bits {bits_list} not supported: use 2..8 (comma-separated for ptq)")
    try:
        parse_clip(clip)
    except ValueError as e:
        raise UserError(str(e)) from None
    return [int(b) for b in bits], clip


def load_run(run_dir, ckpt="final", need_result=True):
    """(checkpoint, model, result dict or None) of a run folder. Raises UserError."""
    import json
    import train
    if not os.path.isdir(run_dir):
        raise train.UserError(f"no run folder {run_dir}")
    name = {"final": "ckpt.pt", "warmdown": "ckpt_warmdown.pt"}[ckpt]
    path = os.path.join(run_dir, name)
    if ckpt == "warmdown" and not os.path.isfile(path):
        raise train.UserError(f"no warmdown checkpoint in {run_dir} (saved by wsd runs with --warmdown > 0); "
                              f"try --ckpt final")
    c, result_path, result = train.load_checkpoint(path), os.path.join(run_dir, "result.json"), None
    if os.path.isfile(result_path):
        try:
            result = json.load(open(result_path))
        except (OSError, ValueError):
            raise train.UserError(f"unreadable {result_path}") from None
    elif need_result:  # result.json marks a finished run: never create one for an unfinished run
        raise train.UserError(f"{run_dir} has no result.json: the run is not finished")
    return c, train.model_from_checkpoint(c), result


def eval_fn_for(ckpt, device):
    """eval_fn(model) -> dict(loss, bpb) on the full val split of the checkpoint's corpus, as the
    final evaluation of train.py computes it."""
    import train
    tc = ckpt["train_config"]
    corpus = train.load_corpus(tc["data"], tc["tokenizer"], tc["vocab_size"], tc["cache_dir"], tc["val_frac"])
    device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    return lambda m: train.evaluate(m.to(device), corpus.val, corpus.token_bytes, tc["block_size"], device=device)


def cmd_export(args):
    import train
    ckpt, model, result = load_run(args.run, need_result=False)
    bits = args.bits or model.config.bits
    if bits == 16:
        raise train.UserError("nothing to export at 16 bits: pass --bits 2..8 (a full-precision run "
                              "exports its round-to-nearest PTQ twin)")
    (bits,), clip = grid_args(bits, args.clip or model.config.clip)
    out = args.out or os.path.join(args.run, f"model_int{bits}.pt" + (".xz" if args.xz else ""))
    sizes = export_artefact(model, out, bits, clip, args.keep, args.xz)
    ev = eval_fn_for(ckpt, args.device)(load_artefact(out))
    print(f"{out}: INT{bits} ({clip}) artefact {sizes['file']:,} bytes (torch.save {sizes['raw']:,}, "
          f"xz {sizes['xz']:,}; packed codes {sizes['codes']:,}) vs fp32 {sizes['fp32']:,} / "
          f"fp16 {sizes['fp16']:,} for {sizes['params']:,} parameters")
    line = f"reloaded val loss {ev['loss']:.6f} ({ev['bpb']:.4f} bpb)"
    m = (result or {}).get("metrics", {})
    same = model.config.bits == bits and model.config.clip == clip
    if same and m.get("val_loss") is not None:
        line += f"; recorded deployed (fake-quant) {m['val_loss']:.6f}, diff {ev['loss'] - m['val_loss']:+.2e}"
    print(line)
    if result is not None:
        result["export"] = dict(file=os.path.basename(out), bits=bits, clip=clip, keep=args.keep, bytes=sizes,
                                val_loss=ev["loss"], val_bpb=ev["bpb"])
        train.write_json(os.path.join(args.run, "result.json"), result)


def cmd_ptq(args):
    import train
    ckpt, model, result = load_run(args.run)
    bits, clip = grid_args(args.bits, args.clip or model.config.clip)
    res = ptq_eval(model, eval_fn_for(ckpt, args.device), bits, clip)
    for b, r in res.items():
        print(f"PTQ INT{b} ({clip}): val loss {r['val_loss']:.4f}, {r['val_bpb']:.4f} bpb")
    result["ptq"] = res
    train.write_json(os.path.join(args.run, "result.json"), result)


def cmd_probe(args):
    import train
    (bits,), _ = grid_args(args.bits, "absmax")
    runs = [load_run(r, args.ckpt) for r in args.runs]  # check every run before writing anything
    clip = args.clip or runs[0][1].config.clip  # one grid for all runs: the first run's (the QAT run)
    grid_args(bits, clip)
    dist = [grid_distance(model, bits, clip) for _, model, _ in runs]
    for run, (_, _, result), d in zip(args.runs, runs, dist):
        print(f"{run}: INT{bits} grid distance {d['overall']:.4f} ({args.ckpt} checkpoint, {clip})")
        result["grid_distance"] = dict(bits=bits, ckpt=args.ckpt, clip=clip, **d)
        train.write_json(os.path.join(run, "result.json"), result)
    for run, d in zip(args.runs[1:], dist[1:]):
        ratio = dist[0]["overall"] / d["overall"] if d["overall"] else float("inf")
        print(f"ratio {args.runs[0]} / {run}: {ratio:.4f}")


def main(argv=None):
    import train
    p = train.OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="pack a run's final checkpoint into a b-bit integer artefact")
    e.add_argument("run")
    e.add_argument("--out", default="", help="artefact file (default RUN/model_int<b>.pt)")
    e.add_argument("--bits", type=int, default=0, help="default: the run's QAT bits (needed for FP runs)")
    e.add_argument("--keep", default="fp32", choices=("fp32", "fp16"), help="dtype of unquantised matrices")
    e.add_argument("--xz", action="store_true", help="write the lzma-compressed bytes")
    q = sub.add_parser("ptq", help="round-to-nearest PTQ eval of a run's final checkpoint")
    q.add_argument("run")
    q.add_argument("--bits", default="8,6,4")
    r = sub.add_parser("probe", help="weight-to-grid distance of runs' checkpoints; ratio first / others")
    r.add_argument("runs", nargs="+")
    r.add_argument("--bits", type=int, default=6)
    r.add_argument("--ckpt", default="warmdown", choices=("warmdown", "final"))
    for s in (e, q, r):
        s.add_argument("--clip", default="", help="grid clip rule (default: the (first) run's)")
    for s in (e, q):
        s.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    try:
        dict(export=cmd_export, ptq=cmd_ptq, probe=cmd_probe)[args.cmd](args)
    except train.UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    # run the module `quant`, not `__main__`: model.py builds its layers from `import quant`, and the
    # isinstance checks of quant_targets/set_qat must see those same classes
    import quant
    quant.main()
