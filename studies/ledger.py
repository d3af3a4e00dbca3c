"""
The claims ledger: every result sentence of the seed abstracts (studies/claims.py: the sentences, quoted,
the rule that picks them, and which confirmatory hypotheses test each), with the status the stored
confirmatory analyses give it. Generated, never typed: `python analyze.py --ledger README.md` writes
results/ledger.md, results/ledger.json, results/ledger_forest.png and the front page's ledger section.

A claim's status:
- confirmed: every part of its sentence has tests, and every test of every part passed in the seed's direction
  (a claimed null: equivalent);
- partial: every tested part is confirmed, and some part has no test (untestable here, or not tested yet): the
  row names the part;
- refuted: a part's test passed against the seed's direction, or an equivalence failed with its whole 90%
  interval outside the margin (not Holm-adjusted: a descriptive refutation of a claimed null), or a directional
  test's 95% interval lies inside +-sesoi, its declared smallest effect of interest ('negligible': refutes 'the
  effect exists'; Lakens 2017, Simonsohn 2015) -- and the sentence states what was refuted;
- undecided: neither; the row gives the effect each null could have detected. A test refuted on this project's
  own assumption (a task order, a fixed step budget, a window that grows with N, this project's ExPE values) or
  against a baseline or direction the sentence does not state leaves its part undecided, never refuted, and the
  row says which assumption;
- pending: a test of some part is declared but not yet run (a later wave's test that supersedes an earlier one
  included), unless another part is already refuted;
- untestable: no part can be tested at this scale or in this harness (the row says why);
- not tested: testable here, but no part is in a confirmatory family yet (the row says what exists for it).
A part's status from its tests (a superseded test is shown, with why, and left out): untestable if every test's
declared gate showed its measure has no range at this scale (cracks-9's sink: no sink forms); else, those left
out, refuted if any is refuted; else pending while any is not run; else undecided if any is undecided; else
confirmed (a part declared
"at least k of its tests", as cracks-8's "several", is confirmed when k are, and refuted when so many are refuted
that k cannot be). A claim's from its parts: refuted if any is; else pending; else undecided; else partial if
a part has no test; else confirmed. A claim of a paper the seeds only cite (nope-1) is counted apart. The count
line also counts the distinct tests (wave, family, id) behind the seed claims by their status, superseded and
beside tests apart.
"""
import json
import os

from studies import wave
from studies.claims import CLAIMS, EXCLUDED, MARGIN_SOURCES, RULE, SOURCE_OF
from studies.common import ci, f, hypothesis_status, table
from studies.rung import across, verdict
from studies.wave import find

STATUSES = ("confirmed", "partial", "refuted", "undecided", "pending", "untestable", "not tested")
TEST_STATUSES = ("confirmed", "refuted", "undecided", "untestable", "pending")  # untestable: a gate showed no range
NOT_TESTED = "not in a confirmatory family"  # how claims.py words a testable claim no family tests yet
COLOURS = {"confirmed": "tab:green", "refuted": "tab:red", "undecided": "tab:grey", "untestable": "tab:olive",
           "pending": "tab:blue"}  # pending: no effect yet
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


def test_row(ref, fams):
    """One test of a part (claims.py: {test, rests_on, superseded_by, why}) with its decided hypothesis: its status
    and words, and, where a refutation rests on this project's assumption (rests_on), the part's reading of it:
    undecided, with the assumption named. A margin or sesoi carries its source (the stored declaration's, else
    claims.MARGIN_SOURCES for waves 1-2)."""
    wv, family, hid = ref["test"]
    h = find(fams, wv, family, hid)
    st, words = hypothesis_status(h)
    if st == "refuted" and ref.get("rests_on"):
        st, words = "undecided", f"{words}; undecided here: the refutation rests on {ref['rests_on']}"
    src = (h or {}).get("source") or MARGIN_SOURCES.get(SOURCE_OF.get((wv, family, hid)))
    return {"wave": wv, "family": family, "id": hid, "status": st, "words": words,
            "effect": (h or {}).get("effect"), "ci": (h or {}).get("ci"), "n": (h or {}).get("n"),
            "p_holm": (h or {}).get("p_holm"), "margin": (h or {}).get("margin"), "sesoi": (h or {}).get("sesoi"),
            "source": src if (h or {}).get("margin") is not None or (h or {}).get("sesoi") is not None else None,
            "declared": (h or {}).get("declared"), "sd": (h or {}).get("sd"), "mde": (h or {}).get("mde"),
            "planned": (h or {}).get("planned"), "rests_on": ref.get("rests_on"), "superseded_by": [list(x) for x in ref.get("superseded_by") or ()],
            "why": ref.get("why")}


