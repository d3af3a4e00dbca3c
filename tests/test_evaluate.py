"""Tests for evaluate.py: scoring, probes, LongPPL, ppl bookkeeping, CLI. Fast (a few seconds each)."""
import json
import math
import os
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn as nn

from conftest import ROOT, tiny_config
import evaluate as E
import tasks
import data
import train
from model import GPT, GPTConfig, attend

torch.set_num_threads(1)


def random_gpt(**kw):
    """A GPT with random (not zero-initialised) weights, so attention and context matter."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**kw)).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return model


@pytest.fixture(scope="module")
def enc():
    return data.get_tokenizer("cl100k_base", 4096)


class Oracle(nn.Module):
    """Fake model that knows the samples: at every position its logits put all mass on the true next
    token of the sample whose prompt the row starts with, whatever candidate answer follows."""

    def __init__(self, samples, vocab):
        super().__init__()
        self.seqs = [(s["prompt_ids"], s["prompt_ids"] + s["answer_ids"]) for s in samples]
        self.vocab = vocab

    def forward(self, idx, targets=None, rows=None):
        B, T = idx.shape
        logits = torch.full((B, T, self.vocab), -1e4)
        for b in range(B):
            row = idx[b].tolist()
            seq = next(full for prompt, full in self.seqs if row[:len(prompt)] == prompt)
            logits[b, torch.arange(len(seq) - 1), torch.tensor(seq[1:])] = 0.0
        return at_rows(logits, rows), None


def at_rows(logits, rows):
    """GPT.forward's rows: the logits of those positions only."""
    return logits if rows is None else logits.gather(1, rows[..., None].expand(-1, -1, logits.shape[-1]))


class Uniform(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, idx, targets=None, rows=None):
        return at_rows(torch.zeros(*idx.shape, self.vocab), rows), None


@pytest.mark.parametrize("task", ["passkey", "niah_multikey", "json_kv"])
def test_oracle_scores_100_and_uniform_scores_chance(enc, task):
    ec = E.EvalConfig(depths=3, samples=2, seed=7, batch_tokens=2048)
    L = 256
    samples = E.task_samples(task, enc, L, tasks.depth_grid(3), 2, 7, None)
    oracle = E.eval_task(Oracle(samples, enc.n_vocab), enc, task, [L], ec, None)
    assert oracle["by_length"]["256"]["exact"] == 1.0 and oracle["by_length"]["256"]["rank"] == 1.0
    assert oracle["by_length"]["256"]["n"] == 6 and set(oracle["by_depth"]["256"]) == {"0", "0.5", "1"}
    assert oracle["by_length"]["256"]["logprob"] == pytest.approx(0.0, abs=1e-3)
    uni = E.eval_task(Uniform(enc.n_vocab), enc, task, [L], ec, None)["by_length"]["256"]
    assert uni["exact"] == 0.0  # argmax of a uniform row is token 0, never an answer token
    assert uni["rank"] == pytest.approx(1 / (1 + tasks.N_DISTRACTORS))  # ties split: chance level
    n_ans = np.mean([len(s["answer_ids"]) for s in samples])
    assert uni["logprob"] == pytest.approx(-n_ans * math.log(enc.n_vocab), rel=1e-5)


