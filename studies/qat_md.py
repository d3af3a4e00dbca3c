"""
The qat study's markdown (studies/qat.py holds its records, report, family and plots): the analysis.md
sections of the QAT schedule grid, the penalty law (in N, and in N and D), the probes' contrasts and the
weight-to-grid distance, from the report alone.
"""
from studies.common import ci, f, family_md, no_data, table, vtag


def decided(r):
    """A row's family verdict in words: 'passed' or 'not distinguishable' with the Holm-adjusted p."""
    if r.get("p_holm") is None:
        return "-"
    return ("**passed**" if r["passed"] else "not distinguishable") + f" (p_holm {f(r['p_holm'], '.2g')})"


def qat_md(q):
    L = ["## 1. QAT schedule grid", ""]
    L += family_md(q.get("family"), "The family: every verdict of this analysis") if q.get("family") else []
    L += ["Deployed metrics.val_loss, mean ± sd over seeds. Exploratory (outside the family): the lowest-mean "
          "warmdown and, against each other warmdown, Δ and the raw paired t p over matched seeds (n - 1 dof, "
          "no adjustment); lowest wins: seeds where the lowest-mean warmdown is lower.", "",
          f"**Per (bits, size)** ({q['lr_rule']}):", ""]
    inter = {(r["variant"], r["size"], r["bits"]): r for r in q["interaction"]}
    L += table(["variant", "bits", "size", "lowest-mean warmdown (at LR)", "FP16 lowest", "same as FP16",
                "other warmdowns: Δ, raw p, lowest wins", "bits x warmdown interaction vs FP16 (family)"],
               [[c["variant"] or "-", str(c["bits"]), c["size"], f"{f(c['best_warmdown'])} ({f(c['best_lr'])})",
                 f(c["fp16_best_warmdown"]), {True: "yes", False: "NO", None: "-"}[c["same_as_fp16"]],
                 "; ".join(f"{f(r['warmdown'])}: {r['delta']:+.4f}, p {f(r['p'], '.2g')}, {r['best_wins']}/{r['n_paired']}"
                           for r in c["warmdowns"] if r["z"] is not None),
                 (lambda t: f"F={f(t['F'], '.2f')} ({t['df1']}, {t['df2']}), p={f(t['p'], '.2g')}, {decided(t)}" if t else "-")(
                     inter.get((c["variant"], c["size"], c["bits"])))]
                for c in q["verdict"]]) + [""]
    L += ["The interaction is the QAT seed's null put as a test: per seed the penalty INT-b - FP16 at each warmdown "
          "(each at its best LR), a repeated-measures F test of a change over warmdowns with seeds as blocks (a seed's "
          "bit-width effect is its block, not error). \"Same as FP16\" only compares the argmins (descriptive).", ""]
    if q["interaction"]:
        L += table(["variant", "bits", "size", "seeds", "penalty by warmdown", "Δ penalty vs ref [95% CI]", "F", "p",
                    "verdict"],
                   [[r["variant"] or "-", str(r["bits"]), r["size"], str(r["n_seeds"]),
                     ", ".join(f"{f(w)}: {m:+.4f}" for w, m in zip(r["warmdowns"], r["penalty_means"])),
                     "; ".join(f"{f(d['warmdown'])}-{f(d['against'])}: " + ci(d["effect"], *(d["ci"] or (None, None)), "+.4f")
                               for d in r["did"]),
                     f(r["F"], ".2f"), f(r["p"], ".2g"),
                     decided(r) + (f"; detectable {f(r.get('mde'), '.3g')}" if not r.get("passed") and r.get("mde") else "")]
                    for r in q["interaction"]]) + [""]
    for t in q["int4_transition"] or []:
        ref, short = f(t["ref_warmdown"]), f(t["short_warmdown"])
        L += [f"**INT4 transition** {vtag(t['variant'])}(d = loss at wd {short} - at wd {ref} per seed, paired t, Holm "
              f"within the family; passed with d > 0: wd {ref} lower): " + "; ".join(
                  f"{r['size']} d {ci(r['mean_diff'], *(r['ci'] or (None, None)), '+.4f')}, p {f(r['p'], '.2g')}, "
                  f"{r['wins']}/{r['n']} seeds, {decided(r)}" for r in t["rows"]) +
              f". wd {ref} lower at every size from: **{t['from_size'] or 'none'}**.", ""]
    for m in q["moves"]:
        L += [f"**Does the best warmdown move with size?** {vtag(m['variant'])}{'FP16' if m['bits'] == 16 else 'INT' + str(m['bits'])}: "
              f"gain of wd {f(m['ref_warmdown'])} over wd {f(m['short_warmdown'])} {m['gain_small']:+.4f} at {m['small']}, "
              f"{m['gain_large']:+.4f} at {m['large']}; difference {ci(m['effect'], *(m['ci'] or (None, None)), '+.4f')}, "
              f"p {f(m['p'], '.2g')}, {decided(m)}.", ""]
    L += ["Per (bits, size, LR) cell (exploratory):", ""]
    L += table(["variant", "bits", "size", "lr", "lowest", "val_loss by warmdown (mean ± sd, n; raw p against the lowest)"],
               [[c["variant"] or "-", str(c["bits"]), c["size"], f(c["lr"]), f(c["best_warmdown"]),
                 "; ".join(f"{f(r['warmdown'])}: {r['mean']:.4f} ± {f(r['sd'], '.2g')} (n={r['n']}"
                           + (f", p {f(r['p'], '.2g')})" if r["z"] is not None else ")") for r in c["warmdowns"])]
                for c in q["cells"]]) + [""]
    return L


