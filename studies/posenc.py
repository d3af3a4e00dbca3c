"""
The posenc study: positional encodings trained short, evaluated long on text and retrieval. Loss,
LongPPL and retrieval by evaluation length per positional encoding, and chunk attention's
ablations. Reads top to bottom: its report, its markdown, its plots, then the confirmatory waves'
outcomes and gates (the functions studies/waves/*.toml name).
"""
import copy
import math
import os
from collections import defaultdict

import numpy as np

from studies.stats import BETTER_LEVEL, MIN_SEEDS, paired_acc, paired_hypothesis, seed_stats
from studies.common import (_read_json, dget, f, family_md, figures, lineage_root, no_data, num, paired_cell, parse_int,
                            pm, run_kind, table)
from studies.encodings import (BASELINES, CHUNK_ABLATIONS, ENCODING_ORDER, Family, attn_by_distance, by_length_panel,
                               cells_by_seed, encoding, exploratory, family_verdict, hope_pairs, per_seed,
                               seed_diffs)


POSENC_FLAGS = ("pos", "pos_pattern", "swan", "chunk_layers")  # a text run given one of these is a posenc run
RETRIEVAL = ("exact", "rank", "logprob")  # per task and length (eval.json tasks); logprob where it was stored


def per_length(ev, lengths, get):
    """{L: seed_stats} of get(eval, L) over the evaluations {seed: eval.json}."""
    return {str(L): seed_stats({s: num(get(e, str(L))) for s, e in ev.items()}) for L in lengths}


def retrieval_of(ev, lengths):
    """{task: {metric: {L: seed_stats}}} of the evaluations' retrieval tasks: RETRIEVAL's metrics (the answer's
    log-probability only where an evaluation stored it)."""
    tasks_ = sorted({t for e in ev.values() for t, v in (e.get("tasks") or {}).items() if isinstance(v, dict)})
    has = lambda t, m: m != "logprob" or any(isinstance(v, dict) and m in v for e in ev.values()
                                             for v in (dget(e, "tasks", t, "by_length") or {}).values())
    return {t: {m: per_length(ev, lengths, lambda e, L, t=t, m=m: dget(e, "tasks", t, "by_length", L, m))
                for m in RETRIEVAL if has(t, m)} for t in tasks_}