def test_batched_scoring_equals_one_pass_per_candidate(enc):
    """The batched, row-sliced path gives what full forward passes, one per candidate, give."""
    from test_tasks import rank_answer
    model = random_gpt(vocab_size=enc.n_vocab, block_size=64, n_layer=2, n_embd=32, n_head=2, n_kv_head=2)
    samples = E.task_samples("niah_single", enc, 128, [0.0, 1.0], 2, 0, None)
    got = E.score_samples(model, samples, batch_tokens=600)
    exact_only = E.score_samples(model, samples, batch_tokens=600, rank=False)  # the answer's row only
    # flat lists: pytest.approx refuses nested structures from pytest 9.2 on
    assert [g["exact"] for g in got] == [g["exact"] for g in exact_only]
    assert [g["logprob"] for g in got] == pytest.approx([g["logprob"] for g in exact_only])
    assert all(g["rank"] is None for g in exact_only) and E.mean_scores(exact_only)["rank"] is None

    @torch.no_grad()
    def lp(ids):
        return torch.log_softmax(model(torch.tensor([ids]))[0][0], -1)
    for s, g in zip(samples, got):
        ids = s["prompt_ids"] + s["answer_ids"]
        want = tasks.score_answer(lp(ids), len(s["prompt_ids"]), s["answer_ids"])
        assert g["exact"] == want["exact"]
        assert g["rank"] == rank_answer(lp, s["prompt_ids"], s["answer_ids"], s["distractor_ids"])
        assert g["logprob"] == pytest.approx(want["logprob"], abs=1e-4)


def test_sink_rate_of_hand_made_importances():
    assert E.sink_rate(torch.tensor([[1.0, 0.25], [0.52, 0.25]])) == 0.5
    assert E.sink_rate(torch.tensor([1.0, 0.25, 0.52])) == pytest.approx(2 / 3)
    assert E.sink_rate(torch.tensor([1.0, 0.25]), eps=1.0) == 0.0  # strictly greater than eps


def test_entropy_of_uniform_attention_is_log_t_plus_1():
    T = 50
    A = torch.tril(torch.ones(T, T))
    A /= A.sum(-1, keepdim=True)
    assert torch.allclose(E.attention_entropy(A), torch.log(torch.arange(1, T + 1).float()), atol=1e-5)
    assert torch.allclose(E.attention_entropy(torch.eye(T)), torch.zeros(T))  # one-hot: 0


def test_longppl_picks_exactly_the_tokens_passing_both_thresholds():
    short = np.array([5.0, 5.0, 3.0, 2.5, 6.0, 1.0, np.nan])
    full = np.array([1.0, 2.5, 0.5, 0.4, 1.99, 0.5, 0.1])
    # drop:          4     2.5   2.5  2.1  4.01  0.5  nan
    key = E.key_tokens(short, full, alpha=2.0, beta=2.0)
    assert key.tolist() == [True, False, True, True, True, False, False]
    assert E.long_ppl(full, key) == pytest.approx(math.exp(np.mean([1.0, 0.5, 0.4, 1.99])))
    assert E.key_tokens([3.0], [1.0], alpha=2.0).tolist() == [False]  # a drop of exactly alpha is not enough
    assert math.isnan(E.long_ppl(full, np.zeros(7, bool)))


class ContextLoss(nn.Module):
    """Fake model whose loss at window position q is g(q + 1): a function of the context length alone."""

    def __init__(self, g):
        super().__init__()
        self.g = g

    def forward(self, idx, targets=None, reduction="mean"):
        B, T = idx.shape
        return None, self.g(torch.arange(1, T + 1, dtype=torch.float32)).expand(B, T)


def test_longppl_short_context_is_a_suffix_of_the_own_full_context():
    """A model that gets worse with context (loss 0.1 per context token, as RoPE past its length):
    the short context is never longer than the full one, so no loss ever drops and no token is
    a key token, also at the window starts, where a short window laid over the whole document
    (the old rule) reached back into the previous window and flagged them."""
    docs = [np.arange(200) % 50, np.arange(77) % 50]
    ec = E.EvalConfig(ppl_tokens=10 ** 6, longppl_short=4, alpha=0.05, beta=100.0)
    lp = E.eval_ppl(ContextLoss(lambda c: 0.1 * c), docs, [16], ec)["longppl"]
    n_wins = sum(len(E.window_starts(len(d), 16, 16)) for d in docs)
    assert lp["by_length"]["16"]["n_key"] == 0
    assert lp["by_length"]["16"]["n_candidates"] == n_wins * (16 - 4)  # full context c > K = 4 only
    assert (lp["short"], lp["step"]) == (4, 1)  # default step K/4


