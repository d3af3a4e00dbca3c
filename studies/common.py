"""
What every study of the analysis reads and writes: the run records (result.json with the eval.json
and grid.json next to it) and the lineage of extensions, then the markdown table and plot helpers.
analyze.py and each studies/<study>.py import it; it imports no study.
"""
import json
import math
import os
import sys


def warn(msg):
    print(f"analyze.py: {msg}", file=sys.stderr)


def _read_json(path):
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError):  # ValueError covers truncated JSON and bad encodings
        return None
    return obj if isinstance(obj, dict) else None


def load_runs(folders):
    """Every readable, finished result.json under the folders (recursively), as dicts; the eval.json
    next to it, if any, goes under "eval". Unreadable or unfinished files are skipped with a warning."""
    runs, seen = [], set()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            path = os.path.join(root, "result.json")
            if "result.json" not in files or os.path.realpath(path) in seen:  # overlapping folders
                continue
            seen.add(os.path.realpath(path))
            run = _read_json(path)
            if run is None:
                warn(f"skipping {path}: unreadable or not a JSON object")
                continue
            if run.get("status", "done") != "done":
                warn(f"skipping {path}: status {run.get('status')!r}, not 'done'")
                continue
            for k in ("config", "model_config", "params", "metrics"):
                if not isinstance(run.get(k), dict):
                    run[k] = {}
            if not isinstance(run.get("run_name"), str):
                run["run_name"] = os.path.basename(os.path.abspath(root))
            run["_dir"] = root  # lets an extension find its parent run (lineage.parent)
            lift_model_flags(run)
            for name in ("eval.json", "grid.json"):
                if os.path.exists(os.path.join(root, name)):
                    ev = _read_json(os.path.join(root, name))
                    if ev is None:
                        warn(f"ignoring {os.path.join(root, name)}: unreadable or not a JSON object")
                    elif name == "eval.json":
                        run["eval"] = ev
                    else:
                        run["grid_distance"] = ev.get("grid_distance")
            runs.append(run)
    return runs


def lift_model_flags(run):
    """The grid axes that are model flags (bits, block_size, dimension overrides) next to the training
    flags in run["config"], as the tables read them; the other model flags stay under config.model."""
    c, mc = run["config"], run["model_config"]
    model = dict(c.get("model") or {}) if isinstance(c.get("model"), dict) else {}
    for k in ("bits", "block_size"):
        model.pop(k, None)
        c.setdefault(k, mc.get(k))
    for k in ("n_layer", "n_embd", "n_head"):
        if k in model:
            c[k] = model.pop(k)
    c["model"] = model


