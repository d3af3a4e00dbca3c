"""
The lengen study: length generalisation on algorithmic tasks (train short, test long). Exact
match by input length per (task, encoding) over seeds, gated in distribution, and the
training-length threshold sweep. Reads top to bottom: its report, its markdown, its plots, then the
confirmatory waves' outcomes and gates (the functions studies/waves/*.toml name).
"""
import copy
import os
from collections import defaultdict

import numpy as np

from studies.stats import BETTER_LEVEL, MIN_SEEDS, paired_acc, paired_hypothesis, seed_stats
from studies.common import (dget, f, family_md, figures, no_data, num, paired_cell, parse_int, pm, run_kind, table,
                     variant_fields)
from studies.encodings import (BASELINES, ENCODING_KEYS, ENCODING_ORDER, Family, by_length_panel, cells_by_seed,
                               encoding, family_verdict, hope_pairs, per_seed, seed_diffs)


GRADED = ("loss", "token_acc")  # per bin beside exact match: the answer-token loss and accuracy (evaluate.eval_algo)


def lengen_report(runs, gate=0.9, margin=0.05, reference="rope"):
    """Algorithmic-task runs (train.py --algo), one cell per (task, encoding, variant) over seeds:
    in-distribution exact match (metrics.val_acc), exact match per input-length bin (beside it the bin's
    GRADED outcomes, where eval.json has them) and the score (mean exact match past N) from eval.json,
    each as mean, sd and per seed. The gate: a cell whose
    mean in-distribution exact match is below `gate` has not learned the task; it is listed under
    "excluded" and gets no extrapolation verdict. A learned cell is compared with the `reference`
    encoding's cell of the same task and variant (when that one is learned too), paired over seeds,
    per bin past N and on the score; the verdicts come from the study's family (lengen_decide: Holm within
    it, the one rule, and a mean difference of at least `margin`)."""
    algo = [r for r in runs if run_kind(r) == "algo"]
    if not algo:
        return None
    by_task = defaultdict(list)
    for r in algo:
        if threshold_run(r):  # the threshold sweep's own runs: lengen.threshold only
            continue
        by_task[str(r["config"]["algo"])].append(r)
    keyed = []
    for task in sorted(by_task):
        rs = by_task[task]
        fields = [{k: v for k, v in variant_fields(r["config"]).items()
                   if (k.startswith("model.") and k[6:] not in ENCODING_KEYS)
                   or k in ("algo_len", "algo_offset", "block_size", "iters")} for r in rs]
        varying = sorted({k for f in fields for k in f if len({g.get(k) for g in fields}) > 1})
        keyed += [((task, encoding({**r["model_config"], **r["config"]["model"]}),
                    ",".join(f"{k}={f.get(k)}" for k in varying)), r) for r, f in zip(rs, fields)]
    cells = cells_by_seed(keyed, "task, encoding, variant")
    out = {}
    for (task, enc, variant), by_seed in cells.items():
        seeds = sorted(by_seed, key=lambda s: (num(s) is None, num(s) or 0))
        bins, train_len = {}, None
        for s in seeds:
            r = by_seed[s]
            ev = dget(r, "eval", "tasks", task) or {}
            tl = ev.get("train_len") if isinstance(ev, dict) else None
            train_len = train_len or (tl if isinstance(tl, list) and len(tl) == 2 else None)
            by_len = ev.get("by_length") if isinstance(ev, dict) else None
            for b, v in (by_len.items() if isinstance(by_len, dict) else ()):
                if isinstance(v, dict) and num(v.get("exact")) is not None:
                    row = bins.setdefault(b, {"lo": v.get("lo"), "hi": parse_int(b), "per_seed": {},
                                              **{m: {} for m in GRADED}})
                    row["per_seed"][s] = num(v["exact"])
                    for m in GRADED:  # graded beside exact match, where the evaluation stored it
                        if num(v.get(m)) is not None:
                            row[m][s] = num(v[m])
        if train_len is None:
            try:
                train_len = [int(x) for x in str(by_seed[seeds[0]]["config"].get("algo_len")).split(",")]
            except ValueError:
                train_len = None
        in_dist = seed_stats({s: num(by_seed[s]["metrics"].get("val_acc")) for s in seeds})
        score = seed_stats({s: num(dget(by_seed[s], "eval", "score")) for s in seeds})
        by_length = {}
        for b in sorted(bins, key=parse_int):
            st = seed_stats(bins[b]["per_seed"])
            by_length[b] = {"lo": bins[b]["lo"], "hi": bins[b]["hi"], **st,
                            **{m: seed_stats(bins[b][m]) for m in GRADED if bins[b][m]}}
        learned = in_dist["mean"] is not None and in_dist["mean"] >= gate
        held = None  # the longest length up to which every bin's mean stays at the gate
        if learned:
            for b in by_length.values():
                if b["mean"] is None or b["mean"] < gate:
                    break
                held = b["hi"]
        out[(task, enc, variant)] = {
            "task": task, "encoding": enc, "variant": variant, "n": len(seeds), "seeds": seeds,
            "train_len": train_len, "in_dist": in_dist, "learned": learned, "by_length": by_length,
            "hope_pairs": hope_pairs(by_seed.values()),
            "score": score, "held_to": held, "vs_reference": None, "verdict": None}
    for key, c in out.items():
        task, enc, variant = key
        ref = out.get((task, reference, variant))
        if not c["learned"]:
            c["verdict"] = "excluded: not learned in distribution"
        elif enc == reference:
            c["verdict"] = "reference"
        elif ref is None:
            c["verdict"] = f"no {reference} cell to compare with"
        elif not ref["learned"]:
            c["verdict"] = f"no comparison: {reference} not learned in distribution"
        else:
            c["vs_reference"] = lengen_paired(c, ref)  # its verdict: lengen_decide, from the family
        base = out.get((task, BASELINES.get(enc), variant))
        c["vs_baseline"] = None
        if base and c["learned"] and base["learned"]:
            c["vs_baseline"] = dict(lengen_paired(c, base), baseline=base["encoding"], verdict=None)
    order = ENCODING_ORDER
    ordered = sorted(out.values(), key=lambda c: (c["task"], c["variant"], order.get(c["encoding"], len(order)),
                                                 c["encoding"]))
    excluded = [{"task": c["task"], "encoding": c["encoding"], "variant": c["variant"], "n": c["n"],
                 "in_dist_mean": c["in_dist"]["mean"]} for c in ordered if not c["learned"]]
    return lengen_decide({
        "gate": {"metric": "metrics.val_acc", "threshold": gate,
                 "rule": "a cell enters the extrapolation verdict when the mean over seeds of its "
                         "in-distribution exact match is >= threshold"},
        "reference": reference, "margin": margin, "cells": ordered, "excluded": excluded,
        "threshold": lengen_threshold(algo, gate)})