@pytest.mark.parametrize("K,W", [(4, 1), (4, 2), (6, 3), (3, 5)])
def test_longppl_key_tokens_by_hand(K, W):
    """Context helps (loss 5 / c): target with full context c in its window has short context
    K + (c - K) mod W (between K and K + W - 1 tokens; short windows start at the window's first
    token, every W), a candidate when that is a strict suffix, and a key token when
    5 / c_short - 5 / c > alpha; with a stride, only each window's own targets count."""
    g = lambda c: 5.0 / c
    docs = [np.arange(150) % 40]
    L, stride, alpha = 16, 8, 0.3
    ec = E.EvalConfig(ppl_tokens=10 ** 6, longppl_short=K, longppl_step=W, alpha=alpha, beta=100.0, stride=stride)
    out = E.eval_ppl(ContextLoss(lambda c: g(c)), docs, [L], ec)
    want_key, want_cand, want_loss = 0, 0, []
    for s in E.window_starts(len(docs[0]), L, stride):
        for p in range(0 if s == 0 else L - stride, L):  # the window's own targets
            c = p + 1
            cs = K + (c - K) % W if c >= K else c
            if cs >= c:  # the short window starts at the window's first token too: no shorter
                assert E.short_context(c, K, W) == 0
                continue
            assert K <= cs < min(K + W, c) and cs == E.short_context(c, K, W)
            want_cand += 1
            if g(cs) - g(c) > alpha:
                want_key += 1
                want_loss.append(g(c))
    r = out["longppl"]["by_length"][str(L)]
    assert (r["n_key"], r["n_candidates"]) == (want_key, want_cand) and want_key > 0
    assert r["longppl"] == pytest.approx(math.exp(np.mean(want_loss)), rel=1e-6)
    assert r["key_frac"] == pytest.approx(want_key / out["tokens"][str(L)])
    assert E.short_context(np.array([1, K, K + 1, K + W]), K, W).tolist() == [0, 0, K if W == 1 else 0, K]


def reference_short_losses(model, text, K, W):
    """A re-implementation of the LongPPL reference find_key_token's short pass (arXiv 2410.23771,
    PKU-ML/LongPPL): over the text, short windows start at 0, W, 2W, ...; the window at s holds
    text[s : s + K + W] and gives the short-context loss of the targets s + K .. s + K + W - 1."""
    out = np.full(len(text), np.nan)
    for s in range(0, len(text) - K, W):
        piece = torch.tensor(text[s:s + K + W], dtype=torch.long)[None]
        with torch.no_grad():
            loss = E.forward(model, piece[:, :-1], piece[:, 1:])[1][0].numpy()
        for t in range(s + K, min(s + K + W, len(text))):
            out[t] = loss[t - s - 1]
    return out


@pytest.mark.parametrize("W", [1, 4, 8])  # steps 1, K/4 and K/2 of K = 16
def test_longppl_matches_the_reference_find_key_token(W):
    """evaluate.py's LongPPL key tokens on one text (one full window) equal the reference's: the same
    short-context loss on every candidate, the same key set, and the reference's other targets are
    exactly those whose short window starts at the text's first token (short = full context)."""
    K, L = 16, 64
    model = random_gpt(vocab_size=50, n_layer=2, n_head=2, n_embd=32, block_size=L)
    text = np.random.default_rng(0).integers(0, 50, L + 1)
    wins = E.plan_windows([text], L, L)
    full = E.doc_losses(model, [text], L, L)[0][0]
    short = E.short_losses(model, [text], wins, L, K, W)[0]
    ref = reference_short_losses(model, text, K, W)
    cand = np.isfinite(short)
    assert cand.sum() == L - K - W + 1 and np.isfinite(ref[K:]).all()
    np.testing.assert_allclose(short[cand], ref[cand], atol=1e-5)
    np.testing.assert_allclose(ref[K:K + W], full[K:K + W], atol=1e-5)  # the reference's first window: no drop
    diff = ref - full
    alpha = float(np.nanquantile(diff[K + W:], 0.75))  # a quarter of the candidates pass: a key set with range
    assert alpha > 1e-3  # the reference's first-window targets (a difference of 0) are never keys
    want = (diff > alpha) & (full < 100.0)
    ec = E.EvalConfig(ppl_tokens=10 ** 6, longppl_short=K, longppl_step=W, alpha=alpha, beta=100.0)
    r = E.eval_ppl(model, [text], [L], ec)["longppl"]["by_length"][str(L)]
    assert r["n_key"] == want.sum() > 0 and r["n_candidates"] == cand.sum()
    assert r["longppl"] == pytest.approx(math.exp(full[want].mean()), rel=1e-5)


