"""The claims ledger (studies/claims.py, studies/ledger.py): every quote is the seed's own words, split into the
parts (findings) it states, each part's words its own; every test names a declared hypothesis and every declared
hypothesis decides a part (or stands beside a row, with why); the statuses follow the rule of results/ledger.md
(shown on planted families: partial, a refutation on this project's assumption, a superseding test not yet run,
'at least k'); each of issue 59's rules holds on the stored ledger, and each check is shown able to fail on the
rows or text it was written against; the front page, results/ledger.md and each write-up's generated sections
are exactly what their generators write."""
import json
import os
import re

import pytest

import analyze
from conftest import ROOT
from studies import claims, ledger, wave
from studies.rung import below_minimum

TINY = [w for w in wave.waves().values() if w.get("kind") != "rung"]  # the rung reruns their tests: no claim of its own
DECL = {(w["wave"], n, h["id"]): h for w in TINY for n, c in w["families"].items() for h in c["hypotheses"]}
DECLARED = set(DECL)
GATE_IDS = {h["id"] for w in TINY for c in w["families"].values() for h in c["hypotheses"] if h.get("gate")}
W2, RW = wave.get("confirm2"), wave.rung()
LED = ledger.ledger(os.path.join(ROOT, "results"))
ROWS = {r["id"]: r for r in LED["rows"]}


def part_refs(c):
    return [t for p in c["parts"] for t in p["tests"]]


def test_every_claim_is_quoted_split_declared_and_has_a_reason():
    ids = [c["id"] for c in claims.CLAIMS]
    assert len(ids) == len(set(ids)) >= 40
    for c in claims.CLAIMS:
        assert c["quote"] and c["tiny"] and c["parts"], c["id"]
        for p in c["parts"]:
            assert p["label"] and p["words"] in c["quote"], f"{c['id']}: part words not in its quote: {p['words']!r}"
            assert p["tests"] or p["untested"], f"{c['id']} / {p['label']}: neither a test nor a reason"
            for t in p["tests"]:
                assert t["test"] in DECLARED, f"{c['id']}: {t['test']} is no declared hypothesis"
                assert t["test"][2] not in GATE_IDS, f"{c['id']}: a gate is not a claim's test"
                for s in t["superseded_by"]:  # a superseding test is declared and decides the same part
                    assert s in DECLARED and s in [x["test"] for x in p["tests"] if not x["superseded_by"]], (c["id"], s)
                    assert t["why"], f"{c['id']}: {t['test']} superseded without a reason"
        for b in c["beside"]:
            assert b["test"] in DECLARED and b["why"], c["id"]
    # every declared hypothesis but a gate decides a part of some claim, or stands beside one with why
    used = {tuple(t) for c in claims.CLAIMS for t in c["tests"]}
    assert {d for d in DECLARED if d[2] not in GATE_IDS} <= used


def test_a_wave_that_names_its_claims_agrees_with_the_ledger():
    """A hypothesis that names the claims it decides (`ledger`, from wave 5 on) is a live test of each of them
    (claims.py may use it for another claim too: qat-8's 'noise-dominated regime below 50M' is qat-7's finding)."""
    for key, d in DECL.items():
        if "ledger" not in d:
            continue
        rows = {c["id"] for c in claims.CLAIMS if any(t["test"] == key and not t["superseded_by"] for t in part_refs(c))}
        assert set(d["ledger"]) <= rows, f"w{key[0]} {key[1]}/{key[2]}: the wave says {d['ledger']}, claims.py {sorted(rows)}"


# -----------------------------------------------------------------------------
# the status rule, on planted families

def h(**k):
    return {"n": 8, "effect": 0.1, "ci": [0.05, 0.15], "p": 0.01, "passed": False, "opposite": False, **k}


def row(parts, beside=()):
    return {"id": "x", "quote": "q", "tiny": "t", "parts": parts, "beside": list(beside)}


def part(tests, untested=None, at_least=None):
    return claims._p("p", "q", tests, untested, at_least=at_least)