def posenc_report(runs, gate=0.9, margin=0.05, reference="rope"):
    """Positional-variant text runs (a --pos, --pos_pattern, --swan or --chunk_layers flag given;
    train short, evaluate long with evaluate.py), one cell per (training, encoding, training length)
    over seeds; training is "text" or "task_mix:<task_list>" (task-trained runs, for retrieval).
    Per cell: loss and LongPPL by evaluation length (eval.json ppl), retrieval exact match, rank and the
    answer's log-probability by length (eval.json tasks), the score, each as mean/sd/per seed; where they
    exist, the attention-by-distance probe per seed, and the same evaluation without log-n scaling
    (eval_nologn.json beside eval.json: `nologn`); the text runs' extensions: `conversions`. Retrieval cells are gated like
    lengen's: learned when the mean exact match of every task at the training length is >= `gate`.
    Against the `reference` encoding's cell of the same training and length, paired over seeds at each
    length past training: the loss difference, and for learned retrieval cells the exact-match
    difference; the verdicts (loss past training, score) come from the study's family
    (posenc_decide: Holm within it, the one rule, and a mean difference of at least `margin`)."""
    sel = [r for r in runs if run_kind(r) == "lm" and isinstance(r.get("eval"), dict)
           and any(k in r["config"]["model"] for k in POSENC_FLAGS)]
    if not sel:
        return None
    def key(r):
        c = r["config"]
        training = f"task_mix:{c.get('task_list')}" if (num(c.get("task_mix")) or 0) > 0 else "text"
        return training, encoding({**r["model_config"], **c["model"]}), c.get("block_size")
    cells = cells_by_seed([(key(r), r) for r in sel], "training, encoding, length")
    out = {}
    for (training, enc, block), by_seed in cells.items():
        seeds = sorted(by_seed, key=lambda s: (num(s) is None, num(s) or 0))
        ev = {s: by_seed[s]["eval"] for s in seeds}
        lengths = sorted({parse_int(L) for s in seeds for L in (dget(ev[s], "ppl", "by_length") or {})} |
                         {parse_int(L) for s in seeds for t in (ev[s].get("tasks") or {}).values()
                          if isinstance(t, dict) for L in (t.get("by_length") or {})})
        lengths = [L for L in lengths if L != math.inf]
        per_len = lambda get: per_length(ev, lengths, get)
        retrieval = retrieval_of(ev, lengths)
        tasks_ = sorted(retrieval)
        train_len = num(block)
        at_train = [retrieval[t]["exact"].get(str(int(train_len)), {}).get("mean") if train_len else None
                    for t in tasks_]
        learned = (all(x is not None and x >= gate for x in at_train) if tasks_ else None)
        out[(training, enc, block)] = {
            "training": training, "encoding": enc, "train_len": int(train_len) if train_len else None,
            "n": len(seeds), "seeds": seeds,
            "val_loss": seed_stats({s: num(by_seed[s]["metrics"].get("val_loss")) for s in seeds}),
            "loss_by_length": per_len(lambda e, L: dget(e, "ppl", "by_length", L)),
            "longppl_by_length": per_len(lambda e, L: dget(e, "ppl", "longppl", "by_length", L, "longppl")),
            # the share of key tokens behind each LongPPL: 0 everywhere (barely trained models) explains an empty LongPPL
            "key_frac_by_length": per_len(lambda e, L: dget(e, "ppl", "longppl", "by_length", L, "key_frac")),
            "retrieval": retrieval, "learned": learned, "hope_pairs": hope_pairs(by_seed.values()),
            "attn_by_distance": attn_by_distance(ev.values()),
            "score": seed_stats({s: num(ev[s].get("score")) for s in seeds}),
            "score_def": next((ev[s].get("score_def") for s in seeds if isinstance(ev[s].get("score_def"), str)), None),
            "vs_reference": None, "verdict": None}
        probes = {s: {L: {"edges": v["edges"], "mean": v["mean"]} for L, v in attn_by_distance([ev[s]]).items()}
                  for s in seeds}
        if any(probes.values()):  # the probe per seed (the U statistic is a per-seed outcome)
            out[(training, enc, block)]["attn_by_distance_per_seed"] = {s: p for s, p in probes.items() if p}
        alt = {s: _read_json(os.path.join(by_seed[s].get("_dir") or "", "eval_nologn.json")) for s in seeds}
        alt = {s: e for s, e in alt.items() if e}
        if alt:  # the same checkpoints evaluated without log-n scaling (wave 5: SWAN)
            out[(training, enc, block)]["nologn"] = {"loss_by_length": per_length(alt, lengths, lambda e, L: dget(
                e, "ppl", "by_length", L)), "retrieval": retrieval_of(alt, lengths)}
    for (training, enc, block), c in out.items():
        ref = out.get((training, reference, block))
        if ref is None or enc == reference:
            c["verdict"] = "reference" if enc == reference else f"no {reference} cell to compare with"
            continue
        past = [L for L in c["loss_by_length"] if c["train_len"] and parse_int(L) > c["train_len"]]
        cmp = {"loss": {L: paired_acc(c["loss_by_length"][L]["per_seed"], ref["loss_by_length"][L]["per_seed"])
                        for L in past if L in ref["loss_by_length"]}, "exact": {}, "score": None}
        if c["learned"] is False:
            c["verdict"] = "excluded: retrieval not learned in distribution"
        elif c["learned"] and not ref["learned"]:
            c["verdict"] = f"no comparison: {reference} retrieval not learned in distribution"
        elif c["learned"]:
            for t in c["retrieval"]:
                for L, st in c["retrieval"][t]["exact"].items():
                    if parse_int(L) > c["train_len"] and L in ref["retrieval"].get(t, {}).get("exact", {}):
                        cmp["exact"][f"{t}@{L}"] = paired_acc(st["per_seed"], ref["retrieval"][t]["exact"][L]["per_seed"])
            cmp["score"] = paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"])  # verdict: posenc_decide
        c["vs_reference"] = cmp
    for (training, enc, block), c in out.items():
        base = out.get((training, BASELINES.get(enc), block))
        c["vs_baseline"] = posenc_baseline(c, base) if base else None
    order = ENCODING_ORDER
    ordered = sorted(out.values(), key=lambda c: (c["training"], c["train_len"] or 0,
                                                 order.get(c["encoding"], len(order)), c["encoding"]))
    pe = {"gate": {"metric": "retrieval exact match at the training length", "threshold": gate},
          "reference": reference, "margin": margin, "cells": ordered,
          "excluded": [{"training": c["training"], "encoding": c["encoding"], "n": c["n"]}
                       for c in ordered if c["learned"] is False],
          "chunk_ablation": chunk_ablation(out)}
    conv = conversions(runs)
    return posenc_decide(dict(pe, conversions=conv) if conv else pe)


