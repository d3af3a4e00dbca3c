"""
The claims ledger: every result sentence of the seed abstracts (studies/claims.py: the sentences, quoted,
the rule that picks them, and which confirmatory hypotheses test each), with the status the stored
confirmatory analyses give it. Generated, never typed: `python analyze.py --ledger README.md` writes
results/ledger.md, results/ledger.json, results/ledger_forest.png and the front page's ledger section.

A claim's status:
- confirmed: every hypothesis that tests it passed in the seed's direction (a claimed null: equivalent);
- refuted: one passed against the seed's direction, or an equivalence failed with its whole 90% interval
  outside the margin (not Holm-adjusted: a descriptive refutation of a claimed null);
- undecided: neither; the row gives the effect each null could have detected;
- untestable: no hypothesis can test it at this scale or in this harness (the row says why);
- not tested: testable here, but in no confirmatory family yet (the row says what exists for it);
- pending: some of its hypotheses are declared but not yet run (unless another already refutes it).
With several tests: refuted if any is refuted; else pending while any is not run; else undecided if any
is undecided; else confirmed. A claim of a paper the seeds only cite (nope-1) is counted apart.
"""
import json
import os

from studies import wave
from studies.claims import CLAIMS, EXCLUDED, RULE
from studies.common import ci, f, hypothesis_status, table
from studies.rung import across, verdict
from studies.wave import find

STATUSES = ("confirmed", "refuted", "undecided", "untestable", "not tested", "pending")
NOT_TESTED = "not in a confirmatory family"  # how claims.py words a testable claim no family tests yet
COLOURS = {"confirmed": "tab:green", "refuted": "tab:red", "undecided": "tab:grey", "pending": "tab:blue"}  # pending: no effect yet
LEDGER_BEGIN, LEDGER_END = "<!-- claims ledger -->", "<!-- /claims ledger -->"


def load_families(results):
    """{(wave, family): decided family} from every wave's results/STUDY/<name>/analysis.json (studies/waves/:
    confirm, confirm2, rung1)."""
    out = {}
    for study in sorted(os.listdir(results)) if os.path.isdir(results) else ():
        for w in wave.waves().values():
            path = os.path.join(results, study, w["name"], "analysis.json")
            if not os.path.isfile(path):
                continue
            with open(path) as fh:
                conf = json.load(fh).get("confirmatory") or {}
            if w["layout"] == "family" and conf.get("family"):
                out[w["wave"], conf["family"]["study"]] = conf["family"]
            for name, fam in (conf.get("families") or {}).items():
                out[w["wave"], name] = fam
    return out


def claim_row(c, fams):
    """A claim with its tests (each with its decided hypothesis, status and words) and its status."""
    tests = []
    for wave, family, hid in c.get("tests") or ():
        h = find(fams, wave, family, hid)
        st, words = hypothesis_status(h)
        tests.append({"wave": wave, "family": family, "id": hid, "status": st, "words": words,
                      "effect": (h or {}).get("effect"), "ci": (h or {}).get("ci"), "n": (h or {}).get("n"),
                      "p_holm": (h or {}).get("p_holm"), "margin": (h or {}).get("margin"),
                      "declared": (h or {}).get("declared"), "sd": (h or {}).get("sd"), "mde": (h or {}).get("mde")})
    pending = sum(t["status"] == "pending" for t in tests)
    if c.get("untestable") and not tests:
        status = "not tested" if c["untestable"].startswith(NOT_TESTED) else "untestable"
    else:
        status = combined([t["status"] for t in tests])
    return {**{k: c.get(k) for k in ("id", "paper", "quote", "tiny", "untestable", "prior_work", "cited",
                                      "paraphrase")}, "status": status, "pending_tests": pending, "tests": tests,
            "rung": rung_row(c, tests, fams)}


def combined(statuses):
    """A claim's status from its tests' (the rule above)."""
    done = [s for s in statuses if s != "pending"]
    return ("refuted" if "refuted" in done else "pending" if len(done) < len(statuses) else
            "undecided" if "undecided" in done else "confirmed")