def test_statuses_follow_the_decided_hypotheses():
    assert ledger.hypothesis_status(None)[0] == "pending"
    assert ledger.hypothesis_status(h(passed=True))[0] == "confirmed"
    assert ledger.hypothesis_status(h(opposite=True))[0] == "refuted"
    assert ledger.hypothesis_status(h(margin=0.01))[0] == "refuted"  # interval wholly outside +-0.01
    assert ledger.hypothesis_status(h(margin=0.2))[0] == "undecided"  # not shown, not excluded
    assert ledger.hypothesis_status(h(not_read="gate"))[0] == "undecided"
    assert ledger.hypothesis_status(h(not_read="no sink", untestable=True))[0] == "untestable"  # a gate showed no range
    assert ledger.hypothesis_status(h(negligible=True, sesoi=0.2))[0] == "refuted"  # inside +-sesoi: no effect
    assert ledger.hypothesis_status(h(passed=True, margin=0.2))[1].startswith("equivalent")
    rule = lambda **k: h(p=None, rule={"passed": False, "refuted": False, "words": "w", **k})  # noqa: E731 (the seed's PI rule)
    assert [ledger.hypothesis_status(rule(**k))[0] for k in ({"passed": True}, {"refuted": True}, {})] == [
        "confirmed", "refuted", "undecided"]
    fams = {(1, "qat"): {"hypotheses": [{"id": "null", **h(passed=True, margin=0.2)},
                                        {"id": "int4_wd33", **h(opposite=True)}]}}
    ok, bad, later = (1, "qat", "null"), (1, "qat", "int4_wd33"), (2, "qat-w2", "law_fit")
    st = lambda *parts, **k: ledger.claim_row(row(list(parts), **k), fams)["status"]  # noqa: E731
    r = ledger.claim_row(row([part([ok, bad, later])]), fams)
    assert r["status"] == "refuted" and r["pending_tests"] == 1  # a refutation stands with a test pending
    assert st(part([ok, later])) == "pending" and st(part([ok])) == "confirmed"
    assert st(part([], "a proof")) == "untestable" and st(part([], ledger.NOT_TESTED + ": x")) == "not tested"
    # partial: every tested part confirmed, another part without a test (untestable or not tested alike)
    assert st(part([ok]), part([], "no measure here")) == "partial"
    assert st(part([ok]), part([], ledger.NOT_TESTED + ": x")) == "partial"
    assert st(part([ok]), part([later])) == "pending"  # a part whose test is declared but not run
    # a refutation on this project's assumption (or an unnamed baseline) leaves the part undecided, with why
    r = ledger.claim_row(row([part([claims._t(*bad, rests_on="this project's task order")])]), fams)
    assert r["status"] == "undecided" and "this project's task order" in r["parts"][0]["tests"][0]["words"]
    # a superseded test is shown, out of the status: its replacement decides (pending until it runs)
    sup = claims._t(*bad, superseded_by=[ok], why="redone")
    assert st(part([sup, ok])) == "confirmed"
    assert st(part([claims._t(*ok, superseded_by=[later], why="redone"), later])) == "pending"
    # a test beside the row does not decide it
    assert ledger.claim_row(row([part([ok])], beside=[{**claims._t(*bad), "why": "b"}]), fams)["status"] == "confirmed"
    # "at least 2 of 3": confirmed at 2, refuted once 2 cannot be reached, else pending or undecided
    fams[(1, "qat")]["hypotheses"].append({"id": "other", **h(passed=True)})
    other = (1, "qat", "other")
    assert st(part([ok, other, bad], at_least=2)) == "confirmed"
    assert st(part([ok, bad, later], at_least=2)) == "pending"
    fams[(1, "qat")]["hypotheses"].append({"id": "bad2", **h(opposite=True)})
    assert st(part([ok, bad, (1, "qat", "bad2")], at_least=2)) == "refuted"
    # a part whose every test's gate showed no range is untestable (cracks-9's sink): beside a confirmed part, partial
    fams[(1, "qat")]["hypotheses"].append({"id": "flat", **h(not_read="no sink forms", untestable=True)})
    flat = (1, "qat", "flat")
    assert st(part([flat])) == "untestable" and st(part([ok]), part([flat])) == "partial"
    assert st(part([flat, ok])) == "confirmed"  # a no-range test beside a decided one: the decided one reads


def test_a_rung_test_below_its_minimum_is_not_read():
    """wave.decide and wave.redecide: a rung hypothesis left with fewer seeds than the minimum has no p (out of Holm's
    m) and says why; at or above it, and in a tiny wave, nothing changes."""
    hs = [{"id": "a", "n": 2, "p": 0.044}, {"id": "b", "n": 6, "p": 0.01}]
    out = below_minimum(RW, "rung-swan", [dict(x) for x in hs])
    assert out[0]["p"] is None and "2 seeds" in out[0]["not_read"] and "minimum of 6" in out[0]["not_read"]
    assert out[1] == hs[1]
    assert below_minimum(W2, "swan", [dict(x) for x in hs]) == hs


# -----------------------------------------------------------------------------
# issue 59's rules on the stored ledger, each check shown able to fail

