"""
Positional encodings: what the lengen and posenc studies share (a run's encoding, the order of
the tables, the comparisons beside the reference, the verdict rule, the by-length panel).
studies/lengen.py and studies/posenc.py import it; it imports no study.
"""
from collections import defaultdict

import numpy as np

from model import MODEL_WIDE_POS, POS_KINDS
from studies.stats import MIN_SEEDS, decide_family
from studies.common import dget, f, num, parse_int, warn


# model flags that make up an algorithmic run's positional variant (its "encoding"); every other
# flag that varies between the runs of one task splits cells as the "variant"
ENCODING_KEYS = ("pos", "pos_pattern", "swan", "window", "global_every", "layer_pattern", "logn_scale",
                 "chunk_layers", "chunk_size", "chunk_topk", "rope_frac", "hope_cutoff", "expe_dims",
                 "expe_start", "expe_slope", "expe_on", "chunk_encoder", "chunk_bypass", "chunk_dense_train")
# chunk attention's ablations (arXiv 2510.17196's principles removed one at a time): flag -> (value, suffix)
CHUNK_ABLATIONS = {"chunk_encoder": ("linear", "-linear"), "chunk_bypass": (False, "-fused"),
                   "chunk_dense_train": (True, "-dense")}


def encoding(mc):
    """Positional variant of a run from its model_config: 'swan', 'chunk' (with '-linear', '-fused',
    '-dense' for each principle removed: CHUNK_ABLATIONS), or the --pos kind (with a sliding window or a
    per-layer pattern appended when set; 'expe-qk' for ExPE written into q and k, which a record
    without expe_on predates the embedding form and so is)."""
    if mc.get("swan"):
        return "swan"
    if str(mc.get("chunk_layers") or "").strip():
        return "chunk" + "".join(suf for k, (v, suf) in CHUNK_ABLATIONS.items()
                                 if k in mc and str(mc[k]).lower() == str(v).lower())
    name = str(mc.get("pos") or "rope")
    if name == "expe" and mc.get("expe_on", "qk") == "qk":
        name = "expe-qk"
    if mc.get("pos_pattern"):
        name += f"[{mc['pos_pattern']}]"
    if num(mc.get("window")):
        name += f"+window{int(num(mc['window']))}"
    return name


# the tables' order of the encodings: model.py's lists (ExPE in q and k after ExPE), then SWAN and chunk attention
ENCODING_ORDER = {e: i for i, e in enumerate(
    [e for k in POS_KINDS for e in ((k, "expe-qk") if k == "expe" else (k,))] + list(MODEL_WIDE_POS) + ["swan", "chunk"]
    + ["chunk" + suf for _, suf in CHUNK_ABLATIONS.values()])}


# Comparisons beside the reference (RoPE) that the write-ups read, each cell against one other encoding:
# ExPE against the sinusoidal encoding its paper compares with (arXiv 2509.19569), sinusoidal against
# NoPE (absolute positions against none), chunk attention against SWAN (the other design that keeps
# retrieval past the training length). In lengen_report and posenc_report as cells[].vs_baseline.
BASELINES = {"expe": "sinusoidal", "sinusoidal": "nope", "chunk": "swan"}


def per_seed(st):
    """The {seed: value} of a stats dict (stats.seed_stats); {} where a stored file lacks it (an analysis
    written before the per-seed values were kept), so that its hypothesis is labelled, never invented."""
    return (st or {}).get("per_seed") or {} if isinstance(st, dict) else {}


def seed_diffs(a, b):
    """{seed: a - b} over the seeds both per-seed dicts have a value for: the per-seed contrast of a
    paired comparison (stats.paired_hypothesis tests its mean against 0)."""
    return {s: a[s] - b[s] for s in a if s in b and a[s] is not None and b[s] is not None}


def family_verdict(h, reference, margin, lower_is_better=False):
    """The verdict of a decided family hypothesis h (stats.decide_family) comparing a cell with
    `reference`: better / worse when it passed the one rule after Holm within the study's family
    (adjusted p < BETTER_LEVEL over >= MIN_SEEDS seeds) and its mean gap is at least the margin;
    otherwise "not distinguishable", with the raw and adjusted p and, beside the null, the smallest
    effect the test would have detected (80% power at the family's strictest Holm step).
    lower_is_better: h compares losses (a negative difference is better)."""
    if h is None or not h["n"]:
        return f"no seeds in common with {reference}"
    if h["passed"] and abs(h["effect"]) >= margin:
        return f"{'better' if (h['effect'] < 0) == lower_is_better else 'worse'} than {reference}"
    if h["n"] < MIN_SEEDS:
        why = f"{h['n']} seeds, fewer than {MIN_SEEDS}"
    elif h.get("undefined"):  # every seed the same contrast: no t statistic
        return f"undefined against {reference} (Δ {h['effect']:+.3f} in every seed, sd 0: no test)"
    else:
        why = (f"p={f(h['p'], '.2g')}, Holm p={f(h['p_holm'], '.2g')}" + (f", |Δ| < {f(margin)}" if h["passed"] else "")
               + (f"; detectable: {f(h['mde'], '.3g')}" if h.get("mde") else ""))
    return f"not distinguishable from {reference} (Δ {h['effect']:+.3f}, {why})"


