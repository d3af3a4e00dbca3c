"""Tests for quant.py: the grid, STE, bit packing, integer export, PTQ, the grid-distance probe, the CLI."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, tiny_config
import quant  # noqa: E402
import train  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

CLIPS = ("absmax", "quantile:0.9", "std:2.5")


def small_config(**kw):
    return GPTConfig(**{**dict(vocab_size=512, block_size=32, n_layer=2, n_head=2, n_kv_head=2, n_embd=64), **kw})


def randomised(model, seed=0):
    """Random weights everywhere (the zero-initialised projections would make trivial rows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1 + (1.0 if p.ndim == 1 else 0.0))
    return model


def tokens(n=2, t=16, seed=0):
    return torch.randint(0, 512, (n, t), generator=torch.Generator().manual_seed(seed))


# -----------------------------------------------------------------------------
# the grid

@pytest.mark.parametrize("bits", range(2, 9))
def test_grid_values_and_qmax(bits):
    qmax = 2 ** (bits - 1) - 1
    w = torch.randn(33, 47)
    q, s = quant.quantize(w, bits)
    assert q.dtype == torch.int8 and s.shape == (33, 1)
    assert q.abs().max() == qmax  # absmax: each row's largest weight sits at +-qmax
    assert (q.abs().amax(dim=1) == qmax).all()
    w_hat = quant.fake_quant(w, bits)
    assert torch.equal(w_hat, q.float() * s)
    assert len(torch.unique(w_hat[0])) <= 2 * qmax + 1
    assert torch.equal(s, s.bfloat16().float())  # scales are bf16 values
    # within half a step of w (the bf16-rounded scale can clamp the max by < 0.5 step too)
    assert ((w_hat - w).abs() <= 0.5 * s + 1e-7).all()


def test_bf16_grid_rounding_matches_torch():
    x = torch.rand(100_000) * 10.0 ** torch.randint(-35, 10, (100_000,)).float()
    x = torch.cat([x, torch.tensor([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1e-40])])  # ties to even, subnormal
    assert torch.equal(quant.to_bf16_grid(x), x.bfloat16().float())


def test_inductor_uses_the_same_grid():
    """Inductor elides x.bfloat16().float() round trips (no precision-cast emulation), which gave
    compiled QAT an unrounded grid, different from the export's; the integer rounding survives.
    ~15 s on a cold compile cache, ~7 s warm."""
    w = torch.randn(33, 47)
    for clip in CLIPS:
        compiled = torch.compile(lambda v: quant.fake_quant(v, 4, clip), backend="inductor")
        assert torch.equal(compiled(w), quant.fake_quant(w, 4, clip)), clip


def test_bits_16_is_identity_and_ternary_at_2():
    w = torch.randn(5, 9)
    assert quant.fake_quant(w, 16) is w
    q, _ = quant.quantize(w, 2)
    assert set(q.unique().tolist()) <= {-1, 0, 1}


def test_ste_gradient_is_identity():
    for bits in (2, 4, 8):
        w = torch.randn(7, 13, requires_grad=True)
        quant.fake_quant(w, bits, "quantile:0.9").sum().backward()
        assert torch.equal(w.grad, torch.ones_like(w))
    lin = quant.QATLinear(13, 7, bits=4)
    x = torch.randn(3, 13)
    lin(x).sum().backward()  # d/dW sum(x W^T) = column sums of x, as without quantisation
    assert torch.allclose(lin.weight.grad, x.sum(0).expand(7, 13))


@pytest.mark.parametrize("bits", range(2, 9))
def test_absmax_grid_is_idempotent(bits):
    w = torch.randn(37, 53) * torch.logspace(-6, 1, 37)[:, None]
    w_hat = quant.fake_quant(w, bits)
    assert torch.equal(quant.fake_quant(w_hat, bits), w_hat)