def unconfirmed_parts_of_confirmed_rows(rows):
    """Confirmed rows with a part that has no confirmed live test, or a live test that is not confirmed."""
    bad = []
    for r in rows:
        if r["status"] != "confirmed":
            continue
        for p in r["parts"]:
            live = [t for t in p["tests"] if not t["superseded_by"]]
            if not live or any(t["status"] != "confirmed" for t in live):
                bad.append(f"{r['id']}: {p['label']}")
    return bad


def test_a_confirmed_row_has_every_part_confirmed():
    old = {"id": "qat-3", "status": "confirmed", "parts": [  # as the ledger had it: cosine moved out of the test
        {"label": "AdamW", "tests": [{"superseded_by": [], "status": "confirmed"}]},
        {"label": "cosine", "tests": []}]}
    assert unconfirmed_parts_of_confirmed_rows([old]) == ["qat-3: cosine"]
    assert not unconfirmed_parts_of_confirmed_rows(LED["rows"])


# The outcome a part's words name: a "penalty" is read on the penalty, a "schedule preference" on the loss itself
# (not the penalty), "the optimal warmdown" on which warmdown is best. The declared hypothesis's claim says which.
OUTCOME_WORDS = [
    (re.compile(r"\bschedule preference\b"), lambda d: "penalty" not in d["claim"]),
    (re.compile(r"\bpenalty\b"), lambda d: "penalty" in d["claim"]),
    (re.compile(r"\boptimal warmdown\b"), lambda d: bool(re.search(r"\blowest\b|\bbest\b", d["claim"]))),
]


def outcome_mismatches(rows):
    """(claim, part words, test) where a live test does not read the outcome the part's words name."""
    bad = []
    for c in rows:
        for p in c["parts"]:
            for rx, reads in OUTCOME_WORDS:
                if rx.search(p["words"]):
                    bad += [(c["id"], rx.pattern, t["test"]) for t in p["tests"]
                            if not t["superseded_by"] and not reads(DECL[t["test"]])]
                    break
    return bad


def test_each_part_is_tested_on_the_outcome_its_words_name():
    old_q7 = claims._row("qat-7", "qat", claims.CLAIMS[7]["quote"], "t", tests=[(2, "qat-w2", "int4_null_sizes")])
    old_q1 = claims._row("qat-1", "qat", claims.CLAIMS[0]["quote"], "t", tests=claims._QAT_NULL)
    assert {b[0] for b in outcome_mismatches([old_q7, old_q1])} == {"qat-7", "qat-1"}
    assert not outcome_mismatches(claims.CLAIMS)


BASELINES = {"sinusoidal": ("sinusoidal",), "RoPE": ("rotary", "RoPE")}


def unnamed_baseline_refutations(rows):
    """Rows refuted by a test against a baseline (sinusoidal, RoPE) their sentence does not name: a refutation
    counts only where the sentence states what was refuted."""
    bad = []
    for r in rows:
        for t in (t for p in r["parts"] for t in p["tests"] if not t["superseded_by"] and t["status"] == "refuted"):
            claim = DECL[(t["wave"], t["family"], t["id"])]["claim"]
            for b, names in BASELINES.items():
                if b in claim and not any(n.lower() in r["quote"].lower() for n in names):
                    bad.append(f"{r['id']}: {t['id']} against {b}")
    return bad


def test_a_refutation_counts_only_where_the_sentence_states_it():
    fams = ledger.load_families(os.path.join(ROOT, "results"))
    old = claims._row("expe-1", "expe", ROWS["expe-1"]["quote"], "t",
                      tests=[(2, "expe", "expe_rope_tasks"), (2, "expe", "expe_sin_tasks")])
    assert unnamed_baseline_refutations([ledger.claim_row(old, fams)]) == ["expe-1: expe_sin_tasks against sinusoidal"]
    assert not unnamed_baseline_refutations(LED["rows"])


def refuted_on_assumption(rows):
    """Refuted rows whose refutation rests on this project's assumption (a test with rests_on read as refuted)."""
    return [r["id"] for r in rows if r["status"] == "refuted" and any(
        t["rests_on"] for p in r["parts"] for t in p["tests"] if not t["superseded_by"] and t["status"] == "refuted")]


def test_no_refuted_row_rests_on_this_projects_assumption():
    old = {"id": "lg-bounds-6", "status": "refuted", "parts": [{"tests": [
        {"superseded_by": [], "status": "refuted", "rests_on": claims.TASK_ORDER}]}]}
    assert refuted_on_assumption([old]) == ["lg-bounds-6"]
    assert not refuted_on_assumption(LED["rows"])
    # the assumptions are named where they apply: the task order, the fixed budget, the ExPE values
    named = lambda cid: " ".join(t["rests_on"] or "" for p in ROWS[cid]["parts"] for t in p["tests"])  # noqa: E731
    assert "task order" in named("lg-bounds-6") and "fixed across N" in named("lg-bounds-1")
    assert all("ExPE values" in named(c) for c in ("expe-1", "expe-2", "expe-3"))


