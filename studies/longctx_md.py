"""
The longctx study's markdown and plots (studies/longctx.py holds its rows, report, family and outcomes): the
analysis.md section of the factorial, the extension-gain check and retrieval, from the report alone.
"""
import numpy as np

from studies.common import ci, f, family_md, figures, no_data, table
from studies.longctx import FEATURES, GATE, OUTCOMES, cells16_summary


def effects_table(o, digits):
    """The main effects of an outcome report (outcome_report) as a markdown table, `digits` decimals."""
    return table(["feature", "effect [95% CI]", "sd over seeds", "abs(effect) / init sd"],
                 [[e["feature"], ci(e["effect"], e["lo"], e["hi"], f"+.{digits}f"), f(e["seed_sd"], f".{digits}f"),
                   f(e["effect_over_init_sd"], ".1f")] for e in o["effects"]]) + [""]


def model_choice_md(o):
    """The model leave-one-cell-out R^2 picks, and what the main effects mean under it: with the
    pairwise model chosen, its interactions whose 95% CI excludes 0 are named (the main effects stay
    the additive model's, which in a balanced factorial are each feature's effect averaged over the
    others' levels, whatever the interactions)."""
    best = o.get("best_by_loco")
    if not best:
        return []
    line = f"Model chosen by leave-one-cell-out R^2: **{best}** (by leave-one-run-out: {o.get('best_by_loo')})."
    if best == "pairwise":
        m = next(x for x in o["models"] if x["model"] == "pairwise")
        inter = [c for c in m["coefs"] if ":" in c["name"] and (c["lo"] > 0 or c["hi"] < 0)]
        line += (" Its interactions with a 95% CI over runs excluding 0 (descriptive, outside the family): " + ("; ".join(
            f"{c['name']} {ci(c['est'], c['lo'], c['hi'], '+.4f')}" for c in inter) if inter else "none") +
            ". The main effects below are the additive fit's: in a balanced factorial, each feature's effect averaged "
            "over the other features' levels; an interaction means that effect differs between those levels.")
    return [line, ""]


def f_tests(o):
    """The nested F tests of an outcome report in one line."""
    return "; ".join(f"{t['test']}: F={f(t['F'], '.2f')} ({t['df1']}, {t['df2']}), p={f(t['p'], '.3g')}" for t in o["tests"])


