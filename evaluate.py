"""
Offline evaluation of a trained run: long context, length generalisation, weights on the grid.

    python evaluate.py out/RUN                          # default suite -> out/RUN/eval.json
    python evaluate.py out/RUN --tasks ppl,passkey,niah_multikey --lengths 256,512,1024,4096
    python evaluate.py out/ALGO_RUN                     # a train.py --algo run: exact match at N, 2N, 3N
    python evaluate.py out/RUN --tasks grid --ckpt warmdown --grid_bits 6 --out out/RUN/grid.json

Text runs, at each length L (default: the training length times 1, 2, 4, 8, 16):
  ppl     loss of the val split's documents over windows of L tokens (optionally sliding), and by
          position in the window; LongPPL (arXiv 2410.23771) on the same windows
  tasks   synthetic retrieval (tasks.py) swept over lengths and needle depths, scored without free
          generation: teacher-forced log-prob, argmax exact match, rank among distractors
  probes  attention-sink rate (arXiv 2410.10781), attention entropy and retrieval-head scores
          (arXiv 2404.15574) from attention maps recomputed from each layer's own q, k
  short   in-distribution val loss at the training length (the short-context predictor)
Algorithmic runs: exact match on input lengths lo..N, N+1..2N, 2N+1..3N (train short, test long).
grid: the weight-to-grid distance of the checkpoint's quantisable matrices on the --grid_bits grid
(0 = on the grid, 0.25 = uniformly spread); analyze.py compares QAT and full-precision runs with it.

eval.json "score": the mean, over the retrieval tasks and the score lengths, of the rank accuracy
(--score rank, the default: graded even for tiny models; chance = 1/5) or of the exact match
(--score exact). Score lengths ("score_lengths"): those >= --target; by default, for a context
extension those >= its new training length (the target it was extended to, never the lengths
inside its pretraining context), else those past the training length. "target": the outcomes at
the score lengths (ppl loss, log LongPPL, key-token share, retrieval). Algorithmic runs: mean exact
match over the bins past N. "sink_rate", "sink_strength": the first-token sink rate and the mean
first-token importance on val text at the training length.
"""
import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import cli
import data
import train
from train import load_run
from cli import UserError, flag, parse, write_json, main as cli_main
from model import checkpoint_file, evaluate
from quant import check_bits, frozen, grid_distance, parse_clip
from tasks import (ALGO_TASKS, TASKS, algo_eval, algo_example_len, depth_grid, make_sample, rank_credit,
                   score_answer)

DEFAULT_TASKS = "ppl,passkey,niah_single,niah_multikey"
DEFAULT_FACTORS = (1, 2, 4, 8, 16)  # default lengths: the training length times these

# -----------------------------------------------------------------------------
# Pure maths: short functions on arrays, tested directly


def bucket_edges(L, buckets="log2"):
    """Edges of position buckets over [0, L): 'log2' -> 0, 1, 2, 4, ..., L (fine near the start,
    where the loss falls fast; one bucket per doubling past the training length, where it may blow
    up); an integer N -> N equal-width buckets."""
    if buckets == "log2":
        return [0] + [2 ** i for i in range(max(L - 1, 1).bit_length()) if 2 ** i < L] + [L]
    n = int(buckets)
    return sorted({round(i * L / n) for i in range(n + 1)})


def bucket_sums(values, positions, edges):
    """(sum, count) of values per bucket [edges[i], edges[i+1]) of their positions."""
    idx = np.searchsorted(edges, positions, side="right") - 1
    nb = len(edges) - 1
    return (np.bincount(idx, weights=values, minlength=nb)[:nb],
            np.bincount(idx, minlength=nb)[:nb])


def window_starts(n, L, stride):
    """Starts of the windows of L inputs (+ 1 target) over a document of n tokens, one every
    `stride` tokens; the tail that fits no whole window is left out (every window has L tokens)."""
    return list(range(0, n - L, stride))


def key_tokens(loss_short, loss_full, alpha=2.0, beta=2.0):
    """LongPPL key tokens (arXiv 2410.23771): the loss drops by more than alpha when the full
    context replaces the short one (LSD > alpha), and the full-context loss is below beta
    (LCL > -beta). Arrays in, bool mask out (NaN, i.e. not scored, is never a key token)."""
    loss_short, loss_full = np.asarray(loss_short), np.asarray(loss_full)
    return (loss_short - loss_full > alpha) & (loss_full < beta)


def long_ppl(loss, key):
    """LongPPL = exp(mean loss on the key tokens); NaN when there are none."""
    loss, key = np.asarray(loss), np.asarray(key, dtype=bool)
    return math.exp(float(loss[key].mean())) if key.any() else float("nan")


def sink_rate(first_importance, eps=0.3):
    """Gu et al. arXiv 2410.10781: a head sinks on the first token when its importance (the mean
    over queries t of A[t, 0]; every query sees key 0) exceeds eps. -> the share of heads that do."""
    return (torch.as_tensor(first_importance) > eps).float().mean().item()


def distance_sums(A, start):
    """Attention mass by relative distance d = i - j of the query rows start..start+n-1 of A [H, n, T]
    (keys past the query carry zero): [T] sums over heads and queries of A[h, i, i - d]."""
    H, n, T = A.shape
    i = torch.arange(start, start + n, device=A.device)[:, None]
    d = (i - torch.arange(T, device=A.device)[None]).clamp_min(0)  # d < 0 is masked (weight 0)
    return torch.zeros(T, device=A.device).scatter_add_(0, d.flatten(), A.sum(0).flatten())


