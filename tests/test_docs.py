"""The documentation's links: every relative link of the front page, the docs/ pages and the study
write-ups names a file of the repository (and an anchor, where one is given, a heading of it or an HTML
anchor); the front page stays short (at most 16 KB) and its ledger is a table linking every claim to its row;
docs/waves.md states the stored walls."""
import glob
import os
import re

import pytest

from conftest import ROOT

PAGES = ["README.md"] + sorted(glob.glob("docs/*.md", root_dir=ROOT)) + sorted(glob.glob("results/*/README.md", root_dir=ROOT))


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page):
    text = open(os.path.join(ROOT, page)).read()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path else os.path.join(ROOT, page)
        assert os.path.exists(full), f"{page}: link to {target} names no file"
        if frag and full.endswith(".md"):
            linked = open(full).read()
            heads = [anchor(h) for h in re.findall(r"^#+ (.*)$", linked, re.M)]
            ids = re.findall(r"<a (?:id|name)=\"([^\"]+)\"", linked)  # an HTML anchor: results/ledger.md's rows
            assert frag in heads + ids, f"{page}: link to {target}: no such heading or anchor (have {heads})"


def test_every_study_has_a_write_up_linked_from_the_front_page():
    readme = open(os.path.join(ROOT, "README.md")).read()
    for study in ("qat", "qat-probes", "longctx", "lengen", "posenc"):
        assert os.path.exists(os.path.join(ROOT, "results", study, "README.md"))
        assert f"(results/{study}/README.md)" in readme


def test_the_front_page_is_at_most_16_kb():
    size = os.path.getsize(os.path.join(ROOT, "README.md"))
    assert size <= 16384, f"README.md is {size} bytes: move detail to docs/ or the write-ups (at most 16,384)"


def test_the_front_page_ledger_is_a_table_linking_every_claim():
    from studies import claims, ledger
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split(ledger.LEDGER_BEGIN, 1)[1].split(ledger.LEDGER_END, 1)[0]
    tables = re.split(r"\n\s*\n", block)
    status = next((t for t in tables if t.startswith("| status | claims |\n|---|---|\n")), None)
    assert status, "README.md: the ledger has no status table (| status | claims |)"
    for c in claims.CLAIMS:
        n = status.count(f"[{c['id']}](results/ledger.md#{c['id']})")
        assert n == 1, f"README.md: claim {c['id']} is linked {n} times in the ledger's status table"
    ledger_md = open(os.path.join(ROOT, "results", "ledger.md")).read()
    assert all(f'<a id="{c["id"]}"></a>' in ledger_md for c in claims.CLAIMS), "results/ledger.md: a row without its anchor"


def test_the_waves_page_states_the_stored_walls():
    """docs/waves.md's walls table: each study's stored wall in its wave's column ("wave N"), the rung's one
    sweep in its row 'all' ("the rung"), and each wave's sum in the row 'all'; a wave with a stored wall and no
    column fails."""
    from studies import ledger, wave
    led = ledger.ledger(os.path.join(ROOT, "results"))
    rung = {w["wave"] for w in wave.waves().values() if w.get("kind") == "rung"}
    text = open(os.path.join(ROOT, "docs", "waves.md")).read().split("## Measured walls", 1)[1]
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in text.splitlines() if r.startswith("| ")]
    head, rows = cells[0], {r[0]: r for r in cells[1:]}
    col = lambda w: next((i for i, h in enumerate(head) if h.startswith("the rung" if w in rung else f"wave {w}")), None)  # noqa: E731
    hms = lambda t: f"{t // 3600} h {t % 3600 // 60} min {t % 60} s"  # noqa: E731
    total = {}
    for x in (x for x in led["walls"] if x["wall"]):
        w, shown = x["wave"], x["wall"]["text"].split(" on ")[0]
        assert col(w) is not None, f"docs/waves.md: wave {w} has a stored wall and no column in the walls table"
        if w in rung:  # one sweep, one wall, stored in each of its run-studies' analyses
            assert rows["all"][col(w)].startswith(shown), f"docs/waves.md: the rung's wall is {shown}"
            continue
        assert rows[x["study"]][col(w)].startswith(shown), f"docs/waves.md: {x['study']} wave {w} is {shown}"
        total[w] = total.get(w, 0) + x["wall"]["seconds"]
    for w, t in total.items():
        assert rows["all"][col(w)].startswith(hms(t)), f"docs/waves.md: wave {w} in all is {hms(t)}"