def test_score_lengths_are_the_target_not_the_pretraining_context():
    # an extension 64 -> 512 evaluated at 64..512: scored at its target only, never inside its pretraining context
    assert E.score_lengths([64, 128, 256, 512], 512, original_len=64)[0] == [512]
    assert E.score_lengths([64, 128, 256, 512], 64, target=512)[0] == [512]  # its parent, at the same target
    assert E.score_lengths([64, 128, 256], 64)[0] == [128, 256]  # a plain run: past its training length
    assert E.score_lengths([32, 64], 64) == ([32, 64], "no length qualifies: all lengths")
    t = E.target_outcomes({"by_length": {"64": 3.0, "512": 4.0},
                           "longppl": {"by_length": {"512": {"longppl": math.e ** 2, "key_frac": 0.01}}}}, [512], [])
    assert t == dict(lengths=[512], loss=4.0, longppl_loss=pytest.approx(2.0), key_frac=0.01, retrieval=None)


def test_position_buckets_sum_correctly():
    assert E.bucket_edges(256) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert E.bucket_edges(100, "4") == [0, 25, 50, 75, 100]
    rng = np.random.default_rng(0)
    L = 100
    pos = np.tile(np.arange(L), 7)
    vals = rng.random(len(pos))
    for edges in (E.bucket_edges(L), E.bucket_edges(L, "3")):
        s, c = E.bucket_sums(vals, pos, edges)
        assert c.sum() == len(vals) and s.sum() == pytest.approx(vals.sum())
        for lo, hi, si, ci in zip(edges, edges[1:], s, c):
            m = (pos >= lo) & (pos < hi)
            assert ci == m.sum() and si == pytest.approx(vals[m].sum())


def test_ppl_by_position_matches_by_length_and_sliding_windows_cover_each_token_once():
    model = random_gpt(vocab_size=64, block_size=16, n_layer=1, n_embd=16, n_head=2, n_kv_head=2)
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 64, 100), rng.integers(0, 64, 45)]
    ec = E.EvalConfig(ppl_tokens=10 ** 6, longppl_short=8)
    out = E.eval_ppl(model, docs, [16, 32], ec)
    for L in ("16", "32"):  # non-overlapping windows: every position of every window is scored once
        b = out["by_position"][L]
        n = sum(x["n"] for x in b)
        assert n == out["tokens"][L]
        assert sum(x["loss"] * x["n"] for x in b) / n == pytest.approx(out["by_length"][L], rel=1e-6)
    assert out["tokens"]["16"] == 16 * (6 + 2) and out["tokens"]["32"] == 32 * (3 + 1)
    assert out["windows"] == {"16": 8, "32": 4} and out["documents"] == {"16": 2, "32": 2}  # what each rests on
    capped = E.eval_ppl(model, docs, [16], E.EvalConfig(ppl_tokens=32, longppl_short=8, no_longppl=True))
    assert capped["windows"] == {"16": 2} and capped["documents"] == {"16": 1} and capped["tokens"]["16"] == 32
    assert set(out["longppl"]["by_length"]) == {"16", "32"}
    # an external evaluator that is the same model picks the same key tokens
    loose = E.EvalConfig(ppl_tokens=10 ** 6, longppl_short=8, alpha=0.0, beta=10.0)  # every loss drop counts
    self_ = E.eval_ppl(model, docs, [16, 32], loose)["longppl"]["by_length"]
    assert self_["32"]["n_key"] > 0 and self_ == E.eval_ppl(model, docs, [16, 32], loose, evaluator=model)["longppl"]["by_length"]
    # sliding: windows of 16 every 4 tokens; each target scored once, after >= 12 tokens of context
    losses = E.doc_losses(model, docs, 16, 4)[0]
    full = E.doc_losses(model, docs, 16, 16)[0]
    for doc, l, f in zip(docs, losses, full):
        starts = E.window_starts(len(doc), 16, 4)
        assert np.isfinite(l).sum() == 16 + 4 * (len(starts) - 1)
        assert np.isfinite(l[1:17]).all() and np.allclose(l[1:17], f[1:17])  # first window: all its tokens
    with pytest.raises(AssertionError):  # the context differs, so the losses do
        np.testing.assert_allclose(losses[0][20:33], full[0][20:33])
    assert np.isfinite(E.doc_losses(model, docs, 16, 16, max_tokens=20)[0][0]).sum() == 32