def by_distance_buckets(sums, T, H):
    """Mean attention weight per (query, key) pair at each relative distance, averaged within log2
    buckets of distance (bucket_edges): a query at i sees distance d once when d <= i, so distance d
    occurs T - d times per head. -> (edges, [means])."""
    edges = bucket_edges(T)
    d = np.arange(T)
    s, c = bucket_sums(sums, d, edges)
    n, _ = bucket_sums(H * (T - d).astype(np.float64), d, edges)
    return edges, (s / np.maximum(n, 1)).tolist()


def attention_entropy(attn):
    """Entropy (nats) of each query's attention distribution: [..., T, T] -> [..., T] (0 log 0 = 0).
    Uniform causal attention gives log(t + 1) at query t."""
    return torch.special.entr(attn).sum(-1)


def retrieval_score(top1, copied, targets, ids, span):
    """Retrieval-head score (Wu et al. arXiv 2404.15574), teacher-forced: the share of answer steps
    at which the model copies (its argmax is the true next token) and the head's top-1 attended key
    lies in the needle and holds that very token. top1 [..., n] key per answer step; copied [n] bool;
    targets [n] answer tokens; ids [T] the sequence; span (lo, hi) of the needle -> [...]."""
    inside = (top1 >= span[0]) & (top1 < span[1])
    return (inside & (ids[top1] == targets) & copied).float().mean(-1)


# -----------------------------------------------------------------------------
# Model helpers


def forward(model, idx, targets=None, rows=None):
    """model(idx) under the device's autocast (per-token losses with targets, the logits of `rows`
    only with rows); a length the model cannot run is a UserError."""
    try:
        with cli.autocast(idx.device):
            return model(idx, targets, reduction="none") if targets is not None else model(idx, rows=rows)
    except ValueError as e:
        raise UserError(f"cannot evaluate {idx.shape[1]} tokens: {e}") from None


@torch.no_grad()
def rows_logprobs(model, idx, rows):
    """Log-probs [B, n, V] at rows [B, n] of idx [B, T]: the model scores only those rows."""
    return F.log_softmax(forward(model, idx, rows=rows)[0].float(), -1)

# -----------------------------------------------------------------------------
# Perplexity by context length and by position, and LongPPL


def plan_windows(docs, L, stride, max_tokens=0):
    """The full-context windows of doc_losses: [(doc, start, first)]: L inputs from `start`; the
    targets at window positions p >= first (token start + p + 1) are this window's own (a target is
    scored by the first window that holds it). max_tokens > 0 stops after that many targets."""
    wins, scored = [], 0
    for d, doc in enumerate(docs):
        prev_end = 0
        for s in window_starts(len(doc), L, stride):
            if max_tokens and scored >= max_tokens:
                break
            first = max(prev_end - s, 0)  # positions p >= first are new targets (token s + p + 1)
            wins.append((d, s, first))
            scored += L - first
            prev_end = s + L
    return wins


def window_losses(model, docs, items, n, batch_tokens=8192, device="cpu"):
    """Per-position losses [len(items), n] of windows of n inputs: item (doc, start) scores the
    tokens start + 1 .. start + n from the inputs start .. start + n - 1, in batches."""
    out = []
    per = max(1, batch_tokens // n)
    for i in range(0, len(items), per):
        xy = torch.from_numpy(np.stack([docs[d][s:s + n + 1] for d, s in items[i:i + per]]).astype(np.int64)).to(device)
        out.append(forward(model, xy[:, :-1], xy[:, 1:])[1].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, n))


@torch.no_grad()
def doc_losses(model, docs, L, stride, max_tokens=0, edges=None, batch_tokens=8192, device="cpu"):
    """Per-token loss of each document over windows of L tokens, one every `stride` tokens. A target
    is scored by the first window that holds it (so stride < L scores the last `stride` tokens of
    each later window: every scored token has at least L - stride tokens of context).
    max_tokens > 0 stops after that many scored tokens (documents in order, from their start).
    -> (losses: one float array per document, loss of token j at [j], NaN where not scored;
        pos_sum, pos_cnt: loss sums and counts per position bucket over every position of every
        window, the loss-vs-position curve; position p = the loss of the token after p).
    """
    wins = plan_windows(docs, L, stride, max_tokens)
    losses = [np.full(len(doc), np.nan) for doc in docs]
    nb = len(edges) - 1 if edges else 0
    pos_sum, pos_cnt = np.zeros(nb), np.zeros(nb, dtype=np.int64)
    rows = window_losses(model, docs, [(d, s) for d, s, _ in wins], L, batch_tokens, device)
    for (d, s, first), row in zip(wins, rows):
        losses[d][s + 1 + first:s + L + 1] = row[first:]
    if edges and len(wins):
        sm, c = bucket_sums(rows.ravel(), np.tile(np.arange(L), len(wins)), edges)
        pos_sum += sm
        pos_cnt += c
    return losses, pos_sum, pos_cnt


def short_context(c, K, W):
    """LongPPL short context (arXiv 2410.23771) of a target whose full context is its c preceding
    tokens inside its own window, as the paper's reference find_key_token lays its short windows
    over a text: one every W tokens from the text's first token (starts 0, W, 2W, ...), each
    scoring the targets K .. K + W - 1 tokens after its start. So the short context is the last
    K + ((c - K) mod W) tokens, between K (the paper's truncation length: a minimum) and K + W - 1;
    W = 1 gives exactly K. 0 (no key-token candidate) when that is not shorter than c: c <= K, and
    the first window's targets (c < K + W), whose short window starts at the text's first token
    too, so the loss difference is 0. Works on arrays."""
    c = np.asarray(c)
    s = K + (np.maximum(c, K) - K) % W
    return np.where(s < c, s, 0)


def short_windows(L, first, K, W):
    """The short-context windows inside one full window of L inputs whose own targets sit at
    positions p >= first: [(u, n)], n inputs from full-window position u = jW, j >= 1 (the window
    at 0 would score no candidate); window j scores the targets at full positions p in
    [u + K - 1, u + n - 1] (full context c = p + 1, short context c - u = short_context(c, K, W))."""
    out = []
    u = W
    while u + K - 1 <= L - 1:
        n = min(K + W - 1, L - u)
        if u + n - 1 >= first:
            out.append((u, n))
        u += W
    return out