def lengen_paired(c, ref):
    """A lengen cell against another of the same task and variant, paired over seeds: the score and
    each input-length bin past the training length."""
    N = c["train_len"][1] if c["train_len"] else None
    return {"score": paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"]),
            "by_length": {b: paired_acc(v["per_seed"], ref["by_length"][b]["per_seed"]) for b, v in c["by_length"].items()
                          if N is not None and v["lo"] is not None and v["lo"] > N and b in ref["by_length"]}}



THRESHOLD_DIR = "threshold"  # sweep.sh puts the threshold sweep's runs in OUT/lengen/threshold/
# The order of the training-length thresholds we read the LG-bounds abstract to predict ("richer tasks
# need longer training"), ranked by how much of the input one output token must combine: copy reads one
# earlier token (found by matching), sort compares one token with all the others (a count), and the
# parity scratchpad composes a running state over all the input.
THRESHOLD_PREDICTED = ("copy", "sort", "parity_scratch")


def threshold_run(r):
    return os.path.basename(os.path.dirname(os.path.normpath(r.get("_dir") or ""))) == THRESHOLD_DIR


def bin_at(by_len, hi):
    """Exact match of the eval.json by_length bin ending at input length hi, or None."""
    v = (by_len or {}).get(str(hi)) if isinstance(by_len, dict) else None
    return num(v.get("exact")) if isinstance(v, dict) else None


