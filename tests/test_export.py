"""tools/export.py: the integer artefact (exact reload, every clip rule, sizes) and its command line."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, tiny_config
from tools import export
import quant
import data
import train
from train import load_run
from model import GPT, evaluate
from test_quant import CLIPS, randomised, small_config, tokens


def write(model, path, bits=None, clip=None, keep="fp32", xz=False):
    """tools/export.py's artefact of model at path; returns its sizes (as the command records them)."""
    import lzma
    raw, sizes = export.artefact_bytes(model, bits or model.config.bits, clip or model.config.clip, keep)
    data = lzma.compress(raw) if xz else raw
    open(path, "wb").write(data)
    return dict(sizes, xz=len(lzma.compress(raw)), file=len(data))


@pytest.fixture(scope="module")
def int4_run(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("int4"), bits=4, save_at="0.5")
    result = train.train(cfg)
    corpus = data.corpus_of(cfg)
    ev = lambda m: evaluate(m, corpus.val, corpus.token_bytes, 32)
    return cfg, result, ev


def test_artefact_reload_equals_fake_quant_loss(int4_run, tmp_path):
    cfg, result, ev = int4_run
    model, _, _ = load_run(cfg.out_dir)
    path = str(tmp_path / "a.pt")
    sizes = write(model, path)
    art = torch.load(path, weights_only=True)  # plain torch.save dict of tensors + metadata
    assert art["bits"] == 4 and set(art["quant"]) == {f"{n}.weight" for n, _ in quant.quant_targets(model)}
    loaded = export.load_artefact(path)
    assert all(m.qat_on.item() == 0 for m in loaded.modules() if hasattr(m, "qat_on"))
    assert ev(loaded)["loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    # weights are exactly the fake-quant grid, and the xz file loads the same model
    for (n, m), (_, lm) in zip(quant.quant_targets(model), quant.quant_targets(loaded)):
        assert torch.equal(lm.weight, quant.fake_quant(m.weight, 4)), n
    write(model, str(tmp_path / "a.pt.xz"), xz=True)
    assert os.path.getsize(tmp_path / "a.pt.xz") == sizes["xz"] < sizes["raw"] == os.path.getsize(path)
    xz = export.load_artefact(str(tmp_path / "a.pt.xz"))
    assert all(torch.equal(a, b) for a, b in zip(xz.state_dict().values(), loaded.state_dict().values()))


@pytest.mark.parametrize("clip", CLIPS)
def test_clip_rule_same_in_fake_quant_and_export(clip, tmp_path):
    model = randomised(GPT(small_config(bits=3, clip=clip, quant_embed=True)))
    x = tokens()
    logits_fq = model(x)[0]
    write(model, str(tmp_path / "a.pt"))
    loaded = export.load_artefact(str(tmp_path / "a.pt"))
    assert torch.equal(loaded(x)[0], logits_fq)
    assert torch.equal(quant.ptq_model(model, 3, clip)(x)[0], logits_fq)
    # a different rule is a different grid
    other = "absmax" if clip != "absmax" else "std:2.5"
    assert not torch.equal(quant.ptq_model(model, 3, other)(x)[0], logits_fq)


@pytest.mark.parametrize("bits", range(2, 9))
def test_artefact_smaller_than_fp16(bits, tmp_path):
    model = randomised(GPT(small_config(bits=bits)))
    s32 = write(model, str(tmp_path / "a.pt"))
    s16 = write(model, str(tmp_path / "b.pt"), keep="fp16")
    assert s16["raw"] < s16["fp16"] and s32["raw"] < s32["fp32"]
    n_quant = sum(m.weight.numel() for _, m in quant.quant_targets(model))
    assert s32["codes"] == sum((m.weight.numel() * bits + 7) // 8 for _, m in quant.quant_targets(model))
    assert s32["codes"] < 2 * n_quant  # the quantised part alone beats fp16
    assert s16["payload"] < s32["payload"]
    x = tokens()  # fp16 rest: close to, not equal to, the fake-quant model
    assert torch.allclose(export.load_artefact(str(tmp_path / "b.pt"))(x)[0], model(x)[0], atol=1e-2)


def run_cli(script, *args):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_cli_export_and_grid_probe(int4_run, tmp_path, capsys):
    cfg, result, _ = int4_run
    before = open(os.path.join(cfg.out_dir, "result.json")).read()
    out = str(tmp_path / "model_int4.pt")
    r = run_cli("tools/export.py", cfg.out_dir, "--out", out)  # the real entry point
    assert r.returncode == 0, r.stderr
    assert "fp16" in r.stdout and "recorded deployed" in r.stdout and "diff +0.00e+00" in r.stdout, r.stdout
    rec = json.load(open(os.path.join(cfg.out_dir, "export.json")))
    assert rec["bytes"]["file"] == os.path.getsize(out) and rec["bytes"]["codes"] > 0
    assert rec["val_loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    # a full-precision export of the INT4 run at 6 bits is its PTQ twin (in process from here on: the
    # entry point is checked above, and each interpreter start costs seconds)
    import evaluate
    from test_faults import run_main
    capsys.readouterr()
    assert run_main(export.main, [cfg.out_dir, "--bits", "6", "--out", str(tmp_path / "model_int6.pt")])[0] == 0
    assert "recorded deployed" not in capsys.readouterr().out
    # the weight-to-grid probe (evaluate.py --tasks grid) writes its own file
    assert run_main(evaluate.main, [cfg.out_dir, "--tasks", "grid", "--ckpt", "warmdown", "--grid_bits", "6",
                                    "--out", str(tmp_path / "grid.json")])[0] == 0
    g = json.load(open(tmp_path / "grid.json"))["grid_distance"]
    assert (g["bits"], g["ckpt"]) == (6, "warmdown") and 0 < g["overall"] < 0.5 and g["per_layer"]
    assert open(os.path.join(cfg.out_dir, "result.json")).read() == before  # the trainer's record is untouched


@pytest.mark.parametrize("args", [
    ["--bits", "1"], ["--bits", "9"], ["--clip", "std:"], ["--keep", "int3"], ["--format", "onnx"],
    ["--out", "RUN/ckpt.pt"], ["--out", "RUN"],
])
def test_cli_bad_input_one_line_error(int4_run, args, capsys):
    """tools/export.py's main in process: the command line's own path (cli_main) without an interpreter start."""
    from test_faults import call, one_line
    cfg, _, _ = int4_run
    files = {n: open(os.path.join(cfg.out_dir, n), "rb").read() for n in os.listdir(cfg.out_dir)
             if os.path.isfile(os.path.join(cfg.out_dir, n))}
    one_line(*call(export.main, [cfg.out_dir, *[a.replace("RUN", cfg.out_dir) for a in args]], capsys))
    for n, b in files.items():  # nothing in the run folder changed
        assert open(os.path.join(cfg.out_dir, n), "rb").read() == b, n


def test_unfinished_or_missing_run_is_refused(int4_run, tmp_path, capsys):
    """In process (the entry points' main; test_cli_export_and_grid_probe runs the real scripts)."""
    import evaluate
    from test_faults import call, one_line
    cfg, _, _ = int4_run
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for f in ("ckpt.pt", "ckpt_warmdown.pt"):
        (unfinished / f).write_bytes(open(os.path.join(cfg.out_dir, f), "rb").read())
    one_line(*call(export.main, [str(unfinished)], capsys), "not finished")
    one_line(*call(export.main, [str(tmp_path / "nope")], capsys), "no run folder")
    one_line(*call(evaluate.main, [str(unfinished), "--tasks", "grid", "--grid_bits", "16"], capsys))
    assert sorted(os.listdir(unfinished)) == ["ckpt.pt", "ckpt_warmdown.pt"]