@pytest.mark.parametrize("bits", (2, 3, 4))
def test_no_nonzero_row_collapses_to_zero(bits):
    qmax = 2 ** (bits - 1) - 1
    w = torch.randn(8, 64)
    w[0] *= 1e-30                          # tiny but nonzero row
    w[1] = 0; w[1, 5] = 1e-3               # a single nonzero weight
    w[2, :60] = 1e-9                       # mostly tiny: quantile clip ~ 0
    w[3, :56] = 0                          # mostly zero: quantile clip = 0
    w[4] = 0                               # all zero: stays zero, no NaN
    for clip in ("absmax", "quantile:0.5", "quantile:0.1", "std:0.01", "std:3"):
        q, s = quant.quantize(w, bits, clip)
        assert torch.isfinite(s).all() and (s > 0).all()
        nonzero = w.abs().amax(dim=1) > 0
        assert (q[nonzero].abs().amax(dim=1) > 0).all(), clip
        assert (q[4] == 0).all()
        # the row's largest weight always maps to +-qmax (the clip never exceeds the absmax)
        big = w.abs().argmax(dim=1)
        assert (q[nonzero].gather(1, big[nonzero, None]).abs() == qmax).all(), clip
    # rows 2 and 3 would clip to ~0 / 0 under quantile:0.5: they fall back to absmax
    c = quant.row_clip(w, "quantile:0.5")
    assert torch.equal(c[2:4], w[2:4].abs().amax(dim=1, keepdim=True))


def test_quantile_clip_matches_torch_quantile():
    w = torch.randn(9, 101)
    assert torch.allclose(quant.row_clip(w, "quantile:0.9"),
                          torch.quantile(w.abs(), 0.9, dim=1, keepdim=True), rtol=1e-6)


def test_parse_clip_rejects_malformed():
    for bad in ("", "max", "quantile", "quantile:0", "quantile:1.5", "std:-1", "std:nan", "std:x"):
        with pytest.raises(ValueError):
            quant.parse_clip(bad)


# -----------------------------------------------------------------------------
# bit packing

@pytest.mark.parametrize("bits", range(2, 9))
def test_pack_unpack_roundtrip(bits):
    qmax = 2 ** (bits - 1) - 1
    g = torch.Generator().manual_seed(bits)
    for shape in ((7, 13), (1, 1), (3, 257), (2, 3, 5)):
        q = torch.randint(-qmax, qmax + 1, shape, generator=g).to(torch.int8)
        q.view(-1)[0], q.view(-1)[-1] = -qmax, qmax
        packed = quant.pack_codes(q, bits)
        n = q.numel()
        assert packed.dtype == torch.uint8 and packed.numel() == (n * bits + 7) // 8
        assert torch.equal(quant.unpack_codes(packed, bits, list(shape)), q)
    with pytest.raises(ValueError):
        quant.pack_codes(torch.tensor([qmax + 1]), bits)


def test_pack_is_chunk_invariant(monkeypatch):
    q = torch.randint(-7, 8, (5, 77)).to(torch.int8)  # 385 codes: chunks of 16 and a partial one
    whole = quant.pack_codes(q, 4)
    monkeypatch.setattr(quant, "PACK_CHUNK", 16)
    assert torch.equal(quant.pack_codes(q, 4), whole)
    assert torch.equal(quant.unpack_codes(whole, 4, q.shape), q)


# -----------------------------------------------------------------------------
# which matrices, late QAT, compile

@pytest.mark.parametrize("tied,quant_embed", [(True, False), (True, True), (False, False), (False, True)])
def test_quant_targets_fp_rule_matches_qat_modules(tied, quant_embed):
    names = lambda m: [n for n, _ in quant.quant_targets(m)]
    fp = GPT(small_config(tie_embeddings=tied, quant_embed=quant_embed))
    q4 = GPT(small_config(tie_embeddings=tied, quant_embed=quant_embed, bits=4))
    assert names(fp) == names(q4)
    assert sum(n.startswith("blocks.") for n in names(q4)) == 2 * 6  # q, k, v, proj, fc, proj per block
    assert ("wte" in names(q4)) == quant_embed and ("lm_head" in names(q4)) == (quant_embed and not tied)
    assert all(n.startswith("blocks.") for n in names(q4) if n not in ("wte", "lm_head"))


def test_qat_switch_changes_loss_eager_and_compiled():
    torch.manual_seed(0)
    model = randomised(GPT(small_config(bits=4, n_layer=1)))
    x, y = tokens(), tokens(seed=1)
    # aot_eager exercises dynamo's tracing and guards (where a Python-attribute switch gets
    # constant-folded); inductor sees the same graph but takes ~30 s to compile on one CPU thread
    backend = os.environ.get("QUANT_TEST_COMPILE_BACKEND", "aot_eager")
    compiled = torch.compile(model, backend=backend)
    losses = {}
    for on in (0, 1, 0):
        quant.set_qat(model, on)
        eager = model(x, y)[1].item()
        comp = compiled(x, y)[1].item()
        assert comp == pytest.approx(eager, abs=1e-5)
        losses.setdefault(on, eager)
    assert abs(losses[0] - losses[1]) > 1e-4