def penalty_md(p):
    L = ["## 2. Quantisation penalty law P_b(N) = L_b(N) - L_16(N) = alpha + beta ln N", "",
         f"P at the reference cell lr={f(p['ref_lr'])}, warmdown={f(p['ref_warmdown'])}, paired on seed and averaged;"
         f" N = params.non_embedding; {p['level']:.0%} prediction intervals at the held-out sizes.", ""]
    for g in p["laws"]:
        L += [f"**{vtag(g['variant'])}INT{g['bits']}**", ""]
        L += table(["size", "N", "P mean", "sd", "seeds", "role", f"{p['level']:.0%} PI", "inside"],
                   [[r["size"], f(r["n_params"], ".3g"), f"{r['penalty']:+.4f}", f(r["sd"], ".2g"), str(r["n"]),
                     r["role"], f"[{r['lo']:+.4f}, {r['hi']:+.4f}]" if "lo" in r else "-",
                     ("yes" if r["inside"] else "NO") if "inside" in r else "-"] for r in g["sizes"]]) + [""]
        if g["fit"]:
            ft = g["fit"]
            L += [f"Fit on {', '.join(g['fit_sizes'])}: alpha={ft['alpha']:.4g}, beta={ft['beta']:.4g}, s={ft['s']:.3g},"
                  f" R^2={f(ft['r2'], '.3f')}. " + (f"Held-out coverage {g['coverage']}." if g["coverage"]
                                                   else "No held-out sizes.")]
            lf = g.get("lack_of_fit")
            if lf:
                L += ["", f"Lack of fit against the pooled seed variance (F test): F={lf['F']:.2f} on ({lf['df1']}, "
                          f"{lf['df2']}) dof, p={lf['p']:.2g}, RMS departure {lf['rms']:.4f}; {decided(lf)}."]
            sc = g.get("seed_check")
            if sc:
                zs = ", ".join(f"{h['size']} z={h['z_seed']:+.1f}" for h in g["held_out"] if h.get("z_seed") is not None)
                L += ["", f"Treating each size's seed sd as known (weighted by sd/sqrt(seeds); overstates, the F test above "
                          f"does not): beta={sc['beta']:.4g} ± {sc['beta_se']:.2g}, chi^2={sc['chi2']:.2f} on {sc['dof']} "
                          f"dof (p={sc['p_lack_of_fit']:.2g})" + (f"; held-out {zs}." if zs else ".")]
        else:
            L += [f"_{g['message']}._"]
        L += [""]
    return L + nd_md(p) + contrasts_md(p)