def num(x):
    """float(x) for a finite number, else None (missing field, string, bool, NaN)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def dget(d, *keys):
    """d[k1][k2]... or None when a level is missing or not a dict (eval.json is another program's output)."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def parse_int(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return math.inf


def parse_size(s):
    """'15M' -> 1.5e7, '350K' -> 3.5e5; inf when unknown. Sort key when params are missing."""
    try:
        return float(s[:-1]) * {"K": 1e3, "M": 1e6, "B": 1e9}[s[-1].upper()]
    except (KeyError, ValueError, IndexError, TypeError, AttributeError):
        return math.inf


def size_label(config):
    """config.size, plus the dimensions overridden on the command line (--n_layer 2 -> '0.5M[n_layer=2]'),
    so that differently shaped models under one preset name are never averaged together."""
    over = [f"{k}={config[k]}" for k in ("n_layer", "n_embd", "n_head") if num(config.get(k))]
    return config["size"] + (f"[{','.join(over)}]" if over else "")


# config keys that split runs into separate studies (probes: AdamW, cosine, longer training, late QAT,
# clip rule) so that the QAT tables never average across them. A key splits only where it varies
# within one size. The training length is compared as "budget": a run's tokens over the most common
# token count of its size (x1 for the grid, x3 / x9 for the longer-training probe), because token
# budgets scale with model size by design and must not split the sizes of one law apart.
# These come first in a variant's name; every other config key (and model flag, as model.<flag>)
# that varies within one size splits too, except the grid's own axes and bookkeeping below.
VARIANT_KEYS = ("optimizer", "schedule", "budget", "block_size", "clip", "qat_start")
AXIS_KEYS = ("bits", "lr", "warmdown", "seed", "size", "n_layer", "n_embd", "n_head", "iters", "tokens")
BOOKKEEPING_KEYS = ("out_dir", "quiet", "resume", "overwrite", "device", "compile", "dist_timeout", "cache_dir",
                    "eval_interval",
                    "eval_tokens", "save_at", "ckpt_every", "model", "ptq_bits", "init_from", "data",
                    "final_eval_tokens", "eval_batch_tokens")


def variant_fields(config):
    """{key: value as text} of the config keys that may split runs into variants (model flags as model.<flag>)."""
    out = {k: str(v) for k, v in config.items() if k not in AXIS_KEYS and k not in BOOKKEEPING_KEYS}
    model = config.get("model")
    if isinstance(model, dict):
        out.update({f"model.{k}": str(v) for k, v in model.items()})
    return out


def run_kind(run):
    """'algo' (train.py --algo: an answer loss, not a text loss), 'extension' (extend.py: has a lineage)
    or 'lm' (a text language-model training run: the QAT grid)."""
    if run["config"].get("algo"):
        return "algo"
    if run.get("lineage") is not None:
        return "extension"
    return "lm"


def parent_run(run, runs):
    """The run an extension came from (lineage.parent: its folder), or None."""
    lin = run.get("lineage")
    parent = lin.get("parent") if isinstance(lin, dict) else None
    if not isinstance(parent, str) or not parent:
        return None
    real = os.path.realpath(parent)
    for r in runs:  # the same folder, else the same folder name (analysed from another working directory)
        if "_real" not in r:  # resolved once per run: lineage chains look parents up many times
            r["_real"] = os.path.realpath(r.get("_dir", ""))
        if r is not run and r["_real"] == real:
            return r
    named = [r for r in runs if r is not run and os.path.basename(os.path.normpath(r.get("_dir", ""))) ==
             os.path.basename(os.path.normpath(parent))]
    return named[0] if len(named) == 1 else None


def lineage_root(run, runs):
    """(the pretraining run an extension descends from, the checkpoint of it that was extended)."""
    r, ckpt, seen = run, "final", set()
    while r is not None and run_kind(r) == "extension" and id(r) not in seen:
        seen.add(id(r))
        ckpt = str(dget(r, "lineage", "parent_ckpt") or "final")
        r = parent_run(r, runs)
    return r, ckpt


def pretrain_block(run):
    """Pretraining context: model_config.rope_original_len when set (an extended run keeps its
    pretraining L there), else config.block_size."""
    for b in (num(run["model_config"].get("rope_original_len")), num(run["config"].get("block_size"))):
        if b:
            return int(b)
    return None


# markdown and plot helpers


def f(x, spec=".4g"):
    """A number for a table: '-' when missing or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec) if isinstance(x, float) else str(x)


def table(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def vtag(variant):
    return f"[{variant}] " if variant else ""


def ci(x, lo, hi, spec="+.3f"):
    return f"{f(x, spec)} [{f(lo, spec)}, {f(hi, spec)}]"


def pm(st, spec=".3f"):
    """'mean ± sd' of a seed_stats dict ('-' when missing)."""
    if not st or st.get("mean") is None:
        return "-"
    return f(st["mean"], spec) + (f" ± {f(st['sd'], '.2f')}" if st.get("sd") is not None else "")


def paired_cell(p):
    """A paired comparison (paired_acc) as 'Δ (z, seeds higher/lower)' for a table; '-' when missing."""
    return f"{p['mean_diff']:+.3f} (z {f(p['z'], '+.1f')}, {p['wins']}/{p['losses']})" if p else "-"


def figures(n, width, height=3.5):
    """A row of n panels (matplotlib Agg, imported only when a plot is drawn)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, n, figsize=(width * n, height), squeeze=False)


def no_data(name):
    return [f"_{name}: no data._", ""]


# a study's family of hypotheses (stats.decide_family) as a table, and the README section made from it

VERDICTS_BEGIN = "<!-- verdicts: generated by analyze.py from analysis.json (python analyze.py --verdicts DIR); do not edit -->"
VERDICTS_END = "<!-- /verdicts -->"
CONFIRM_BEGIN, CONFIRM_END = "<!-- confirmatory -->", "<!-- /confirmatory -->"  # wave 1's section (its marker in studies/waves/wave1.toml)
PILOT_NOTE = ("_The 3-seed pilot's families (seeds 0-2): exploratory. They were decided on the data the "
              "confirmatory family was chosen after; the seed's claims are decided by the confirmatory family at the "
              "top of this write-up, on fresh seeds._")


def null_power(h):
    """What a null could have detected, for its verdict cell: the detectable effect."""
    if h.get("mde"):
        return f"; detectable: {f(h['mde'], '.3g')}"
    return ""