def conversions(runs):
    """posenc.conversions: the extensions (extend.py) of text-trained posenc runs, one row per (the root's
    encoding, lineage method, factor, steps) over seeds (each its root's): the loss by evaluation length and the
    root's training length (wave 5's SWAN conversion and its continued-training control)."""
    groups = defaultdict(dict)
    for r in runs:
        root = lineage_root(r, runs)[0] if run_kind(r) == "extension" and isinstance(r.get("eval"), dict) else None
        if root is None or root is r or (num(root["config"].get("task_mix")) or 0) > 0 \
                or not any(k in root["config"]["model"] for k in POSENC_FLAGS):
            continue
        lin = r["lineage"]
        key = (encoding({**root["model_config"], **root["config"]["model"]}), str(lin.get("method")),
               num(lin.get("factor")), num(lin.get("iters")), num(root["config"].get("block_size")))
        groups[key][root["config"].get("seed")] = r
    rows = []
    for (enc, method, factor, iters, block), by_seed in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ev = {s: r["eval"] for s, r in by_seed.items()}
        lengths = sorted({parse_int(L) for e in ev.values() for L in (dget(e, "ppl", "by_length") or {})})
        rows.append({"parent": enc, "method": method, "factor": factor, "iters": int(iters) if iters else None,
                     "train_len": int(block) if block else None, "n": len(ev),
                     "seeds": sorted(ev, key=lambda s: (num(s) is None, num(s) or 0)),
                     "loss_by_length": per_length(ev, lengths, lambda e, L: dget(e, "ppl", "by_length", L))})
    return rows


def mean_loss(by_length, lengths):
    """{seed: the mean loss over the given evaluation lengths} of a cell's loss_by_length (None for a
    seed missing one); the seeds are the per-seed keys, as stored (a JSON file's are text)."""
    seeds = dict.fromkeys(s for L in lengths for s in per_seed(by_length[L]))
    by = {s: [per_seed(by_length[L]).get(s) for L in lengths] for s in seeds}
    return {s: float(np.mean(v)) if v and None not in v else None for s, v in by.items()}


def past_lengths(by_length, other, train_len):
    """The evaluation lengths past training where both loss_by_length dicts have a mean."""
    return [L for L in by_length if train_len and parse_int(L) > train_len and by_length[L]["mean"] is not None
            and (other.get(L) or {}).get("mean") is not None]


def posenc_baseline(c, base):
    """posenc cells[].vs_baseline: a cell against its BASELINES encoding of the same training and length,
    paired over seeds: the loss at every length (training length included), the mean loss past
    training (loss_past, with the verdict on it, lower is better), and, when both learned retrieval,
    the score; None when there is neither."""
    lens = [L for L in c["loss_by_length"] if c["loss_by_length"][L]["mean"] is not None
            and (base["loss_by_length"].get(L) or {}).get("mean") is not None]  # text-trained cells only
    past = past_lengths(c["loss_by_length"], base["loss_by_length"], c["train_len"])
    loss_past = (paired_acc(mean_loss(c["loss_by_length"], past), mean_loss(base["loss_by_length"], past))
                 if past else None)
    score = paired_acc(c["score"]["per_seed"], base["score"]["per_seed"]) if c["learned"] and base["learned"] else None
    if not lens and score is None:
        return None
    return {"baseline": base["encoding"],
            "loss": {L: paired_acc(c["loss_by_length"][L]["per_seed"], base["loss_by_length"][L]["per_seed"]) for L in lens},
            "loss_past": loss_past, "loss_verdict": None,  # the verdicts: posenc_decide
            "score": score, "score_verdict": None}