def lengen_threshold(algo, gate=0.9):
    """lengen.threshold: per (task, n_layer, encoding) trained at >= 2 maximum input lengths N (the
    threshold sweep's runs and the main grid's), over seeds: in-distribution exact match and exact match
    in the bins ending at 2N and 3N; the threshold itself is decided with the family (lengen_decide)."""
    groups = defaultdict(lambda: defaultdict(dict))
    for r in algo:
        task = str(r["config"]["algo"])
        try:
            N = int(str(r["config"].get("algo_len")).split(",")[-1])
        except ValueError:
            continue
        key = (task, num(r["model_config"].get("n_layer")), encoding({**r["model_config"], **r["config"]["model"]}),
               num(r["config"].get("iters")))  # the step budget: a row per budget (wave 2 crosses N with it)
        groups[key][N][r["config"].get("seed")] = r
    rows = []
    for (task, n_layer, enc, iters), by_n in sorted(groups.items(), key=lambda kv: (
            kv[0][0], kv[0][1] or 0, ENCODING_ORDER.get(kv[0][2], 99), kv[0][3] or 0)):
        if len(by_n) < 2:
            continue
        pts = []
        for N in sorted(by_n):
            rs = by_n[N]
            by_len = {s: dget(r, "eval", "tasks", task, "by_length") for s, r in rs.items()}
            pts.append({"train_len": N, "n": len(rs), "seeds": sorted(rs, key=lambda s: (num(s) is None, num(s) or 0)),
                        "in_dist": seed_stats({s: num(r["metrics"].get("val_acc")) for s, r in rs.items()}),
                        "at_2x": seed_stats({s: bin_at(by_len[s], 2 * N) for s in rs}),
                        "at_3x": seed_stats({s: bin_at(by_len[s], 3 * N) for s in rs})})
        rows.append({"task": task, "n_layer": int(n_layer) if n_layer else None, "encoding": enc,
                     "iters": int(iters) if iters else None, "by_train_len": pts})
    if not rows:
        return None
    return {"rule": THRESHOLD_RULE.format(gate=gate), "gate": gate, "predicted_order": list(THRESHOLD_PREDICTED),
            "rows": rows}


THRESHOLD_RULE = (
    "a row (task, layers, encoding) is excluded when no trained N reaches mean in-distribution exact match >= "
    "{gate}. Otherwise its family test, at the longest trained N, is the one-sample t test over seeds of each "
    "seed's min(in-distribution, N+1..2N exact match) - {gate}: passed above the gate, the threshold is the "
    "smallest N from which every trained N' has every seed >= {gate} in distribution and at N'+1..2N' "
    "(left-censored, '<= N', when that is the shortest N trained); passed below the gate, there is none up to "
    "the longest N (right-censored: it may lie above); not passed, undecided")


def threshold_holds(p, gate):
    """The per-seed gate at one training length: every seed (>= MIN_SEEDS of them) has exact match >=
    gate in distribution and in the bin N+1..2N."""
    ind, a2 = per_seed(p["in_dist"]), per_seed(p["at_2x"])
    seeds = [s for s in ind if ind[s] is not None and a2.get(s) is not None]
    return len(seeds) >= MIN_SEEDS and all(ind[s] >= gate and a2[s] >= gate for s in seeds)


def threshold_contrast(p, gate):
    """{seed: min(in-distribution, N+1..2N exact match) - gate} at one training length: positive when
    that seed holds the gate on both."""
    ind, a2 = per_seed(p["in_dist"]), per_seed(p["at_2x"])
    return {s: min(ind[s], a2[s]) - gate for s in ind if ind[s] is not None and a2.get(s) is not None}


def threshold_decision(row, h, gate):
    """(threshold, status) of a threshold row from its decided family hypothesis h (None: excluded)."""
    pts = sorted(row["by_train_len"], key=lambda p: p["train_len"])
    if h is None:
        return None, f"excluded: not learned in distribution (mean >= {gate:g}) at any N"
    if h["n"] < 2:
        return None, f"undecided at N={pts[-1]['train_len']} (fewer than 2 per-seed values stored)"
    if not h["passed"]:
        return None, (f"undecided at N={pts[-1]['train_len']} (mean {h['effect']:+.3f} from the gate, "
                      f"p={f(h['p'], '.2g')}, Holm p={f(h['p_holm'], '.2g')})")
    if h["direction"] < 0:
        return None, f"none up to N={pts[-1]['train_len']} (right-censored: it may lie above)"
    thr = None
    for p in reversed(pts):
        if not threshold_holds(p, gate):
            break
        thr = p["train_len"]
    if thr is None:
        return None, f"none by the per-seed gate at N={pts[-1]['train_len']} (a seed below {gate:g})"
    return thr, (f"<= {thr} (left-censored: the shortest N trained)" if thr == pts[0]["train_len"] else str(thr))