def exploratory(p):
    """A paired comparison (stats.paired_acc) outside the study's family: its numbers, no verdict word."""
    if p is None:
        return "exploratory: no seeds in common"
    return f"exploratory, outside the family (Δ {p['mean_diff']:+.3f}, raw paired t p={f(p['p'], '.2g')})"


class Family:
    """A study's family under construction: add(id, hypothesis) in a fixed order, decide() once (Holm
    over all of them, stats.decide_family), then get(id) gives each decided hypothesis (None for an id
    never added). The id names where the hypothesis came from in the report ("cells/copy/nope/score")."""

    def __init__(self):
        self.hyps, self.by_id = [], {}

    def add(self, hid, hyp):
        if hyp["n"] < 2:  # no p: not counted in the family's m, and said so
            hyp = dict(hyp, test=hyp["test"] + " (excluded: fewer than 2 per-seed values stored)")
        self.hyps.append(dict(hyp, id=hid))
        return hid

    def decide(self):
        fam = decide_family(self.hyps)
        self.by_id = {h["id"]: h for h in fam["hypotheses"]}
        return fam

    def get(self, hid):
        return self.by_id.get(hid)


def cells_by_seed(keyed, what):
    """{key: {seed: run}} from (key, run) pairs; a run repeating a (key, seed) is ignored with a
    warning naming `what` the key is made of."""
    cells, dups = {}, []
    for key, r in keyed:
        seed = r["config"].get("seed")
        if seed in cells.setdefault(key, {}):
            dups.append(r["run_name"])
            continue
        cells[key][seed] = r
    if dups:
        warn(f"{len(dups)} runs repeat a ({what}, seed) already seen and are ignored, e.g. {dups[0]}")
    return cells


def by_length_panel(ax, series, colour, clip):
    """One encoding panel: a line per cell (x, mean) with its seed band (mean +- sd; clipped to [0, 1]
    for exact match), one colour per encoding across panels (colour: a dict shared by the panels),
    crosses and a dashed line for a cell not learned in distribution.
    series: [(encoding, label, learned, [(x, {"mean", "sd"})])]."""
    for enc, label, learned, pts in series:
        pts = sorted((x, v) for x, v in pts if v["mean"] is not None)
        if not pts:
            continue
        x, m = [p[0] for p in pts], np.array([p[1]["mean"] for p in pts])
        sd = np.array([p[1]["sd"] or 0.0 for p in pts])
        col = colour.setdefault(enc, f"C{len(colour) % 10}")
        ax.plot(x, m, "o-" if learned else "x--", color=col, label=label + ("" if learned else " (not learned)"))
        lo, hi = (np.clip(m - sd, 0, 1), np.clip(m + sd, 0, 1)) if clip else (m - sd, m + sd)
        ax.fill_between(x, lo, hi, color=col, alpha=0.15)
    ax.legend(fontsize=6)


def hope_pairs(runs):
    """HoPE's rotary pairs per head and how many it left unrotated (train.py's run record "hope"),
    from the first run that has them; None for a cell without HoPE layers."""
    return next((r["hope"] for r in runs if isinstance(r.get("hope"), dict)), None)


def attn_by_distance(evals):
    """{L: {edges, mean [layer][bucket]}}: evaluate.py's mean attention weight per relative-distance
    bucket at length L (probes.by_length.L.attn_by_distance), averaged over the seeds that have it."""
    acc = defaultdict(list)
    for e in evals:
        for L, row in (dget(e, "probes", "by_length") or {}).items():
            v = row.get("attn_by_distance") if isinstance(row, dict) else None
            if isinstance(v, dict) and isinstance(v.get("mean"), list):
                acc[L].append(v)
    out = {}
    for L in sorted(acc, key=parse_int):
        vs = [v for v in acc[L] if v["edges"] == acc[L][0]["edges"] and np.shape(v["mean"]) == np.shape(acc[L][0]["mean"])]
        out[L] = {"edges": vs[0]["edges"], "n": len(vs), "mean": np.mean([v["mean"] for v in vs], 0).tolist()}
    return out
