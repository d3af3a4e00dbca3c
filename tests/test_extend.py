"""extend.py and the RoPE scalings of model.rope_inv_freq: closed forms, lineage, every positional
variant, --layers global, bad input."""
import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, tiny_config
import extend
import data
import train
from train import load_run
from model import GPT, evaluate, load_checkpoint, model_from_checkpoint, rope_inv_freq

CASES = [(16, 1e4, 4, 64), (32, 5e5, 8, 256), (64, 1e4, 2, 4096)]  # (head_dim, theta, factor, L)


# ---------------------------------------------------------------- closed forms, computed pair by pair

def closed_form(method, d, theta, s, L, seq_len=None):
    """inv_freq_j for pair j in [0, d/2), as PI (arXiv 2306.15595), NTK-aware scaling and YaRN (arXiv 2309.00071) define it."""
    base = [theta ** (-2 * j / d) for j in range(d // 2)]
    if method == "pi":
        return [b / s for b in base]
    if method == "ntk":
        return [(theta * s ** (d / (d - 2))) ** (-2 * j / d) for j in range(d // 2)]
    if method == "dynamic_ntk":
        if seq_len <= L:
            return base
        b2 = theta * (s * seq_len / L - (s - 1)) ** (d / (d - 2))
        return [b2 ** (-2 * j / d) for j in range(d // 2)]
    if method == "yarn":
        dim = lambda r: d * math.log(L / (2 * math.pi * r)) / (2 * math.log(theta))
        low, high = max(math.floor(dim(32)), 0), min(math.ceil(dim(1)), d - 1)
        high = high + 0.001 if low == high else high
        gam = [min(max((j - low) / (high - low), 0.0), 1.0) for j in range(d // 2)]
        return [b / s * g + b * (1 - g) for b, g in zip(base, gam)]
    if method == "llama3":  # low_freq_factor 1, high_freq_factor 4
        out = []
        for b in base:
            wl = 2 * math.pi / b
            if wl < L / 4:
                out.append(b)
            elif wl > L / 1:
                out.append(b / s)
            else:
                sm = (L / wl - 1) / (4 - 1)
                out.append((1 - sm) * b / s + sm * b)
        return out
    raise AssertionError(method)


@pytest.mark.parametrize("d,theta,s,L", CASES)
@pytest.mark.parametrize("method", ["pi", "ntk", "dynamic_ntk", "yarn", "llama3"])
def test_inverse_frequencies_match_closed_forms(method, d, theta, s, L):
    for seq_len in ([L // 2, L, 3 * L] if method == "dynamic_ntk" else [None]):
        got, att = rope_inv_freq(d, theta, method, s, L, seq_len=seq_len)
        want = closed_form(method, d, theta, s, L, seq_len)
        assert got.dtype == torch.float64 and got.shape == (d // 2,)
        assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=1e-13, atol=0)
        assert att == (0.1 * math.log(s) + 1 if method == "yarn" else 1.0)


@pytest.mark.parametrize("method", ["none", "pi", "ntk", "dynamic_ntk", "yarn", "llama3"])
def test_factor_one_is_identity(method):
    plain = torch.tensor([1e4 ** (-2 * j / 32) for j in range(16)], dtype=torch.float64)
    got, att = rope_inv_freq(32, 1e4, method, 1.0, 256, seq_len=1024)
    assert torch.allclose(got, plain, rtol=1e-14, atol=0) and att == 1.0


def test_what_each_method_changes():
    d, theta, s, L = 64, 1e4, 2, 4096
    base = rope_inv_freq(d, theta)[0]
    assert torch.equal(rope_inv_freq(d, theta, "pi", s, L)[0], base / s)
    ntk = rope_inv_freq(d, theta, "ntk", s, L)[0]
    assert ntk[0] == base[0] and torch.allclose(ntk[-1], base[-1] / s, rtol=1e-12)  # NTK: PI at the lowest pair
    # YaRN: dim(32) = 10.47, dim(1) = 22.5: pairs 0..10 kept exactly, pairs >= 23 divided by s exactly
    yarn, att = rope_inv_freq(d, theta, "yarn", s, L)
    assert torch.equal(yarn[:11], base[:11]) and torch.equal(yarn[23:], base[23:] / s)
    assert ((yarn[11:23] < base[11:23]) & (yarn[11:23] > base[11:23] / s)).all()
    assert att == pytest.approx(1 + 0.1 * math.log(2), abs=1e-15)
    # the ramp is measured on the ORIGINAL length: a longer L keeps fewer pairs
    assert (rope_inv_freq(d, theta, "yarn", s, 4 * L)[0] == base).sum() > (yarn == base).sum()
    # dynamic NTK: identity up to L, then a growing base
    assert torch.equal(rope_inv_freq(d, theta, "dynamic_ntk", s, L, seq_len=L)[0], base)
    assert (rope_inv_freq(d, theta, "dynamic_ntk", s, L, seq_len=2 * L)[0][1:] < base[1:]).all()
    with pytest.raises(ValueError, match="unknown RoPE scaling"):
        rope_inv_freq(d, theta, "yarn2", 1.0, L)


# ---------------------------------------------------------------- extending tiny runs

@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """parent(name, **model flags) -> out_dir of a tiny finished run (trained once per module)."""
    root, made = tmp_path_factory.mktemp("parents"), {}

    def make(name, **model):
        if name not in made:
            cfg = tiny_config(root, out_dir=str(root / name), iters=4, eval_interval=100, ptq_bits="",
                              save_at="0.5", model=model)
            train.train(cfg)
            made[name] = cfg.out_dir
        return made[name]
    return make


def run_extend(args):
    extend.main([*args, "--quiet"])
    out = args[args.index("--out_dir") + 1]
    return json.load(open(os.path.join(out, "result.json")))


def test_training_free_run_record_and_lineage(parent, tmp_path):
    p = parent("rope")
    out = str(tmp_path / "yarn4")
    r = run_extend([p, "--method", "yarn", "--factor", "4", "--beta_fast", "16", "--out_dir", out])
    parent_rec = json.load(open(os.path.join(p, "result.json")))
    assert set(parent_rec) <= set(r) and set(parent_rec["metrics"]) <= set(r["metrics"])
    assert r["lineage"]["parent"] == p and r["lineage"]["parent_ckpt"] == "final"
    assert (r["lineage"]["method"], r["lineage"]["factor"], r["lineage"]["beta_fast"]) == ("yarn", 4.0, 16.0)
    assert r["lineage"]["parent_step"] == 4 and r["lineage"]["parent_lineage"] is None and r["steps"] == 0
    mc = r["model_config"]
    assert (mc["block_size"], mc["rope_original_len"]) == (128, 32)
    assert (mc["rope_scaling"], mc["rope_factor"]) == ("yarn", 4.0)
    assert r["config"]["init_from"] == os.path.join(out, "init.pt") and r["corpus"]["hash"] == parent_rec["corpus"]["hash"]
    # the checkpoint loads like any run's, carries the parent's weights, and reproduces val_loss
    model, cfg, ck = load_run(out)
    pk = load_checkpoint(os.path.join(p, "ckpt.pt"))
    assert all(torch.equal(v, pk["model"][k]) for k, v in ck["model"].items())
    init = load_checkpoint(os.path.join(out, "init.pt"))  # the starting point train.py loaded
    assert init["model_config"] == ck["model_config"] and init["extra"]["lineage"]["method"] == "yarn"
    corpus = data.corpus_of(cfg)
    ev = evaluate(model, corpus.val, corpus.token_bytes, 128)
    assert ev["loss"] == pytest.approx(r["metrics"]["val_loss"], abs=1e-9)


def test_method_none_is_the_parent_at_its_own_length(parent, tmp_path):
    p = parent("rope")
    run_extend([p, "--method", "none", "--factor", "2", "--out_dir", str(tmp_path / "n")])
    parent_rec = json.load(open(os.path.join(p, "result.json")))
    model, cfg, _ = load_run(str(tmp_path / "n"))
    corpus = data.corpus_of(cfg)
    at_32 = evaluate(model, corpus.val, corpus.token_bytes, 32)["loss"]
    assert at_32 == pytest.approx(parent_rec["metrics"]["val_loss"], abs=1e-9)


def test_more_training_control_then_training_free_scaling(parent, tmp_path):
    """--method none --factor 1 with a budget: the parent trained on at its own length (nothing rescaled,
    the extension's LR schedule); a training-free scaling of it then reaches the target from the
    pretraining length (the more-training control of the longctx study)."""
    p = parent("rope")
    more = run_extend([p, "--method", "none", "--factor", "1", "--iters", "2", "--out_dir", str(tmp_path / "m")])
    parent_rec = json.load(open(os.path.join(p, "result.json")))
    assert (more["steps"], more["model_config"]["block_size"]) == (2, parent_rec["model_config"]["block_size"])
    assert more["model_config"]["rope_scaling"] == parent_rec["model_config"]["rope_scaling"]
    assert more["lineage"]["factor"] == 1 and more["lineage"]["budget"] == {"source": "iters", "iters": 2}
    assert more["config"]["lr"] == pytest.approx(parent_rec["config"]["lr"] * extend.DEFAULT_LR_FRAC)
    assert more["metrics"]["val_loss"] != parent_rec["metrics"]["val_loss"]  # it trained
    r = run_extend([str(tmp_path / "m"), "--method", "ntk", "--factor", "4", "--out_dir", str(tmp_path / "mf")])
    assert (r["model_config"]["rope_original_len"], r["model_config"]["block_size"]) == (32, 128)
    assert r["lineage"]["parent_lineage"]["factor"] == 1


def test_task_rows_map_to_the_training_flags(tmp_path):
    """--task_rows: a task-mix parent's rows on every step (all: nothing changes), on the short steps only
    (task_short_only, which needs --short_frac) or none (task_mix 0); a parent without a mix: nothing."""
    pc = tiny_config(tmp_path, task_mix=0.5, task_list="passkey_short")
    ec = lambda **kw: extend.ExtendConfig(run="x", **kw)
    assert extend.task_rows(ec(task_rows="all"), pc) == {}
    assert extend.task_rows(ec(task_rows="short", short_frac=0.25), pc) == {"task_short_only": True}
    assert extend.task_rows(ec(task_rows="none"), pc) == {"task_mix": 0.0}
    with pytest.raises(extend.UserError, match="--short_frac"):
        extend.task_rows(ec(task_rows="short"), pc)
    assert extend.task_rows(ec(task_rows="short"), tiny_config(tmp_path)) == {}  # no mix: nothing to move


def test_continued_training_two_stages_chain_lineage(parent, tmp_path):
    p = parent("rope")
    out = str(tmp_path / "y2")
    r = run_extend([p, "--method", "yarn", "--factor", "4", "--iters", "3", "--stages", "2", "--short_frac",
                    "0.5", "--ckpt", "0.5", "--out_dir", out])
    s1 = json.load(open(os.path.join(out, "stage1", "result.json")))
    assert (s1["steps"], s1["model_config"]["block_size"], s1["lineage"]["stage"]) == (1, 64, 1)
    assert (s1["lineage"]["parent"], s1["lineage"]["parent_ckpt"], s1["lineage"]["parent_step"]) == (p, "0.5", 2)
    assert (r["steps"], r["model_config"]["block_size"], r["model_config"]["rope_factor"]) == (2, 128, 4.0)
    assert r["model_config"]["rope_original_len"] == 32  # both stages scale from the pretraining length
    assert r["lineage"]["parent"] == os.path.join(out, "stage1")
    assert r["lineage"]["parent_lineage"] == s1["lineage"]
    assert r["config"]["short_frac"] == 0.5 and r["config"]["short_block"] == 32
    assert load_checkpoint(os.path.join(out, "ckpt.pt"))["extra"]["lineage"] == r["lineage"]
    peak = json.load(open(os.path.join(p, "result.json")))["config"]["lr"]  # both stages: a fraction of the parent's
    for rec in (s1, r):
        assert rec["config"]["lr"] == pytest.approx(peak * extend.DEFAULT_LR_FRAC)
        assert rec["lineage"]["parent_lr"] == peak and rec["lineage"]["lr_frac"] == extend.DEFAULT_LR_FRAC


def test_extension_has_its_own_lr_schedule(parent, tmp_path):
    """Continued training restarts at --lr_frac x the parent's peak, warms up briefly and decays to 0
    (as the log's LR multipliers show), recorded in lineage; --lr_frac 0 re-warms to the parent's peak
    with the parent's warmup and warmdown; --lr sets the peak absolutely."""
    p = parent("rope")
    pc = json.load(open(os.path.join(p, "result.json")))["config"]
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--iters", "10", "--lr_frac", "0.2", "--out_dir",
                    str(tmp_path / "own")])
    lin, c = r["lineage"], r["config"]
    assert c["lr"] == pytest.approx(0.2 * pc["lr"]) and (c["warmup"], c["warmdown"]) == (extend.DEFAULT_EXT_WARMUP, 0.9)
    assert (lin["lr"], lin["lr_frac"], lin["parent_lr"], lin["warmup"], lin["warmdown"], lin["schedule"]) == \
        (c["lr"], 0.2, pc["lr"], c["warmup"], 0.9, "wsd")
    mults = [json.loads(x)["lr_mult"] for x in open(tmp_path / "own" / "log.jsonl") if '"lr_mult"' in x]
    assert len(mults) == 10 and mults[1] == 1.0 and all(a > b for a, b in zip(mults[1:], mults[2:])) and mults[-1] < 0.2
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--iters", "2", "--lr_frac", "0", "--out_dir",
                    str(tmp_path / "old")])
    assert [r["config"][k] for k in ("lr", "warmup", "warmdown")] == [pc[k] for k in ("lr", "warmup", "warmdown")]
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--iters", "2", "--lr", "0.3", "--warmup", "0.5",
                    "--out_dir", str(tmp_path / "abs")])
    assert (r["config"]["lr"], r["config"]["warmup"], r["config"]["warmdown"], r["lineage"]["lr_frac"]) == (0.3, 0.5, 0.5, None)


def test_budget_flags_train_the_tokens_asked(parent, tmp_path):
    """The continued-training budget is explicit: tokens trained = what was asked, at the parent's
    tokens per step (parent: 4 steps x 8 x 32 = 1024 tokens, 256 per step)."""
    p = parent("rope")
    r = run_extend([p, "--method", "ntk", "--factor", "4", "--tokens", "768", "--out_dir", str(tmp_path / "t")])
    assert r["tokens"] == 768 and r["steps"] == 3 and r["config"]["batch_size"] == 2  # 2 x 128 = 256 per step
    b = r["lineage"]["budget"]
    assert (b["source"], b["tokens"], r["lineage"]["tokens"]) == ("tokens", 768, 768)
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--token_frac", "0.5", "--out_dir", str(tmp_path / "f")])
    b = r["lineage"]["budget"]
    assert (b["source"], b["token_frac"], b["parent_tokens"], b["tokens"]) == ("token_frac", 0.5, 1024, 512)
    assert r["tokens"] == 512 and r["config"]["batch_size"] == 4 and r["steps"] == 2
    # --train: the default fraction; an intermediate checkpoint counts the parent's whole (planned) run
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--train", "--token_frac", "0.25", "--ckpt", "0.5",
                    "--out_dir", str(tmp_path / "e")])
    assert r["tokens"] == 256 and r["lineage"]["parent_step"] == 2
    r = run_extend([p, "--method", "ntk", "--factor", "2", "--train", "--out_dir", str(tmp_path / "d")])
    assert r["lineage"]["budget"]["token_frac"] == extend.DEFAULT_TOKEN_FRAC and r["tokens"] == 256  # 1 step at least
    # two stages: half the tokens each, both at 256 tokens per step
    r = run_extend([p, "--method", "yarn", "--factor", "4", "--tokens", "1024", "--stages", "2",
                    "--out_dir", str(tmp_path / "y")])
    s1 = json.load(open(os.path.join(tmp_path, "y", "stage1", "result.json")))
    assert (s1["tokens"], r["tokens"], s1["config"]["batch_size"], r["config"]["batch_size"]) == (512, 512, 4, 2)


@pytest.mark.parametrize("name,model,method,iters", [
    ("rope", {}, "ntk", 0),
    ("partial", dict(rope_frac=0.5), "yarn", 0),
    ("hope", dict(pos="hope", hope_cutoff=0), "pi", 0),
    ("swan", dict(swan=True, window=8, global_every=2, logn_scale=True), "llama3", 0),
    ("nope", dict(pos="nope"), "none", 2),
    ("alibi", dict(pos="alibi"), "none", 2),
    ("expe", dict(pos="expe"), "none", 2),
    ("sinusoidal", dict(pos="sinusoidal"), "none", 2),
    ("rope", {}, "dynamic_ntk", 0),
    ("rope", {}, "abf", 2),
])
def test_every_positional_variant_extends(parent, tmp_path, name, model, method, iters):
    p = parent(name, **model)
    out = str(tmp_path / "x")
    args = [p, "--method", method, "--factor", "2", "--iters", str(iters), "--out_dir", out]
    r = run_extend(args + (["--theta", "5e5"] if method == "abf" else []))
    assert math.isfinite(r["metrics"]["val_loss"]) and r["model_config"]["block_size"] == 64
    assert r["steps"] == iters and r["lineage"]["method"] == method
    m = model_from_checkpoint(load_checkpoint(os.path.join(out, "ckpt.pt")))
    if method in ("ntk", "yarn", "pi", "llama3"):  # the scaled frequencies, relative to the pretraining length
        assert torch.equal(m.inv_freq, rope_inv_freq(m.rope_dims, 1e4, method, 2.0, 32)[0].float())
    if method == "abf":
        assert r["model_config"]["rope_theta"] == 5e5 and r["model_config"]["rope_scaling"] == "none"
        want = torch.tensor([5e5 ** (-2 * j / 32) for j in range(16)], dtype=torch.float64)
        assert torch.allclose(m.inv_freq, want.float(), rtol=1e-6)


@pytest.mark.parametrize("name,model", [("hope", dict(pos="hope")), ("expe", dict(pos="expe")),
                                         ("expe_qk", dict(pos="expe", expe_on="qk")),
                                         ("swan", dict(swan=True, window=8, global_every=2, logn_scale=True))])
def test_longer_block_leaves_the_function_unchanged_within_L(parent, tmp_path, name, model):
    """HoPE's cutoff and ExPE's slope default to block_size: extend.py freezes them."""
    p = parent(name, **model)
    out = str(tmp_path / "n")
    run_extend([p, "--method", "none", "--factor", "4", "--out_dir", out])
    a = model_from_checkpoint(load_checkpoint(os.path.join(p, "ckpt.pt")))
    b = model_from_checkpoint(load_checkpoint(os.path.join(out, "ckpt.pt")))
    x = torch.randint(0, 500, (2, 32))
    assert torch.equal(a(x)[0], b(x)[0])


def test_layers_global_keeps_windowed_layers_rope(parent, tmp_path):
    p = parent("windowed", window=8, global_every=2)
    out = str(tmp_path / "g")
    run_extend([p, "--method", "yarn", "--factor", "4", "--layers", "global", "--out_dir", out])
    m = model_from_checkpoint(load_checkpoint(os.path.join(out, "ckpt.pt")))
    assert [(l.window, l.scaled) for l in m.plan] == [(8, False), (0, True)]
    plain = GPT(dataclasses.replace(m.config, rope_scaling="none", rope_factor=1.0))
    pe, pe0 = m.positions(128, "cpu"), plain.positions(128, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(pe["layers"][0], pe0["layers"][0]))  # windowed: unchanged
    assert not torch.equal(pe["layers"][1][0], pe0["layers"][1][0])  # global: YaRN


# ---------------------------------------------------------------- SWAN conversion

def block_outputs(model, x, upto):
    """Hidden states after blocks 0..upto-1 (the layers that a conversion may leave unchanged)."""
    h, pe = model.embed(x), model.positions(x.shape[1], "cpu")
    for block in model.blocks[:upto]:
        h = block(h, pe)
    return h


def test_swan_conversion_keeps_weights_and_changes_only_the_plan(parent, tmp_path):
    p = parent("rope")  # 2 layers, block 32, RoPE everywhere
    out = str(tmp_path / "swan")
    r = run_extend([p, "--method", "swan", "--window", "8", "--global_every", "2", "--out_dir", out])
    mc = r["model_config"]
    assert (mc["swan"], mc["window"], mc["global_every"], mc["block_size"], mc["logn_scale"]) == (True, 8, 2, 32, False)
    lin = r["lineage"]
    assert (lin["method"], lin["window"], lin["global_every"], lin["parent"], r["steps"]) == ("swan", 8, 2, p, 0)
    a = model_from_checkpoint(load_checkpoint(os.path.join(p, "ckpt.pt")))
    b = model_from_checkpoint(load_checkpoint(os.path.join(out, "ckpt.pt")))
    assert [(l.window, l.pos) for l in a.plan] == [(0, "rope"), (0, "rope")]
    assert [(l.window, l.pos) for l in b.plan] == [(8, "rope"), (0, "nope")]  # RoPE windowed, NoPE global
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)  # every weight identical
    x = torch.randint(0, 500, (2, 8))  # within the window the windowed RoPE layer is the parent's layer
    with torch.no_grad():
        assert torch.equal(block_outputs(a, x, 1), block_outputs(b, x, 1))
        assert not torch.allclose(a(x)[0], b(x)[0], atol=1e-4)  # the global layer lost RoPE
    assert b.config.window == 8 and sum(l.window == 0 for l in b.plan) == 1


def test_swan_conversion_then_training_runs_and_records_lineage(parent, tmp_path):
    p = parent("windowed", window=8, global_every=2)  # the parent's window and global layers are kept
    out = str(tmp_path / "swan-ft")
    r = run_extend([p, "--method", "swan", "--iters", "3", "--out_dir", out])
    assert r["steps"] == 3 and math.isfinite(r["metrics"]["val_loss"])
    assert (r["lineage"]["method"], r["lineage"]["iters"], r["lineage"]["window"]) == ("swan", 3, 8)
    assert r["config"]["init_from"] == os.path.join(out, "init.pt")
    init = load_checkpoint(os.path.join(out, "init.pt"))  # the converted model before training
    pk = load_checkpoint(os.path.join(p, "ckpt.pt"))
    assert all(torch.equal(v, pk["model"][k]) for k, v in init["model"].items())
    final = load_checkpoint(os.path.join(out, "ckpt.pt"))
    assert final["extra"]["lineage"] == r["lineage"] and final["model_config"]["swan"]
    assert not all(torch.equal(v, init["model"][k]) for k, v in final["model"].items())  # it trained


# ---------------------------------------------------------------- bad input

BAD = [
    ("missing", ["{tmp}/no_such_run", "--factor", "2"], "no run folder"),
    ("empty", ["{tmp}", "--factor", "2"], "no checkpoint ckpt.pt"),
    ("corrupt", ["{corrupt}", "--factor", "2"], "corrupt or unreadable checkpoint"),
    ("factor1", ["{rope}", "--method", "yarn", "--factor", "1"], "--factor 1 must be > 1"),
    ("factor<1", ["{rope}", "--method", "pi", "--factor", "0.5"], "--factor 0.5 must be > 1"),
    ("method", ["{rope}", "--method", "rope2", "--factor", "2"], "unknown --method 'rope2'"),
    ("nope", ["{nope}", "--method", "yarn", "--factor", "2"], "no layer of this model uses RoPE"),
    ("learned", ["{learned}", "--method", "none", "--factor", "2", "--iters", "5"], "pos=learned"),
    ("ckpt", ["{rope}", "--factor", "2", "--ckpt", "0.3"], "no checkpoint ckpt_0.3.pt"),
    ("ckptname", ["{rope}", "--factor", "2", "--ckpt", "best"], "--ckpt 'best'"),
    ("abf", ["{rope}", "--method", "abf", "--factor", "2"], "needs --theta"),
    ("global", ["{rope}", "--method", "none", "--factor", "2", "--layers", "global"], "--layers global"),
    ("nofactor", ["{rope}"], "--factor is required"),
    ("stages", ["{rope}", "--factor", "2", "--stages", "2", "--iters", "4"], "--stages 2"),
    ("stagesfree", ["{rope}", "--factor", "4", "--stages", "2"], "with a continued-training budget"),
    ("budgets", ["{rope}", "--factor", "2", "--tokens", "100", "--iters", "2"], "one continued-training budget"),
    ("budgetneg", ["{rope}", "--factor", "2", "--token_frac", "-0.1"], "must be >= 0"),
    ("lrfrac", ["{rope}", "--factor", "2", "--iters", "2", "--lr_frac", "-1"], "--lr_frac -1 must be >= 0"),
    ("flag", ["{rope}", "--factor", "2", "--no_such_flag"], "unrecognized arguments"),
    ("swan_window", ["{rope}", "--method", "swan"], "needs --window W"),
    ("swan_rope", ["{nope}", "--method", "swan", "--window", "8"], "RoPE in every layer"),
    ("swan_global", ["{rope}", "--method", "swan", "--window", "8"], "at least one global layer"),  # 2 layers, k=4
    ("swan_big", ["{rope}", "--method", "swan", "--window", "64", "--global_every", "2"], "window=64 must be"),
    ("taskrows", ["{rope}", "--factor", "2", "--iters", "2", "--task_rows", "long"], "--task_rows 'long'"),
    ("more_free", ["{rope}", "--method", "none", "--factor", "1"], "give a continued-training budget"),
    ("swan_stages", ["{rope}", "--method", "swan", "--window", "8", "--stages", "2", "--iters", "2"], "one stage"),
]


def bad_args(parent, tmp_path, args):
    (tmp_path / "corrupt").mkdir(exist_ok=True)
    (tmp_path / "corrupt" / "ckpt.pt").write_bytes(b"junk")
    (tmp_path / "corrupt" / "result.json").write_text("{}")
    names = dict(tmp=str(tmp_path), corrupt=str(tmp_path / "corrupt"))
    for k in ("rope", "nope", "learned"):
        if "{" + k + "}" in args[0]:
            names[k] = parent(k, **({} if k == "rope" else dict(pos=k)))
    return [a.format(**names) for a in args] + ["--out_dir", str(tmp_path / "out"), "--quiet"]


@pytest.mark.parametrize("case,args,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_error(parent, tmp_path, capsys, case, args, msg):
    with pytest.raises(SystemExit) as e:
        extend.main(bad_args(parent, tmp_path, args))
    err = capsys.readouterr().err.strip()
    assert e.value.code != 0 and msg in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case,args,msg", [BAD[0], BAD[6]], ids=["missing", "nope"])
def test_bad_input_cli(parent, tmp_path, case, args, msg):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "extend.py"), *bad_args(parent, tmp_path, args)],
                       capture_output=True, text=True, timeout=120)
    err = p.stderr.strip()
    assert p.returncode != 0 and msg in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_finished_output_is_not_overwritten(parent, tmp_path, capsys):
    out = str(tmp_path / "o")
    run_extend([parent("rope"), "--factor", "2", "--out_dir", out])
    before = open(os.path.join(out, "result.json")).read()
    with pytest.raises(SystemExit):
        extend.main([parent("rope"), "--factor", "2", "--out_dir", out, "--method", "pi"])
    assert "already holds a finished run" in capsys.readouterr().err
    assert open(os.path.join(out, "result.json")).read() == before
    run_extend([parent("rope"), "--factor", "2", "--out_dir", out, "--method", "pi", "--overwrite"])
    assert json.load(open(os.path.join(out, "result.json")))["lineage"]["method"] == "pi"