def part_status(part, tests):
    """A part's status from its tests' (superseded ones left out; the rule above)."""
    live = [t["status"] for t in tests if not t["superseded_by"]]
    if live and all(s == "untestable" for s in live):  # every test's gate showed its measure has no range here
        return "untestable"
    live = [s for s in live if s != "untestable"]
    if not live:
        return "not tested" if (part.get("untested") or "").startswith(NOT_TESTED) else "untestable"
    k = part.get("at_least")
    if k:  # "at least k of these": confirmed when k are, refuted when fewer than k can still be
        if live.count("confirmed") >= k:
            return "confirmed"
        if len(live) - live.count("refuted") < k:
            return "refuted"
        return "pending" if "pending" in live else "undecided"
    return combined(live)


def claim_row(c, fams):
    """A claim with its parts (each with its tests, each with its decided hypothesis, status and words, and the
    part's status), the tests beside it, the flat list of its tests, and its status (the rule above)."""
    parts, flat = [], {}
    for p in c.get("parts") or ():
        tests = [test_row(ref, fams) for ref in p["tests"]]
        for t in tests:  # a test superseded in one part and live in another is live
            key = (t["wave"], t["family"], t["id"])
            if key not in flat or (flat[key]["superseded_by"] and not t["superseded_by"]):
                flat[key] = t
        parts.append({"label": p["label"], "words": p["words"], "untested": p.get("untested"),
                      "stand_in": p.get("stand_in"), "at_least": p.get("at_least"), "status": part_status(p, tests),
                      "tests": tests})
    beside = [dict(test_row(b, fams), why=b["why"]) for b in c.get("beside") or ()]
    live = [t for t in flat.values() if not t["superseded_by"]]
    return {**{k: c.get(k) for k in ("id", "paper", "quote", "tiny", "untestable", "prior_work", "cited",
                                      "paraphrase")}, "status": claim_status([p["status"] for p in parts]),
            "pending_tests": sum(t["status"] == "pending" for t in live), "parts": parts, "beside": beside,
            "tests": list(flat.values()), "rung": rung_row(c, list(flat.values()), fams)}


def combined(statuses):
    """A part's status from its tests' (the rule above)."""
    done = [s for s in statuses if s != "pending"]
    return ("refuted" if "refuted" in done else "pending" if len(done) < len(statuses) else
            "undecided" if "undecided" in done else "confirmed")


def claim_status(parts):
    """A claim's status from its parts' (the rule above)."""
    tested = [s for s in parts if s not in ("untestable", "not tested")]
    if not tested:
        return "not tested" if "not tested" in parts else "untestable"
    for s in ("refuted", "pending", "undecided"):
        if s in tested:
            return s
    return "partial" if len(tested) < len(parts) else "confirmed"


