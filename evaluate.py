"""
Offline long-context evaluation of a trained run (REFERENCE.md sections 8 and 9).

    python evaluate.py out/RUN                          # default suite -> out/RUN/eval.json
    python evaluate.py out/RUN --tasks ppl,passkey,niah_multikey --lengths 256,512,1024,4096
    python evaluate.py out/ALGO_RUN                     # a train.py --algo run: exact match at N, 2N, 3N

Text runs, at each length L (default: the training length times 1, 2, 4, 8, 16):
  ppl     loss of the val split's documents over windows of L tokens (optionally sliding), and by
          position in the window; LongPPL (arXiv 2410.23771) on the same windows
  tasks   synthetic retrieval (tasks.py) swept over lengths and needle depths, scored without free
          generation: teacher-forced log-prob, argmax exact match, rank among distractors
  probes  attention-sink rate (arXiv 2410.10781), attention entropy and retrieval-head scores
          (arXiv 2404.15574) from attention maps recomputed from each layer's own q, k
  short   in-distribution val loss at the training length (the short-context predictor)
Algorithmic runs: exact match on input lengths lo..N, N+1..2N, 2N+1..3N (train short, test long).

eval.json "score": the mean, over the retrieval tasks and the lengths past the training length,
of the rank accuracy (--score rank, the default: graded even for tiny models; chance = 1/5) or of
the exact match (--score exact). Algorithmic runs: mean exact match over the bins past N.
"sink_rate": the first-token sink rate on val text at the training length.
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

import train
from tasks import ALGO_TASKS, TASKS, algo_example_len, depth_grid, make_sample, rank_credit, score_answer
from train import UserError

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


def sink_importance(attn):
    """Gu et al. arXiv 2410.10781: importance of key k = mean over queries t >= k of A[t, k].
    attn [..., T, T] (rows = queries, causal: A[t, k] = 0 for k > t) -> [..., T]."""
    T = attn.shape[-1]
    return attn.sum(-2) / torch.arange(T, 0, -1, dtype=attn.dtype, device=attn.device)


def sink_rate(attn, eps=0.3):
    """Share of heads ([H, T, T] or [L, H, T, T]: every leading index is one head) whose
    first-token importance exceeds eps (0.3 as in arXiv 2410.10781)."""
    return (sink_importance(attn)[..., 0] > eps).float().mean().item()


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


def head_attention(q, k, start=0, window=0, slope=None):
    """Attention probabilities of the queries at positions start .. start+n-1 (q [n, D]) over keys
    0 .. start+n-1 (k [>= start+n, D]): softmax(q k^T / sqrt(D)), causal, keys (i - window, i] for
    windowed layers, ALiBi bias -slope * (i - j). -> [n, start + n]."""
    n, D = q.shape
    e = start + n
    s = (q @ k[:e].T) * D ** -0.5
    i = torch.arange(start, e, device=q.device)[:, None]
    j = torch.arange(e, device=q.device)[None]
    if slope is not None:
        s = s - slope * (i - j).to(s.dtype)
    ok = j <= i
    if window:
        ok &= j > i - window
    return torch.softmax(s.masked_fill(~ok, float("-inf")), -1)

# -----------------------------------------------------------------------------
# Model helpers


def forward(model, idx, targets=None):
    """model(idx) under the device's autocast; a length the model cannot run is a UserError."""
    try:
        with train.autocast(idx.device):
            return model(idx, targets, reduction="none") if targets is not None else model(idx)
    except ValueError as e:
        raise UserError(f"cannot evaluate {idx.shape[1]} tokens: {e}") from None


@torch.no_grad()
def rows_logprobs(model, idx, rows):
    """Log-probs [B, n, V] at rows [B, n] of idx [B, T]. A hook on the final norm keeps only those
    rows, so the head never builds [B, T, V] logits at long T; a model without ln_f (the tests'
    fake models) goes through its full logits."""
    pick = lambda out: out.gather(1, rows[..., None].expand(-1, -1, out.shape[-1]))
    if getattr(model, "ln_f", None) is None:
        return F.log_softmax(pick(forward(model, idx)[0]).float(), -1)
    hook = model.ln_f.register_forward_hook(lambda m, inp, out: pick(out))
    try:
        return F.log_softmax(forward(model, idx)[0].float(), -1)
    finally:
        hook.remove()