def hypothesis_status(h):
    """One decided confirmatory hypothesis -> (status, words): the claims ledger's rule (studies/ledger.py)."""
    if h is None:
        return "pending", "pending: not run yet"
    if h.get("not_read"):  # a failed gate: untestable where its measure was shown to have no range at this scale
        return "untestable" if h.get("untestable") else "undecided", f"not read: {h['not_read']}"
    if h.get("rule"):  # decided by the seed's own rule, not by a p (studies/decisions.py: the prediction intervals)
        st = "confirmed" if h["rule"].get("passed") else "refuted" if h["rule"].get("refuted") else "undecided"
        return st, h["rule"].get("words") or st
    if h.get("opposite"):
        return "refuted", "passed opposite to the seed"
    if h.get("negligible"):  # a declared smallest effect of interest: the interval lies inside +-sesoi
        return "refuted", f"no effect of interest: interval inside +-{f(h['sesoi'], '.3g')}"
    if h.get("passed"):
        return "confirmed", (f"equivalent within +-{f(h['margin'], '.3g')}" if h.get("margin") is not None
                             else "passed, as the seed")
    if h.get("margin") is not None:
        lo, hi = h["ci"] if h.get("ci") else (None, None)
        if lo is not None and (lo > h["margin"] or hi < -h["margin"]):
            return "refuted", f"not equivalent: interval outside +-{f(h['margin'], '.3g')}"
        return "undecided", f"not shown equivalent (margin +-{f(h['margin'], '.3g')})"
    if h.get("p") is None:
        return "undecided", "undefined: no test"
    return "undecided", "not distinguishable" + (f"; detectable: {f(h['mde'], '.3g')}" if h.get("mde") else "")


def verdict_words(h):
    """A decided hypothesis's verdict cell: a difference 'passed (higher / lower)' or 'not
    distinguishable' with its detectable effect; an equivalence hypothesis 'equivalent within +-margin'
    or 'not shown equivalent'; a hypothesis without a test (every seed the same contrast, sd 0; fewer
    than 2 seeds) 'undefined'."""
    if h.get("undefined") or h.get("p") is None:
        return ("undefined: every seed gives the same contrast (sd 0), no t statistic"
                if h.get("sd") is not None and h.get("n", 0) >= 2 else "undefined: no test")
    if h.get("margin") is not None:
        return (f"equivalent within +-{f(h['margin'])}" if h["passed"]
                else f"not shown equivalent (margin +-{f(h['margin'])})")
    if h["passed"]:
        return "passed (" + ("higher" if h["direction"] > 0 else "lower") + ")"
    return "not distinguishable" + null_power(h)


def family_md(family, title="Verdicts (the declared family)"):
    """The family as markdown: one row per hypothesis with its effect and seed-level 95% interval, raw
    and Holm-adjusted p, the verdict (passed / not distinguishable) and, beside a null, the effect its
    test would have detected with 80% power at the family's strictest Holm step."""
    if not family or not family.get("hypotheses"):
        return no_data(title)
    rows = []
    for h in family["hypotheses"]:
        lo, hi = h["ci"] if h.get("ci") else (None, None)
        verdict = verdict_words(h)
        rows.append([h["claim"], h["test"], str(h["n"]), ci(h["effect"], lo, hi, "+.3g"),
                     f(h["p"], ".2g"), f(h["p_holm"], ".2g"), verdict])
    return ([f"### {title}", "",
             f"{family['m']} hypotheses; the rule: {family['rule']} (Holm 1979 within this family). "
             "'detectable' is the smallest effect the test finds with 80% power at level "
             f"{family['alpha']:g}/{family['m']}, from its own n and sd over seeds. An equivalence hypothesis "
             "(TOST, its margin declared with the design) passes as 'equivalent': its interval is the 90% one.", ""]
            + table(["claim", "test", "seeds", "effect [95% CI over seeds]", "p", "p (Holm)", "verdict"], rows)
            + [""])


def families(report):
    """[(title, family)] of every 'family' key in a study's report (its top-level sections)."""
    out = []
    for name, part in report.items():
        if isinstance(part, dict) and isinstance(part.get("family"), dict):
            out.append((f"Verdicts: {name}", part["family"]))
    return out


def with_verdicts(readme, report):
    """README text with the section between VERDICTS_BEGIN and VERDICTS_END rewritten from the report's
    families; None when the README has no such markers (nothing to regenerate)."""
    if VERDICTS_BEGIN not in readme or VERDICTS_END not in readme:
        return None
    head, rest = readme.split(VERDICTS_BEGIN, 1)
    tail = rest.split(VERDICTS_END, 1)[1]
    body = [line for title, fam in families(report) for line in family_md(fam, title)]
    if CONFIRM_BEGIN in readme and body:  # a write-up with a confirmatory family: these are the pilot's
        body = [PILOT_NOTE, ""] + body
    return head + VERDICTS_BEGIN + "\n\n" + "\n".join(body or no_data("verdicts")) + "\n" + VERDICTS_END + tail
