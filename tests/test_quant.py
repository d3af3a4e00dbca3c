"""Tests for quant.py: the grid, STE, bit packing, integer export, PTQ, the grid-distance probe, the CLI."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, tiny_config
import quant  # noqa: E402
import data  # noqa: E402
import train  # noqa: E402
from model import GPT, GPTConfig, evaluate, load_checkpoint, model_from_checkpoint  # noqa: E402

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


def test_quant_targets_twin_leaves_the_rng_alone():
    model = GPT(small_config())
    state = torch.get_rng_state()
    quant.quant_targets(model)  # its twin is built on the CPU (small): its init draws, then the state is put back
    assert torch.equal(state, torch.get_rng_state())


def test_frozen_is_the_fake_quant_forward_bit_for_bit(monkeypatch):
    model = randomised(GPT(small_config(bits=4, quant_embed=True, tie_embeddings=False)))
    x, y = tokens(), tokens(seed=1)
    with torch.no_grad():
        ref = model(x, y, reduction="none")
        fz = quant.frozen(model)
        calls, orig = [], quant.fake_quant
        monkeypatch.setattr(quant, "fake_quant", lambda *a, **k: (calls.append(1), orig(*a, **k))[1])
        got = fz(x, y, reduction="none")
    assert not calls  # the weights were quantised once, not at this forward
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert fz is not model and model.blocks[0].attn.c_q.qat_on.item() == 1  # the model itself untouched
    quant.set_qat(model, False)  # QAT off: the same, the weights as they are
    with torch.no_grad():
        ref, got = model(x, y, reduction="none"), quant.frozen(model)(x, y, reduction="none")
    assert torch.equal(got[1], ref[1]) and len(calls) == len(quant.quant_targets(model))  # in model's forward only
    fp = GPT(small_config())
    assert quant.frozen(fp) is fp  # nothing fake-quantised: as is


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
# PTQ on one trained INT4 run

@pytest.fixture(scope="module")
def int4_run(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("int4"), bits=4)
    result = train.train(cfg)
    corpus = data.corpus_of(cfg)
    ev = lambda m: evaluate(m, corpus.val, corpus.token_bytes, 32)
    return cfg, result, ev


def test_ptq_at_trained_bits_equals_deployed_loss(int4_run):
    cfg, result, ev = int4_run
    model = model_from_checkpoint(load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt")))
    res = quant.ptq_eval(model, ev, bits_list=(8, 4))
    assert set(res) == {"8", "4"} and set(res["4"]) >= {"val_loss", "val_bpb"}
    assert res["4"]["val_loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-6)
    assert model.blocks[0].attn.c_q.qat_on.item() == 1  # the original model is untouched


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
    assert quant.grid_distance(on_grid, 4)["overall"] > 0.1  # on the INT6 grid is not on the INT4 grid
    # overall is the weight-count-weighted mean of the per-layer distances
    n = {k: m.weight.numel() for k, m in ((f"{a}.weight", b) for a, b in quant.quant_targets(model))}
    assert d["overall"] == pytest.approx(sum(d["per_layer"][k] * n[k] for k in n) / sum(n.values()))