def rung_row(c, tests, fams):
    """The claim at the larger rung (studies/waves/rung1.toml): each tiny test's rerun (its rung verdict, effect,
    and the comparison across sizes), the claim's rung status by the same rule, and holds / weakens / flips; or
    why it has no rung (skipped, or not decided at the tiny size)."""
    rw = wave.rung()
    index = wave.mirrors(rw)
    rows = []
    for t in tests:
        key = (t["wave"], t["family"], t["id"])
        if key not in index:
            continue
        name, hid = index[key]
        h = find(fams, rw["wave"], name, hid)
        a = across(find(fams, t["wave"], t["family"], t["id"]), h)
        rows.append({"tiny": list(key), "family": name, "id": hid, "status": hypothesis_status(h)[0],
                     "gated_out": (h or {}).get("gated_out") or [],
                     "words": hypothesis_status(h)[1], "effect": (h or {}).get("effect"), "ci": (h or {}).get("ci"),
                     "n": (h or {}).get("n"), "p_holm": (h or {}).get("p_holm"), "margin": (h or {}).get("margin"),
                     "declared": (h or {}).get("declared"), "sd": (h or {}).get("sd"),
                     "size": rw["runs"][rw["families"][name]["runs"]]["size"], "across": a})
    if not rows:
        why = wave.skipped(rw, combined([t["status"] for t in tests]), [(t["wave"], t["family"], t["id"]) for t in tests]) if tests else None
        return {"status": None, "why": why or ("no test at the tiny size" if not tests else "not in the rung"),
                "tests": []}
    st = combined([r["status"] for r in rows])
    missing = [f"w{t['wave']} {t['family']}/{t['id']}" for t in tests if (t["wave"], t["family"], t["id"]) not in index]
    tiny = combined([t["status"] for t in tests])
    v = verdict(tiny, st)
    marks = list(dict.fromkeys(r["across"]["why"] for r in rows if r["across"].get("why")))
    if v == "weakens" and marks:  # why it weakened: too few seeds for the tiny effect, or a recipe not learned
        v += f" ({'; '.join(marks)})"
    why = [f"not rerun: w{t['wave']} {t['family']}/{t['id']} ({wave.not_rerun(rw).get((t['wave'], t['family'], t['id']), 'not in the rung')})"
           for t in tests if (t["wave"], t["family"], t["id"]) not in index]
    return {"status": st, "verdict": v, "tests": rows, "not_rerun": missing, "why": "; ".join(why) or None}


def walls(results):
    """{(wave, study): confirmatory.wall} of every wave's stored analyses, results/STUDY/<name> (None: not
    analysed yet). The rung's one sweep has one wall, stored in each of its run-studies' analyses."""
    out = {}
    for w in wave.waves().values():
        for study in w["runs"]:
            path = os.path.join(results, study, w["name"], "analysis.json")
            conf = json.load(open(path)).get("confirmatory") if os.path.isfile(path) else None
            out[w["wave"], study] = (conf or {}).get("wall") if conf is not None else None
    return out


def ledger(results):
    fams = load_families(results)
    rows = [claim_row(c, fams) for c in CLAIMS]
    counts = {s: sum(r["status"] == s and not r.get("cited") for r in rows) for s in STATUSES}
    w = walls(results)
    return {"rule": RULE, "statuses": __doc__.split("A claim's status:")[1].strip(),
            "n": sum(not r.get("cited") for r in rows), "cited": [r for r in rows if r.get("cited")], "counts": counts, "rows": rows, "excluded": EXCLUDED,
            "walls": [{"wave": k[0], "study": k[1], "wall": v} for k, v in w.items()]}