def measured_order(rows):
    """{n_layer: {ordered: [[tasks of one threshold], ...] lowest first, none: [tasks without a threshold
    (none up to the longest N, or undecided)], excluded: [tasks]}}. Tied tasks stay in one group, sorted
    by name: the order is what was measured, never broken toward the prediction."""
    out = {}
    for depth in sorted({r["n_layer"] for r in rows if r["n_layer"]}):
        rs = [r for r in rows if r["n_layer"] == depth]
        excluded = [r for r in rs if r["status"].startswith("excluded")]
        out[str(depth)] = {
            "ordered": [sorted(r["task"] for r in rs if r["threshold"] == t)
                        for t in sorted({r["threshold"] for r in rs if r["threshold"] is not None})],
            "none": sorted(r["task"] for r in rs if r["threshold"] is None and r not in excluded),
            "excluded": sorted(r["task"] for r in excluded)}
    return out


def lengen_decide(lg):
    """The lengen section with its declared family decided (stats.decide_family: Holm within it) and every
    verdict field derived from the family: a pure function of the section, so that a fresh analysis and
    analyze.py --refamily (a stored analysis.json) decide alike. The family: each learned cell against the
    reference (the score, paired over seeds), each learned cell against its BASELINES encoding (the score),
    each threshold row learned at some N at its longest N (threshold_contrast). Per-bin comparisons
    (vs_reference.by_length) are exploratory."""
    if not lg:
        return lg
    lg = copy.deepcopy(lg)
    ref, margin, gate = lg["reference"], lg["margin"], lg["gate"]["threshold"]
    cells = {(c["task"], c["encoding"], c["variant"]): c for c in lg["cells"]}
    fam, ids = Family(), {}
    for i, c in enumerate(lg["cells"]):
        name = f"{c['task']}: {c['encoding']}" + (f" [{c['variant']}]" if c["variant"] else "")
        for kind, other in (("ref", ref if c["vs_reference"] is not None else None),
                            ("base", (c.get("vs_baseline") or {}).get("baseline"))):
            if other is not None:
                o = cells[(c["task"], other, c["variant"])]
                ids[i, kind] = fam.add(f"cells/{name}/vs {other}", paired_hypothesis(
                    f"{name} vs {other}: score (exact match past N)",
                    seed_diffs(per_seed(c["score"]), per_seed(o["score"]))))
    th = lg.get("threshold")
    for i, r in enumerate((th or {}).get("rows", [])):
        pts = sorted(r["by_train_len"], key=lambda p: p["train_len"])
        if any(p["in_dist"]["mean"] is not None and p["in_dist"]["mean"] >= gate for p in pts):
            budgets = {x.get("iters") for x in th["rows"] if (x["task"], x["n_layer"], x["encoding"])
                       == (r["task"], r["n_layer"], r["encoding"])}
            tag = f", {r['iters']} steps" if len(budgets) > 1 else ""  # wave 2 crosses N with the step budget
            ids[i, "threshold"] = fam.add(f"threshold/{r['task']}/{r['n_layer']}/{r['encoding']}{tag}", paired_hypothesis(
                f"threshold: {r['task']}, {r['n_layer']} layers, {r['encoding']}{tag}: min(in-dist, N+1..2N) - {gate:g} "
                f"at N={pts[-1]['train_len']}", threshold_contrast(pts[-1], gate), test="one-sample t over seeds"))
    lg["family"] = fam.decide()
    for i, c in enumerate(lg["cells"]):
        if (i, "ref") in ids:
            c["verdict"] = family_verdict(fam.get(ids[i, "ref"]), ref, margin)
        if (i, "base") in ids:
            c["vs_baseline"]["verdict"] = family_verdict(fam.get(ids[i, "base"]), c["vs_baseline"]["baseline"], margin)
        N = c["train_len"][1] if c["train_len"] else None
        # "extrapolates": better than the reference by the family's rule and a bin past N at the gate
        c["extrapolates"] = bool(c["verdict"].startswith("better") and N is not None and (c["held_to"] or 0) > N)
    if th:
        for i, r in enumerate(th["rows"]):
            r["threshold"], r["status"] = threshold_decision(r, fam.get(ids.get((i, "threshold"))), gate)
        th["rule"] = THRESHOLD_RULE.format(gate=gate)
        th["measured_order"] = measured_order(th["rows"])
    return lg