def chunk_ablation(cells, full="chunk"):
    """posenc.chunk_ablation: each cell with one of chunk attention's principles removed
    (CHUNK_ABLATIONS) against the full chunk model's cell of the same training and length, paired over
    seeds. Text-trained cells: the loss at each length past training and its mean over those lengths
    (loss_past; lower is better). Retrieval-trained cells: the retrieval score and exact match per task
    and length past training, compared only when both learned retrieval in distribution (the full
    model's ability is shown before an ablation's effect on it is read); an ablation that did not learn
    it is reported as such. The verdicts of the compared rows: posenc_decide, from the family."""
    rows = []
    for (training, enc, block), c in cells.items():
        ref = cells.get((training, full, block))
        flag = next((k for k, (_, suf) in CHUNK_ABLATIONS.items() if enc == full + suf), None)
        if flag is None or ref is None:
            continue
        cmp = {"score": None, "exact": {}, "loss": {}, "loss_past": None}
        if training == "text":  # loss by length past training, paired with the full chunk model's
            past = past_lengths(c["loss_by_length"], ref["loss_by_length"], c["train_len"])
            cmp["loss"] = {L: paired_acc(c["loss_by_length"][L]["per_seed"], ref["loss_by_length"][L]["per_seed"])
                           for L in past}
            # negative: lower without it; the verdict: posenc_decide
            cmp["loss_past"] = (paired_acc(mean_loss(c["loss_by_length"], past), mean_loss(ref["loss_by_length"], past))
                                if past else None)
            verdict = None if past else "no lengths past training"
        elif ref["learned"] is not True:
            verdict = f"no comparison: {full} retrieval not learned in distribution"
        elif c["learned"] is not True:
            verdict = "retrieval not learned in distribution without this principle"
        else:
            for t, r in c["retrieval"].items():
                for L, st in r["exact"].items():
                    if parse_int(L) > (c["train_len"] or 0) and L in ref["retrieval"].get(t, {}).get("exact", {}):
                        cmp["exact"][f"{t}@{L}"] = paired_acc(st["per_seed"], ref["retrieval"][t]["exact"][L]["per_seed"])
            cmp["score"] = paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"])
            verdict = None  # posenc_decide
        rows.append({"ablation": flag, "value": CHUNK_ABLATIONS[flag][0], "encoding": enc, "training": training,
                     "train_len": c["train_len"], "n": c["n"], "learned": c["learned"], "full_learned": ref["learned"],
                     "retrieval": c["retrieval"], "score": c["score"], "full_score": ref["score"],
                     "loss_by_length": c["loss_by_length"], "full_loss_by_length": ref["loss_by_length"],
                     "vs_full": cmp, "verdict": verdict})
    order = list(CHUNK_ABLATIONS)
    return sorted(rows, key=lambda r: (r["training"], r["train_len"] or 0, order.index(r["ablation"])))


def posenc_decide(pe, full="chunk"):
    """The posenc section with its declared family decided (stats.decide_family: Holm within it) and every
    verdict field derived from the family: a pure function of the section (a fresh analysis and analyze.py
    --refamily decide alike). The family, each paired over seeds: every encoding but the chunk ablations
    against the reference, on the mean text loss past training (lower is better) and, both learned, on the
    retrieval score; every cell against its BASELINES encoding (the same two); every chunk ablation
    against the full chunk model (loss past training; score when both learned). Exploratory, outside the
    family: the loss and exact match at each single length, and the chunk ablations against the reference."""
    if not pe:
        return pe
    pe = copy.deepcopy(pe)
    ref, margin = pe["reference"], pe["margin"]
    cells = {(c["training"], c["encoding"], c["train_len"]): c for c in pe["cells"]}
    ablated = {full + suf for _, suf in CHUNK_ABLATIONS.values()}
    fam, ids = Family(), {}

    def add(key, claim, a_loss, b_loss, train_len, a_score, b_score, scored):
        """The loss-past and score hypotheses of one comparison (a against b), where they apply."""
        past = past_lengths(a_loss, b_loss, train_len)
        if past:
            ids[key + ("loss",)] = fam.add(f"{claim}/loss", paired_hypothesis(
                f"{claim}: mean text loss past training", seed_diffs(mean_loss(a_loss, past), mean_loss(b_loss, past))))
        if scored:
            ids[key + ("score",)] = fam.add(f"{claim}/score", paired_hypothesis(
                f"{claim}: retrieval score (exact match past training)", seed_diffs(per_seed(a_score), per_seed(b_score))))

    for i, c in enumerate(pe["cells"]):
        name = f"{c['training']}: {c['encoding']}"
        r = cells.get((c["training"], ref, c["train_len"]))
        if r is not None and c["encoding"] != ref and c["encoding"] not in ablated:
            add(("ref", i), f"{name} vs {ref}", c["loss_by_length"], r["loss_by_length"], c["train_len"],
                c["score"], r["score"], (c["vs_reference"] or {}).get("score") is not None)
        if c.get("vs_baseline"):
            b = cells[(c["training"], c["vs_baseline"]["baseline"], c["train_len"])]
            add(("base", i), f"{name} vs {b['encoding']}", c["loss_by_length"], b["loss_by_length"], c["train_len"],
                c["score"], b["score"], c["vs_baseline"]["score"] is not None)
    for i, row in enumerate(pe.get("chunk_ablation") or []):
        add(("ablation", i), f"{row['training']}: {row['encoding']} vs {full}", row["loss_by_length"],
            row["full_loss_by_length"], row["train_len"] if row["training"] == "text" else None,
            row["score"], row["full_score"], row["vs_full"]["score"] is not None)
    pe["family"] = fam.decide()

    def verdict(key, other, lower_is_better=False):
        return family_verdict(fam.get(ids[key]), other, margin, lower_is_better) if key in ids else None

    for i, c in enumerate(pe["cells"]):
        cmp = c["vs_reference"]
        if cmp is not None:
            r = cells[(c["training"], ref, c["train_len"])]
            past = past_lengths(c["loss_by_length"], r["loss_by_length"], c["train_len"])
            cmp["loss_past"] = (paired_acc(mean_loss(c["loss_by_length"], past), mean_loss(r["loss_by_length"], past))
                                if past else None)
            c["loss_verdict"] = (exploratory(cmp["loss_past"]) if c["encoding"] in ablated and past
                                 else verdict(("ref", i, "loss"), ref, lower_is_better=True))
            if cmp.get("score") is not None:
                c["verdict"] = (exploratory(cmp["score"]) if c["encoding"] in ablated
                                else verdict(("ref", i, "score"), ref))
        else:
            c["loss_verdict"] = None
        b = c.get("vs_baseline")
        if b:
            b["loss_verdict"] = verdict(("base", i, "loss"), b["baseline"], lower_is_better=True)
            b["score_verdict"] = verdict(("base", i, "score"), b["baseline"])
    for i, row in enumerate(pe.get("chunk_ablation") or []):
        v = verdict(("ablation", i, "loss"), full, lower_is_better=True) or verdict(("ablation", i, "score"), full)
        row["verdict"] = v or row["verdict"]
    return pe