@torch.no_grad()
def short_losses(model, docs, wins, L, K, W, batch_tokens=8192, device="cpu"):
    """Short-context losses aligned with the full-context windows `wins` (plan_windows) of L inputs:
    each target's short context is a suffix of its OWN full context (short_context); NaN where the
    target is no candidate (full context <= K tokens) or not scored."""
    out = [np.full(len(doc), np.nan) for doc in docs]
    groups = defaultdict(list)  # input length -> [(doc, start, first, u)]
    for d, s, first in wins:
        for u, n in short_windows(L, first, K, W):
            groups[n].append((d, s, first, u))
    for n, items in groups.items():
        rows = window_losses(model, docs, [(d, s + u) for d, s, _, u in items], n, batch_tokens, device)
        for (d, s, first, u), row in zip(items, rows):
            lo = max(u + K - 1, first)  # full-window positions scored by this short window
            out[d][s + lo + 1:s + u + n + 1] = row[lo - u:]
    return out


def eval_ppl(model, docs, lengths, ec, evaluator=None, device="cpu", bar=None):
    """Loss by length and by position bucket, and LongPPL at every length. The evaluator (this model
    unless --evaluator) picks the key tokens from its own short- and full-context losses on the same
    windows (the short context of a target is the last --longppl_short (+ up to step - 1) tokens of
    its own full context); LongPPL is then this model's full-context loss on them."""
    out = dict(by_length={}, by_position={}, tokens={}, windows={}, documents={}, stride=ec.stride or "L",
               buckets=ec.buckets)
    runs = {}
    for L in lengths:
        stride = min(ec.stride, L) if ec.stride else L
        wins = plan_windows(docs, L, stride, ec.ppl_tokens)  # what each outcome at L rests on, recorded
        out["windows"][str(L)], out["documents"][str(L)] = len(wins), len({d for d, _, _ in wins})
        edges = bucket_edges(L, ec.buckets)
        losses, ps, pc = doc_losses(model, docs, L, stride, ec.ppl_tokens, edges, ec.batch_tokens, device)
        tick(bar)
        runs[L] = (losses, stride, wins)
        allv = np.concatenate(losses)
        n = int(np.isfinite(allv).sum())
        out["tokens"][str(L)] = n
        out["by_length"][str(L)] = float(np.nanmean(allv)) if n else None
        out["by_position"][str(L)] = [dict(lo=lo, hi=hi, loss=float(s / c) if c else None, n=int(c))
                                      for lo, hi, s, c in zip(edges, edges[1:], ps, pc)]
    if ec.no_longppl:
        return out
    K, W = ec.longppl_short, longppl_step(ec)
    lp = out["longppl"] = dict(short=K, step=W, alpha=ec.alpha, beta=ec.beta, evaluator=ec.evaluator or "self",
                               by_length={})
    ev = evaluator or model
    for L in lengths:
        full, stride, wins = runs[L]
        full_ev = full if evaluator is None else doc_losses(evaluator, docs, L, stride, ec.ppl_tokens, None,
                                                            ec.batch_tokens, device)[0]
        short = np.concatenate(short_losses(ev, docs, wins, L, K, W, ec.batch_tokens, device))
        f, fe = np.concatenate(full), np.concatenate(full_ev)
        scored = np.isfinite(f)
        cand = scored & np.isfinite(fe) & np.isfinite(short)
        key = np.zeros(len(f), dtype=bool)
        key[cand] = key_tokens(short[cand], fe[cand], ec.alpha, ec.beta)
        lp["by_length"][str(L)] = dict(longppl=long_ppl(f, key), n_key=int(key.sum()), n_candidates=int(cand.sum()),
                                       key_frac=float(key.sum() / scored.sum()) if scored.any() else None)
    return out