def lengen_md(lg):
    if not (lg and lg["cells"]):
        return no_data("lengen")
    ref, gate = lg["reference"], lg["gate"]["threshold"]
    L = ["## 5. Length generalisation on algorithmic tasks", "",
         f"Exact match, mean ± sd over seeds: in distribution (metrics.val_acc, input lengths 1..N) and per "
         f"input-length bin (evaluate.py). Gate: a cell is learned when its mean in-distribution exact match is "
         f">= {f(gate)}; a cell that is not is excluded from the verdict. held to: the longest length up to which "
         f"every bin's mean stays >= {f(gate)}. Δ {ref}: the score (mean exact match past N) minus {ref}'s, paired "
         f"over seeds, with paired z and the seeds where it is higher/lower; verdict: better/worse when the paired t "
         f"test over >= {MIN_SEEDS} seeds passes Holm-adjusted p < {f(BETTER_LEVEL)} within the study's family "
         f"(the table at the end) and |Δ| >= {f(lg['margin'])}, else not distinguishable, with the effect it could "
         f"have detected; extrapolates: better, and held to past N.", ""]
    for task in dict.fromkeys(c["task"] for c in lg["cells"]):
        cs = [c for c in lg["cells"] if c["task"] == task]
        bins = sorted({b for c in cs for b in c["by_length"]}, key=parse_int)
        span = {b: next((f"{c['by_length'][b]['lo']}-{b}" for c in cs if b in c["by_length"]), b) for b in bins}
        tl = next((c["train_len"] for c in cs if c["train_len"]), None)
        L += [f"**{task}**" + (f" (trained on input lengths {tl[0]}-{tl[1]})" if tl else ""), ""]
        rows = []
        for c in cs:
            p = (c["vs_reference"] or {}).get("score")
            rows.append([c["encoding"] + (f" [{c['variant']}]" if c["variant"] else ""), str(c["n"]),
                         pm(c["in_dist"]), "yes" if c["learned"] else "**no**"]
                        + [pm(c["by_length"].get(b)) for b in bins]
                        + [pm(c["score"]), f(c["held_to"]),
                           paired_cell(p),
                           c["verdict"] + ("; extrapolates" if c.get("extrapolates") else "")])
        L += table(["encoding", "seeds", "in-dist", "learned"] + [span[b] for b in bins]
                   + ["score", "held to", f"Δ {ref} (z, higher/lower)", "verdict"], rows) + [""]
    ex = lg["excluded"]
    L += [f"Excluded by the gate ({len(ex)} cells): " + (", ".join(
        f"{x['task']}/{x['encoding']}{' [' + x['variant'] + ']' if x['variant'] else ''} "
        f"({f(x['in_dist_mean'], '.3f')})" for x in ex) if ex else "none") + ".", ""]
    base = [c for c in lg["cells"] if c.get("vs_baseline")]
    if base:
        L += ["Beside the reference (`vs_baseline`, the score paired over seeds; in the family):", ""]
        L += [f"- {c['task']}: {c['encoding']} vs {c['vs_baseline']['baseline']}: {paired_cell(c['vs_baseline']['score'])}, "
              f"{c['vs_baseline']['verdict']}" for c in base] + [""]
    return L + threshold_md(lg.get("threshold")) + family_md(lg.get("family"), "Verdicts: lengen (the declared family)")


def threshold_md(th):
    if not th:
        return []
    lens = sorted({p["train_len"] for r in th["rows"] for p in r["by_train_len"]})
    L = ["### The training-length threshold", "",
         f"Exact match at 2N (in distribution / at 3N in brackets), mean over seeds, per maximum training length "
         f"N. Threshold: {th['rule']}.", ""]
    rows = []
    for r in th["rows"]:
        by = {p["train_len"]: p for p in r["by_train_len"]}
        rows.append([r["task"], str(r["n_layer"]), r["encoding"]]
                    + [(f"{f(by[N]['at_2x']['mean'], '.2f')} ({f(by[N]['in_dist']['mean'], '.2f')} / "
                        f"{f(by[N]['at_3x']['mean'], '.2f')}) n={by[N]['n']}") if N in by else "-" for N in lens]
                    + [r["status"]])
    L += table(["task", "layers", "encoding"] + [f"N={N}" for N in lens] + ["threshold"], rows) + [""]
    order = []
    for d, o in th["measured_order"].items():
        parts = [" = ".join(g) for g in o["ordered"]] + ([f"no threshold: {', '.join(o['none'])}"] if o["none"] else [])
        order.append(f"{d} layers: " + ("; ".join(parts) or "-")
                     + (f" (excluded, not learned: {', '.join(o['excluded'])})" if o["excluded"] else ""))
    L += [f"Predicted order of the thresholds (lowest first): {', '.join(th['predicted_order'])}; measured "
          "(ties joined by =, never broken toward the prediction): " + "; ".join(order) + ".", ""]
    return L