def longctx_md(lc):
    if not (lc and lc["outcomes"]):
        return no_data("longctx")
    L = ["## 4. Long-context extensibility vs inhibiting features (arXiv 2608.10296)", "",
         f"Pretraining contexts {lc['contexts']}; short context = {lc['short_block'] or 'n/a (need two contexts)'}. "
         f"Main recipe: {lc['main_recipe']} ({lc['recipes'].get(lc['main_recipe'], len(lc['runs']))} runs); "
         f"recipes: {', '.join(f'{r} ({n})' for r, n in lc['recipes'].items()) or '-'}. Features: "
         f"{', '.join(FEATURES)} (1 = present). Effects are in the outcome's units, 95% confidence intervals in "
         f"brackets; init sd = pooled sd over seeds within a cell.", ""]
    L += gain_md(lc)
    L += retrieval_md(lc)
    L += cells16_md(lc)
    L += family_md(lc.get("family"))
    if lc.get("empty_outcomes"):
        L += ["Not analysed, no value in any run of the main recipe: " + ", ".join(
            f"{k} (eval.json target.{OUTCOMES[k][2]})" if OUTCOMES[k][2] else k for k in lc["empty_outcomes"]) + ".", ""]
    if lc.get("constant_outcomes"):
        L += ["Not analysed, one value in every run of the main recipe: " + ", ".join(
            f"{k} = {v:g}" for k, v in lc["constant_outcomes"].items()) + ".", ""]
    sk = lc.get("sinks")
    if sk:
        L += [f"Sinks (main recipe's roots): sink rate {f(sk['rate_min'], '.3f')} .. {f(sk['rate_max'], '.3f')}; " +
              ("no head sinks, so the QK-norm -> sink -> outcome path is not tested." if not sk["path"] else
               f"QK-norm on the sink rate {ci(sk['path']['qk_norm_on_sink_rate']['est'], sk['path']['qk_norm_on_sink_rate']['lo'], sk['path']['qk_norm_on_sink_rate']['hi'], '+.3f')}; "
               "sink rate -> loss within each context: " + ", ".join(
                   f"ctx {w['ctx']}: slope {f(w['slope'], '+.3g')}, R^2 {f(w['r2'], '.2f')}" for w in sk["path"]["within_ctx"])), ""]
    outs = lc["outcomes"]
    if outs:
        first = next(iter(outs.values()))
        L += table(["cell " + "/".join(FEATURES), "count", "n"] + list(outs),
                   [[c["cell"], str(c["count"]), str(c["n"])] +
                    [f"{f(cm['mean'], '.4f')} ± {f(cm['sd'], '.3f')}" for cm in
                     (next((x for x in o["cells"] if x["cell"] == c["cell"]), {"mean": None, "sd": None})
                      for o in outs.values())] for c in first["cells"]]) + [""]
    for key, o in outs.items():
        sv = o["seed_variance"]
        rd = o.get("relative_drop")
        L += [f"### {key}: {o['what']} ({'higher' if o['higher_is_better'] else 'lower'} is better)", ""]
        if rd:
            L += [f"Headline: the worst cell ({rd['worst_cell']}, {f(rd['worst'], '.4f')}) is {f(rd['drop_pct'], '.1f')}% "
                  f"from the best ({rd['best_cell']}, {f(rd['best'], '.4f')}).", ""]
        L += model_choice_md(o)
        L += [
              f"{o['n']} runs, {o['n_cells']} cells, seeds {o['seeds']}. Init swing: sd {f(sv['init_sd'], '.4f')} "
              f"({sv['dof']} dof); the largest range over seeds in a cell is {f(sv['swing_share_max'], '.0%')} of the "
              f"range of the cell means ({f(sv['cell_mean_range'], '.4f')}), median {f(sv['swing_share_median'], '.0%')}.", ""]
        L += effects_table(o, 4)
        L += table(["model", "params", "R^2", "LOO R^2 (runs)", "LOO R^2 (cells)", "coefficients [95% CI]"],
                   [[m["model"], str(m["k"]), f(m["r2"], ".3f"), f(m["loo_r2"], ".3f"), f(m["loco_r2"], ".3f"),
                     "; ".join(f"{c['name']} {ci(c['est'], c['lo'], c['hi'], '+.4f')}" for c in m["coefs"]
                               if c["name"] != "intercept" and (m["model"] != "pairwise" or ":" in c["name"]))
                     or "the cell means"] for m in o["models"]]) + [""]
        L += ["Nested F tests: " + f_tests(o) + f". Best predictor by LOO R^2 over runs: **{o['best_by_loo']}**.", ""]
        rem = o["remove_one"]
        L += ["Remove one feature from the four-feature cell (increment = all four - the other three; equal "
              "increments = the count hypothesis):", ""]
        L += table(["feature", "increment [95% CI]", "n (4 / 3)"],
                   [[r["feature"], ci(r["increment"], r["lo"], r["hi"], "+.4f"), "/".join(map(str, r["n"]))]
                    for r in rem["increments"]]) + [""]
        eq = rem["equal"]
        L += [f"Equal increments: F={f(eq['F'], '.2f')} ({eq['df1']}, {eq['df2']}), p={f(eq['p'], '.3g')}.", ""]
        if o["predictors"]:
            L += ["Short-context predictors and sinks (exploratory: one predictor at a time, not corrected for "
                  "multiple comparisons):", ""]
            L += table(["predictor", "n", "slope", "R^2", "LOO R^2"],
                       [[p["predictor"], str(p["n"]), f(p["slope"], "+.3g"), f(p["r2"], ".3f"), f(p["loo_r2"], ".3f")]
                        for p in o["predictors"]]) + [""]
        e = o["early"]
        if e:
            L += [f"Early extension (checkpoint {', '.join(e['ckpts'])}, same recipe) -> final: n={e['n']}, "
                  f"R^2={f(e['r2'], '.3f')}, LOO R^2={f(e['loo_r2'], '.3f')}, Pearson {f(e['pearson'], '.3f')}, "
                  f"Spearman {f(e['spearman'], '.3f')}.", ""]
        if o["variants"]:
            L += ["Robustness variants (each on its own; never pooled with the main recipe):", ""]
            L += table(["recipe", "n", "mean", "- main (paired)", "r with main", "count slope [95% CI]", "count R^2 / LOO",
                        "additive effects"],
                       [[v["recipe"], str(v["n"]), f(v["mean"], ".4f"), f(v["minus_main"], "+.4f"), f(v["r_with_main"], ".2f"),
                         ci(v["count"]["coefs"][0]["est"], v["count"]["coefs"][0]["lo"], v["count"]["coefs"][0]["hi"], "+.4f"),
                         f"{f(v['count']['r2'], '.2f')} / {f(v['count_loo_r2'], '.2f')}",
                         ", ".join([f"{c['name']} {f(c['est'], '+.3f')}" for c in (v["additive"] or {}).get("coefs", [])]
                                   + [f"{k} = {x} in every run" for k, x in v.get("constant", {}).items()])]
                        for v in o["variants"]]) + [""]
    return L