def test_late_qat_switches_on_in_training(tmp_path):
    """Same seed and batches: with qat_start=0.5 the loss curve follows the never-QAT run (qat_start=1)
    up to the switch, then leaves it."""
    curves = []
    for start in (0.5, 1.0):
        cfg = tiny_config(tmp_path, bits=4, qat_start=start, iters=8, eval_interval=8,
                          out_dir=str(tmp_path / f"run{start}"))
        train.train(cfg)
        curves.append([r["loss"] for r in map(json.loads, open(os.path.join(cfg.out_dir, "log.jsonl")))])
    assert curves[0][:4] == curves[1][:4]  # steps 0..3: QAT off in both
    assert curves[0][4] != curves[1][4]    # step 4: QAT on in the first run only


# -----------------------------------------------------------------------------
# export, PTQ and probe on one trained INT4 run

@pytest.fixture(scope="module")
def int4_run(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("int4"), bits=4)
    result = train.train(cfg)
    corpus = train.load_corpus(cfg.data, cfg.tokenizer, cfg.vocab_size, cfg.cache_dir, cfg.val_frac)
    ev = lambda m: train.evaluate(m, corpus.val, corpus.token_bytes, cfg.block_size)
    return cfg, result, ev


def test_artefact_reload_equals_fake_quant_loss(int4_run, tmp_path):
    cfg, result, ev = int4_run
    model = train.model_from_checkpoint(train.load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt")))
    path = str(tmp_path / "a.pt")
    sizes = quant.export_artefact(model, path)
    art = torch.load(path, weights_only=True)  # plain torch.save dict of tensors + metadata
    assert art["bits"] == 4 and set(art["quant"]) == {f"{n}.weight" for n, _ in quant.quant_targets(model)}
    loaded = quant.load_artefact(path)
    assert all(m.qat_on.item() == 0 for m in loaded.modules() if hasattr(m, "qat_on"))
    assert ev(loaded)["loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    # weights are exactly the fake-quant grid, and the xz file loads the same model
    for (n, m), (_, lm) in zip(quant.quant_targets(model), quant.quant_targets(loaded)):
        assert torch.equal(lm.weight, quant.fake_quant(m.weight, 4)), n
    quant.export_artefact(model, str(tmp_path / "a.pt.xz"), xz=True)
    assert os.path.getsize(tmp_path / "a.pt.xz") == sizes["xz"] < sizes["raw"] == os.path.getsize(path)
    xz = quant.load_artefact(str(tmp_path / "a.pt.xz"))
    assert all(torch.equal(a, b) for a, b in zip(xz.state_dict().values(), loaded.state_dict().values()))


def test_ptq_at_trained_bits_equals_deployed_loss(int4_run):
    cfg, result, ev = int4_run
    model = train.model_from_checkpoint(train.load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt")))
    res = quant.ptq_eval(model, ev, bits_list=(8, 4))
    assert set(res) == {"8", "4"} and set(res["4"]) >= {"val_loss", "val_bpb"}
    assert res["4"]["val_loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    assert model.blocks[0].attn.c_q.qat_on.item() == 1  # the original model is untouched


@pytest.mark.parametrize("clip", CLIPS)
def test_clip_rule_same_in_fake_quant_and_export(clip, tmp_path):
    model = randomised(GPT(small_config(bits=3, clip=clip, quant_embed=True)))
    x = tokens()
    logits_fq = model(x)[0]
    quant.export_artefact(model, str(tmp_path / "a.pt"))
    loaded = quant.load_artefact(str(tmp_path / "a.pt"))
    assert torch.equal(loaded(x)[0], logits_fq)
    assert torch.equal(quant.ptq_model(model, 3, clip)(x)[0], logits_fq)
    # a different rule is a different grid
    other = "absmax" if clip != "absmax" else "std:2.5"
    assert not torch.equal(quant.ptq_model(model, 3, other)(x)[0], logits_fq)


@pytest.mark.parametrize("bits", range(2, 9))
def test_artefact_smaller_than_fp16(bits, tmp_path):
    model = randomised(GPT(small_config(bits=bits)))
    s32 = quant.export_artefact(model, str(tmp_path / "a.pt"))
    s16 = quant.export_artefact(model, str(tmp_path / "b.pt"), keep="fp16")
    assert s16["raw"] < s16["fp16"] and s32["raw"] < s32["fp32"]
    n_quant = sum(m.weight.numel() for _, m in quant.quant_targets(model))
    assert s32["codes"] == sum((m.weight.numel() * bits + 7) // 8 for _, m in quant.quant_targets(model))
    assert s32["codes"] < 2 * n_quant  # the quantised part alone beats fp16
    assert s16["payload"] < s32["payload"]
    x = tokens()  # fp16 rest: close to, not equal to, the fake-quant model
    assert torch.allclose(quant.load_artefact(str(tmp_path / "b.pt"))(x)[0], model(x)[0], atol=1e-2)


# -----------------------------------------------------------------------------
# grid-distance probe

def test_grid_distance_random_and_on_grid():
    model = randomised(GPT(small_config()))
    d = quant.grid_distance(model, 6)
    assert d["overall"] == pytest.approx(0.25, abs=0.01)
    assert set(d["per_layer"]) == {f"{n}.weight" for n, _ in quant.quant_targets(model)}
    on_grid = quant.ptq_model(model, 6)
    z = quant.grid_distance(on_grid, 6)
    assert z["overall"] == 0.0 and all(v == 0.0 for v in z["per_layer"].values())
    assert quant.grid_distance(on_grid.state_dict(), 6)["overall"] == 0.0
    assert quant.grid_distance(on_grid, 4)["overall"] > 0.1  # on the INT6 grid is not on the INT4 grid
    # a state dict gives the block matrices; overall is the count-weighted mean
    sd = quant.grid_distance(model.state_dict(), 6)
    assert sd["per_layer"] == d["per_layer"]


# -----------------------------------------------------------------------------
# command line

def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "quant.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_cli_export_ptq_probe(int4_run, tmp_path, capsys):
    cfg, result, _ = int4_run
    out = str(tmp_path / "art.pt")
    r = run_cli("export", cfg.out_dir, "--out", out)  # the real entry point (python quant.py)
    assert r.returncode == 0, r.stderr
    assert "fp16" in r.stdout and "recorded deployed" in r.stdout and "diff +0.00e+00" in r.stdout, r.stdout
    quant.main(["ptq", cfg.out_dir, "--bits", "8,4"])
    quant.main(["probe", cfg.out_dir, cfg.out_dir, "--bits", "6"])
    text = capsys.readouterr().out
    assert "ratio" in text and "1.0000" in text
    res = json.load(open(os.path.join(cfg.out_dir, "result.json")))
    assert res["ptq"]["4"]["val_loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    g = res["grid_distance"]
    assert (g["bits"], g["ckpt"]) == (6, "warmdown") and 0 < g["overall"] < 0.5 and g["per_layer"]
    assert res["export"]["bytes"]["file"] == os.path.getsize(out) and res["export"]["bytes"]["codes"] > 0


def test_cli_bad_input_one_line_error(int4_run, tmp_path):
    cfg, _, _ = int4_run
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (("export", str(empty)), ("probe", cfg.out_dir, "--clip", "quantile:2")):
        r = run_cli(*args)
        assert r.returncode != 0, args
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_cli_bad_input_in_process(int4_run, tmp_path, capsys):
    cfg, _, _ = int4_run
    for args in (["ptq", cfg.out_dir, "--bits", "1"], ["ptq", cfg.out_dir, "--bits", "x"],
                 ["ptq", cfg.out_dir, "--bits", "9"], ["export", str(tmp_path / "nope")],
                 ["export", cfg.out_dir, "--clip", "std:"], ["probe", cfg.out_dir, "--ckpt", "final", "--bits", "16"],
                 ["probe", str(tmp_path)], ["export", cfg.out_dir, "--keep", "int3"]):
        with pytest.raises(SystemExit) as e:
            quant.main(args)
        assert e.value.code != 0
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (args, err)
    # a run with a checkpoint but no result.json is unfinished: refused, and no result.json appears
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for f in ("ckpt.pt", "ckpt_warmdown.pt"):
        (unfinished / f).write_bytes(open(os.path.join(cfg.out_dir, f), "rb").read())
    for args in (["ptq", str(unfinished)], ["probe", str(unfinished)]):
        with pytest.raises(SystemExit):
            quant.main(args)
        assert "not finished" in capsys.readouterr().err
    assert not (unfinished / "result.json").exists()