def test_torchrun_two_processes_extend_in_two_stages(parent, tmp_path):
    """torchrun --nproc_per_node 2 (gloo): only rank 0 locks and writes the stage folders, the other
    rank waits for its init.pt at a barrier, both train each stage through DDP (the process group
    started again for stage 2); the record matches a single-process extension to float noise."""
    p = parent("rope")
    args = [p, "--method", "yarn", "--factor", "4", "--stages", "2", "--iters", "4", "--batch_size", "4", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(ROOT, "extend.py"), *args, "--out_dir", str(tmp_path / "ddp")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("val loss") == 1  # reported by rank 0 only
    ddp = json.load(open(tmp_path / "ddp" / "result.json"))
    single = run_extend(args[:-1] + ["--out_dir", str(tmp_path / "single")])
    assert (ddp["world_size"], ddp["ddp_backend"], ddp["steps"]) == (2, "gloo", 2)
    assert json.load(open(tmp_path / "ddp" / "stage1" / "result.json"))["world_size"] == 2
    assert ddp["metrics"]["val_loss"] == pytest.approx(single["metrics"]["val_loss"], abs=1e-4)


def test_extension_trains_on_its_own_data_when_given():
    """--data: continued training (and its final evaluation) reads that corpus, e.g. a long-document
    set; without it, the parent's."""
    parent = train.parse_args(["--size", "0.1M", "--data", "webcorpus", "--iters", "10"])
    for argv, want in (([], "webcorpus"), (["--data", "books"], "books")):
        ec = extend.parse_args(["RUN", "--method", "ntk", "--factor", "2", "--iters", "4", *argv])
        cfg = extend.child_config(parent, ec, 512, 256, 4, 8, "/nonexistent/out")
        assert cfg.data == want