@pytest.mark.parametrize("kw", [dict(), dict(window=6), dict(pos="alibi"), dict(pos="alibi", window=6),
                                dict(n_kv_head=1, qk_norm="head"), dict(pos="hope", logn_scale=True),
                                dict(pos="expe"), dict(norm_order="post"), dict(chunk_layers="all", chunk_size=4)])
def test_probe_maps_reproduce_the_model_attention(kw):
    """GPT.attention_maps times v gives each layer's own attention output (and, for chunk layers,
    the retrieval branch's), so the probe sees what the model computes; the probe's sink importance
    and entropy are the means over queries of column 0 and of the row entropies of those maps."""
    cfg = GPTConfig(vocab_size=64, block_size=8, n_layer=2, n_embd=32, n_head=4, **kw)
    model = random_gpt(**cfg.__dict__)
    T = 24
    idx = torch.randint(0, 64, (1, T))
    maps = {}
    for li, branch, s, A in model.attention_maps(idx):
        maps.setdefault((li, branch), []).append(A)
    maps = {k: torch.cat(v, 1) for k, v in maps.items()}
    with torch.no_grad():
        x, pe = model.embed(idx), model.positions(T, "cpu")
        for li, block in enumerate(model.blocks):
            attn = block.attn
            q, k, v, q0, k0 = attn.qkv(block.attn_input(x), pe)
            vv = v[0].repeat_interleave(4 // v.shape[1], 0)
            want = attend(q, k, v, attn.layer.window, getattr(attn, "slopes", None))[0]
            A = maps[(li, "attn")]
            assert A.shape == (4, T, T) and torch.allclose(A.sum(-1), torch.ones(4, T), atol=1e-5)
            assert torch.allclose(A @ vv, want, atol=1e-5)
            if attn.retr is not None:
                R = maps[(li, "retrieval")]
                y = (R @ vv).transpose(0, 1).reshape(T, -1)
                assert torch.allclose(attn.retr.c_proj(y), attn.retr(block.attn_input(x), q0, k0, v)[0], atol=1e-5)
            x = block(x, pe)
        probe = E.attention_probe(model, idx)
    for li in range(2):
        A = maps[(li, "attn")]
        assert torch.allclose(probe["sink"][li], A[..., 0].mean(-1), atol=1e-5)
        assert torch.allclose(probe["entropy"][li], E.attention_entropy(A).mean(-1), atol=1e-4)
        want_d = torch.zeros(T)  # attention mass by relative distance, by the definition
        for i in range(T):
            for j in range(i + 1):
                want_d[i - j] += A[:, i, j].sum()
        assert torch.allclose(probe["distance"][li], want_d, atol=1e-4)
    assert bool(probe["chunk_retrieval"]) == bool(kw.get("chunk_layers"))


def test_retrieval_score_hand_made():
    ids = torch.tensor([9, 9, 5, 6, 9, 9, 5, 6])
    span = (1, 4)           # the needle holds tokens 5, 6 at positions 2, 3
    targets = torch.tensor([5, 6])
    top1 = torch.tensor([[2, 3],    # head 0: both answer tokens copied from the needle -> 1
                         [6, 3],    # head 1: first from outside the needle -> 1/2
                         [3, 2]])   # head 2: wrong tokens inside the needle -> 0
    copied = torch.tensor([True, True])
    assert E.retrieval_score(top1, copied, targets, ids, span).tolist() == [1.0, 0.5, 0.0]
    assert E.retrieval_score(top1, torch.tensor([True, False]), targets, ids, span).tolist() == [0.5, 0.0, 0.0]


def test_algo_bins():
    assert E.algo_bins(1, [16, 32, 48]) == [(1, 16), (17, 32), (33, 48)]


def test_algo_bins_evaluate_exactly_their_lengths():
    """eval_algo's bins tile the lengths generated: each bin's examples have input lengths inside
    the bin, every length of the bin appears (equally often), and the bins together are 1..3N."""
    class Recorder(torch.nn.Module):  # a model that answers nothing and records what it is shown
        config = SimpleNamespace(block_size=40)
        seen = []

        def forward(self, x, y):
            self.seen.append([r.index(tasks.SEP) - r.index(tasks.BOS) - 1 for r in x.tolist()])
            return torch.zeros(*x.shape, len(tasks.ALGO_VOCAB)), torch.zeros(())
    tc = train.TrainConfig(algo="sort", algo_len="1,16", algo_offset=2)
    model = Recorder()
    out = E.eval_algo(model, tc, [16, 32, 48], 64)
    assert [(b["lo"], b["hi"]) for b in out["by_length"].values()] == [(1, 16), (17, 32), (33, 48)]
    # beside exact match and the answer loss, answer-token accuracy (tasks.algo_eval): PAD, never an answer token
    assert all(b["exact"] == 0.0 and b["token_acc"] == 0.0 and "loss" in b for b in out["by_length"].values())
    for (lo, hi), lens in zip(E.algo_bins(1, [16, 32, 48]), model.seen):
        assert Counter(lens) == {n: 4 for n in range(lo, hi + 1)}
    assert sorted(set().union(*map(set, model.seen))) == list(range(1, 49))
    with pytest.raises(E.UserError, match="fewer than the 16 input lengths"):
        E.eval_algo(model, tc, [16, 32, 48], 15)


def run_cli(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, os.path.join(ROOT, "evaluate.py"), *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One tiny trained run (0.1M, block 32) shared by the CLI tests."""
    cfg = tiny_config(tmp_path_factory.mktemp("ev"))
    train.train(cfg)
    return cfg.out_dir


def test_end_to_end_writes_eval_json(run_dir):
    p = run_cli(run_dir, "--tasks", "ppl,passkey", "--lengths", "32,64,128", "--samples", "2", "--ppl_tokens", "2048",
                "--quiet")
    assert p.returncode == 0, p.stderr
    ev = json.load(open(os.path.join(run_dir, "eval.json")))
    for k in ("score", "sink_rate", "tasks", "ppl", "short", "probes", "eval_config", "model_config", "train_length"):
        assert k in ev
    assert ev["train_length"] == 32 and ev["lengths"] == [32, 64, 128]
    assert set(ev["ppl"]["by_length"]) == {"32", "64", "128"} and ev["ppl"]["by_length"]["64"] > 0
    assert sum(b["n"] for b in ev["ppl"]["by_position"]["64"]) == ev["ppl"]["tokens"]["64"]
    assert "longppl" in ev["ppl"] and set(ev["ppl"]["longppl"]["by_length"]) == {"32", "64", "128"}
    pk = ev["tasks"]["passkey"]
    assert pk["by_length"]["32"] is None and "too short" in pk["skipped"]["32"]  # passkey needs ~128 tokens
    assert set(pk["by_length"]["128"]) == {"exact", "rank", "logprob", "n"} and pk["by_length"]["128"]["n"] == 6
    assert set(pk["by_depth"]["128"]) == {"0", "0.5", "1"}
    assert ev["score"] == pk["by_length"]["128"]["rank"] and ev["score_lengths"] == [64, 128]
    t = ev["target"]  # the outcomes at the score lengths
    assert t["lengths"] == [64, 128] and t["retrieval"] == ev["score"]
    assert t["loss"] == pytest.approx((ev["ppl"]["by_length"]["64"] + ev["ppl"]["by_length"]["128"]) / 2)
    assert 0 <= ev["sink_strength"] <= 1
    assert 0 <= ev["sink_rate"] <= 1 and ev["short"]["val_loss"] > 0
    pb = ev["probes"]["by_length"]["32"]
    assert len(pb["sink"]) == 2 and len(pb["entropy"][0]) == 2  # 0.1M: 2 layers x 2 heads
    assert "score" in p.stdout and "ppl loss" in p.stdout
    # a bad input from the command line: one line on stderr, no traceback, exit 1
    p = run_cli(run_dir, "--tasks", "ppl,bogus", "--quiet")
    assert p.returncode == 1 and "unknown task 'bogus'" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_eval_data_long_documents_and_the_window_check(run_dir, tmp_path, capsys):
    """ppl outcomes live inside single documents: the run's own val documents (2 short ones) hold too
    few windows of 1024 and evaluate.py refuses before computing anything; a long-document set
    (--eval_data, prepared by data.py with the run's tokenizer) holds enough and is what gets scored."""
    from conftest import write_corpus
    err = one_line_error(capsys, run_dir, "--tasks", "ppl", "--lengths", "1024", "--min_windows", "8",
                         "--out", str(tmp_path / "no.json"))
    assert "evaluation windows of 1024 tokens (need 8" in err and not (tmp_path / "no.json").exists()
    books = str(tmp_path / "books")
    data.prepare(write_corpus(str(tmp_path / "src"), n_docs=2, words=12000), books, vocab_size=512, val_frac=0.5)
    out = tmp_path / "ev.json"
    E.main([run_dir, "--tasks", "ppl", "--lengths", "1024", "--min_windows", "8", "--eval_data", books,
            "--no_probes", "--longppl_short", "512", "--out", str(out), "--quiet"])
    ev = json.loads(out.read_text())
    n = len(data.load_corpus(books, "cl100k_base", 512).val_docs()[0])
    assert ev["ppl"]["tokens"]["1024"] == 1024 * data.windows_per_length([n], [1024])[1024] >= 8 * 1024


def test_fixed_evaluator_run_must_be_finished(run_dir, tmp_path, capsys):
    """--evaluator names the run folder whose final checkpoint picks LongPPL key tokens (the paper
    longctx grid's fixed evaluator per seed, trained by an earlier line): an unfinished one (no
    result.json yet) is refused in one line before anything is written; a finished one is recorded."""
    import shutil
    ev_run = str(tmp_path / "evaluator")
    shutil.copytree(run_dir, ev_run)
    os.remove(os.path.join(ev_run, "result.json"))
    out = tmp_path / "ev.json"
    flags = ["--tasks", "ppl", "--lengths", "32", "--ppl_tokens", "512", "--no_probes", "--longppl_short", "8",
             "--out", str(out)]
    err = one_line_error(capsys, run_dir, *flags, "--evaluator", ev_run)
    assert "not finished" in err and not out.exists()
    shutil.copy(os.path.join(run_dir, "result.json"), ev_run)
    E.main([run_dir, *flags, "--evaluator", ev_run, "--quiet"])
    lp = json.loads(out.read_text())["ppl"]["longppl"]
    E.main([run_dir, *flags, "--quiet"])
    own = json.loads(out.read_text())["ppl"]["longppl"]
    assert lp["evaluator"] == ev_run and own["evaluator"] == "self"
    assert lp["by_length"] == own["by_length"]  # the same weights pick the same key tokens


def one_line_error(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        E.main(list(argv) + ["--quiet"])
    err = capsys.readouterr().err
    assert e.value.code != 0 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    return err


@pytest.mark.parametrize("args,msg", [
    (["--tasks", "ppl,copy"], "only for runs trained with --algo"),
    (["--lengths", "32,x"], "malformed --lengths"),
    (["--lengths", "10000000"], "outside"),
    (["--haystack", "hay"], "unknown --haystack"),
    (["--rank", "false"], "--score rank needs the ranking"),
])
def test_bad_input_one_line_error(run_dir, capsys, args, msg):
    assert msg in one_line_error(capsys, run_dir, *args)


def test_missing_checkpoint_and_learned_positions(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "no checkpoint" in one_line_error(capsys, str(tmp_path / "empty"))
    assert "no run folder" in one_line_error(capsys, str(tmp_path / "nothing"))
    cfg = tiny_config(tmp_path, iters=2, model={"pos": "learned"})
    train.train(cfg)
    err = one_line_error(capsys, cfg.out_dir, "--tasks", "ppl", "--lengths", "32,64")
    assert "learned" in err and "64" in err


def test_algo_run_train_short_test_long(tmp_path, capsys):
    cfg = train.TrainConfig(algo="copy", algo_len="1,4", model=dict(block_size=16), size="0.1M", iters=3, batch_size=8,
                            eval_interval=10, out_dir=str(tmp_path / "copy"), quiet=True)
    train.train(cfg)
    E.main([cfg.out_dir, "--quiet", "--algo_samples", "16"])
    ev = json.load(open(os.path.join(cfg.out_dir, "eval.json")))
    bins = ev["tasks"]["copy"]["by_length"]
    assert ev["lengths"] == [4, 8, 12] and [(b["lo"], b["hi"]) for b in bins.values()] == [(1, 4), (5, 8), (9, 12)]
    assert ev["score"] == pytest.approx((bins["8"]["exact"] + bins["12"]["exact"]) / 2)  # bins past N = 4
    assert ev["short"]["val_loss"] > 0 and "inputs 1-4" in capsys.readouterr().out
    assert "can only be copy" in one_line_error(capsys, cfg.out_dir, "--tasks", "passkey")


def test_short_val_loss_reused_from_result_json_is_the_evaluated_one(run_dir):
    model, tc, _ = train.load_run(run_dir)
    corpus = data.corpus_of(tc)
    reused = E.short_val_loss(model, corpus, 32, E.EvalConfig(run=run_dir), "cpu")
    fresh = E.short_val_loss(model, corpus, 32, E.EvalConfig(run=run_dir, ckpt="warmdown"), "cpu")
    assert (reused["source"], fresh["source"]) == ("result.json", "evaluated")
    assert reused["val_loss"] == pytest.approx(fresh["val_loss"], abs=1e-6)


def test_attention_by_distance_buckets_are_mean_weights_per_pair():
    """Uniform causal attention (1 / (i + 1)) at T = 4, one head: distance d occurs T - d times; the
    log2 buckets [0,1), [1,2), [2,4) average the weights of their (query, key) pairs."""
    A = torch.tensor([[[1 / (i + 1) if j <= i else 0.0 for j in range(4)] for i in range(4)]])
    edges, mean = E.by_distance_buckets(E.distance_sums(A, 0).double().numpy(), 4, 1)
    h = [1, 1 / 2, 1 / 3, 1 / 4]
    assert edges == [0, 1, 2, 4]
    assert mean == pytest.approx([sum(h) / 4, sum(h[1:]) / 3, (h[2] + h[3] + h[3]) / 3])