def gain_md(lc):
    """The extension-gain check: does each recipe extend (lower loss at the target than the parent and
    than training-free scaling)? A recipe whose mean gain is not positive is flagged."""
    if not lc.get("gain"):
        return []
    L = ["### Does the extension extend? Extension gain at the target (nats; positive = the extension helps)", ""]
    cell = lambda g: (f"{ci(g['mean'], g['lo'], g['hi'], '+.4f')}; runs > 0: {g['n_positive']}/{g['n']}, cells > 0: "
                      f"{g['cells_positive']}/{g['n_cells']}") if g else "-"
    L += table(["recipe", "vs the unextended parent", "vs training-free scaling", "vs the more-training control", "flag"],
               [[g["recipe"] + (" (main)" if g["recipe"] == lc["main_recipe"] else ""), cell(g["gain_parent"]),
                 cell(g["gain_free"]), cell(g.get("gain_more")), "**mean gain not positive**" if g["flagged"] else ""]
                for g in lc["gain"]]) + [""]
    for rec in lc["flagged_recipes"]:
        L += [f"**FLAG: {rec} does not extend: its mean gain at the target is not positive; its outcomes measure "
              f"a recipe that hurts, not what an extension recovers.**", ""]
    return L


def retrieval_md(lc):
    """Exact-match retrieval at the target per cell, its gate and whether the cells span > 3 init sds."""
    r = lc.get("retrieval")
    if not r:
        return []
    L = [f"### Retrieval: {r['metric']} (main recipe)", "",
         f"Samples per run {r['samples_per_run']} ({r['samples_rule']}). Gate: {r['gate']['metric']} >= "
         f"{r['gate']['threshold']}; a cell is learned with at least {r['gate']['min_passing']} passing runs. Init sd "
         f"{f(r['init_sd'], '.3f')} ({r['init_sd_dof']} dof), range of the cell means {f(r['cell_mean_range'], '.3f')}. "
         f"**Verdict: {r['verdict']}.** The sampling CI is binomial (the passing runs' samples): a sampling component, "
         "not an interval over seeds.", ""]
    L += table(["cell " + "/".join(FEATURES), "runs passing / n", "samples", "exact match [95% sampling CI]",
                "sd over seeds", "before the extension", "every run", "exact match at the pretraining length", "learned"],
               [[c["cell"], f"{c['n_pass']} / {c['n']}", str(c["samples"]), ci(c["mean"], c["lo"], c["hi"], ".3f"),
                 f(c["sd"], ".3f"), f(c["pre_mean"], ".3f"), f(c["mean_all"], ".3f"), f(c["id_exact"], ".3f"),
                 "yes" if c["learned"] else "**no**"] for c in r["cells"]]) + [""]
    sub = r.get("subfactorial")
    if sub and sub["report"]:
        o, (fx, v) = sub["report"], next(iter(sub["fixed"].items()))
        L += [f"**The learned half: {fx} = {v}** (every one of its {len(sub['cells'])} cells learned; "
              f"{', '.join(sub['features'])} crossed, {o['n']} runs; the cell means "
              f"{'span' if sub['spans_3sd'] else 'do not span'} more than 3 init sds: range "
              f"{f(sub['cell_mean_range'], '.3f')}, init sd {f(sub['init_sd'], '.3f')}). Main effects on the target "
              f"exact match (additive model):", ""]
        L += effects_table(o, 3)
        L += ["Models: " + "; ".join(f"{m['model']} R^2 {f(m['r2'], '.2f')} (LOO {f(m['loo_r2'], '.2f')})"
                                     for m in o["models"]) + ". Nested F tests: " + f_tests(o) + ".", ""]
    return L


def longctx_plots(rep):
    """longctx_outcome_vs_count.png: each outcome of the main recipe vs the feature count: every run
    (colour = seed, offset by seed so none hides another), the cell means (x) and the count fit."""
    lc = rep["longctx"]
    if not (lc and lc["outcomes"]):
        return []
    outs = lc["outcomes"]
    fig, axs = figures(len(outs), 4.2, 3.6)
    rows = [w for w in lc["runs"] if w["recipe"] == lc["main_recipe"] and w["ckpt"] == "final"]
    for ax, (key, o) in zip(axs[0], outs.items()):
        seeds = o["seeds"] or [None]
        for j, sd in enumerate(seeds):
            pts = [w for w in rows if w["seed"] == sd and w[key] is not None]
            ax.plot([w["count"] + 0.08 * (j - (len(seeds) - 1) / 2) for w in pts], [w[key] for w in pts], "o",
                    ms=4, alpha=0.8, label=f"seed {f(sd, 'g')}")
        ax.plot([c["count"] for c in o["cells"]], [c["mean"] for c in o["cells"]], "kx", ms=5, label="cell mean")
        b = {c["name"]: c["est"] for c in o["models"][0]["coefs"]}
        ax.plot([0, 4], [b["intercept"], b["intercept"] + 4 * b["count"]], "k-",
                label=f"count fit, R^2 {f(o['models'][0]['r2'], '.2f')}")
        ax.set(xlabel="inhibiting-feature count", ylabel=key, title=f"{key} vs feature count")
        ax.legend(fontsize=6)
    return [("longctx_outcome_vs_count.png", fig)]