def nd_md(p):
    """The two laws side by side: the N law (alpha + beta ln N) and the N-D law (k D^gamma_D / N^gamma_N)."""
    L = ["### The law in size and tokens beside the law in size", "",
         "delta(N, D) = k D^gamma_D / N^gamma_N (arXiv 2505.14302), OLS in log space on the fit sizes at every "
         f"training length; {p['level']:.0%} prediction intervals (log space, t on n - 3 dof). Beside it the N law "
         "(the same at any D). Cells marked 'in fit' were fitted by the N-D law, not tested.", ""]
    for g in p.get("laws_nd") or []:
        if g["k"] is None and not any("pred_n" in c for c in g["held_out"]):
            continue  # neither law was fitted for this group (a probe at one size): nothing to put side by side
        L += [f"**{vtag(g['variant'])}INT{g['bits']}**: " + (
            f"k={g['k']:.3g}, gamma_N={g['gamma_N']:+.3f}, gamma_D={g['gamma_D']:+.3f}, R^2={f(g['r2'], '.3f')} on "
            f"{g['n']} cells; held-out coverage {g['coverage'] or '-'}." if g["k"] is not None else f"_{g['message']}._"), ""]
        if g["k"] is not None:
            lf = g.get("lack_of_fit")
            L += ["Its exponents (OLS in log space, t on " + f"{g['dof']} dof, {p['level']:.0%} interval): " + "; ".join(
                f"{c['name']} {ci(c['est'], c['lo'], c['hi'])}, p {f(c['p'], '.2g')}, {decided(c)}" for c in g["coefs"][1:])
                + (f". Lack of fit against the pooled seed variance: F={lf['F']:.2f} on ({lf['df1']}, {lf['df2']}) dof, "
                   f"p={lf['p']:.2g}, RMS departure {lf['rms']:.4f}; {decided(lf)}." if lf else "."), ""]
        if g["held_out"]:
            pi = lambda c, law: (f"{c[f'pred_{law}']:+.4f} [{f(c[f'lo_{law}'], '+.4f')}, {f(c[f'hi_{law}'], '+.4f')}]"
                                 + ("" if c.get(f"inside_{law}") is None else " ok" if c[f"inside_{law}"] else " **out**")
                                 if f"pred_{law}" in c else "-")
            L += table(["size", "budget", "N", "D", "P (mean ± sd)", "N law", "N-D law"],
                       [[c["size"], c["budget"], f(c["n_params"], ".3g"), f(c["tokens"], ".3g"),
                         f"{c['penalty']:+.4f} ± {f(c['sd'], '.2g')}", pi(c, "n"),
                         pi(c, "nd") + (" (in fit)" if c["in_nd_fit"] else "")] for c in g["held_out"]]) + [""]
            e = g["error"]
            L += ["Mean |error|: held-out sizes N law " + f(e["n"]["held_out_sizes"], ".4f") + ", N-D law "
                  + f(e["nd"]["held_out_sizes"], ".4f") + "; longer training N law " + f(e["n"]["longer_training"], ".4f")
                  + ", N-D law " + f(e["nd"]["longer_training"], ".4f") + " (in fit).", ""]
    return L


def contrasts_md(p):
    rows = p.get("variant_contrasts") or []
    if not rows:
        return []
    return (["### Probes against the grid: the penalty, paired over seeds", "",
             f"d = the probe's penalty - the grid's ({rows[0]['against'] or 'grid'}) at the same size and bits; "
             "smaller / larger: the family's rule (Holm-adjusted paired t p < 0.05 over >= 3 seeds).", ""] +
            table(["probe", "bits", "size", "Δ penalty [95% CI]", "t", "p", "p (Holm)", "seeds", "verdict"],
                  [[r["variant"], str(r["bits"]), r["size"], ci(r["mean_diff"], *(r["ci"] or (None, None)), "+.4f"),
                    f(r["z"], "+.2f"), f(r["p"], ".2g"), f(r.get("p_holm"), ".2g"), str(r["n"]), str(r["verdict"])]
                   for r in rows]) + [""])


def grid_md(g):
    L = ["## 3. Weight-to-grid distance (descriptive)", "",
         "Mean |w/s - round(w/s)| on the grid_bits grid (0.25 = uniform, 0 = snapped); ratio = QAT / FP16"
         " over matched seeds (per seed in analysis.json).", ""]
    return L + table(["grid_bits", "entry", "size", "lr", "warmdown", "bits", "d", "d FP16", "ratio", "seeds"],
                     [[str(r["grid_bits"]), vtag(r["variant"]) + r["key"], r["size"],
                       f(r["lr"]), f(r["warmdown"]), str(r["bits"]), f(r["d_qat"]), f(r["d_fp16"]),
                       f(r["ratio"]), str(r["n"])] for r in g["rows"]]) + [""]


def qat_markdown(rep):
    return ((qat_md(rep["qat"]) if rep["qat"]["cells"] else no_data("qat")) +
            (penalty_md(rep["penalty_law"]) if rep["penalty_law"]["laws"] else no_data("penalty_law")) +
            (grid_md(rep["grid_distance"]) if rep["grid_distance"]["rows"] else no_data("grid_distance")))