def waves_line(led):
    """Which confirmatory sweeps have been analysed, and their measured walls (the rung's: rung_md)."""
    ws = [w for w in wave.waves().values() if w.get("kind") != "rung"]
    parts, total = {w["wave"]: [] for w in ws}, {w["wave"]: 0 for w in ws}
    for x in (x for x in led["walls"] if x["wave"] in parts):
        wl = x["wall"]
        parts[x["wave"]].append(f"{x['study']} {wl['text'].split(' on ')[0]}" if wl else f"{x['study']} not analysed yet")
        total[x["wave"]] += wl["seconds"] if wl else 0
    hms = lambda t: f"{t // 3600} h {t % 3600 // 60} min {t % 60} s"
    line = f"Measured walls on 2 cores, wave 1 ({ws[0]['declared_in']}): {', '.join(parts[1])}; {hms(total[1])} in all. "
    for w in ws[1:]:
        n = w["wave"]
        line += (f"Wave {n} ({w['declared_in']}, `CONFIRM={n} bash sweep.sh STUDY`): {', '.join(parts[n])}; "
                 f"{hms(total[n])} " + ("so far. " if any(x["wall"] is None for x in led["walls"] if x["wave"] == n)
                                        else "in all. "))
    return line + "Each write-up says what else shared the cores."


def count_line(led):
    c = led["counts"]
    cited = "; ".join(f"{r['id']}: {r['status']}" for r in led["cited"])
    return (f"**{led['n']} seed claims: {c['confirmed']} confirmed, {c['refuted']} refuted, {c['undecided']} "
            f"undecided, {c['untestable']} untestable here, {c['not tested']} not tested yet"
            + (f", {c['pending']} pending (runs not finished)" if c["pending"] else "")
            + (f"; plus {len(led['cited'])} claim of a paper the seeds cite ({cited})" if cited else "") + ".**")


def quote(r):
    q = r["quote"]
    tag = (" (a cited paper's claim, not a seed's; paraphrased)" if r.get("cited") else
           " (prior work, as the abstract states it)" if r.get("prior_work") else "")
    return (q if r.get("paraphrase") else f"\"{q}\"") + tag


def decided_by(r, short=False):
    """The tests behind a row and their verdicts (short: statuses only, and the reason's first clause)."""
    if r["status"] in ("untestable", "not tested"):
        why = r["untestable"].split(";")[0] if short else r["untestable"]  # claims.py keeps ';' out of brackets
        return why.split(": ", 1)[-1] if short and r["status"] == "not tested" else why
    return "; ".join(f"w{t['wave']} {t['family']}/{t['id']}: {t['status'] if short else t['words']}"
                     for t in r["tests"])


def front_md(led):
    """The front page's ledger: the count line, which claims reproduced and which did not (each by id, with
    the quoted words and tests in results/ledger.md), the walls, the plot."""
    by = lambda st: ", ".join(r["id"] for r in led["rows"] if r["status"] == st and not r.get("cited")) or "none"
    L = [count_line(led), "",
         "Every sentence of the seed abstracts that states a result, in the seeds' order, quoted with its status, "
         "its restatement in tiny terms and the tests behind it: [results/ledger.md](results/ledger.md) (rule and "
         "statuses there). Generated by `python analyze.py --ledger README.md` from `results/*/confirm*/analysis.json`.",
         "",
         f"- Reproduced here (confirmed): {by('confirmed')}.",
         f"- Did not reproduce (refuted): {by('refuted')}.",
         f"- Undecided (the detectable effects are in the ledger): {by('undecided')}.",
         *([f"- Pending (wave 2 runs not finished): {by('pending')}."] if led["counts"]["pending"] else []),
         f"- Untestable here: {by('untestable')}; not tested yet: {by('not tested')}.", "",
         waves_line(led), "",
         "![Each tested claim's effect and interval, in the seed's direction](results/ledger_forest.png)", ""]
    L += rung_md(led)
    return L


RUNG_VERDICTS = ("holds", "weakens", "flips", "pending")