def rung_row(c, tests, fams):
    """The claim at the larger rung (studies/waves/rung1.toml): each tiny test's rerun (its rung verdict, effect,
    and the comparison across sizes), the claim's rung status by the same rule, and holds / weakens / flips; or
    why it has no rung (skipped, or not decided at the tiny size). The verdict compares like with like: the tiny
    status of the tests the rung reran against theirs at the rung; where a live tiny test was not rerun, the rung
    status is at most partial and the verdict says "in part" (a rung that reran only a sentence's confirmed part
    neither confirms the sentence nor flips its refutation). The reruns of a superseded tiny test are listed
    (superseded: true) and left out of the rung status, as the tiny test is out of the claim's."""
    rw = wave.rung()
    index = wave.mirrors(rw)
    rows = []
    live = [t for t in tests if not t.get("superseded_by")]
    for t in tests:
        key = (t["wave"], t["family"], t["id"])
        if key not in index:
            continue
        name, hid = index[key]
        h = find(fams, rw["wave"], name, hid)
        a = across(find(fams, t["wave"], t["family"], t["id"]), h)
        st, words = hypothesis_status(h)
        if st == "refuted" and t.get("rests_on"):  # the tiny test's assumption holds at the rung too
            st, words = "undecided", f"{words}; undecided here: the refutation rests on {t['rests_on']}"
        rows.append({"tiny": list(key), "family": name, "id": hid, "status": st,
                     "gated_out": (h or {}).get("gated_out") or [],
                     "words": words, "effect": (h or {}).get("effect"), "ci": (h or {}).get("ci"),
                     "n": (h or {}).get("n"), "p_holm": (h or {}).get("p_holm"), "margin": (h or {}).get("margin"),
                     "declared": (h or {}).get("declared"), "sd": (h or {}).get("sd"),
                     "size": rw["runs"][rw["families"][name]["runs"]]["size"], "across": a,
                     "superseded": bool(t.get("superseded_by"))})
    if not any(not r["superseded"] for r in rows):
        later = sorted({f"wave {t['wave']}" for t in live if t["wave"] > rw["wave"]})
        # a claim whose every test a later wave declared was never the rung's to rerun, whatever they decided
        why = (None if live and all(t["wave"] > rw["wave"] for t in live) else
               wave.skipped(rw, combined([t["status"] for t in live]), [(t["wave"], t["family"], t["id"]) for t in live])
               if live else None)
        some = "its tests are" if all(t["wave"] > rw["wave"] for t in live) else "some of its tests are"
        why = why or ("no test at the tiny size" if not live else
                      f"not in the rung: {some} {' and '.join(later)}'s, declared after it" if later else
                      "not in the rung")
        return {"status": None, "why": why, "tests": rows}
    st = combined([r["status"] for r in rows if not r["superseded"]])
    gone = [t for t in live if (t["wave"], t["family"], t["id"]) not in index]  # live tiny tests the rung lacks
    missing = [f"w{t['wave']} {t['family']}/{t['id']}" for t in gone]
    # like for like: the tiny status of the tests the rung reran (a test not run yet has nothing to compare)
    done = [t["status"] for t in live if t not in gone and t["status"] != "pending"]
    tiny = combined(done) if done else "pending"
    v = verdict(tiny, st)
    marks = list(dict.fromkeys(r["across"]["why"] for r in rows if r["across"].get("why")))
    if v == "weakens" and marks:  # why it weakened: too few seeds for the tiny effect, or a recipe not learned
        v += f" ({'; '.join(marks)})"
    if gone:  # the rung never confirms a sentence part it did not rerun, and its verdict says it is partial
        st = "partial" if st == "confirmed" else st
        decided = combined([t["status"] for t in live if t["status"] != "pending"] or ["pending"])
        v = (f"not rerun: the tests that decide it ({', '.join(missing)})" if decided != tiny else
             v + f" (in part: {len(live) - len(gone)} of {len(live)} tests rerun)")
    why = [f"not rerun: w{t['wave']} {t['family']}/{t['id']} ("
           + ("declared after the rung" if t["wave"] > rw["wave"] else
              wave.not_rerun(rw).get((t["wave"], t["family"], t["id"]), "not in the rung")) + ")" for t in gone]
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
            "n": sum(not r.get("cited") for r in rows), "cited": [r for r in rows if r.get("cited")], "counts": counts,
            "test_counts": test_counts(rows), "rows": rows, "excluded": EXCLUDED,
            "walls": [{"wave": k[0], "study": k[1], "wall": v} for k, v in w.items()]}