QAT_STAND_IN = re.compile(r"INT4 and INT3 stand in for INT8 and INT6|INT[34] stands in for INT6|INT[34] for INT6")


def unlabelled_stand_ins(rows):
    """QAT rows whose sentence names INT6 or INT8, tested here at INT4 or INT3, that do not label the stand-in."""
    bad = []
    for r in rows:
        tested = [p for p in r["parts"] if p["tests"]]
        if r["paper"] == "qat" and re.search(r"INT[68]", r["quote"]) and tested:
            if not any(QAT_STAND_IN.search(p.get("stand_in") or "") for p in tested):
                bad.append(r["id"])
    return bad


def test_rows_label_int4_and_int3_standing_in_for_int8_and_int6():
    old = claims._row("qat-2", "qat", ROWS["qat-2"]["quote"], "t", tests=claims._QAT_NULL)  # no stand_in
    assert unlabelled_stand_ins([old]) == ["qat-2"]
    assert not unlabelled_stand_ins(claims.CLAIMS)


def test_expe_1_says_what_it_is_refuted_on_and_whose_defaults_model_py_uses():
    r = ROWS["expe-1"]
    text = r["tiny"] + " ".join(t["why"] or "" for t in r["beside"])
    assert "sinusoidal" in text and "does not name" in text  # refuted only against an unnamed baseline
    import model
    c = model.GPTConfig()  # the row's numbers are model.py's defaults
    assert (c.expe_dims, c.expe_start, c.expe_slope, c.expe_on) == (2, 1.0, 0.0, "embed")
    assert "expe_dims = 2" in text and "expe_start = 1.0" in text and "1 / block_size" in text
    assert "not shown to be the paper's" in text


def test_every_margin_and_sesoi_has_its_source():
    bad = [f"{r['id']}: {t['family']}/{t['id']}" for r in LED["rows"] for t in r["tests"]
           if (t["margin"] is not None or t["sesoi"] is not None) and not t["source"]]
    assert not bad
    assert set(claims.SOURCE_OF.values()) <= set(claims.MARGIN_SOURCES)
    margins = {k for k, d in DECL.items() if d.get("margin") is not None and not d.get("source")}
    assert margins <= set(claims.SOURCE_OF), f"margins without a source: {sorted(margins - set(claims.SOURCE_OF))}"


# -----------------------------------------------------------------------------
# the count line and the generated pages

COUNT = re.compile(r"\*\*(\d+) seed claims: (.*?); behind them (\d+) distinct tests: (.*?)(?:; plus .*)?\.\*\*")


def count_errors(line, led):
    """What the count line gets wrong against the rows: the claims by status, the distinct tests by status."""
    m = COUNT.fullmatch(line)
    if not m:
        return ["no count of claims and of the distinct tests behind them"]
    bad = []
    seed = [r for r in led["rows"] if not r.get("cited")]
    claimed = {s: int(n) for n, s in re.findall(r"(\d+) (confirmed|partial|refuted|undecided|pending|untestable|not "
                                                 r"tested)", m.group(2))}
    for s in ledger.STATUSES:
        if claimed.get(s) != sum(r["status"] == s for r in seed):
            bad.append(f"{s}: {claimed.get(s)}")
    live = {(t["wave"], t["family"], t["id"]) for r in seed for p in r["parts"] for t in p["tests"] if not t["superseded_by"]}
    if int(m.group(3)) != len(live):
        bad.append(f"tests: {m.group(3)}, the rows name {len(live)}")
    return bad


def test_the_count_line_counts_claims_and_distinct_tests():
    old = ("**45 seed claims: 11 confirmed, 6 refuted, 14 undecided, 8 untestable here, 6 not tested yet; plus 1 "
           "claim of a paper the seeds cite (nope-1: confirmed).**")
    assert count_errors(old, LED) == ["no count of claims and of the distinct tests behind them"]
    line = ledger.count_line(LED)
    assert not count_errors(line, LED), count_errors(line, LED)
    assert count_errors(line.replace(f"behind them {LED['test_counts']['n']} ", "behind them 99 "), LED)
    assert sum(LED["counts"].values()) == LED["n"] == len([c for c in claims.CLAIMS if not c.get("cited")])
    t = LED["test_counts"]
    assert sum(t[s] for s in ledger.TEST_STATUSES) == t["n"] and "nope-1" in line