def posenc_md(pe):
    if not (pe and pe["cells"]):
        return no_data("posenc")
    ref, gate = pe["reference"], f(pe['gate']['threshold'])
    how = ("Mean ± sd over seeds (evaluate.py). Loss: nats/token on the held-out plays in windows of L tokens; "
           f"Δ loss {ref}: mean over the lengths past training of the paired difference from {ref}'s (negative: "
           f"lower loss). Retrieval: exact match of the answer (rank among 5 in brackets); learned: mean exact "
           f"match at the training length >= {gate}; Δ {ref}: the score (mean exact match past training) minus "
           f"{ref}'s, paired over seeds (z, seeds higher/lower); verdict (loss and retrieval): better/worse when the "
           f"paired t test over >= {MIN_SEEDS} seeds passes Holm-adjusted p < {f(BETTER_LEVEL)} within the study's "
           f"family (the table at the end) and |Δ| >= {f(pe['margin'])}, else not distinguishable, with the effect it "
           f"could have detected; the chunk ablations against {ref} are exploratory (outside the family).")
    L = ["## 6. Positional encodings: train short, evaluate long", "", how, ""]
    for training in dict.fromkeys(c["training"] for c in pe["cells"]):
        cs = [c for c in pe["cells"] if c["training"] == training]
        lens = sorted({L for c in cs for L in c["loss_by_length"] if c["loss_by_length"][L]["mean"] is not None},
                      key=parse_int)
        if lens:
            L += [f"**{training}-trained: loss by length**", ""]
            rows = []
            for c in cs:
                rows.append([c["encoding"], str(c["n"]), f(c["train_len"])] + [pm(c["loss_by_length"].get(L))
                                                                            for L in lens]
                            + [pm(c["longppl_by_length"].get(lens[-1]), ".2f"),
                               paired_cell((c["vs_reference"] or {}).get("loss_past")),
                               c.get("loss_verdict") or ("reference" if c["encoding"] == ref else "-")])
            L += table(["encoding", "seeds", "train len"] + [f"loss@{x}" for x in lens]
                       + [f"LongPPL@{lens[-1]}", f"Δ loss {ref} past training", "loss verdict"], rows) + [""]
        for t in sorted({t for c in cs for t in c["retrieval"]}):
            tl = sorted({L for c in cs for L in c["retrieval"].get(t, {}).get("exact", {})}, key=parse_int)
            L += [f"**{training}-trained: {t} retrieval**", ""]
            rows = []
            for c in cs:
                r = c["retrieval"].get(t, {})
                p = (c["vs_reference"] or {}).get("score")
                rows.append([c["encoding"], str(c["n"])]
                            + [pm(r.get("exact", {}).get(L)) + f" ({f((r.get('rank', {}).get(L) or {}).get('mean'), '.2f')})"
                               for L in tl]
                            + ["-" if c["learned"] is None else "yes" if c["learned"] else "**no**", pm(c["score"]),
                               paired_cell(p),
                               c["verdict"]])
            L += table(["encoding", "seeds"] + [f"@{x}" for x in tl] + ["learned", "score", f"Δ {ref}", "verdict"],
                       rows) + [""]
    base = [c for c in pe["cells"] if c.get("vs_baseline")]
    if base:
        L += ["Beside the reference (`vs_baseline`, paired over seeds, in the family; loss: mean past training, "
              "lower is better):", ""]
        for c in base:
            b = c["vs_baseline"]
            L += [f"- {c['training']}: {c['encoding']} vs {b['baseline']}: " + "; ".join(
                x for x in (f"loss {paired_cell(b['loss_past'])}, {b['loss_verdict']}" if b["loss_verdict"] else "",
                            f"score {paired_cell(b['score'])}, {b['score_verdict']}" if b["score_verdict"] else "") if x)]
        L += [""]
    if pe["excluded"]:
        L += ["Retrieval cells excluded by the gate: " + ", ".join(f"{x['training']}/{x['encoding']}"
                                                                for x in pe["excluded"]) + ".", ""]
    return (L + chunk_ablation_md(pe.get("chunk_ablation"))
            + family_md(pe.get("family"), "Verdicts: posenc (the declared family)"))