def task_panels(rows):
    """One panel per task, in first-seen order: (figure, [(axes, task, that task's rows)])."""
    tasks_ = list(dict.fromkeys(r["task"] for r in rows))
    fig, axs = figures(len(tasks_), 4)
    return fig, [(ax, t, [r for r in rows if r["task"] == t]) for ax, t in zip(axs[0], tasks_)]


def lengen_plots(rep):
    """lengen_accuracy.png: exact match by input length (bin centre) per task, one line per encoding."""
    lg = rep["lengen"]
    if not (lg and lg["cells"]):
        return []
    fig, panels = task_panels(lg["cells"])
    colour = {}
    for ax, task, cs in panels:
        by_length_panel(ax, [(c["encoding"], c["encoding"] + (f" [{c['variant']}]" if c["variant"] else ""),
                              c["learned"], [((b["lo"] + b["hi"]) / 2 if b["lo"] is not None else b["hi"], b)
                                             for b in c["by_length"].values()]) for c in cs], colour, clip=True)
        tl = next((c["train_len"] for c in cs if c["train_len"]), None)
        if tl:
            ax.axvline(tl[1] + 0.5, color="grey", ls=":", lw=1)
        ax.set(title=task, xlabel="input length (bin centre)", ylabel="exact match", ylim=(-0.03, 1.03))
    return [("lengen_accuracy.png", fig)] + threshold_plot(lg.get("threshold"))


def threshold_plot(th):
    """lengen_threshold.png: exact match at 2N against the maximum training length N, one panel per
    task, one line per (layers, encoding) with its seed band and its threshold status in the legend
    (crosses, dashed: a row never learned in distribution); the dashed line is the gate."""
    if not th:
        return []
    fig, panels = task_panels(th["rows"])
    colour = {}
    for ax, task, rs in panels:
        by_length_panel(ax, [(f"L{r['n_layer']}", f"{r['n_layer']} layers, {r['encoding']}"
                              + (f" (threshold {r['status']})" if r["threshold"] is not None
                                 else "" if r["status"].startswith("excluded")  # the panel says "(not learned)"
                                 else f" ({r['status'].split(' (')[0]})"), not r["status"].startswith("excluded"),
                              [(p["train_len"], p["at_2x"]) for p in r["by_train_len"]]) for r in rs], colour, clip=True)
        ax.axhline(th["gate"], color="grey", ls="--", lw=1)
        ax.set(title=task, xlabel="maximum training length N", ylabel="exact match at N+1..2N", ylim=(-0.03, 1.03))
    return [("lengen_threshold.png", fig)]


# -----------------------------------------------------------------------------
# The confirmatory waves' outcomes and gates (studies/waves/*.toml `outcome_fn` / `gate_fn` = "lengen.NAME", with
# their `args`), from a report: {"per_seed": {seed: value}}, with "gated_out": the seeds a gate dropped.

LG_DEPTH = 3  # copy's and sort's recipe depth (sweep.sh lengen_recipe): the threshold rows lg-bounds reads


def cell(rep, task, enc):
    """The main grid's (task, encoding) cell of a report (no variant), or None."""
    return next((c for c in (rep.get("lengen") or {}).get("cells", [])
                 if c["task"] == task and c["encoding"] == enc and not c.get("variant")), None)


def pair_gate(rep, task, encs, level):
    """Wave 1's gate: the seeds whose runs of the task with every encoding of encs reach `level` exact match in
    distribution."""
    cells = {c["encoding"]: c for c in rep["lengen"]["cells"] if c["task"] == task and not c.get("variant")}
    ok = [set(s for s, v in cells[e]["in_dist"]["per_seed"].items() if v is not None and v >= level)
          for e in encs if e in cells]
    return {str(s) for s in set.intersection(*ok)} if len(ok) == len(encs) else set()


def task_pair(rep, task, enc, ref, level):
    """Per seed enc's score past N minus ref's on one task; a seed is kept when both runs reach `level` in
    distribution."""
    a, b = cell(rep, task, enc), cell(rep, task, ref)
    if a is None or b is None:
        return {"per_seed": {}}
    keep, drop = {}, []
    for s, v in a["score"]["per_seed"].items():
        if s in b["score"]["per_seed"]:
            if all((c["in_dist"]["per_seed"].get(s) or 0) >= level for c in (a, b)):
                keep[s] = v - b["score"]["per_seed"][s]
            else:
                drop.append(s)
    return {"per_seed": keep, "gated_out": [str(s) for s in sorted(drop)]}


