"""The claims ledger (studies/claims.py, studies/ledger.py): every quote is the seed's own words, every test
names a declared hypothesis, every claim has a status and a reason or a family behind it, the statuses follow
the stored families (shown on planted ones), and the front page, results/ledger.md and each write-up's
wave-2 section are exactly what their generators write."""
import json
import os

import pytest

import analyze
from conftest import ROOT
from studies import claims, ledger, wave

TINY = [w for w in wave.waves().values() if w.get("kind") != "rung"]  # the rung reruns their tests: no claim of its own
DECLARED = {(w["wave"], n, h["id"]) for w in TINY for n, c in w["families"].items() for h in c["hypotheses"]}
GATE_IDS = {h["id"] for w in TINY for c in w["families"].values() for h in c["hypotheses"] if h.get("gate")}
W2, RW = wave.get("confirm2"), wave.rung()


def test_every_claim_is_quoted_declared_and_has_a_reason():
    ids = [c["id"] for c in claims.CLAIMS]
    assert len(ids) == len(set(ids)) >= 40
    for c in claims.CLAIMS:
        assert c["quote"] and c["tiny"], c["id"]
        for t in c["tests"]:
            assert tuple(t) in DECLARED, f"{c['id']}: {t} is no declared hypothesis"
            assert t[2] not in GATE_IDS, f"{c['id']}: a gate is not a claim's test"
        assert c["tests"] or c["untestable"], f"{c['id']}: neither a test nor a reason"
    # every declared hypothesis but the gate decides at least one claim
    used = {tuple(t) for c in claims.CLAIMS for t in c["tests"]}
    assert {d for d in DECLARED if d[2] not in GATE_IDS} <= used


def test_statuses_follow_the_decided_hypotheses():
    h = lambda **k: {"n": 8, "effect": 0.1, "ci": [0.05, 0.15], "p": 0.01, "passed": False, "opposite": False, **k}
    assert ledger.hypothesis_status(None)[0] == "pending"
    assert ledger.hypothesis_status(h(passed=True))[0] == "confirmed"
    assert ledger.hypothesis_status(h(opposite=True))[0] == "refuted"
    assert ledger.hypothesis_status(h(margin=0.01))[0] == "refuted"  # interval wholly outside +-0.01
    assert ledger.hypothesis_status(h(margin=0.2))[0] == "undecided"  # not shown, not excluded
    assert ledger.hypothesis_status(h(not_read="gate"))[0] == "undecided"
    assert ledger.hypothesis_status(h(passed=True, margin=0.2))[1].startswith("equivalent")
    fams = {(1, "qat"): {"hypotheses": [{"id": "null", **h(passed=True, margin=0.2)},
                                        {"id": "int4_wd33", **h(opposite=True)}]}}
    c = {"id": "x", "tests": [(1, "qat", "null"), (1, "qat", "int4_wd33"), (2, "qat-w2", "law_fit")]}
    row = ledger.claim_row(c, fams)
    assert row["status"] == "refuted" and row["pending_tests"] == 1  # a refutation stands with a test pending
    assert ledger.claim_row({**c, "tests": [c["tests"][0], c["tests"][2]]}, fams)["status"] == "pending"
    assert ledger.claim_row({**c, "tests": c["tests"][:1]}, fams)["status"] == "confirmed"
    assert ledger.claim_row({"id": "y", "tests": [], "untestable": "a proof"}, fams)["status"] == "untestable"
    assert ledger.claim_row({"id": "z", "tests": [], "untestable": ledger.NOT_TESTED + ": x"}, fams)["status"] == "not tested"


def test_the_stored_ledger_counts_every_claim_once():
    led = ledger.ledger(os.path.join(ROOT, "results"))
    assert sum(led["counts"].values()) == led["n"] == len([c for c in claims.CLAIMS if not c.get("cited")])
    assert ledger.count_line(led).startswith(f"**{led['n']} seed claims:") and "nope-1" in ledger.count_line(led)


def test_the_front_page_and_results_ledger_are_generated():
    led = ledger.ledger(os.path.join(ROOT, "results"))
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    assert ledger.with_ledger(text, led) == text, "run python analyze.py --ledger README.md"
    assert text.index(ledger.LEDGER_BEGIN) < text.index("Confirmatory families, wave 1")  # the ledger leads
    with open(os.path.join(ROOT, "results", "ledger.md")) as fh:
        assert fh.read() == "\n".join(ledger.full_md(led)) + "\n", "run python analyze.py --ledger README.md"


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