def rung_md(led):
    """The front page's lines on the larger rung: which decided claims hold, weaken or flip there; which were
    skipped and why; the plot of effect against size."""
    rw = wave.rung()
    rows = [r for r in led["rows"] if r["status"] in ("confirmed", "refuted")]
    by = lambda v: ", ".join(r["id"] for r in rows if (r["rung"].get("verdict") or "").split(" ")[0] == v) or "none"
    skipped = [r for r in rows if r["rung"]["status"] is None]
    sizes = ", ".join(f"{k} {v['size']}" for k, v in rw["runs"].items())
    L = [f"**At a larger size** (the rung, `bash sweep.sh {rw['name']}`: {sizes}; {rw['declared_in']}), the claims decided at "
         "the tiny size:", "",
         f"- Hold (the same verdict): {by('holds')}.",
         f"- Weaken (undecided at the larger size): {by('weakens')}.",
         f"- Flip (confirmed at one size, refuted at the other): {by('flips')}.",
         f"- Not learned at the larger size (every seed failed a recipe's gate): {by('not')}.",
         *([f"- Pending (the rung's runs not finished): {by('pending')}."] if by("pending") != "none" else []),
         "- Skipped: " + ("; ".join(f"{r['id']} ({r['rung']['why']})" for r in skipped) or "none") + ".", "",
         rung_wall_line(led), "",
         "Each claim's effect at both sizes, with the difference and its interval: the rung column of "
         "[results/ledger.md](results/ledger.md).", "",
         "![Each claim's effect against model size (log axis), the seeds' sizes marked where their documents state "
         "them](results/ledger_sizes.png)", ""]
    return L


def rung_wall_line(led):
    """The rung's measured wall (one sweep for every run-study), or that it has not been published yet."""
    w = next((x["wall"] for x in led["walls"] if x["wave"] == 3 and x["wall"]), None)
    return (f"Measured wall of `bash sweep.sh rung1` on 2 cores (every run-study; the issue's budget: 4 h): "
            f"{w['text']}." if w else "The rung's wall: not published yet (its jobs are not all done).")


def full_md(led):
    L = ["# The claims ledger", "", "Generated by `python analyze.py --ledger README.md`; do not edit.", "",
         count_line(led), "", "## Which sentences", "", led["rule"], "", "## Statuses", "", led["statuses"], "",
         "## Claims", ""]
    rows = []
    for r in led["rows"]:
        tests = "<br>".join(
            f"w{t['wave']} {t['family']}/{t['id']}: {t['words']}"
            + (f", {ci(t['effect'], *(t['ci'] or (None, None)), '+.3g')}, Holm p {f(t['p_holm'], '.2g')}, "
               f"{t['n']} seeds" if t["effect"] is not None else "") for t in r["tests"]) or r["untestable"]
        rows.append([r["id"], quote(r), r["tiny"], r["status"], tests, rung_cell(r)])
    L += table(["#", "the seed's words", "in tiny terms", "status", "tests", f"larger rung ({wave.rung()['declared_in']})"], rows) + [""]
    L += ["## Sentences left out, and why", ""]
    L += table(["paper", "sentence", "why not a result claim"], [[e["paper"], f"\"{e['quote']}\"", e["why"]]
                                                                for e in led["excluded"]]) + [""]
    L += ["## `ledger.json`", "", JSON_KEYS, ""]
    return L


JSON_KEYS = (
    "results/ledger.json holds this page as data: `rule`, `statuses` (the two texts above), `n` (seed claims), "
    "`counts` (claims by status), `cited` (the cited paper's rows), `excluded` (paper, quote, why), `walls` (wave: 1, 2 or 3 "
    "for the rung, whose run-studies share one wall; study, wall: seconds, sittings, jobs, text; null until analysed), `plot` and `sizes_plot` (the figures' paths) "
    "and `rows`, one per claim: `id`, `paper`, `quote`, `tiny`, `status`, `untestable`, `prior_work`, `cited`, "
    "`paraphrase`, `pending_tests`, `tests` (each: wave, family, id, status, words, effect, ci, n, p_holm, margin, "
    "declared, sd, mde) and `rung`: the larger rung's `status` (null when the claim has no rung test, with `why`), "
    "its `verdict` across sizes (holds, weakens, flips, pending), `not_rerun` (tiny tests without a rung test) and "
    "`tests`, each rung test with `tiny` (the [wave, family, id] it reruns), `family`, `id`, `size`, `status`, "
    "`words`, `effect`, `ci`, `n`, `p_holm`, `margin`, `declared`, `sd` and `across`: `tiny` and `rung` statuses, "
    "`diff` (rung minus tiny effect), `diff_ci` (its 95% Welch interval) and `verdict`. Every per-seed value behind "
    "these is in the analysis.json each test names (results/STUDY/confirm, confirm2, rung1).")