def chunk_ablation_md(rows):
    if not rows:
        return []
    L = ["### Chunk attention: one principle removed at a time (arXiv 2510.17196)", "",
         "Text-trained: loss by length of each ablated model (the full chunk model's in brackets), the paired "
         "difference of the mean loss past training (negative: lower without the principle). Retrieval-trained: "
         "exact match by length, the score (mean exact match past training) beside the full chunk model's and "
         "their paired difference. z and seeds higher/lower in brackets; verdict by the one rule (paired t test "
         f"over >= {MIN_SEEDS} seeds, Holm-adjusted within the study's family), with the detectable effect beside "
         "a null.", ""]
    out = []
    for r in rows:
        if r["training"] == "text":
            by = " / ".join(f"@{L} {f(st['mean'], '.3f')} ({f((r['full_loss_by_length'].get(L) or {}).get('mean'), '.3f')})"
                            for L, st in r["loss_by_length"].items())
            out.append([r["encoding"], f"{r['ablation']}={r['value']}", r["training"], str(r["n"]), by or "-",
                        "-", "-", paired_cell(r["vs_full"]["loss_past"]), r["verdict"]])
            continue
        ex = " / ".join(f"{t}@{L} {f(st['mean'], '.2f')}" for t, v in r["retrieval"].items()
                        for L, st in v["exact"].items())
        out.append([r["encoding"], f"{r['ablation']}={r['value']}", r["training"], str(r["n"]), ex or "-",
                    pm(r["score"]), pm(r["full_score"]), paired_cell(r["vs_full"]["score"]), r["verdict"]])
    return L + table(["encoding", "removed", "training", "seeds", "by length", "score", "full chunk score",
                      "Δ chunk", "verdict"], out) + [""]


def posenc_plots(rep):
    """posenc_length.png: per training (text / task mix) the loss and each retrieval task's exact match
    by evaluation length, one line per encoding."""
    pe = rep["posenc"]
    if not (pe and pe["cells"]):
        return []
    panels = []  # (title, ylabel, [(cell, {length: stats})])
    for training in dict.fromkeys(c["training"] for c in pe["cells"]):
        cs = [c for c in pe["cells"] if c["training"] == training]
        if any(v["mean"] is not None for c in cs for v in c["loss_by_length"].values()):
            panels.append((f"{training}: loss", "loss (nats/token)", [(c, c["loss_by_length"]) for c in cs]))
        for t in sorted({t for c in cs for t in c["retrieval"]}):
            panels.append((f"{training}: {t}", "exact match", [(c, c["retrieval"][t]["exact"])
                                                               for c in cs if t in c["retrieval"]]))
    fig, axs = figures(len(panels), 4.5)
    colour = {}
    for ax, (title, ylabel, series) in zip(axs[0], panels):
        by_length_panel(ax, [(c["encoding"], c["encoding"], c["learned"] is not False,
                              [(parse_int(L), v) for L, v in by_len.items()]) for c, by_len in series],
                        colour, clip=ylabel == "exact match")
        tl = next((c["train_len"] for c, _ in series if c["train_len"]), None)
        if tl:
            ax.axvline(tl, color="grey", ls=":", lw=1)
        ax.set(title=title, xlabel="evaluation length (tokens)", ylabel=ylabel, xscale="log")
        lengths = sorted({parse_int(L) for _, by_len in series for L in by_len})
        ax.set_xticks(lengths, [str(L) for L in lengths])  # the evaluated lengths, not 2x10^2 ...
        ax.minorticks_off()
    return [("posenc_length.png", fig)]


# -----------------------------------------------------------------------------
# The confirmatory waves' outcomes and gates (studies/waves/*.toml `outcome_fn` / `gate_fn` = "posenc.NAME", with
# their `args`), from a report: {"per_seed": {seed: value}}, with "gated_out": the seeds a gate dropped.

def _cell(rep, training, enc):
    return next((c for c in (rep.get("posenc") or {}).get("cells", [])
                 if c["training"] == training and c["encoding"] == enc), None)