def cells16_rows(s):
    """The per-cell table of cells16_summary: mean (sd over seeds) of y, exact match and the early extension's y."""
    st = lambda m, sd: "-" if m is None else f"{m:+.2f} ({sd:.2f})" if sd is not None else f"{m:+.2f}"  # noqa: E731
    return table(["cell", "roots learned", "answer log-likelihood (nats)", "exact match", "early extension's "
                  "log-likelihood"], [[c["cell"], f"{c['learned']} of {c['n']}", st(c["mean"], c["sd"]),
                                       st(c["exact"], c["exact_sd"]), st(c["early"], c["early_sd"])] for c in s["cells"]])


def cells16_md(lc):
    """The graded outcome per cell of the full factorial (wave 4), its range in init sds and the single costs."""
    s = lc.get("cells16")
    if not s:
        return []
    cost = ", ".join(f"{k} {v:+.2f}" for k, v in s["single_cost"].items())
    return ([f"### The graded outcome per cell: the passkey answer's log-likelihood at the target (nats; main recipe)",
             "", f"{s['learned']} of {s['n']} roots learned passkey in distribution (exact match >= {GATE} at their "
             f"pretraining length). The cell means span {s['spread']:.2f} nats (best {s['best']}, worst {s['worst']}), "
             f"{s['spread_sds']:.1f} init sds ({s['init_sd']:.2f}, {s['init_sd_dof']} dof): "
             + ("the outcome has range here (more than 3 init sds)." if s["spread_sds"] > 3 else
                "under 3 init sds: no range at this scale.") + f" Single costs, y(0000) minus the cell's: {cost}."
             + (" Main effects (the cells with the feature minus those without; the count slope is their mean): "
                + ", ".join(f"{k} {v:+.2f}" for k, v in s["main_effect"].items()) + ". Inside each pretraining "
                "context, the slope of the cell means on the count of QK-norm, GQA and SWA: "
                + ", ".join(f"{k} {v:+.2f}" for k, v in s["slope_within_context"].items()) + " nats a feature."
                if s.get("main_effect") else "")
             + (f" Exact match falls from {r['none']:.3f} (0000) to {r['all']:.3f} (1111): a relative drop of "
                f"{100 * r['relative']:.0f}% [{100 * r['ci'][0]:.0f}%, {100 * r['ci'][1]:.0f}%] over {r['n']} seeds, beside the "
                "seed's 'up to 47%' (HELMET at 32K)." if (r := s.get("relative_drop_exact")) and r.get("ci") else ""), ""]
            + cells16_rows(s) + [""])


def learnability_md(rep):
    """A learnability pilot (wave 4's): per cell of the factorial, the roots that learned passkey in distribution
    (exact match >= GATE at their pretraining length) and the outcomes at the target after the main extension,
    mean and sd over seeds: the answer log-likelihood (graded), exact match, and the early extension's; then the
    pilot's measured wall and its cost per job."""
    lc = rep.get("longctx") or {}
    s = cells16_summary(lc.get("runs", []), lc.get("main_recipe"))
    if not s:
        return []
    seeds = sorted({w["seed"] for w in lc["runs"]})
    wall = rep.get("wall") or {}
    cost = (f" Its measured wall: {wall['text']}; {wall['seconds'] * (wall.get('jobs') or 1) / max(s['n'], 1):.0f} "
            f"core-seconds a job ({s['n']} jobs)." if wall.get("seconds") else "")
    return ([f"The learnability pilot (seeds {', '.join(map(str, seeds))}; exploratory, no confirmatory wave uses "
             f"them): {s['learned']} of {s['n']} roots learned passkey in distribution (exact match >= {GATE} at their "
             f"pretraining length).{cost} Per cell (QK-norm, GQA, SWA, short context), mean (sd over seeds) at 512 "
             f"after the main extension, and after extending the early checkpoint:", ""] + cells16_rows(s) + [""])