# -----------------------------------------------------------------------------
# Perplexity by context length and by position, and LongPPL


@torch.no_grad()
def doc_losses(model, docs, L, stride, max_tokens=0, edges=None, batch_tokens=8192, device="cpu", bar=None):
    """Per-token loss of each document over windows of L tokens, one every `stride` tokens. A target
    is scored by the first window that holds it (so stride < L scores the last `stride` tokens of
    each later window: every scored token has at least L - stride tokens of context).
    max_tokens > 0 stops after that many scored tokens (documents in order, from their start).
    -> (losses: one float array per document, loss of token j at [j], NaN where not scored;
        pos_sum, pos_cnt: loss sums and counts per position bucket over every position of every
        window, the loss-vs-position curve; position p = the loss of the token after p).
    """
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
    losses = [np.full(len(doc), np.nan) for doc in docs]
    nb = len(edges) - 1 if edges else 0
    pos_sum, pos_cnt = np.zeros(nb), np.zeros(nb, dtype=np.int64)
    per = max(1, batch_tokens // L)
    for i in range(0, len(wins), per):
        chunk = wins[i:i + per]
        xy = torch.from_numpy(np.stack([docs[d][s:s + L + 1] for d, s, _ in chunk]).astype(np.int64)).to(device)
        loss = forward(model, xy[:, :-1], xy[:, 1:])[1].float().cpu().numpy()
        for (d, s, first), row in zip(chunk, loss):
            losses[d][s + 1 + first:s + L + 1] = row[first:]
        if edges:
            sm, c = bucket_sums(loss.ravel(), np.tile(np.arange(L), len(chunk)), edges)
            pos_sum += sm
            pos_cnt += c
        if bar:
            bar.update(len(chunk) * cost(L, L))
    return losses, pos_sum, pos_cnt


def eval_ppl(model, docs, lengths, ec, evaluator=None, device="cpu", bar=None):
    """Loss by length and by position bucket, and LongPPL at every length. The evaluator (this model
    unless --evaluator) picks the key tokens from its own short- and full-context losses on the same
    windows; LongPPL is then this model's full-context loss on them."""
    out = dict(by_length={}, by_position={}, tokens={}, stride=ec.stride or "L", buckets=ec.buckets)
    runs = {}
    for L in lengths:
        stride = min(ec.stride, L) if ec.stride else L
        edges = bucket_edges(L, ec.buckets)
        losses, ps, pc = doc_losses(model, docs, L, stride, ec.ppl_tokens, edges, ec.batch_tokens, device, bar)
        runs[L] = (losses, stride)
        allv = np.concatenate(losses)
        n = int(np.isfinite(allv).sum())
        out["tokens"][str(L)] = n
        out["by_length"][str(L)] = float(np.nanmean(allv)) if n else None
        out["by_position"][str(L)] = [dict(lo=lo, hi=hi, loss=float(s / c) if c else None, n=int(c))
                                      for lo, hi, s, c in zip(edges, edges[1:], ps, pc)]
    if ec.no_longppl:
        return out
    S = ec.longppl_short
    # short context: windows of S tokens every S/2 (each token sees S/2 + 1 .. S tokens), over
    # the part of each document scored at some length
    ends = np.max([[int(np.flatnonzero(np.isfinite(l))[-1]) + 1 if np.isfinite(l).any() else 0 for l in runs[L][0]]
                   for L in lengths], axis=0)
    short = doc_losses(evaluator or model, [doc[:e + S + 1] if e else doc[:0] for doc, e in zip(docs, ends)],
                       S, max(S // 2, 1), batch_tokens=ec.batch_tokens, device=device, bar=bar)[0]
    short = np.concatenate([np.pad(s, (0, len(d) - len(s)), constant_values=np.nan) for s, d in zip(short, docs)])
    lp = out["longppl"] = dict(short=S, alpha=ec.alpha, beta=ec.beta, evaluator=ec.evaluator or "self", by_length={})
    for L in lengths:
        full, stride = runs[L]
        full_ev = full if evaluator is None else doc_losses(evaluator, docs, L, stride, ec.ppl_tokens, None,
                                                            ec.batch_tokens, device, bar)[0]
        f, fe = np.concatenate(full), np.concatenate(full_ev)
        ok = np.isfinite(f) & np.isfinite(fe) & np.isfinite(short)
        key = key_tokens(short[ok], fe[ok], ec.alpha, ec.beta)
        lp["by_length"][str(L)] = dict(longppl=long_ppl(f[ok], key), n_key=int(key.sum()),
                                       key_frac=float(key.mean()) if ok.any() else None)
    return out

# -----------------------------------------------------------------------------
# Synthetic retrieval tasks


@torch.no_grad()
def score_samples(model, samples, batch_tokens=8192, device="cpu", bar=None):
    """{"exact", "logprob", "rank"} per sample (tasks.score_answer and rank_credit, the rule of
    tasks.rank_answer). The true answer and its distractors share the prompt and the answer length,
    so a sample's candidates go through one batched forward (with other samples of the same
    prompt length): one pass of k+1 rows instead of k+2 passes."""
    groups = defaultdict(list)
    for i, s in enumerate(samples):
        groups[(len(s["prompt_ids"]), len(s["answer_ids"]))].append(i)
    out = [None] * len(samples)
    for (P, n), members in groups.items():
        cands = lambda s: [s["answer_ids"]] + list(s["distractor_ids"])
        per = max(1, batch_tokens // ((P + n) * len(cands(samples[members[0]]))))
        for c in range(0, len(members), per):
            chunk = members[c:c + per]
            seqs = [samples[i]["prompt_ids"] + a for i in chunk for a in cands(samples[i])]
            rows = torch.arange(P - 1, P - 1 + n, device=device).expand(len(seqs), n)
            lp = rows_logprobs(model, torch.tensor(seqs, device=device), rows)
            k = 0
            for i in chunk:
                sc = [score_answer(lp[k + j], 1, a) for j, a in enumerate(cands(samples[i]))]
                out[i] = dict(sc[0], rank=rank_credit([x["logprob"] for x in sc]))
                k += len(sc)
            if bar:
                bar.update(len(seqs) * cost(P + n, P + n))
    return out


def task_samples(task, enc, L, depths, n, seed, haystack):
    """n samples per depth; sample i has the same seed at every depth and length (controlled sweep).
    A length too short for the task (or a vocabulary too small for it) raises UserError."""
    try:
        return [make_sample(task, enc, L, d, f"{seed}-{task}-{i}", haystack) for d in depths for i in range(n)]
    except ValueError as e:  # tasks.py: too short for the task, or too few words in the vocabulary
        raise UserError(f"{task} at length {L}: {e or type(e).__name__}") from None


def mean_scores(rows):
    return dict({k: float(np.mean([r[k] for r in rows])) for k in ("exact", "rank", "logprob")}, n=len(rows))


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
            if bar:
                bar.update(cost(5 * ec.depths * ec.samples * L, L))
            continue
        scores = score_samples(model, samples, ec.batch_tokens, device, bar)
        out["by_length"][str(L)] = mean_scores(scores)
        by_d = defaultdict(list)
        for s, r in zip(samples, scores):
            by_d[f"{s['depth']:g}"].append(r)
        out["by_depth"][str(L)] = {d: mean_scores(r) for d, r in by_d.items()}
    return out

# -----------------------------------------------------------------------------
# Attention probes


@torch.no_grad()
def attention_probe(model, idx, rows=(), q_block=1024):
    """One sequence idx [1, T] -> dict of [n_layer, n_head] tensors: "sink" (first-token importance),
    "entropy" (mean over queries), "top1" ([layer, head, len(rows)] top-1 key at the given query rows),
    plus "pred" (the model's argmax at those rows).
    Attention probabilities are recomputed from each layer's own q, k: a pre-hook captures the
    attention input (the normed block input) and the position tables of the forward pass, then
    Attention.qkv -> head_attention with the layer's causal / window / ALiBi masks, one head and
    q_block queries at a time (memory O(q_block x T), no T x T map). Chunk layers (arXiv
    2510.17196): only their local windowed attention is probed, not the retrieval branch."""
    captured = []
    hooks = [b.attn.register_forward_pre_hook(lambda m, args: captured.append(args)) for b in model.blocks]
    try:
        logits = forward(model, idx)[0]
    finally:
        for h in hooks:
            h.remove()
    rows = torch.tensor(list(rows), dtype=torch.long, device=idx.device)
    T = idx.shape[1]
    nl, H = len(model.blocks), model.config.n_head
    sink, ent = torch.zeros(nl, H), torch.zeros(nl, H)
    top1 = torch.zeros(nl, H, len(rows), dtype=torch.long)
    for li, (block, (x, pe)) in enumerate(zip(model.blocks, captured)):
        attn = block.attn
        with train.autocast(idx.device):
            q, k = attn.qkv(x, pe)[:2]
        q, k = q[0].float(), k[0].float()
        group = H // k.shape[0]
        for h in range(H):
            slope = attn.slopes[h].item() if getattr(attn, "slopes", None) is not None else None
            col0, es = 0.0, 0.0
            for s in range(0, T, q_block):
                A = head_attention(q[h, s:s + q_block], k[h // group], s, attn.layer.window, slope)
                col0 += A[:, 0].sum().item()
                es += attention_entropy(A).sum().item()
                here = (rows >= s) & (rows < s + A.shape[0])
                if here.any():
                    top1[li, h, here.cpu()] = A[rows[here] - s].argmax(-1).cpu()
            sink[li, h], ent[li, h] = col0 / T, es / T  # sink_importance(A)[0]: all T queries see key 0
    pred = logits[0, rows].argmax(-1).cpu() if len(rows) else torch.zeros(0, dtype=torch.long)
    return dict(sink=sink, entropy=ent, top1=top1, pred=pred)


def needle_span(sample):
    """[start, end) of the queried needle: from needle_pos to the end of the first occurrence of
    the answer tokens after it (a RULER needle ends with its value)."""
    p, a, n = sample["prompt_ids"], sample["answer_ids"], sample["needle_pos"]
    for i in range(n, len(p) - len(a) + 1):
        if p[i:i + len(a)] == a:
            return n, i + len(a)
    return n, n


def eval_probes(model, enc, val, lengths, ec, device="cpu", bar=None):
    """Per length: sink rate and first-token importance [layer][head], attention entropy (on
    probe_samples windows of val text), retrieval-head scores (on probe_samples niah_single samples)."""
    out = dict(eps=ec.eps, by_length={})
    for L in lengths:
        wins = [np.asarray(val[i * L:(i + 1) * L], dtype=np.int64) for i in range(ec.probe_samples)]
        wins = [w for w in wins if len(w) == L] or [np.resize(np.asarray(val, dtype=np.int64), L)]
        sinks, ents = [], []
        for w in wins:
            r = attention_probe(model, torch.from_numpy(w)[None].to(device))
            sinks.append(r["sink"])
            ents.append(r["entropy"])
            if bar:
                bar.update(cost(L, L))
        sinks, ent = torch.stack(sinks), torch.stack(ents).mean(0)
        row = dict(sink_rate=(sinks > ec.eps).float().mean().item(), sink=sinks.mean(0).tolist(),
                   entropy=ent.tolist(), entropy_mean=ent.mean().item())
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
            if bar:
                bar.update(cost(L, L))
        if scores:
            ret = torch.stack(scores).mean(0)
            row.update(retrieval=ret.tolist(), retrieval_max=ret.max().item())
        out["by_length"][str(L)] = row
    return out

# -----------------------------------------------------------------------------
# Train short / test long on algorithmic tasks (REFERENCE.md section 9)


def algo_bins(lo, lengths):
    """Upper ends N, 2N, 3N -> input-length bins (lo, N), (N+1, 2N), (2N+1, 3N)."""
    return [(a, b) for a, b in zip([lo] + [l + 1 for l in lengths[:-1]], lengths)]


def eval_algo(model, tc, lengths, n, device="cpu", bar=None):
    """Exact match and answer loss per input-length bin with train.evaluate_algo; the evaluation
    block grows to fit the longest example (positions past training are the point), with the
    training's random offsets."""
    lo, N = train.algo_lengths(tc)
    out = dict(train_len=[lo, N], by_length={})
    for a, b in algo_bins(lo, lengths):
        if a > b:
            raise UserError(f"--lengths must increase and start at >= {lo}, got {','.join(map(str, lengths))}")
        need = algo_example_len(tc.algo, b, tc.algo_offset) - 1
        cfg = dataclasses.replace(tc, block_size=max(tc.block_size, need))
        try:
            r = train.evaluate_algo(model, cfg, device, n=n, lengths=(a, b))
        except ValueError as e:
            raise UserError(f"cannot evaluate input lengths {a}-{b} ({need} tokens): {e}") from None
        out["by_length"][str(b)] = dict(lo=a, hi=b, exact=r["acc"], loss=r["loss"], n=n)
        if bar:
            bar.update(1)
    return out

# -----------------------------------------------------------------------------
# Run loading, the suite, the report


@dataclasses.dataclass
class EvalConfig:
    run: str = ""               # run folder (holds ckpt.pt)
    tasks: str = ""             # comma-separated: ppl and tasks.py TASKS ('' = DEFAULT_TASKS); algo runs: their task
    lengths: str = ""           # context lengths ('' = training length x 1,2,4,8,16); algo runs: bin ends N,2N,3N
    depths: int = 0             # needle depths per length, evenly spaced in [0, 1] (0 = 3; --quick: 1, i.e. 0.5)
    samples: int = 2            # samples per (task, length, depth)
    haystack: str = "repeat"    # repeat (filler sentences) | needle (distractor needles) | corpus (val text)
    seed: int = 0               # sample seed: same keys and values at every length and depth
    score: str = "rank"         # metric of the top-level score: rank | exact
    stride: int = 0             # ppl sliding windows: score the last `stride` tokens of each window (0 = L)
    ppl_tokens: int = 0         # scored tokens per length, from the start of the val documents (0 = 32768; --quick 8192)
    buckets: str = "log2"       # ppl position buckets: log2 | N equal-width buckets
    no_longppl: bool = False    # skip LongPPL
    longppl_short: int = 64     # LongPPL short context (tokens)
    alpha: float = 2.0          # LongPPL: minimum loss drop short -> full context
    beta: float = 2.0           # LongPPL: maximum full-context loss
    evaluator: str = ""         # LongPPL key tokens from another run's checkpoint ('' = this model)
    no_probes: bool = False     # skip the attention probes
    probe_samples: int = 1      # val text windows per length for sink rate / entropy
    eps: float = 0.3            # sink threshold (arXiv 2410.10781)
    algo_samples: int = 256     # examples per length bin for algorithmic runs
    logn: bool = False          # SWAN log-n query scaling at evaluation (model.config.logn_scale = True)
    quick: bool = False         # cheaper, for sweeps: 1 depth (0.5), 8192 ppl tokens
    ckpt: str = "ckpt.pt"       # checkpoint file in the run folder
    out: str = ""               # output path ('' = RUN/eval.json)
    batch_tokens: int = 8192    # tokens per forward pass
    max_len: int = 65536        # sanity limit on lengths
    device: str = "auto"        # auto | cpu | cuda | cuda:N
    quiet: bool = False         # no progress bar


def parse_args(argv=None):
    p = train.OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run")
    helps = train.field_help(EvalConfig)
    for f in dataclasses.fields(EvalConfig)[1:]:
        if f.type in (bool, "bool"):
            p.add_argument(f"--{f.name}", action="store_true", help=helps.get(f.name))
        else:
            p.add_argument(f"--{f.name}", type={"int": int, "float": float, "str": str}.get(f.type, f.type),
                           default=f.default, help=f"{helps.get(f.name, '')} (default {f.default!r})")
    ec = EvalConfig(**vars(p.parse_args(argv)))
    ec.depths = ec.depths or (1 if ec.quick else 3)
    ec.ppl_tokens = ec.ppl_tokens or (8192 if ec.quick else 32768)
    return ec


def int_list(s, name):
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"malformed --{name} {s!r}: comma-separated integers") from None


def load_run(path, ckpt_name="ckpt.pt", logn=False):
    """(model, train config, model config dict) of a run folder."""
    if not os.path.isdir(path):
        raise UserError(f"run folder not found: {path}")
    ckpt = train.load_checkpoint(os.path.join(path, ckpt_name))
    model = train.model_from_checkpoint(ckpt, **({"logn_scale": True} if logn else {}))
    names = {f.name for f in dataclasses.fields(train.TrainConfig)}
    tc = train.TrainConfig(**{k: v for k, v in ckpt.get("train_config", {}).items() if k in names})
    return model.eval(), tc, ckpt["model_config"]


def check(ec, tc, mcfg, tasks, lengths):
    """Every bad input is a one-line UserError before any work."""
    if ec.haystack not in ("repeat", "needle", "corpus"):
        raise UserError(f"unknown --haystack {ec.haystack!r}: repeat | needle | corpus")
    if ec.score not in ("rank", "exact"):
        raise UserError(f"unknown --score {ec.score!r}: rank | exact")
    if min(ec.depths, ec.samples, ec.probe_samples, ec.longppl_short - 1, ec.algo_samples, ec.batch_tokens) < 1:
        raise UserError("--depths, --samples, --probe_samples, --algo_samples, --batch_tokens must be >= 1, "
                        "--longppl_short >= 2")
    if ec.stride < 0 or (ec.buckets != "log2" and not ec.buckets.isdigit()):
        raise UserError("--stride must be >= 0 and --buckets log2 or a positive integer")
    if not lengths:
        raise UserError("--lengths is empty")
    if tc.algo:
        bad = [t for t in tasks if t != tc.algo]
        if bad:
            raise UserError(f"{ec.run} was trained on --algo {tc.algo}: --tasks can only be {tc.algo}, not {bad[0]!r}")
        return
    known = ["ppl"] + list(TASKS)
    bad = [t for t in tasks if t not in known]
    if bad:
        hint = " (an algorithmic task: only for runs trained with --algo)" if bad[0] in ALGO_TASKS else ""
        raise UserError(f"unknown task {bad[0]!r}{hint}; choose from {', '.join(known)}")
    for L in lengths:
        if not 2 <= L <= ec.max_len:
            raise UserError(f"length {L} outside [2, --max_len {ec.max_len}]")
    if mcfg["pos"] == "learned" and max(lengths) > mcfg["block_size"]:
        raise UserError(f"pos=learned has only block_size={mcfg['block_size']} positions: cannot evaluate "
                        f"length {max(lengths)}")


def short_val_loss(model, corpus, block, ec, device):
    """In-distribution val loss at the training length: train.evaluate on the whole val split. The
    run's result.json holds this very number (same deterministic function, and log-n scaling is
    off within the training length), so a finished run's final checkpoint reuses it."""
    path = os.path.join(ec.run, "result.json")
    if ec.ckpt == "ckpt.pt" and os.path.exists(path):
        try:
            return dict(val_loss=float(json.load(open(path))["metrics"]["val_loss"]), block_size=block,
                        source="result.json")
        except (ValueError, KeyError, TypeError, OSError):
            pass
    return dict(val_loss=train.evaluate(model, corpus.val, corpus.token_bytes, block, device=device)["loss"],
                block_size=block, source="evaluated")


def cost(tokens, L):
    """Progress-bar work units of a forward over `tokens` tokens at length L (attention grows with L)."""
    return tokens * (1 + L / 2048)


def evaluate_run(ec):
    t0 = time.time()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if ec.device == "auto" else ec.device
    model, tc, mcfg = load_run(ec.run, ec.ckpt, ec.logn)
    model.to(device)
    train_len = mcfg["block_size"]
    if tc.algo:
        N = train.algo_lengths(tc)[1]
        tasks = [t for t in ec.tasks.split(",") if t.strip()] or [tc.algo]
        lengths = int_list(ec.lengths, "lengths") or [N, 2 * N, 3 * N]
    else:
        tasks = [t for t in (ec.tasks or DEFAULT_TASKS).split(",") if t.strip()]
        lengths = sorted(set(int_list(ec.lengths, "lengths") or [train_len * f for f in DEFAULT_FACTORS]))
    check(ec, tc, mcfg, tasks, lengths)
    res = dict(run=ec.run, checkpoint=os.path.join(ec.run, ec.ckpt), train_length=train_len,
               eval_config=dataclasses.asdict(ec), tasks_evaluated=tasks, lengths=lengths,
               model_config=mcfg, train_config=dataclasses.asdict(tc), versions=train.versions(), device=device)
    from tqdm import tqdm
    if tc.algo:
        with tqdm(total=len(lengths), disable=ec.quiet, desc=tc.algo, dynamic_ncols=True) as bar:
            algo = eval_algo(model, tc, lengths, ec.algo_samples, device, bar)
        past = [v["exact"] for v in algo["by_length"].values() if v["lo"] > algo["train_len"][1]]
        short = train.evaluate_algo(model, tc, device)
        res.update(tasks={tc.algo: algo}, score=float(np.mean(past)) if past else None,
                   score_def="mean exact match over the input-length bins past the training maximum",
                   sink_rate=None, ppl=None, short=dict(val_loss=short["loss"], val_acc=short["acc"]))
        return dict(res, wall_s=time.time() - t0)

    corpus = train.load_corpus(tc.data, tc.tokenizer, tc.vocab_size, tc.cache_dir, tc.val_frac)
    enc, n_train = corpus.enc, corpus.meta["n_train_tokens"]
    # val documents, without their trailing end-of-text separator
    docs = [np.asarray(corpus.val[d["start"] - n_train:d["end"] - n_train - 1])
            for d in corpus.meta["docs"] if d["split"] == "val"]
    haystack = {"repeat": None, "needle": "needle", "corpus": corpus.val}[ec.haystack]
    evaluator = None
    if ec.evaluator:
        evaluator, etc, _ = load_run(ec.evaluator, "ckpt.pt")
        if (etc.tokenizer, etc.vocab_size) != (tc.tokenizer, tc.vocab_size):
            raise UserError(f"--evaluator {ec.evaluator} uses another tokenizer ({etc.tokenizer}/{etc.vocab_size})")
        evaluator.to(device)
    retrieval = [t for t in tasks if t in TASKS]
    probe_lengths = sorted(set(lengths) | {train_len})
    ppl_tok = lambda L: min(ec.ppl_tokens, sum(max(len(d) - 1, 0) for d in docs))
    total = sum(cost(ppl_tok(L), L) * (2 if evaluator else 1) for L in lengths) * ("ppl" in tasks)
    total += sum(cost(5 * ec.depths * ec.samples * L, L) for L in lengths) * len(retrieval)
    total += 0 if ec.no_probes else sum(cost(2 * ec.probe_samples * L, L) for L in probe_lengths)
    total += 0 if ec.no_longppl or "ppl" not in tasks else cost(2 * ec.ppl_tokens, ec.longppl_short)
    bar = tqdm(total=round(total), disable=ec.quiet, dynamic_ncols=True, unit="tok",
               bar_format="{l_bar}{bar}| {elapsed}<{remaining}")
    if "ppl" in tasks:
        bar.set_description("ppl")
        res["ppl"] = eval_ppl(model, docs, lengths, ec, evaluator, device, bar)
    res["tasks"] = {}
    for t in retrieval:
        bar.set_description(t)
        res["tasks"][t] = eval_task(model, enc, t, lengths, ec, haystack, device, bar)
    if not ec.no_probes:
        bar.set_description("probes")
        res["probes"] = eval_probes(model, enc, corpus.val, probe_lengths, ec, device, bar)
    bar.close()
    res["short"] = short_val_loss(model, corpus, train_len, ec, device)
    past = [L for L in lengths if L > train_len] or lengths
    vals = [r[str(L)][ec.score] for r in (res["tasks"][t]["by_length"] for t in retrieval) for L in past
            if r[str(L)] is not None]
    where = "past the training length" if past[0] > train_len else "none is past the training length"
    res.update(score=float(np.mean(vals)) if vals else None, score_lengths=past,
               score_def=f"mean {ec.score} over {','.join(retrieval) or 'no tasks'} at {','.join(map(str, past))} ({where})",
               sink_rate=res["probes"]["by_length"][str(train_len)]["sink_rate"] if "probes" in res else None)
    return dict(res, wall_s=time.time() - t0)


def fmt(x, spec=".3f"):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


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
    lines.append(f"short val loss {fmt(res['short']['val_loss'], '.4f')} at the training length; sink rate "
                 f"{fmt(res['sink_rate'])}; score {fmt(res['score'], '.4f')} = {res['score_def']}")
    return "\n".join(lines)


def main(argv=None):
    def body():
        ec = parse_args(argv)
        torch.manual_seed(ec.seed)
        res = evaluate_run(ec)
        out = ec.out or os.path.join(ec.run, "eval.json")
        train.write_json(out, clean(res))
        print(report(res))
        print(f"wrote {out} in {res['wall_s']:.0f} s")
    train.cli(body)


def clean(x):
    """NaN / inf anywhere -> None, so eval.json is strict JSON."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


if __name__ == "__main__":
    main()
