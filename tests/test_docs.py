"""The documentation's links: every relative link of the front page, the docs/ pages and the study
write-ups names a file of the repository (and an anchor, where one is given, a heading of it)."""
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
            heads = [anchor(h) for h in re.findall(r"^#+ (.*)$", open(full).read(), re.M)]
            assert frag in heads, f"{page}: link to {target}: no such heading (have {heads})"


def test_every_study_has_a_write_up_linked_from_the_front_page():
    readme = open(os.path.join(ROOT, "README.md")).read()
    for study in ("qat", "qat-probes", "longctx", "lengen", "posenc"):
        assert os.path.exists(os.path.join(ROOT, "results", study, "README.md"))
        assert f"(results/{study}/README.md)" in readme