def refuted_list_errors(front, led):
    """The front page's list of claims that did not reproduce, against the ledger's refuted rows."""
    m = re.search(r"(?:Did not reproduce \(refuted\):|\| refuted \(did not reproduce\) \|)([^\n]*)", front)
    listed = set(re.findall(r"\b[a-z]+(?:-[a-z]+)*-\d+a?\b", m.group(1))) if m else set()
    return sorted(listed ^ {r["id"] for r in led["rows"] if r["status"] == "refuted" and not r.get("cited")})


def test_the_front_page_lists_as_refuted_only_the_refuted_rows():
    refuted = {r["id"] for r in LED["rows"] if r["status"] == "refuted" and not r.get("cited")}
    old = "- Did not reproduce (refuted): lg-bounds-1, lg-bounds-5, lg-bounds-6, expe-1, expe-2, expe-3.\n"
    assert refuted_list_errors(old, LED) == sorted(refuted ^ {"expe-1", "expe-2", "expe-3", "lg-bounds-1", "lg-bounds-5",
                                                              "lg-bounds-6"})
    assert not refuted_list_errors("| refuted (did not reproduce) | " + ", ".join(sorted(refuted)) + " |\n", LED)
    with open(os.path.join(ROOT, "README.md")) as fh:
        assert not refuted_list_errors(fh.read(), LED)


def test_the_front_page_and_results_ledger_are_generated():
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    assert ledger.with_ledger(text, LED) == text, "run python analyze.py --ledger README.md"
    with open(os.path.join(ROOT, "results", "ledger.md")) as fh:
        assert fh.read() == "\n".join(ledger.full_md(LED)) + "\n", "run python analyze.py --ledger README.md"


@pytest.mark.parametrize("study", list(W2["runs"]))
def test_the_writeup_carries_the_generated_wave2_section(study):
    with open(os.path.join(ROOT, "results", study, "README.md")) as fh:
        text = fh.read()
    pilot = analyze.pilot_report(os.path.join(ROOT, "results", study), study)
    path = os.path.join(ROOT, "results", study, "confirm2", "analysis.json")
    conf = json.load(open(path)) if os.path.isfile(path) else None
    assert wave.markers(W2)[0] in text
    assert wave.with_section(W2, text, study, conf, pilot) == text, f"run python analyze.py --verdicts results/{study}"


@pytest.mark.parametrize("study", list(RW["runs"]))
def test_the_writeup_carries_the_generated_rung_section(study):
    with open(os.path.join(ROOT, "results", study, "README.md")) as fh:
        text = fh.read()
    path = os.path.join(ROOT, "results", study, RW["name"], "analysis.json")
    conf = json.load(open(path)) if os.path.isfile(path) else None
    tiny = ledger.load_families(os.path.join(ROOT, "results"))
    assert wave.markers(RW)[0] in text
    assert wave.with_section(RW, text, study, conf, tiny) == text, f"run python analyze.py --verdicts results/{study}"


def test_ledger_mode_writes_only_with_markers(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "README.md").write_text(f"a\n{ledger.LEDGER_BEGIN}\nstale\n{ledger.LEDGER_END}\nb\n")
    assert analyze.main(["--ledger", str(tmp_path / "README.md"), "--no_plots"]) == 0
    t = (tmp_path / "README.md").read_text()
    assert "stale" not in t and "pending" in t and t.startswith("a\n") and t.endswith("b\n")
    assert json.loads((tmp_path / "results" / "ledger.json").read_text())["n"] == sum(not c.get("cited") for c in claims.CLAIMS)
    (tmp_path / "README.md").write_text("no markers\n")
    assert analyze.main(["--ledger", str(tmp_path / "README.md")]) == 2


def test_a_published_wave_gives_the_power_its_seeds_bought():
    # wave 4 was planned on its pilot: each of its tests in the ledger carries that plan, and its cell says it
    w4 = [t for r in LED["rows"] for t in r["tests"] if t["wave"] == 4]
    assert w4 and all(t["planned"] and t["planned"]["seeds"] == 7 for t in w4)
    cell = ledger.test_cell(next(t for t in w4 if t["id"] == "compound"))
    assert re.search(r"planned at 7 seeds: power \d\.\d\d at the target [+-][\d.]+, \d\.\d\d to refute at \+-", cell)
    eq = ledger.test_cell(next(t for t in w4 if t["id"] == "short_loss"))
    assert "power 1.00 at the margin" in eq
    assert "planned" not in ledger.test_cell({**w4[0], "planned": None})