def longppl_step(ec):
    return ec.longppl_step or max(ec.longppl_short // 4, 1)

# -----------------------------------------------------------------------------
# Synthetic retrieval tasks


@torch.no_grad()
def score_samples(model, samples, batch_tokens=8192, device="cpu", rank=True):
    """{"exact", "logprob", "rank"} per sample (tasks.score_answer and rank_credit, the rule of
    tasks.rank_answer). The true answer and its distractors share the prompt and the answer length,
    so a sample's candidates go through one batched forward (with other samples of the same
    prompt length): one pass of k+1 rows instead of k+2 passes. rank=False: the true answer's row
    only (exact match and log-prob; rank None), 1/(k+1) of the cost."""
    groups = defaultdict(list)
    for i, s in enumerate(samples):
        groups[(len(s["prompt_ids"]), len(s["answer_ids"]))].append(i)
    out = [None] * len(samples)
    for (P, n), members in groups.items():
        cands = lambda s: [s["answer_ids"]] + (list(s["distractor_ids"]) if rank else [])
        per = max(1, batch_tokens // ((P + n) * len(cands(samples[members[0]]))))
        for c in range(0, len(members), per):
            chunk = members[c:c + per]
            seqs = [samples[i]["prompt_ids"] + a for i in chunk for a in cands(samples[i])]
            rows = torch.arange(P - 1, P - 1 + n, device=device).expand(len(seqs), n)
            lp = rows_logprobs(model, torch.tensor(seqs, device=device), rows)
            k = 0
            for i in chunk:
                sc = [score_answer(lp[k + j], 1, a) for j, a in enumerate(cands(samples[i]))]
                out[i] = dict(sc[0], rank=rank_credit([x["logprob"] for x in sc]) if rank else None)
                k += len(sc)
    return out


def task_samples(task, enc, L, depths, n, seed, haystack):
    """n samples per depth; sample i has the same seed at every depth and length (controlled sweep).
    A length too short for the task (or a vocabulary too small for it) raises UserError."""
    try:
        return [make_sample(task, enc, L, d, f"{seed}-{task}-{i}", haystack) for d in depths for i in range(n)]
    except ValueError as e:  # tasks.py: too short for the task, or too few words in the vocabulary
        raise UserError(f"{task} at length {L}: {e or type(e).__name__}") from None


def mean_scores(rows):
    return dict({k: float(np.mean([r[k] for r in rows])) if rows[0][k] is not None else None
                 for k in ("exact", "rank", "logprob")}, n=len(rows))


def eval_task(model, enc, task, lengths, ec, haystack, device="cpu", bar=None):
    """{"by_length": {L: means}, "by_depth": {L: {depth: means}}} for one retrieval task; a length
    the task does not fit in is null, with the reason under "skipped"."""
    out = dict(by_length={}, by_depth={}, skipped={})
    for L in lengths:
        try:
            samples = task_samples(task, enc, L, depth_grid(ec.depths), ec.samples, ec.seed, haystack)
        except UserError as e:
            out["by_length"][str(L)] = out["by_depth"][str(L)] = None
            out["skipped"][str(L)] = str(e)
            from tqdm import tqdm
            tqdm.write(f"skipped {e}", file=sys.stderr)
            tick(bar)
            continue
        scores = score_samples(model, samples, ec.batch_tokens, device, ec.rank)
        tick(bar)
        out["by_length"][str(L)] = mean_scores(scores)
        by_d = defaultdict(list)
        for s, r in zip(samples, scores):
            by_d[f"{s['depth']:g}"].append(r)
        out["by_depth"][str(L)] = {d: mean_scores(r) for d, r in by_d.items()}
    return out

# -----------------------------------------------------------------------------
# Attention probes


@torch.no_grad()
def attention_probe(model, idx, rows=()):
    """One sequence idx [1, T] -> "sink" (first-token importance: mean over queries of A[t, 0]) and
    "entropy" (mean over queries), [n_layer, n_head] each; "top1" [n_layer, n_head, len(rows)]: the
    top-1 key of the query rows; "pred": the model's argmax at those rows; "retrieval": the same
    sink and entropy of each chunk layer's retrieval branch ("chunk_retrieval", over the queries
    that retrieve); "distance" [n_layer, T]: the local attention's mass at each relative distance,
    summed over heads and queries (distance_sums).
    The maps come from the model's own attention code (GPT.attention_maps), so every variant is
    probed as it computes: causal, windowed, ALiBi, chunk retrieval."""
    rows = torch.tensor(list(rows), dtype=torch.long, device=idx.device)
    T = idx.shape[1]
    nl, H = len(model.blocks), model.config.n_head
    sink, ent = torch.zeros(nl, H), torch.zeros(nl, H)
    top1 = torch.zeros(nl, H, len(rows), dtype=torch.long)
    retr = defaultdict(lambda: torch.zeros(3, H))  # layer -> sum of A[t, 0], sum of entropy, queries
    dist = torch.zeros(nl, T)  # attention mass by relative distance, summed over heads and queries
    with cli.autocast(idx.device):
        for li, branch, s, A in model.attention_maps(idx):
            A = A.float()
            if branch == "retrieval":
                used = A.sum(-1) > 0
                retr[li] += torch.stack([A[..., 0].sum(-1), attention_entropy(A).sum(-1), used.sum(-1)]).cpu()
                continue
            sink[li] += A[..., 0].sum(-1).cpu() / T
            ent[li] += attention_entropy(A).sum(-1).cpu() / T
            dist[li] += distance_sums(A, s).cpu()
            here = (rows >= s) & (rows < s + A.shape[1])
            if here.any():
                top1[li][:, here.cpu()] = A[:, rows[here] - s].argmax(-1).cpu()
    pred = rows_logprobs(model, idx, rows[None])[0].argmax(-1).cpu() if len(rows) else torch.zeros(0, dtype=torch.long)
    retrieval = {li: dict(sink=(r[0] / r[2].clamp_min(1)).tolist(), entropy=(r[1] / r[2].clamp_min(1)).tolist())
                 for li, r in retr.items()}
    return dict(sink=sink, entropy=ent, top1=top1, pred=pred, chunk_retrieval=retrieval, distance=dist)


def needle_span(sample):
    """[start, end) of the queried needle: from needle_pos to the end of the first occurrence of
    the answer tokens after it (a RULER needle ends with its value)."""
    p, a, n = sample["prompt_ids"], sample["answer_ids"], sample["needle_pos"]
    for i in range(n, len(p) - len(a) + 1):
        if p[i:i + len(a)] == a:
            return n, i + len(a)
    return n, n


def eval_probes(model, enc, val, lengths, ec, device="cpu", bar=None):
    """Per length: sink rate and first-token importance [layer][head], attention entropy and the mean
    attention weight by relative distance per layer (on probe_samples windows of val text; arXiv
    2410.21216's local-decay / U-shape evidence), retrieval-head scores (on probe_samples niah_single samples),
    and for chunk layers the sink and entropy of their retrieval branch."""
    out = dict(eps=ec.eps, by_length={})
    for L in lengths:
        wins = [np.asarray(val[i * L:(i + 1) * L], dtype=np.int64) for i in range(ec.probe_samples)]
        wins = [w for w in wins if len(w) == L] or [np.resize(np.asarray(val, dtype=np.int64), L)]
        probes = [attention_probe(model, torch.from_numpy(w)[None].to(device)) for w in wins]
        sinks, ent = torch.stack([r["sink"] for r in probes]), torch.stack([r["entropy"] for r in probes]).mean(0)
        row = dict(sink_rate=sink_rate(sinks, ec.eps), sink=sinks.mean(0).tolist(),
                   entropy=ent.tolist(), entropy_mean=ent.mean().item())
        dist = torch.stack([r["distance"] for r in probes]).mean(0).double().numpy()  # HoPE's U-shape probe
        by_d = [by_distance_buckets(dist[li], L, model.config.n_head) for li in range(len(dist))]
        row["attn_by_distance"] = dict(edges=by_d[0][0], mean=[m for _, m in by_d])
        if probes[0]["chunk_retrieval"]:
            row["chunk_retrieval"] = {str(li): dict(sink=np.mean([r["chunk_retrieval"][li]["sink"] for r in probes], 0).tolist(),
                                                    entropy=np.mean([r["chunk_retrieval"][li]["entropy"] for r in probes], 0).tolist())
                                      for li in probes[0]["chunk_retrieval"]}
        try:
            m = ec.probe_samples  # needles at depths (i + 1/2) / m: 0.5 for one probe sample
            samples = task_samples("niah_single", enc, L, [(i + 0.5) / m for i in range(m)], 1, ec.seed, None)
        except UserError:
            samples = []  # too short for a NIAH sample: no retrieval score at this length
        scores = []
        for s in samples:
            ids = s["prompt_ids"] + s["answer_ids"]
            P, n = len(s["prompt_ids"]), len(s["answer_ids"])
            r = attention_probe(model, torch.tensor([ids], device=device), range(P - 1, P - 1 + n))
            tgt = torch.tensor(s["answer_ids"])
            scores.append(retrieval_score(r["top1"], r["pred"] == tgt, tgt, torch.tensor(ids), needle_span(s)))
        if scores:
            ret = torch.stack(scores).mean(0)
            row.update(retrieval=ret.tolist(), retrieval_max=ret.max().item())
        out["by_length"][str(L)] = row
        tick(bar)
    return out

# -----------------------------------------------------------------------------
# Train short / test long on algorithmic tasks (e.g. arXiv 2207.02098, 2310.16028)


def algo_bins(lo, lengths):
    """Upper ends N, 2N, 3N -> input-length bins (lo, N), (N+1, 2N), (2N+1, 3N)."""
    return [(a, b) for a, b in zip([lo] + [l + 1 for l in lengths[:-1]], lengths)]


@torch.no_grad()
def eval_algo(model, tc, lengths, n, device="cpu", bar=None):
    """Exact match, answer loss and answer-token accuracy (token_acc) per input-length bin with
    tasks.algo_eval (every input length of the bin, equally often); the evaluation block grows to fit the
    longest example (positions past training are the point), with the training's random offsets."""
    lo, N = train.algo_lengths(tc)
    out = dict(train_len=[lo, N], by_length={})
    for a, b in algo_bins(lo, lengths):
        if a > b:
            raise UserError(f"--lengths must increase and start at >= {lo}, got {','.join(map(str, lengths))}")
        if n < b - a + 1:  # every length of a bin is evaluated (tasks.algo_eval cycles through them)
            raise UserError(f"--algo_samples {n} is fewer than the {b - a + 1} input lengths of bin {a}-{b}")
        need = algo_example_len(tc.algo, b, tc.algo_offset) - 1
        try:
            r = algo_eval(model, tc.algo, (a, b), max(model.config.block_size, need), tc.seed, tc.algo_offset, n, device)
        except ValueError as e:
            raise UserError(f"cannot evaluate input lengths {a}-{b} ({need} tokens): {e}") from None
        out["by_length"][str(b)] = dict(lo=a, hi=b, exact=r["acc"], loss=r["loss"], token_acc=r["token_acc"], n=n)
        tick(bar)
    return out

# -----------------------------------------------------------------------------
# Run loading, the suite, the report


@dataclass
class EvalConfig:
    run: str = flag("", "run folder", positional=True)
    ckpt: str = flag("final", "checkpoint: final | warmdown | a --save_at fraction (0.25)")
    tasks: str = flag("", f"comma-separated: ppl, grid and tasks.py TASKS ('' = {DEFAULT_TASKS}); algo runs: their task")
    lengths: str = flag("", "context lengths ('' = training length x 1,2,4,8,16); algo runs: bin ends N,2N,3N")
    depths: int = flag(0, "needle depths per length, evenly spaced in [0, 1] (0 = 3; --quick: 1, i.e. 0.5)")
    samples: int = flag(2, "samples per (task, length, depth)")
    haystack: str = flag("repeat", "repeat (filler sentences) | needle (distractor needles) | corpus (val text)")
    seed: int = flag(0, "sample seed: same keys and values at every length and depth")
    score: str = flag("rank", "metric of the top-level score: rank | exact")
    target: int = flag(0, "score at the lengths >= this (0: an extension's own training length, the target it "
                          "was extended to; else the lengths past the training length)")
    stride: int = flag(0, "ppl sliding windows: score the last `stride` tokens of each window (0 = L)")
    ppl_tokens: int = flag(0, "scored tokens per length, from the start of the val documents (0 = 32768; --quick 8192)")
    buckets: str = flag("log2", "ppl position buckets: log2 | N equal-width buckets")
    eval_data: str = flag("", "ppl documents from this corpus's held-out split (a long-document set, e.g. a data.py "
                              "prepare of books) instead of the run's val documents")
    min_windows: int = flag(1, "refuse to run when the ppl documents hold fewer full windows than this at a length")
    no_longppl: bool = flag(False, "skip LongPPL")
    longppl_short: int = flag(64, "LongPPL truncation length K (the paper's, a minimum): short windows every step "
                              "tokens from each window's first token (as the reference find_key_token); a target's "
                              "short context is the last K..K+step-1 tokens of its full context, a candidate when shorter")
    longppl_step: int = flag(0, "LongPPL short windows: one every step tokens inside each full window (0 = K/4, as "
                                "the paper's 4096/1024; 1 = a short context of exactly K tokens)")
    alpha: float = flag(2.0, "LongPPL: minimum loss drop short -> full context")
    beta: float = flag(2.0, "LongPPL: maximum full-context loss")
    evaluator: str = flag("", "LongPPL key tokens from another run's final checkpoint ('' = this model)")
    no_probes: bool = flag(False, "skip the attention probes")
    rank: bool = flag(True, "retrieval: also rank the answer among its distractors (false: exact match only, "
                            "one row per sample instead of 5)")
    probe_samples: int = flag(1, "val text windows per length for sink rate / entropy")
    eps: float = flag(0.3, "sink threshold (arXiv 2410.10781)")
    algo_samples: int = flag(256, "examples per length bin for algorithmic runs")
    grid_bits: int = flag(6, "grid: bit-width of the grid the weights are measured against")
    grid_clip: str = flag("", "grid: clip rule of the grid ('' = the run's own)")
    logn: bool = flag(False, "SWAN log-n query scaling at evaluation (model.config.logn_scale = True)")
    quick: bool = flag(False, "cheaper, for sweeps: 1 depth (0.5), 8192 ppl tokens")
    out: str = flag("", "output path ('' = RUN/eval.json)")
    batch_tokens: int = flag(0, "tokens per forward pass (0 = sized to the device and vocabulary, as train.py's)")
    max_len: int = flag(65536, "sanity limit on lengths")
    device: str = flag("auto", "auto | cpu | cuda | cuda:N")
    quiet: bool = flag(False, "no progress bar")


def parse_args(argv=None):
    ec = parse(EvalConfig, argv, __doc__)
    ec.depths = ec.depths or (1 if ec.quick else 3)
    ec.ppl_tokens = ec.ppl_tokens or (8192 if ec.quick else 32768)
    return ec


def int_list(s, name):
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"malformed --{name} {s!r}: comma-separated integers") from None


def check(ec, tc, mcfg, tasks, lengths):
    """Every bad input is a one-line UserError before any work."""
    if ec.haystack not in ("repeat", "needle", "corpus"):
        raise UserError(f"unknown --haystack {ec.haystack!r}: repeat | needle | corpus")
    if ec.score not in ("rank", "exact"):
        raise UserError(f"unknown --score {ec.score!r}: rank | exact")
    if ec.score == "rank" and not ec.rank:
        raise UserError("--score rank needs the ranking: drop --rank false, or use --score exact")
    if min(ec.depths, ec.samples, ec.probe_samples, ec.longppl_short, ec.algo_samples) < 1 \
            or ec.longppl_step < 0 or ec.batch_tokens < 0:
        raise UserError("--depths, --samples, --probe_samples, --algo_samples, --longppl_short must "
                        "be >= 1, --longppl_step and --batch_tokens >= 0")
    if ec.stride < 0 or (ec.buckets != "log2" and not ec.buckets.isdigit()):
        raise UserError("--stride must be >= 0 and --buckets log2 or a positive integer")
    if ec.out:  # never over an input (a checkpoint, a record): only over an earlier evaluation
        cli.check_out_file(ec.out, "--out", is_eval_record, "evaluate.py output")
    if "grid" in tasks:
        try:
            check_bits(ec.grid_bits)
            parse_clip(ec.grid_clip or mcfg.clip)
        except ValueError as e:
            raise UserError(f"--grid_bits/--grid_clip: {e}") from None
        return
    if not lengths:
        raise UserError("--lengths is empty")
    if tc.algo:
        bad = [t for t in tasks if t != tc.algo]
        if bad:
            raise UserError(f"{ec.run} was trained on --algo {tc.algo}: --tasks can only be {tc.algo}, not {bad[0]!r}")
        return
    known = ["ppl", "grid"] + list(TASKS)
    bad = [t for t in tasks if t not in known]
    if bad:
        hint = " (an algorithmic task: only for runs trained with --algo)" if bad[0] in ALGO_TASKS else ""
        raise UserError(f"unknown task {bad[0]!r}{hint}; choose from {', '.join(known)}")
    for L in lengths:
        if not 2 <= L <= ec.max_len:
            raise UserError(f"length {L} outside [2, --max_len {ec.max_len}]")
    if mcfg.pos == "learned" and max(lengths) > mcfg.block_size:
        raise UserError(f"pos=learned has only block_size={mcfg.block_size} positions: cannot evaluate "
                        f"length {max(lengths)}")


def is_eval_record(path):
    """An earlier output of this script (a JSON object with its eval_config)."""
    if not path.endswith(".json"):
        return False
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(rec, dict) and "eval_config" in rec


def recorded_metrics(ec):
    """The metrics of the run's result.json when the final checkpoint is evaluated (the weights they
    were measured on), else None."""
    path = os.path.join(ec.run, "result.json")
    if ec.ckpt == "final" and os.path.exists(path):
        try:
            with open(path) as f:
                m = json.load(f)["metrics"]
            return m if isinstance(m, dict) else None
        except (ValueError, KeyError, TypeError, OSError):
            pass
    return None


def short_val_loss(model, corpus, block, ec, device, final_tokens=0):
    """In-distribution val loss at the training length: model.evaluate on the run's final-evaluation
    tokens of the val split (final_tokens, its --final_eval_tokens; 0 = all). The run's result.json
    holds this very number (same deterministic function, and log-n scaling is off within the
    training length), so a finished run's final checkpoint reuses it."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return dict(val_loss=float(recorded_metrics(ec)["val_loss"]), block_size=block, source="result.json")
    ev = evaluate(model, corpus.val, corpus.token_bytes, block, ec.batch_tokens, final_tokens, device)
    return dict(val_loss=ev["loss"], block_size=block, source="evaluated")


@torch.no_grad()
def short_algo(model, tc, train_len, ec, device):
    """An algorithmic run's in-distribution answer loss and exact match (tasks.algo_eval at the
    training lengths): a full-precision run's result.json holds them (its final evaluation, the same
    call), so its final checkpoint reuses them; a QAT run's record holds full-precision exact match."""
    m = recorded_metrics(ec) if model.config.bits >= 16 else None
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return dict(val_loss=float(m["val_loss"]), val_acc=float(m["val_acc"]))
    r = algo_eval(model, tc.algo, train.algo_lengths(tc), train_len, tc.seed, tc.algo_offset, device=device)
    return dict(val_loss=r["loss"], val_acc=r["acc"])


