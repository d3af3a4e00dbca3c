"""
Export a trained run's weights for deployment.

    python export.py out/RUN                        # bit-packed b-bit artefact RUN/model_int<b>.pt
    python export.py out/RUN --xz --keep fp16       # smaller: lzma-compressed, fp16 for the rest
    python export.py out/FP_RUN --bits 4            # a full-precision run exports its PTQ twin

The integer artefact (--format int) holds each quantised matrix as packed b-bit codes with bf16
per-row scales, on the very grid of training (quant.py), and every other tensor as fp32 (exact:
the reloaded model's loss equals the fake-quant loss) or fp16. The export reloads what it wrote,
evaluates it on the run's val split and records both in RUN/export.json (never in result.json,
the trainer's record).

This is a script above the library (train.py, model.py, quant.py); nothing imports it.
"""
import dataclasses
import io
import lzma
import os
from dataclasses import dataclass

import torch

import cli
import train
from cli import UserError, atomic_write, flag, parse, write_json, main as cli_main
from model import GPT, GPTConfig
from quant import check_bits, pack_codes, parse_clip, quant_targets, quantize, set_qat, unpack_codes

ARTEFACT_KIND = "gpt-int-artefact"


@dataclass
class ExportConfig:
    run: str = flag("", "run folder", positional=True)
    format: str = flag("int", "int: bit-packed b-bit artefact")
    out: str = flag("", "output file ('' = RUN/model_int<b>.pt[.xz])")
    bits: int = flag(0, "grid bit-width (0 = the run's QAT bits; needed for full-precision runs)")
    clip: str = flag("", "grid clip rule ('' = the run's own)")
    keep: str = flag("fp32", "dtype of the tensors that are not quantised: fp32 (exact) | fp16")
    xz: bool = flag(False, "write the lzma-compressed bytes")
    device: str = flag("auto", "where the reloaded artefact is evaluated: auto | cpu | cuda | cuda:N")


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
        raise UserError(f"artefact does not match this model code: {str(e).splitlines()[0]}") from None
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
    corpus = train.corpus_of(cfg)
    raw, sizes = artefact_bytes(model, bits, clip, xc.keep)
    packed = lzma.compress(raw)
    sizes.update(xz=len(packed), file=len(packed if xc.xz else raw))
    atomic_write(out, packed if xc.xz else raw, "wb")
    ev = train.evaluate(load_artefact(out).to(device), corpus.val, corpus.token_bytes, model.config.block_size,
                        device=device)
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


def export(xc):
    model, cfg, _ = train.load_run(xc.run)  # a finished run: its result.json exists
    result = train.read_result(xc.run)
    if xc.format != "int":
        raise UserError(f"unknown --format {xc.format!r}: int")
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