def rung_cell(r):
    """The ledger's rung column: the claim's status at the larger size and its verdict across sizes, each rerun
    test's effect and the difference from the tiny effect; or why there is none."""
    g = r["rung"]
    if g["status"] is None:
        return "-" if g["why"] == "no test at the tiny size" else f"not run: {g['why']}"
    parts = [f"**{g['status']}** ({g['verdict']})"]
    for t in g["tests"]:
        a = t["across"]
        parts.append(f"{t['size']} {t['family']}/{t['id']}: {t['words']}"
                     + (f", {ci(t['effect'], *(t['ci'] or (None, None)), '+.3g')}, Holm p {f(t['p_holm'], '.2g')}, "
                        f"{t['n']} seeds" + (f" ({len(t['gated_out'])} gated out)" if t["gated_out"] else "")
                        + f"; rung - tiny {ci(a['diff'], *(a['diff_ci'] or (None, None)), '+.3g')}: {a['verdict']}"
                        if t["effect"] is not None else ""))
    if g.get("why"):
        parts.append(g["why"])
    return "<br>".join(parts)


def sizes_plot(led, path):
    """Each claim's rerun tests: the effect in the seed's direction against non-embedding parameters (log
    axis), tiny and rung, with their intervals; differences in units of the tiny sd (left), claimed nulls over
    their margin (right). The seeds' own sizes are marked where their documents state them (QAT 15M-100M;
    Cracks 7B); the other seed abstracts state none. The tiny point of a family spanning sizes (the QAT nulls
    over 14K-39K) sits at its largest size (each rung hypothesis's `params`)."""
    from studies.common import figures
    rw = wave.rung()
    pts = {}
    for r in led["rows"]:
        for t in r["rung"]["tests"]:
            key = (t["family"], t["id"])
            tiny = next((x for x in r["tests"] if [x["wave"], x["family"], x["id"]] == t["tiny"]), None)
            if tiny is None or tiny["effect"] is None:
                continue
            pts.setdefault(key, {"claims": [], "tiny": tiny, "rung": t, "paper": r["paper"]})["claims"].append(r["id"])
    if not pts:
        return None
    fig, axes = figures(2, 6, 4)
    for ax, equiv in ((axes[0][0], False), (axes[0][1], True)):
        sel = [(k, v) for k, v in pts.items() if (v["tiny"]["margin"] is not None) == equiv and (equiv or v["tiny"]["sd"])]
        for i, (k, v) in enumerate(sel):
            params = dict(zip(("tiny", "rung"), next(d["params"] for d in rw["families"][k[0]]["hypotheses"]
                                                     if d["id"] == k[1])))
            scale = v["tiny"]["margin"] if equiv else v["tiny"]["sd"] / (v["tiny"]["declared"] or 1)
            xs, ys, lo, hi, cols = [], [], [], [], []
            for which, t in (("tiny", v["tiny"]), ("rung", v["rung"])):
                if t["effect"] is None or not t["ci"]:
                    continue
                xs.append(params[which] * (1 + 0.04 * i))
                ys.append(t["effect"] / scale)
                lo.append(min(t["ci"]) / scale if scale > 0 else max(t["ci"]) / scale)
                hi.append(max(t["ci"]) / scale if scale > 0 else min(t["ci"]) / scale)
                cols.append(COLOURS.get(t["status"], "k"))
            ax.plot(xs, ys, "-", color="0.6", lw=0.8)
            for x, y, a, b, c in zip(xs, ys, lo, hi, cols):
                ax.plot([x, x], [a, b], color=c, lw=1.5)
                ax.plot([x], [y], "o", color=c, ms=3)
            if xs:
                ax.annotate(f"{k[1]} ({', '.join(v['claims'])})", (xs[-1], ys[-1]), fontsize=5, xytext=(3, 0),
                            textcoords="offset points")
        for paper, (a, b) in rw["seed_sizes"].items():
            ax.axvspan(a, b * 1.05, color="0.85")
            ax.text(a, 0.98, f"{paper} seed", transform=ax.get_xaxis_transform(), fontsize=5, va="top")
        ax.set_xscale("log")
        ax.axhline(0, color="k", lw=0.8)
        if equiv:
            for y in (-1, 1):
                ax.axhline(y, color="k", lw=0.8, ls=":")
        ax.set_xlabel("non-embedding parameters", fontsize=7)
        ax.set_ylabel("claimed null: effect / margin (90% interval)" if equiv else
                      "effect in the seed's direction / tiny sd (95% interval)", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def forest(led, path):
    """One row per tested hypothesis (labelled with the claims it decides), coloured by status: left, the
    differences, effect and 95% interval in the seed's direction in units of the per-seed sd (d_z: the units
    differ, nats, exact match, z); right, the claimed nulls, effect and 90% interval over the margin (+-1)."""
    from studies.common import figures
    tests, claims = {}, {}
    for r in led["rows"]:  # a hypothesis deciding several claims is drawn once
        for t in r["tests"]:
            if t["effect"] is not None and t["ci"] and (t["sd"] or t["margin"]):
                key = (t["wave"], t["family"], t["id"])
                tests.setdefault(key, t)
                claims.setdefault(key, []).append(r["id"])
    diff = [(k, t) for k, t in tests.items() if t["margin"] is None and t["sd"]]
    equiv = [(k, t) for k, t in tests.items() if t["margin"] is not None]
    if not diff and not equiv:
        return None
    fig, axes = figures(2, 6, 0.3 * max(len(diff), len(equiv)) + 1.4)
    for ax, rows, scale, xlabel in (
            (axes[0][0], diff, lambda t: t["sd"] / (t["declared"] or 1),
             "effect in the seed's direction / per-seed sd (d_z), 95% interval"),
            (axes[0][1], equiv, lambda t: t["margin"], "claimed null: effect / margin, 90% interval (| = margin)")):
        for i, (k, t) in enumerate(reversed(rows)):
            e, lo, hi = (x / scale(t) for x in (t["effect"], *t["ci"]))
            ax.plot([min(lo, hi), max(lo, hi)], [i, i], color=COLOURS[t["status"]], lw=2)
            ax.plot([e], [i], "o", color=COLOURS[t["status"]], ms=4)
        ax.axvline(0, color="k", lw=0.8)
        if rows is equiv:
            for x in (-1, 1):
                ax.axvline(x, color="k", lw=0.8, ls=":")
        else:
            ax.set_xscale("symlog", linthresh=1)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{', '.join(claims[k])}: w{k[0]} {k[1]}/{k[2]}" for k, _ in reversed(rows)], fontsize=6)
        ax.set_xlabel(xlabel, fontsize=7)
    for st, col in COLOURS.items():
        if st != "pending":
            axes[0][0].plot([], [], color=col, lw=2, label=st)
    axes[0][0].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def with_ledger(readme, led):
    if LEDGER_BEGIN not in readme or LEDGER_END not in readme:
        return None
    head, rest = readme.split(LEDGER_BEGIN, 1)
    return head + LEDGER_BEGIN + "\n\n" + "\n".join(front_md(led)) + "\n" + LEDGER_END + rest.split(LEDGER_END, 1)[1]