def evaluate_run(ec):
    t0 = time.time()
    device = cli.resolve_device(ec.device)
    model, tc, _ = load_run(ec.run, ec.ckpt, **({"logn_scale": True} if ec.logn else {}))
    model.to(device).eval()
    mcfg, train_len = model.config, model.config.block_size
    if tc.algo:
        N = train.algo_lengths(tc)[1]
        tasks = [t for t in ec.tasks.split(",") if t.strip()] or [tc.algo]
        lengths = int_list(ec.lengths, "lengths") or [N, 2 * N, 3 * N]
    else:
        tasks = [t for t in (ec.tasks or DEFAULT_TASKS).split(",") if t.strip()]
        lengths = sorted(set(int_list(ec.lengths, "lengths") or [train_len * f for f in DEFAULT_FACTORS]))
    check(ec, tc, mcfg, tasks, lengths)
    ec.batch_tokens = cli.eval_batch_tokens(device, mcfg.vocab_size, ec.batch_tokens)
    res = dict(run=ec.run, checkpoint=os.path.join(ec.run, checkpoint_file(ec.ckpt)), train_length=train_len,
               eval_config=dataclasses.asdict(ec), tasks_evaluated=tasks, lengths=lengths,
               model_config=dataclasses.asdict(mcfg), train_config=dataclasses.asdict(tc),
               versions=cli.versions(), device=device)
    if "grid" in tasks:  # the weights alone: no data, no lengths
        clip = ec.grid_clip or mcfg.clip
        res.update(tasks_evaluated=["grid"], grid_distance=dict(bits=ec.grid_bits, clip=clip, ckpt=ec.ckpt,
                                                                **grid_distance(model, ec.grid_bits, clip)))
        return dict(res, wall_s=time.time() - t0)
    from tqdm import tqdm
    model = frozen(model)  # a QAT model's weights quantised once, not at every forward (after the grid task)
    if tc.algo:
        with tqdm(total=len(lengths), disable=ec.quiet, desc=tc.algo, dynamic_ncols=True) as bar:
            algo = eval_algo(model, tc, lengths, ec.algo_samples, device, bar)
        past = [v["exact"] for v in algo["by_length"].values() if v["lo"] > algo["train_len"][1]]
        res.update(tasks={tc.algo: algo}, score=float(np.mean(past)) if past else None,
                   score_def="mean exact match over the input-length bins past the training maximum",
                   sink_rate=None, ppl=None, short=short_algo(model, tc, train_len, ec, device))
        return dict(res, wall_s=time.time() - t0)

    corpus = data.corpus_of(tc)
    docs = corpus.val_docs()  # without their trailing end-of-text separator
    if ec.eval_data:  # a long-document set apart from the training corpus, tokenized as the run was
        docs = data.load_corpus(ec.eval_data, tc.tokenizer, tc.vocab_size, tc.cache_dir, tc.val_frac).val_docs()
    if "ppl" in tasks:  # before anything is computed: outcomes inside single documents need enough windows
        data.check_windows([len(d) for d in docs], lengths, ec.min_windows, ec.eval_data or f"{ec.run}'s val documents",
                           ec.stride)
    haystack = {"repeat": None, "needle": "needle", "corpus": corpus.val}[ec.haystack]
    if corpus.enc is None and [t for t in tasks if t in TASKS]:
        raise UserError(f"{ec.run}'s corpus has no tokenizer (--tokenizer none): only ppl can be evaluated")
    evaluator = None
    if ec.evaluator:
        evaluator, etc, _ = load_run(ec.evaluator)
        if (etc.tokenizer, etc.vocab_size) != (tc.tokenizer, tc.vocab_size):
            raise UserError(f"--evaluator {ec.evaluator} uses another tokenizer ({etc.tokenizer}/{etc.vocab_size})")
        evaluator = frozen(evaluator.to(device).eval())
    retrieval = [t for t in tasks if t in TASKS]
    probe_lengths = sorted(set(lengths) | {train_len})
    total = len(lengths) * ("ppl" in tasks) + len(retrieval) * len(lengths) + len(probe_lengths) * (not ec.no_probes)
    bar = tqdm(total=total, disable=ec.quiet, dynamic_ncols=True, bar_format="{l_bar}{bar}| {elapsed}<{remaining}")
    if "ppl" in tasks:
        bar.set_description("ppl")
        res["ppl"] = eval_ppl(model, docs, lengths, ec, evaluator, device, bar)
    res["tasks"] = {}
    for t in retrieval:
        bar.set_description(t)
        res["tasks"][t] = eval_task(model, corpus.enc, t, lengths, ec, haystack, device, bar)
    if not ec.no_probes:
        bar.set_description("probes")
        res["probes"] = eval_probes(model, corpus.enc, corpus.val, probe_lengths, ec, device, bar)
    bar.close()
    res["short"] = short_val_loss(model, corpus, train_len, ec, device, tc.final_eval_tokens)
    past, where = score_lengths(lengths, train_len, mcfg.rope_original_len, ec.target)
    vals = [r[str(L)][ec.score] for r in (res["tasks"][t]["by_length"] for t in retrieval) for L in past
            if r[str(L)] is not None]
    sink = res["probes"]["by_length"][str(train_len)] if "probes" in res else None
    res.update(score=float(np.mean(vals)) if vals else None, score_lengths=past,
               score_def=f"mean {ec.score} over {','.join(retrieval) or 'no tasks'} at {','.join(map(str, past))} ({where})",
               sink_rate=sink["sink_rate"] if sink else None,
               sink_strength=float(np.mean(sink["sink"])) if sink else None,
               target=target_outcomes(res.get("ppl"), past, vals))
    return dict(res, wall_s=time.time() - t0)