def test_counts(rows):
    """The distinct tests (wave, family, id) behind the seed claims (not the cited paper's), by status: a test
    that decides a part, by the status it gives there (a refutation on this project's assumption: undecided; a
    test read both ways in two rows counts once, at its more cautious reading); superseded and beside tests
    apart, each counted once (a test that decides one row and is superseded in another counts as deciding)."""
    seen, superseded, beside = {}, set(), set()
    order = {"pending": 0, "untestable": 1, "undecided": 2, "refuted": 3, "confirmed": 4}
    for r in (r for r in rows if not r.get("cited")):
        for p in r["parts"]:
            for t in p["tests"]:
                key = (t["wave"], t["family"], t["id"])
                if t["superseded_by"]:
                    superseded.add(key)
                elif key not in seen or order[t["status"]] < order[seen[key]]:
                    seen[key] = t["status"]
        beside |= {(t["wave"], t["family"], t["id"]) for t in r["beside"]}
    out = {s: sum(v == s for v in seen.values()) for s in TEST_STATUSES}
    return {"n": len(seen), **out, "superseded": len(superseded - set(seen)), "beside": len(beside - set(seen))}


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
    """The claims by status, then the distinct tests behind them by status (superseded and beside apart), then the
    cited paper's claims."""
    c, t = led["counts"], led["test_counts"]
    cited = "; ".join(f"{r['id']}: {r['status']}" for r in led["cited"])
    return (f"**{led['n']} seed claims: {c['confirmed']} confirmed, {c['partial']} partial (a part untested), "
            f"{c['refuted']} refuted, {c['undecided']} undecided, {c['pending']} pending (declared tests not run "
            f"yet), {c['untestable']} untestable here, {c['not tested']} not tested yet; behind them {t['n']} "
            f"distinct tests: {t['confirmed']} confirmed, {t['refuted']} refuted, {t['undecided']} undecided, "
            f"{t['untestable']} untestable (a gate showed its measure has no range), {t['pending']} pending (declared, not run), and {t['superseded']} superseded and {t['beside']} beside "
            "(shown in their rows, out of the statuses)"
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
    """The front page's ledger, for a newcomer: the count line, the claims by status (each id a link to its row
    of results/ledger.md), one line of links, and the decided claims at the larger rung. The walls, the waves'
    prose and the reasons live in docs/waves.md, results/ledger.md and the write-ups."""
    link = lambda r: f"[{r['id']}](results/ledger.md#{r['id']})"
    ids = lambda rows: ", ".join(map(link, rows)) or "none"
    seed = [r for r in led["rows"] if not r.get("cited")]
    label = {"confirmed": "confirmed (reproduced here)", "partial": "partial (a part of the sentence untested)",
             "refuted": "refuted (did not reproduce)",
             "undecided": "undecided", "untestable": "untestable here", "not tested": "not tested yet",
             "pending": "pending (runs not finished)"}
    L = [count_line(led), "", "| status | claims |", "|---|---|"]
    L += [f"| {label[s]} | {ids([r for r in seed if r['status'] == s])} |" for s in STATUSES
          if s != "pending" or led["counts"]["pending"]]
    L += [f"| {r['status']}: a claim of a paper the seeds cite | {link(r)} |" for r in led["cited"]]
    L += ["", "Each claim's quote, tests and effects: [results/ledger.md](results/ledger.md) and "
          "[the forest plot](results/ledger_forest.png). Generated by `python analyze.py --ledger README.md`. "
          "The claims decided here, rerun at [the larger rung](docs/waves.md#the-larger-rung-wave-3) "
          "([effect against size](results/ledger_sizes.png)):", ""]
    decided = [r for r in led["rows"] if r["status"] in ("confirmed", "refuted")]
    by = lambda v: [r for r in decided if r["rung"]["status"] is not None and (r["rung"].get("verdict") or "").startswith(v)]
    part = lambda rows: ", ".join(link(r) + (" (in part)" if r["rung"].get("not_rerun") else "") for r in rows) or "none"
    L += ["| at the larger rung | claims |", "|---|---|",
          f"| holds | {part(by('holds'))} |", f"| weakens | {part(by('weakens'))} |", f"| flips | {part(by('flips'))} |"]
    L += [f"| {v} | {part(by(k))} |" for k, v in (("not learned", "not learned"), ("pending", "pending")) if by(k)]
    L += [f"| skipped (or its deciding tests not rerun) | {ids([r for r in decided if r['rung']['status'] is None or r['rung']['verdict'].startswith('not rerun')])} |", ""]
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
        rows.append([f'<a id="{r["id"]}"></a>{r["id"]}', quote(r), r["tiny"], r["status"], parts_cell(r), rung_cell(r)])
    L += table(["#", "the seed's words", "in tiny terms", "status", "tests", f"larger rung ({wave.rung()['declared_in']})"], rows) + [""]
    L += ["## Sentences left out, and why", ""]
    L += table(["paper", "sentence", "why not a result claim"], [[e["paper"], f"\"{e['quote']}\"", e["why"]]
                                                                for e in led["excluded"]]) + [""]
    L += ["## `ledger.json`", "", JSON_KEYS, ""]
    return L


def test_cell(t, why=True):
    """One test in the ledger's tests column: its verdict, effect and interval, its margin or sesoi with the source,
    for a superseded test what replaces it and why, and for a live test with a why (a rerun struck before its
    runs) that why."""
    s = (f"w{t['wave']} {t['family']}/{t['id']}: {t['words']}"
         + (f", {ci(t['effect'], *(t['ci'] or (None, None)), '+.3g')}, Holm p {f(t['p_holm'], '.2g')}, "
            f"{t['n']} seeds" if t["effect"] is not None else ""))
    for k in ("margin", "sesoi"):
        if t.get(k) is not None:
            s += f"; {k} +-{f(t[k], '.3g')} ({t['source'] or 'no source declared'})"
    if t.get("planned"):  # the power the wave's seeds bought, planned on its pilot before the runs
        pl = t["planned"]
        s += (f"; planned at {pl['seeds']} seeds: power {f(pl['power'], '.2f')} "
              + (f"at the margin" if t.get("margin") is not None else f"at the target {f(pl['target'], '+.3g')}")
              + (f", {f(pl['sesoi_power'], '.2f')} to refute at +-{f(pl['sesoi'], '.3g')}" if pl.get("sesoi_power") is not None else ""))
    if t["superseded_by"]:
        s = (f"~~{s}~~ superseded by " + ", ".join(f"w{w} {fa}/{i}" for w, fa, i in t["superseded_by"])
             + f": {t['why']}")
    elif why and t.get("why"):
        s += f" ({t['why']})"
    return s


def parts_cell(r):
    """The ledger's tests column: each part of the sentence (its label, its words where they are not the whole
    quote, its status), what stands in for the seed's, its tests or why it has none; then the tests beside it."""
    out = []
    for p in r["parts"]:
        head = "" if len(r["parts"]) == 1 and p["words"] == r["quote"] else (
            f"**{p['label']}**" + (f" ('{p['words']}')" if p["words"] != r["quote"] else "") + f": {p['status']}"
            + (f" (at least {p['at_least']} of its tests)" if p.get("at_least") else ""))
        lines = ([head] if head else []) + (
            [f"stand-in: {p['stand_in']}"] if p.get("stand_in") else []) + (
            [test_cell(t) for t in p["tests"]] or [f"no test: {p['untested']}"])
        out.append("<br>".join(lines))
    out += [f"beside, not deciding: {test_cell(t, why=False)}: {t['why']}" for t in r["beside"]]
    return "<br><br>".join(out)


JSON_KEYS = (
    "results/ledger.json holds this page as data: `rule`, `statuses` (the two texts above), `n` (seed claims), "
    "`counts` (claims by status), `cited` (the cited paper's rows), `excluded` (paper, quote, why), `walls` (wave: 1, 2 or 3 "
    "for the rung, whose run-studies share one wall; study, wall: seconds, sittings, jobs, text; null until analysed), `plot` and `sizes_plot` (the figures' paths), "
    "`test_counts` (the distinct tests behind the seed claims: n and by status, superseded, beside) "
    "and `rows`, one per claim: `id`, `paper`, `quote`, `tiny`, `status`, `untestable`, `prior_work`, `cited`, "
    "`paraphrase`, `pending_tests`, `parts` (each: label, words, untested, stand_in, at_least, status, tests), "
    "`beside` (tests shown, not deciding, each with why), `tests` (every test of its parts once; each: wave, family, "
    "id, status, words, effect, ci, n, p_holm, margin, sesoi, source, declared, sd, mde, planned (a published wave's "
    "plan on its pilot: seeds, target, power, seeds_needed, sesoi, sesoi_power, sesoi_seeds_needed), rests_on, superseded_by, "
    "why) and `rung`: the larger rung's `status` (null when the claim has no rung test, with `why`), "
    "its `verdict` across sizes (holds, weakens, flips, pending; a weakening's reason in brackets; where some live "
    "tiny tests were not rerun, the verdict on the reruns ends '(in part: k of n tests rerun)', or reads 'not rerun: "
    "the tests that decide it (...)' where the reruns alone would not give the claim's tiny status, and a rung "
    "`status` that would be confirmed is 'partial': the rung did not rerun the whole sentence), `not_rerun` (tiny "
    "tests without a rung test) and "
    "`tests`, each rung test with `tiny` (the [wave, family, id] it reruns), `superseded` (its tiny test is), `family`, `id`, `size`, `status`, "
    "`words`, `effect`, `ci`, `n`, `p_holm`, `margin`, `declared`, `sd` and `across`: `tiny` and `rung` statuses, "
    "`diff` (rung minus tiny effect), `diff_ci` (its 95% Welch interval) and `verdict`. Every per-seed value behind "
    "these is in the analysis.json each test names (results/STUDY/NAME, NAME a wave's: confirm, confirm2, rung1, "
    "cracks4, wave5).")


def rung_cell(r):
    """The ledger's rung column: the claim's status at the larger size and its verdict across sizes, each rerun
    test's effect and the difference from the tiny effect; or why there is none."""
    g = r["rung"]
    if g["status"] is None and not g["tests"]:
        return "-" if g["why"] == "no test at the tiny size" else f"not run: {g['why']}"
    parts = [f"**{g['status']}** ({g['verdict']})" if g["status"] is not None else f"not run: {g['why']}"]
    for t in g["tests"]:  # a superseded tiny test's rerun is shown, struck, out of the status
        a = t["across"]
        parts.append(("superseded at the tiny size: " if t.get("superseded") else "")
                     + f"{t['size']} {t['family']}/{t['id']}: {t['words']}"
                     + (f", {ci(t['effect'], *(t['ci'] or (None, None)), '+.3g')}, Holm p {f(t['p_holm'], '.2g')}, "
                        f"{t['n']} seeds" + (f" ({len(t['gated_out'])} gated out)" if t["gated_out"] else "")
                        + f"; rung - tiny {ci(a['diff'], *(a['diff_ci'] or (None, None)), '+.3g')}: {a['verdict']}"
                        if t["effect"] is not None else ""))
    if g.get("why") and g["status"] is not None:
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
        for t in (t for t in r["rung"]["tests"] if not t.get("superseded")):
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
    for r in led["rows"]:  # a hypothesis deciding several claims is drawn once; a superseded one is not drawn
        for t in r["tests"]:
            if t["effect"] is not None and t["ci"] and (t["sd"] or t["margin"]) and not t["superseded_by"]:
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