def tasks_pooled(rep, enc, ref, tasks, level):
    """Per seed the mean over tasks of (enc - ref) score past N; a seed is kept when both runs of every task
    reach `level` in distribution (the tasks each learns), else gated out."""
    per, out, dropped = {}, {}, set()
    for t in tasks:
        a, b = cell(rep, t, enc), cell(rep, t, ref)
        if a is None or b is None:
            return {"per_seed": {}, "gated_out": []}
        for s, v in a["score"]["per_seed"].items():
            if s not in b["score"]["per_seed"]:
                continue
            if not all((c["in_dist"]["per_seed"].get(s) or 0) >= level for c in (a, b)):
                dropped.add(s)
            per.setdefault(s, []).append(v - b["score"]["per_seed"][s])
    for s, v in per.items():
        if s not in dropped and len(v) == len(tasks):
            out[s] = float(np.mean(v))
    return {"per_seed": out, "gated_out": [str(s) for s in sorted(dropped)]}


def _lg_points(rep, task):
    """{budget (iters): {N: point}} of the NoPE threshold rows of a task at its recipe depth (a row per step
    budget; the pilot's rows, stored before rows carried iters, are one budget)."""
    rows = [r for r in ((rep.get("lengen") or {}).get("threshold") or {}).get("rows", [])
            if r["task"] == task and r["encoding"] == "nope" and r["n_layer"] == LG_DEPTH]
    return {r.get("iters") or 0: {p["train_len"]: p for p in r["by_train_len"]} for r in rows}


def lg_rise(rep, task):
    """Per seed, averaged over the step budgets: the score past N (N+1..2N) at the largest N minus at the smallest."""
    out, pts_by = defaultdict(list), _lg_points(rep, task)
    for pts in pts_by.values():
        if len(pts) < 2:
            continue
        a, z = pts[max(pts)]["at_2x"]["per_seed"], pts[min(pts)]["at_2x"]["per_seed"]
        for s in a:
            if s in z and a[s] is not None and z[s] is not None:
                out[s].append(a[s] - z[s])
    return {"per_seed": {s: float(np.mean(v)) for s, v in out.items() if len(v) == len(pts_by)}}


def lg_reaches(rep, task, level):
    """Per seed min(exact match on 1..N, on N+1..2N) - level at the largest N and step budget."""
    pts = _lg_points(rep, task)
    if not pts:
        return {"per_seed": {}}
    b = max(pts)
    p = pts[b][max(pts[b])]
    ind, past = p["in_dist"]["per_seed"], p["at_2x"]["per_seed"]
    return {"per_seed": {s: min(ind[s], past[s]) - level for s in past if s in ind and None not in (ind[s], past[s])}}


def _lg_multiples(pts):
    """{multiple of the task's smallest step budget: its points}: each task's budgets are its own recipe's steps
    times the declared multiples (copy 600 and 1200, sort 800 and 1600), so two tasks pair by the multiple."""
    lo = min(pts) if pts else 0
    return {(round(b / lo) if lo else 1): p for b, p in pts.items()}


def lg_richer(rep, simpler, harder):
    """Per seed, averaged over the budgets (paired by multiple): the simpler task's score past N minus the
    harder one's, at the largest N both ran."""
    c, s_ = _lg_multiples(_lg_points(rep, simpler)), _lg_multiples(_lg_points(rep, harder))
    out = defaultdict(list)
    for b in set(c) & set(s_):
        if not set(c[b]) & set(s_[b]):
            continue
        N = max(set(c[b]) & set(s_[b]))
        a, z = c[b][N]["at_2x"]["per_seed"], s_[b][N]["at_2x"]["per_seed"]
        for s in a:
            if s in z and None not in (a[s], z[s]):
                out[s].append(a[s] - z[s])
    n = len(set(c) & set(s_))
    return {"per_seed": {s: float(np.mean(v)) for s, v in out.items() if len(v) == n}}



# Wave 5's lg-bounds (steps that grow with N; a fixed evaluation window) and the tasks' graded outcome. Its runs
# sit in the main folder, each budget its own: a cell is found by its training length N, whatever its variant.

def cell_at(rep, task, enc, N):
    """The (task, encoding) cell trained on input lengths up to N, any variant; None when none or several match
    (a declaration error, never a silent pick)."""
    hits = [c for c in (rep.get("lengen") or {}).get("cells", [])
            if c["task"] == task and c["encoding"] == enc and (c.get("train_len") or [None, None])[1] == N]
    return hits[0] if len(hits) == 1 else None