def score_lengths(lengths, train_len, original_len=0, target=0):
    """The lengths the outcomes are scored at, and why: those >= --target when given; else, for a
    context extension (original_len: its pretraining length), those >= its new training length (the
    target it was extended to); else those past the training length; all lengths when none qualifies."""
    if target:
        past, where = [L for L in lengths if L >= target], f"the target length(s) >= {target}"
    elif original_len:
        past, where = [L for L in lengths if L >= train_len], f"the extension's target length(s) >= {train_len}"
    else:
        past, where = [L for L in lengths if L > train_len], "past the training length"
    return (past, where) if past else (lengths, "no length qualifies: all lengths")


def target_outcomes(ppl, past, retrieval):
    """The outcomes at the score lengths (means over them): loss (ppl loss, nats/token), longppl_loss
    (log LongPPL = the mean key-token loss, nats), key_frac, and retrieval (the score, when retrieval
    tasks ran); None where not measured."""
    mean = lambda xs: float(np.mean(xs)) if xs and all(x is not None and math.isfinite(x) for x in xs) else None
    by = (ppl or {}).get("by_length", {})
    lp = ((ppl or {}).get("longppl") or {}).get("by_length", {})
    loss = mean([by.get(str(L)) for L in past]) if ppl else None
    return dict(lengths=past, loss=loss, longppl_loss=mean([math.log(lp[str(L)]["longppl"]) if str(L) in lp and lp[str(L)]["longppl"] else None
                                   for L in past]) if lp else None,
                key_frac=mean([lp[str(L)]["key_frac"] for L in past if str(L) in lp]) if lp else None,
                retrieval=float(np.mean(retrieval)) if retrieval else None)