def _passkey_at(c, L):
    return c["retrieval"]["passkey"]["exact"].get(str(L), {}).get("per_seed", {})


def text_past(rep, enc, ref):
    """Per seed the mean text loss past the training length (256-1024), enc minus ref (nats)."""
    a, b = _cell(rep, "text", enc), _cell(rep, "text", ref)
    if a is None or b is None:
        return {"per_seed": {}}

    def past(c):
        out = defaultdict(list)
        for L, v in c["loss_by_length"].items():
            if int(L) > c["train_len"]:
                for s, x in v["per_seed"].items():
                    out[s].append(x)
        return {s: float(np.mean(v)) for s, v in out.items()}
    pa, pb = past(a), past(b)
    return {"per_seed": {s: pa[s] - pb[s] for s in pa if s in pb}}


def passkey_past(rep, enc, ref, level, gate_both=True):
    """Per seed passkey exact match past the training length, enc minus ref; a seed is kept when ref's run (and,
    with gate_both, enc's) reaches `level` at the training length."""
    a, b = _cell(rep, "task_mix:passkey", enc), _cell(rep, "task_mix:passkey", ref)
    if a is None or b is None:
        return {"per_seed": {}}
    ga, gb = _passkey_at(a, a["train_len"]), _passkey_at(b, b["train_len"])
    keep, drop = {}, []
    for s, v in a["score"]["per_seed"].items():
        if s not in b["score"]["per_seed"]:
            continue
        if (gb.get(s) or 0) >= level and (not gate_both or (ga.get(s) or 0) >= level):
            keep[s] = v - b["score"]["per_seed"][s]
        else:
            drop.append(s)
    return {"per_seed": keep, "gated_out": [str(s) for s in sorted(drop)]}


def passkey_pair_gate(rep, enc, ref, level):
    """Wave 1's gate: the seeds whose passkey runs of enc and of ref both reach `level` exact match at the
    training length."""
    ok = []
    for e in (enc, ref):
        c = _cell(rep, "task_mix:passkey", e)
        if c is None:
            return set()
        ok.append({str(s) for s, v in _passkey_at(c, c["train_len"]).items() if v is not None and v >= level})
    return ok[0] & ok[1]


# Wave 5's outcomes: a graded passkey outcome, the attention-by-distance U statistic, log-n scaling, the conversion

def passkey_graded(rep, enc, ref, level, metric="rank", gate_both=True):
    """Per seed the mean over the lengths past training of (enc - ref) in a graded passkey metric ("rank": the
    rank credit; "logprob": the answer's log-probability); a seed is kept when ref's run (and, with gate_both,
    enc's) reaches `level` exact match at the training length (as passkey_past)."""
    a, b = _cell(rep, "task_mix:passkey", enc), _cell(rep, "task_mix:passkey", ref)
    if a is None or b is None:
        return {"per_seed": {}, "gated_out": []}
    ma, mb = (c["retrieval"]["passkey"].get(metric) or {} for c in (a, b))
    past = [L for L in ma if int(L) > a["train_len"] and L in mb]
    seeds = set.intersection(*(set(ma[L]["per_seed"]) & set(mb[L]["per_seed"]) for L in past)) if past else set()
    ga, gb = _passkey_at(a, a["train_len"]), _passkey_at(b, b["train_len"])
    ok = {s for s in seeds if (gb.get(s) or 0) >= level and (not gate_both or (ga.get(s) or 0) >= level)}
    return {"per_seed": {s: float(np.mean([ma[L]["per_seed"][s] - mb[L]["per_seed"][s] for L in past])) for s in ok},
            "gated_out": [str(s) for s in sorted(seeds - ok, key=str)]}


def uniform_buckets(edges):
    """The mean weight per (query, key) pair in each distance bucket (evaluate.by_distance_buckets) under uniform
    causal attention at the probe's length T = edges[-1]: query i spreads 1/(i + 1) over its i + 1 keys, so the
    pairs at distance d carry H_T - H_d in all over T - d pairs. A distant pair comes only from a late query, which
    has more keys: position-blind attention already falls with distance (U -0.27 at 128 and at 1024, raw)."""
    T = int(edges[-1])
    h = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, T + 1))])  # h[k] = H_k, the k-th harmonic number
    d = np.arange(T)
    mass, pairs = h[T] - h[d], (T - d).astype(float)
    return [float(mass[a:b].sum() / pairs[a:b].sum()) for a, b in zip(edges[:-1], edges[1:])]