def _bin(c, hi, metric="exact"):
    v = c["by_length"].get(str(hi)) or {}
    return (v if metric == "exact" else v.get(metric) or {}).get("per_seed", {})


def _paired(pairs, level):
    """Per seed the mean over pairs (a, z, gates) of a - z ({seed: x} each); a seed is kept when it has every
    pair and every gate cell reaches `level` in distribution there, else (a gate missed) gated out."""
    per, out = defaultdict(list), set()
    for a, z, gates in pairs:
        for s in set(a) & set(z):
            per[s].append(a[s] - z[s])
            if any((g["in_dist"]["per_seed"].get(s) or 0) < level for g in gates):
                out.add(s)
    return {"per_seed": {s: float(np.mean(v)) for s, v in per.items() if len(v) == len(pairs) and s not in out},
            "gated_out": [str(s) for s in sorted(out, key=str)]}


def lg_rise_grown(rep, task, lo, hi, level=0.9, enc="nope"):
    """lg-bounds-1 with steps proportional to N: per seed exact match on N+1..2N at N = hi minus at N = lo; a seed
    whose N = lo or N = hi run misses `level` in distribution is gated out (a rise would be N = lo not learning, a
    fall N = hi not learning: neither is length generalisation)."""
    a, z = cell_at(rep, task, enc, hi), cell_at(rep, task, enc, lo)
    return _paired([(_bin(a, 2 * hi), _bin(z, 2 * lo), [a, z])], level) if a and z else {"per_seed": {}}


def lg_rise_fixed(rep, tasks, lo, hi, window, level=0.9, enc="nope"):
    """lg-bounds-1 without a window that grows with N: per seed, the mean over tasks of exact match in the bin
    ending at `window` (past both N) at N = hi minus at N = lo; gated as lg_rise_grown."""
    cs = [(cell_at(rep, t, enc, hi), cell_at(rep, t, enc, lo)) for t in tasks]
    ok = all(a and z for a, z in cs)
    return _paired([(_bin(a, window), _bin(z, window), [a, z]) for a, z in cs], level) if ok else {"per_seed": {}}


def trivial_token_acc(task, lo, hi, seeds, n=256):
    """The floor a graded answer-token accuracy must clear (wave 5's pilot_p3): the larger of chance over the
    digits (0.1) and the repeat-previous predictor's token accuracy (each answer token predicted as the token
    before it, teacher-forced, as tasks.algo_eval scores), on the evaluation's own examples at input lengths
    lo..hi (tasks.algo_eval's, one set a seed), averaged over `seeds`. Copy: about chance; sort: far above it (a
    sorted answer repeats its digits)."""
    from tasks import algo_targets
    acc = []
    for s in seeds:
        x, y = algo_targets(task, (lo, hi), n, 4 * hi + 8, ("val", s), cover=True)
        m = y >= 0
        acc.append(float(((x == y) & m).sum()) / max(int(m.sum()), 1))
    return max(0.1, float(np.mean(acc)))


def lg_richer_at(rep, simpler, harder, N, enc="nope"):
    """lg-bounds-6 at one N: per seed the simpler task's exact match on N+1..2N minus the harder one's (no gate)."""
    a, b = cell_at(rep, simpler, enc, N), cell_at(rep, harder, enc, N)
    return _paired([(_bin(a, 2 * N), _bin(b, 2 * N), [])], 0) if a and b else {"per_seed": {}}


def tasks_graded(rep, enc, ref, tasks, level, metric="token_acc", N=16):
    """hope-3/-4/-6 off the floor: per seed the mean over tasks of (enc - ref) in a graded per-bin outcome
    (lengen_report's GRADED) averaged over the bins past N; a seed is kept when both runs of every task reach
    `level` in distribution (as tasks_pooled)."""
    pairs = []
    for t in tasks:
        a, b = cell_at(rep, t, enc, N), cell_at(rep, t, ref, N)
        if not (a and b):
            return {"per_seed": {}}
        past = [k for k, v in a["by_length"].items() if (v.get("lo") or 0) > N and k in b["by_length"]]
        mean = lambda c: ({s: float(np.mean([_bin(c, k, metric)[s] for k in past]))
                           for s in set.intersection(*(set(_bin(c, k, metric)) for k in past))} if past else {})
        pairs.append((mean(a), mean(b), [a, b]))
    return _paired(pairs, level)