def fmt(x, spec=".3f"):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def tick(bar):
    if bar is not None:
        bar.update(1)


def report(res):
    """The readable table printed at the end."""
    algo = res["train_config"]["algo"]
    lines = [f"{res['run']}  (training length {res['train_length']}" +
             (f", inputs {res['train_config']['algo_len'].replace(',', '-')})" if algo else ")")]
    Ls = [str(L) for L in res["lengths"]]
    row = lambda name, vals, spec=".3f": f"{name:<28}" + "".join(f"{fmt(v, spec):>9}" for v in vals)
    if algo:  # columns are input-length bins
        bins = res["tasks"][algo]["by_length"]
        lines.append(f"{'input length':<28}" + "".join(f"{bins[L]['lo']}-{bins[L]['hi']:<}".rjust(9) for L in Ls))
        lines.append(row(f"{algo} answer loss", [bins[L]["loss"] for L in Ls]))
    else:
        lines.append(row("length", res["lengths"], "d"))
    if res.get("ppl"):
        p = res["ppl"]
        lines.append(row("ppl loss (nats/token)", [p["by_length"][L] for L in Ls]))
        if "longppl" in p:
            lines.append(row("LongPPL", [p["longppl"]["by_length"][L]["longppl"] for L in Ls], ".2f"))
            lines.append(row("  key-token share", [p["longppl"]["by_length"][L]["key_frac"] for L in Ls], ".4f"))
    for t, r in res["tasks"].items():
        for m in ("exact", "rank") if t in TASKS else ("exact",):
            lines.append(row(f"{t} {m}", [(r["by_length"].get(L) or {}).get(m) for L in Ls]))
    if res.get("probes"):
        pb = res["probes"]["by_length"]
        lines.append(row(f"sink rate (eps {res['probes']['eps']})", [pb.get(L, {}).get("sink_rate") for L in Ls]))
        lines.append(row("attention entropy (mean)", [pb.get(L, {}).get("entropy_mean") for L in Ls]))
        lines.append(row("best retrieval-head score", [pb.get(L, {}).get("retrieval_max") for L in Ls]))
    if res.get("ppl"):
        for L in Ls[-1:]:
            bp = res["ppl"]["by_position"][L]
            lines.append(f"loss by position at {L}: " + "  ".join(f"{b['lo']}-{b['hi']}:{fmt(b['loss'], '.2f')}" for b in bp))
    t = res.get("target") or {}
    lines.append(f"at {','.join(map(str, t.get('lengths', [])))}: loss {fmt(t.get('loss'), '.4f')}, log LongPPL "
                 f"{fmt(t.get('longppl_loss'), '.4f')}, key-token share {fmt(t.get('key_frac'), '.4f')}")
    lines.append(f"short val loss {fmt(res['short']['val_loss'], '.4f')} at the training length; sink rate "
                 f"{fmt(res['sink_rate'])}; score {fmt(res['score'], '.4f')} = {res['score_def']}")
    return "\n".join(lines)


def main(argv=None):
    def body():
        ec = parse_args(argv)
        torch.manual_seed(ec.seed)
        res = evaluate_run(ec)
        out = ec.out or os.path.join(ec.run, "eval.json")
        write_json(out, res)
        if "grid_distance" in res:
            g = res["grid_distance"]
            print(f"{ec.run}: INT{g['bits']} grid distance {g['overall']:.4f} ({g['ckpt']} checkpoint, {g['clip']})")
        else:
            print(report(res))
        print(f"wrote {out} in {res['wall_s']:.0f} s")
    cli_main(body)


if __name__ == "__main__":
    main()