def u_statistic(edges, mean, part="far"):
    """The U statistic of one attention-by-distance profile (evaluate.py: the mean attention weight per log2
    distance bucket [layer][bucket]), averaged over layers and divided bucket by bucket by uniform causal
    attention's (uniform_buckets: uniform attention gives 0 whatever its length): part "far", U = ln(the farthest
    bucket's / the smallest of the middle buckets', those from distance 4 up to the farthest; > 0: the far end
    rises above the middle, a U); part "local", D = ln(the distance-1 bucket's / the same middle minimum; > 0: the
    weight decays from the nearest key to the middle, a local decay). None without a middle bucket or with a zero
    weight."""
    w = np.mean(np.asarray(mean, dtype=float), 0) / np.asarray(uniform_buckets(edges))
    mid = [w[j] for j in range(len(w) - 1) if edges[j] >= 4]
    top = w[-1] if part == "far" else (w[list(edges).index(1)] if 1 in edges else 0.0)
    return float(np.log(top / min(mid))) if mid and top > 0 and min(mid) > 0 else None


def _u(rep, enc, length, part="far"):
    """{seed: U} (or D: part "local") of enc's text cell at one evaluation length (attn_by_distance_per_seed)."""
    c = _cell(rep, "text", enc) or {}
    us = {s: u_statistic(v[str(length)]["edges"], v[str(length)]["mean"], part)
          for s, v in (c.get("attn_by_distance_per_seed") or {}).items() if str(length) in v}
    return {s: u for s, u in us.items() if u is not None}


def u_shape(rep, enc, length):
    """hope-1: per seed the local decay D and the far rise U of enc's text model at `length`, two contrasts
    (decisions.directional_iut: both > 0)."""
    return {"contrasts": {"local decay": _u(rep, enc, length, "local"), "far rise": _u(rep, enc, length)}}


def u_shape_diff(rep, enc, ref, length):
    """hope-2: per seed U(enc) - U(ref) at `length` (the far rise)."""
    a, b = _u(rep, enc, length), _u(rep, ref, length)
    return {"per_seed": {s: a[s] - b[s] for s in a if s in b}}


def logn_gain(rep, enc, training, metric, level=0.9, tol=1e-6):
    """swan-4: per seed the mean past the training length of the outcome with log-n scaling (eval.json) minus
    without it (eval_nologn.json, the same checkpoint): text "loss" (-: the scaling helps) or a passkey metric
    ("logprob", "exact"; +: it helps). A seed is gated out when its two evaluations differ at the training
    length by more than tol (the scaling is inactive there: else they are not one model's) or, for passkey,
    when it misses `level` exact match at the training length."""
    c = _cell(rep, training, enc)
    alt = (c or {}).get("nologn")
    if not alt:
        return {"per_seed": {}, "gated_out": []}
    pick = lambda x: x["loss_by_length"] if training == "text" else x["retrieval"]["passkey"][metric]
    on, off, T = pick(c), pick(alt), str(c["train_len"])
    past = [L for L in on if int(L) > c["train_len"] and L in off]
    seeds = set.intersection(*(set(on[L]["per_seed"]) & set(off[L]["per_seed"]) for L in past)) if past else set()
    at = lambda x, s: (x.get(T) or {}).get("per_seed", {}).get(s)
    gate = {} if training == "text" else _passkey_at(c, c["train_len"])
    ok = {s for s in seeds if at(on, s) is not None and at(off, s) is not None and abs(at(on, s) - at(off, s)) <= tol
          and (training == "text" or (gate.get(s) or 0) >= level)}
    return {"per_seed": {s: float(np.mean([on[L]["per_seed"][s] - off[L]["per_seed"][s] for L in past])) for s in ok},
            "gated_out": [str(s) for s in sorted(seeds - ok, key=str)]}


def conversion_gain(rep, parent, method, control, iters):
    """swan-6: per seed the mean text loss past the training length of the parent converted by `method` and trained
    on for `iters` steps minus the same parent trained on for as many steps without conversion (`control`,
    extend.py --method none --factor 1): posenc.conversions."""
    rows = {r["method"]: r for r in (rep.get("posenc") or {}).get("conversions") or []
            if r["parent"] == parent and r["iters"] == iters}
    a, b = rows.get(method), rows.get(control)
    if a is None or b is None:
        return {"per_seed": {}}
    past = [L for L in a["loss_by_length"] if int(L) > a["train_len"] and L in b["loss_by_length"]]
    mean = lambda r: {s: float(np.mean([r["loss_by_length"][L]["per_seed"].get(s, math.nan) for L in past]))
                      for s in r["loss_by_length"][past[0]]["per_seed"]} if past else {}
    ma, mb = mean(a), mean(b)
    return {"per_seed": {s: ma[s] - mb[s] for s in ma if s in mb and not math.isnan(ma[s] - mb[s])}}
