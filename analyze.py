"""
Statistics and reports for the studies of this project: the command line and the registry of studies.

    python analyze.py out/sweeps/qat out/sweeps/qat-probes --study qat --fit_sizes 14K,25K,39K --out DIR

Reads every result.json (and the eval.json / grid.json next to it, if any) under the folders and
writes analysis.md, analysis.json and PNG plots to --out (default: the first folder). Without runs:

    python analyze.py --verdicts DIR    # DIR/README.md's verdicts section from DIR/analysis.json
    python analyze.py --refamily DIR    # the families and verdicts of DIR/analysis.json decided again (REDECIDE)
    python analyze.py --power DIR [--seeds N] [--effect X]   # power before the run (docs/cluster.md)

The statistics are pure functions in studies/stats.py; the run loading and the markdown and plot helpers
are in studies/common.py; each study is one file, studies/<study>.py, with its report (a JSON-able dict),
its markdown and its plots in that order (lengen and posenc share encodings.py). This file
holds the registry of studies (STUDIES), the assignment of runs to studies and the command line:
  qat      (sweep.sh qat and qat-probes) best warmdown per (bits, size[, lr]) with paired z over seeds,
           the quantisation penalty law P_b(N) with prediction intervals at held-out sizes, and the
           weight-to-grid distance
  longctx  inhibiting-feature count -> extension outcome on a factorial grid (arXiv 2608.10296)
  lengen   exact match by input length per (task, encoding) over seeds, gated in distribution
  posenc   loss, LongPPL and retrieval by evaluation length per positional encoding
--study NAME[,NAME] analyses those studies (sweep.sh --post passes its own, so every run read
belongs to it); without it, each run goes to one study by its record (study_of) and every study
with runs is analysed, so no section sees another study's runs. A new study costs one file
studies/<study>.py, one line in STUDIES and one grid_ function in sweep.sh.
Seeds: the QAT LR-schedule study (720-run grid, "QAT seed" below; it has no arXiv id) and "Cracks
in the Foundation" (arXiv 2608.10296, "long-context seed"). Every field is optional: a missing one
shrinks a table, it never crashes the script.
"""
import json
import os
import sys
from collections import defaultdict

from cli import OneLineParser, UserError, atomic_write, clean, finite_float
from studies.stats import power_plan
from studies.common import f, families, lineage_root, load_runs, run_kind, table, warn, with_verdicts
from studies import wave
from studies.qat import REF_WARMDOWN, qat_decide, qat_plots, qat_study, records
from studies.qat_md import qat_markdown
from studies.longctx import longctx_decide, longctx_report
from studies.longctx_md import longctx_md, longctx_plots
from studies.lengen import lengen_decide, lengen_md, lengen_plots, lengen_report
from studies.posenc import POSENC_FLAGS, posenc_decide, posenc_md, posenc_plots, posenc_report

# =============================================================================
# the registry of studies and the command line

# study -> (its sections from (runs, args), their markdown, their plots [(file name, figure)]).
# sweep.sh's qat-probes is analysed by the qat block, together with the grid (ALIASES).
STUDIES = {
    "qat": (qat_study, qat_markdown, qat_plots),
    "longctx": (lambda runs, a: {"longctx": longctx_report(runs)}, lambda rep: longctx_md(rep["longctx"]),
                longctx_plots),
    "lengen": (lambda runs, a: {"lengen": lengen_report(runs, a.lengen_gate, a.lengen_margin)},
               lambda rep: lengen_md(rep["lengen"]), lengen_plots),
    "posenc": (lambda runs, a: {"posenc": posenc_report(runs, a.lengen_gate, a.lengen_margin)},
               lambda rep: posenc_md(rep["posenc"]), posenc_plots),
}
ALIASES = {"qat-probes": "qat"}
# study -> the pure function that decides its family and verdict fields from its stored sections alone
# (the study's report calls it too): report -> {section: section}; analyze.py --refamily DIR re-decides
# a stored analysis.json with it
REDECIDE = {"qat": qat_decide, "longctx": lambda rep: {"longctx": longctx_decide(rep["longctx"])},
            "lengen": lambda rep: {"lengen": lengen_decide(rep["lengen"])},
            "posenc": lambda rep: {"posenc": posenc_decide(rep["posenc"])}}


def study_of(run, runs, extended=()):
    """The study a run belongs to when --study does not say: an algorithmic run is lengen's; a text
    run given a positional flag (POSENC_FLAGS), or an extension of one, is posenc's; another
    extension, a pretraining run that was extended (id in `extended`) or a text run with an
    eval.json is longctx's; any other text run is qat's."""
    kind = run_kind(run)
    if kind == "algo":
        return "lengen"
    root = (lineage_root(run, runs)[0] if kind == "extension" else None) or run
    if any(k in root["config"]["model"] for k in POSENC_FLAGS):
        return "posenc"
    if kind == "extension" or isinstance(run.get("eval"), dict) or id(run) in extended:
        return "longctx"
    return "qat"


def runs_by_study(runs, selected=None):
    """{study: its runs}: with one study selected, every run; else each run by study_of, keeping the
    selected studies (default: every study with runs)."""
    if selected and len(selected) == 1:
        return {selected[0]: runs}
    extended = {id(lineage_root(r, runs)[0]) for r in runs if run_kind(r) == "extension"}
    by = defaultdict(list)
    for r in runs:
        by[study_of(r, runs, extended)].append(r)
    return {s: by[s] for s in STUDIES if by[s] and (selected is None or s in selected)}


def parse_studies(text):
    """--study NAME[,NAME] -> study names of STUDIES (aliases resolved, order kept)."""
    names = [ALIASES.get(s.strip(), s.strip()) for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in STUDIES]
    if bad or not names:
        raise UserError(f"--study {text!r}: unknown study {', '.join(bad) or '(none given)'} "
                        f"(choose from: {', '.join(list(STUDIES) + list(ALIASES))})")
    return list(dict.fromkeys(names))


def analyse(runs, args):
    """(report, markdown lines, [(plot file, figure)]) of the selected studies over the runs."""
    mine = runs_by_study(runs, parse_studies(args.study) if args.study else None)
    _, skipped = records(runs)
    rep = {"n_runs": len(runs), "studies": {s: len(rs) for s, rs in mine.items()},
           "n_skipped_qat": skipped["missing"], "n_algo": skipped["algo"], "n_extension": skipped["extension"],
           "n_no_comparison": skipped["single"]}
    lines = [f"# Analysis of {len(runs)} runs", "",
             f"Folders: {', '.join(args.folders)}. Studies: "
             + (", ".join(f"{s} ({len(rs)} runs)" for s, rs in mine.items()) or "none") + ".", ""]
    if "qat" in mine:
        other = [f"{n} {what}" for n, what in ((skipped["algo"], "algorithmic-task runs (config.algo)"),
                                               (skipped["extension"], "context extensions (lineage)"),
                                               (skipped["single"], "runs with one bit-width and one warmdown in "
                                                                   "their variant and size (nothing to compare)")) if n]
        lines += [f"{skipped['missing']} runs lack one of config.bits/size/lr/warmdown/seed or metrics.val_loss and "
                  f"are not in the QAT tables" + (f"; neither are {' and '.join(other)}." if other else "."), ""]
    figs = []
    for name, rs in mine.items():
        study, markdown, plots = STUDIES[name]
        part = study(rs, args)  # a UserError (bad flag for this study) stops the whole analysis
        rep.update(part)
        if name in REDECIDE:  # its markdown from what analysis.json stores, as --refamily renders it (inf -> null)
            part = json.loads(json.dumps(clean(part)))
        try:  # one broken section must not take the others down
            lines += markdown(part)
            figs += plots(part) if not args.no_plots else []
        except Exception as e:
            warn(f"{name} section skipped: {type(e).__name__}: {e}")
            lines += [f"_{name}: skipped ({type(e).__name__}: {e})._", ""]
    return rep, lines, figs


def save_figures(figs, outdir):
    """Write each figure to outdir; returns the names written. A failed plot is a warning, never a crash."""
    import matplotlib.pyplot as plt
    written = []
    for name, fig in figs:
        try:
            fig.tight_layout()
            fig.savefig(os.path.join(outdir, name), dpi=120)
            written.append(name)
        except Exception as e:
            warn(f"plot {name} skipped: {type(e).__name__}: {e}")
        plt.close(fig)
    return written


def write_analysis(out, rep, md):
    """out/analysis.md and out/analysis.json, each written atomically, then the verdicts section of
    out/README.md where it has one."""
    atomic_write(os.path.join(out, "analysis.md"), md)
    atomic_write(os.path.join(out, "analysis.json"), json.dumps(clean(rep), indent=1, allow_nan=False) + "\n")
    if write_verdicts(out, json.loads(json.dumps(clean(rep)))):
        print(f"rewrote the verdicts section of {os.path.join(out, 'README.md')}", file=sys.stderr)


def write_verdicts(folder, report):
    """Rewrite the verdicts section of folder/README.md (a study's write-up) from the report's families;
    False when there is no README with the section's markers. Atomic: a failed write leaves it whole."""
    path = os.path.join(folder, "README.md")
    if not os.path.isfile(path):
        return False
    with open(path) as fh:
        text = with_verdicts(fh.read(), report)
    if text is None:
        return False
    study = os.path.basename(os.path.normpath(folder))
    for w in wave.waves().values():  # each wave's section: its declaration and plan, then DIR/<name>'s families
        if study not in w["runs"]:
            continue
        conf = None
        if os.path.isfile(os.path.join(folder, w["name"], "analysis.json")):
            conf = read_analysis(os.path.join(folder, w["name"]), "--verdicts")
        text = wave.with_section(w, text, study, conf, plan_basis(w, folder, study, report)) or text
    atomic_write(path, text)
    return True


def plan_basis(w, folder, study, report=None):
    """What a wave's seed plan for a run-study is made on: the pilot's stored report (with the sections of the
    run-studies its families also read, from their sibling folders), or, for a rung, the tiny families stored
    beside it (results/*/<name>/analysis.json)."""
    if w.get("kind") == "rung":
        from studies import ledger
        return ledger.load_families(os.path.dirname(os.path.normpath(folder)))
    if w["runs"][study].get("pilot"):  # the wave's own pilot, published beside the study: DIR/<pilot>/analysis.json
        report = read_analysis(os.path.join(folder, w["runs"][study]["pilot"]), "--power")
    if report is not None and w["layout"] != "family" and any(r not in report for r in w["runs"][study].get("reads", ())):
        return pilot_report(folder, study, w["runs"][study].get("reads", ()))
    return report


def store_plan(w, study, conf, out):
    """Each hypothesis of a published wave keeps its plan (`planned`: wave.plan_record), made on the wave's pilot
    stored beside the publication (RESULTS/STUDY/<pilot>), so the ledger can give the power its seeds bought; a
    wave without a pilot there (an unpublished analysis, a wave planned on stored runs) keeps none."""
    pilot = w["runs"][study].get("pilot")
    folder = os.path.dirname(os.path.normpath(out))
    if w["layout"] == "family" or not pilot or not os.path.isfile(os.path.join(folder, pilot, "analysis.json")):
        return
    basis = plan_basis(w, folder, study)
    planned = wave.plan_record(w, study, basis) if basis else {}
    for name, fam in (conf.get("families") or {}).items():
        for h in fam["hypotheses"]:
            if (planned.get(name) or {}).get(h["id"]):
                h["planned"] = planned[name][h["id"]]


def read_analysis(folder, flag):
    """DIR/analysis.json as a dict, or None after a one-line warning naming the flag."""
    try:
        with open(os.path.join(folder, "analysis.json")) as fh:
            report = json.load(fh)
    except (OSError, ValueError) as e:
        warn(f"{flag} {folder}: cannot read analysis.json ({e})")
        return None
    if not isinstance(report, dict):
        warn(f"{flag} {folder}: analysis.json is not a JSON object")
        return None
    return report


def verdicts_only(folder):
    """analyze.py --verdicts DIR: the README section regenerated from DIR/analysis.json, no runs read."""
    report = read_analysis(folder, "--verdicts")
    if report is None:
        return 2
    if not write_verdicts(folder, report):
        warn(f"--verdicts {folder}: no README.md with the verdicts markers there")
        return 2
    print(f"rewrote the verdicts section of {os.path.join(folder, 'README.md')}", file=sys.stderr)
    return 0


def refamily(folder, no_plots=False):
    """analyze.py --refamily DIR: the families and verdict fields of DIR/analysis.json decided again from
    the per-seed values it stores, by the studies' own pure functions (REDECIDE, as a fresh analysis),
    without the runs; analysis.json, analysis.md (its header kept, each study's markdown rendered from
    the report), the plots it lists and the README's verdicts section are rewritten, each atomically."""
    report = read_analysis(folder, "--refamily")
    if report is None:
        return 2
    studies = list(report.get("studies") or {})
    other = [s for s in studies if s not in REDECIDE or not isinstance(report.get(s), dict)]
    if not studies or other:
        warn(f"--refamily {folder}: no family function for {', '.join(other) or 'a file without studies'} "
             f"(studies with one: {', '.join(REDECIDE)})")
        return 2
    for s in studies:
        try:
            report.update(REDECIDE[s](report))
        except (KeyError, TypeError) as e:  # a section or a field the family function reads is missing
            warn(f"--refamily {folder}: the stored {s} analysis lacks {e} (analyse the runs again)")
            return 2
    report = json.loads(json.dumps(clean(report)))  # rendered from what analysis.json will hold, as a fresh analysis
    head = f"# Analysis of {report.get('n_runs')} runs\n\n"
    try:
        with open(os.path.join(folder, "analysis.md")) as fh:  # the header names the folders analysed
            old = fh.read()
        head = old[:old.index("\n## ") + 1] if "\n## " in old else head
    except OSError:
        pass
    lines = [line for s in studies for line in STUDIES[s][1](report)]
    try:
        if report.get("plots") and not no_plots:
            figs = [fig for s in studies for fig in STUDIES[s][2](report) if fig[0] in report["plots"]]
            save_figures(figs, folder)
        write_analysis(folder, report, head + "\n".join(lines) + "\n")
    except OSError as e:
        warn(f"cannot write to {folder}: {e}")
        return 1
    print(f"re-decided the families of {os.path.join(folder, 'analysis.json')} ({', '.join(studies)}) and "
          "rewrote analysis.md", file=sys.stderr)
    return 0


def power_md(family, seeds=None, effect=None):
    """power_plan of one family as a markdown table."""
    plan = power_plan(family, seeds, effect)
    rows = [[r["claim"], r["kind"], str(r["n"]), f(r["sd"], ".3g"), f(r["sd_plan"], ".3g"), f(r["effect"], "+.3g"),
             str(r["planned_seeds"]), (f"power {r['detectable']:.2f}" if r.get("detectable_is") and r["detectable"] is not None
                                       else f(r["detectable"], ".3g")),
             f(r["target"], ".3g"), f(r["seeds_needed"])] for r in plan["rows"]]
    return ([f"{family['m']} hypotheses, each at level {family['alpha']:g}/{family['m']} = {plan['level']:.3g} (the "
             f"strictest Holm step) with {plan['power']:.0%} power, planned on the {plan['conf']:.0%} upper "
             "confidence bound of each sd (of the per-seed contrast; of the error term for an F test, the standard "
             "error for a coefficient); an equivalence test: its power at its margin when the true contrast is 0, and "
             "the seeds for 80%. '-': no sd (every seed equal), or over 1000 seeds.", ""]
            + table(["claim", "test", "seeds", "sd", "sd planned on", "effect", "planned seeds", "detectable at them",
                     "effect named", "seeds needed"], rows))


def power(folder, seeds=None, effect=None):
    """analyze.py --power DIR: for each hypothesis of DIR/analysis.json's families, the effect detectable at
    the planned seeds and the seeds needed for the named effect (stats.power_plan); nothing is written."""
    report = read_analysis(folder, "--power")
    if report is None:
        return 2
    fams = families(report)
    if not fams:
        warn(f"--power {folder}: analysis.json declares no family (analyse the runs again, or "
             f"python analyze.py --refamily {folder} for a study that has one: {', '.join(REDECIDE)})")
        return 2
    for title, fam in fams:
        print("\n".join([f"## Power: {title[len('Verdicts: '):]}", ""] + power_md(fam, seeds, effect) + [""]))
    return 0


def confirm_study(folder, study, w):
    """The run-study of a wave a folder's analysis belongs to: --study (its first name), else the folder's name
    (results/qat-probes)."""
    name = (study or "").split(",")[0] or os.path.basename(os.path.normpath(folder))
    if name not in w["runs"]:
        raise UserError(f"--confirm --wave {w['wave']}: no run-study {name!r} in {w['file']} (give --study, one of: "
                        f"{', '.join(w['runs'])})")
    return name


def pilot_report(folder, name, reads=None):
    """A stored pilot report for a wave's planner, with the sections its families also read (posenc's read
    lengen's task cells: reads, by default every wave's) from the sibling results/OTHER/analysis.json."""
    report = read_analysis(folder, "--power")
    for other in wave.reads(name) if reads is None else reads:
        if report is not None and other not in report:
            rep = read_analysis(os.path.join(os.path.dirname(os.path.normpath(folder)), other), "--power")
            report = {**report, other: (rep or {}).get(other)}
    return report


def power_confirm(folder, study=None, number=1):
    """analyze.py --power DIR --confirm [--wave N]: the run-study's declared families (studies/waves/*.toml)
    built on the pilot's stored per-seed values (a rung: on the tiny tests it reruns) and planned at their Holm
    steps on the upper bound of each sd: the seeds each hypothesis needs, the count the sweep runs (>= the
    wave's min_seeds, <= its cap) and what it detects there."""
    w = wave.get(number)
    name = confirm_study(folder, study, w)
    basis = plan_basis(w, folder, name, read_analysis(folder, "--power") if w.get("kind") != "rung" else None)
    if basis is None:
        return 2
    try:
        lines = wave.plan_md(w, name, basis)
    except (KeyError, ValueError) as e:
        warn(f"--power {folder} --confirm: {e}")
        return 2
    print("\n".join([f"## {w['text']['plan_title']}: {name}", ""] + lines))
    return 0


def front(readme, results="results", prefix="results/"):
    """analyze.py --front PAGE (results/wave1.md): its confirmatory-verdicts section regenerated from
    results/*/confirm."""
    try:
        with open(readme) as fh:
            text = wave.with_front(fh.read(), results, prefix)
    except OSError as e:
        warn(f"--front {readme}: {e}")
        return 2
    if text is None:
        warn(f"--front {readme}: no confirmatory-verdicts markers there")
        return 2
    atomic_write(readme, text)
    print(f"rewrote the confirmatory verdicts of {readme}", file=sys.stderr)
    return 0


def write_ledger(readme, results="results", no_plots=False):
    """analyze.py --ledger README.md: the claims ledger (studies/ledger.py) from results/*/confirm*: results/ledger.md,
    ledger.json, ledger_forest.png, and the front page's ledger section."""
    from studies import ledger
    try:
        led = ledger.ledger(results)
        with open(readme) as fh:
            text = ledger.with_ledger(fh.read(), led)
    except (OSError, ValueError, KeyError) as e:
        warn(f"--ledger {readme}: {e}")
        return 2
    if text is None:
        warn(f"--ledger {readme}: no claims-ledger markers there")
        return 2
    try:
        if not no_plots:
            led["plot"] = ledger.forest(led, os.path.join(results, "ledger_forest.png"))
            led["sizes_plot"] = ledger.sizes_plot(led, os.path.join(results, "ledger_sizes.png"))
        atomic_write(os.path.join(results, "ledger.json"), json.dumps(clean(led), indent=1, allow_nan=False) + "\n")
        atomic_write(os.path.join(results, "ledger.md"), "\n".join(ledger.full_md(led)) + "\n")
        atomic_write(readme, text)
    except OSError as e:
        warn(f"--ledger: cannot write: {e}")
        return 1
    print(ledger.count_line(led), file=sys.stderr)
    return 0


def main(argv=None):
    ap = OneLineParser(description="Statistics and reports over result.json / eval.json files.")
    ap.add_argument("folders", nargs="*", help="folders searched recursively for result.json")
    ap.add_argument("--verdicts", default=None, metavar="DIR",
                    help="only rewrite the verdicts section of DIR/README.md from DIR/analysis.json (no runs read); "
                         "an analysis written into a folder whose README.md has that section rewrites it too")
    ap.add_argument("--refamily", default=None, metavar="DIR",
                    help="decide the families of DIR/analysis.json again from its stored per-seed values (no runs "
                         "read) and rewrite analysis.json, analysis.md, its plots and the README's verdicts section")
    ap.add_argument("--power", default=None, metavar="DIR",
                    help="print, for each hypothesis of DIR/analysis.json's families, the effect detectable at "
                         "--seeds seeds and the seeds needed for --effect (power before the run; nothing written)")
    ap.add_argument("--ledger", default=None, metavar="README",
                    help="only regenerate the claims ledger (results/ledger.md, .json, forest plot) and README's section")
    ap.add_argument("--front", default=None, metavar="PAGE",
                    help="only rewrite the confirmatory-verdicts section of PAGE (results/wave1.md: wave 1's verdicts) "
                         "from results/*/confirm")
    ap.add_argument("--seeds", type=int, default=None, help="--power: planned seeds (default: each hypothesis's own n)")
    ap.add_argument("--effect", type=finite_float, default=None,
                    help="--power: the effect to detect, in each hypothesis's own units (default: its observed effect)")
    ap.add_argument("--study", default=None,
                    help="comma list of studies to analyse (" + ", ".join(list(STUDIES) + list(ALIASES)) +
                         "); one study: every run read is its own (sweep.sh --post passes it). Default: each "
                         "run's study from its record, every study that has runs")
    ap.add_argument("--out", default=None, help="output folder (default: the first folder)")
    ap.add_argument("--fit_sizes", default=None,
                    help="qat: comma list of size names for the penalty fit; the rest are held out "
                         "(default: all but the two extreme sizes if >= 5 sizes, else all)")
    ap.add_argument("--level", type=finite_float, default=0.95, help="prediction-interval level, in (0, 1)")
    ap.add_argument("--ref_lr", type=finite_float, default=1.0, help="qat: LR of the cell where the penalty is measured")
    ap.add_argument("--ref_warmdown", type=finite_float, default=REF_WARMDOWN,
                    help="qat: warmdown of the cell where the penalty is measured")
    ap.add_argument("--lengen_gate", type=finite_float, default=0.9,
                    help="lengen, posenc: a (task, encoding) cell enters the extrapolation verdict only when its "
                         "mean in-distribution exact match over seeds is >= this")
    ap.add_argument("--lengen_margin", type=finite_float, default=0.05,
                    help="lengen, posenc: smallest mean gain (or loss) of exact match past N against RoPE "
                         "that counts as better (worse), with the paired t test over >= 3 seeds at p < 0.05")
    ap.add_bool("--no_plots", False, "skip the PNG plots")
    ap.add_argument("--wave", type=int, default=1, choices=[w["wave"] for w in wave.waves().values()],
                    help="--confirm: which confirmatory wave (studies/waves/*.toml: " +
                         "; ".join(f"{w['wave']}: {os.path.basename(w['file'])}" for w in wave.waves().values()) + ")")
    ap.add_bool("--confirm", False, "with runs: also decide the run-study's declared families of the wave "
                "(studies/waves/*.toml; --study names it) on them; with --power DIR: plan its seeds on DIR's pilot")
    args = ap.parse_args(argv)
    if sum(x is not None for x in (args.verdicts, args.refamily, args.power, args.front, args.ledger)) > 1:
        ap.error("--verdicts, --refamily, --power, --front and --ledger are separate modes: give one")
    if args.seeds is not None and args.seeds < 2:
        ap.error(f"--seeds {args.seeds}: a paired t test needs at least 2 seeds")
    if args.effect is not None and not args.effect > 0:
        ap.error(f"--effect {args.effect:g} must be > 0")
    if args.verdicts:
        return verdicts_only(args.verdicts)
    if args.ledger:
        return write_ledger(args.ledger, os.path.join(os.path.dirname(os.path.abspath(args.ledger)), "results"),
                            args.no_plots)
    if args.front:
        here = os.path.dirname(os.path.abspath(args.front))  # a page in results/ itself, or beside it
        inside = os.path.basename(here) == "results"
        return front(args.front, here if inside else os.path.join(here, "results"), "" if inside else "results/")
    if args.refamily:
        return refamily(args.refamily, args.no_plots)
    if args.power:
        try:
            return (power_confirm(args.power, args.study, args.wave) if args.confirm
                    else power(args.power, args.seeds, args.effect))
        except UserError as e:
            warn(str(e))
            return 2
    if not args.folders:
        ap.error("the following arguments are required: folders (a folder of runs; or --verdicts, --refamily or --power DIR)")
    if not 0 < args.level < 1:
        ap.error(f"--level {args.level:g} must be in (0, 1)")
    missing = [d for d in args.folders if not os.path.isdir(d)]
    if missing:
        warn(f"no such folder: {', '.join(missing)}")
        return 2
    runs = load_runs(args.folders)
    if not runs:
        warn(f"nothing to analyse: no readable result.json under {', '.join(args.folders)}")
        return 2
    try:
        rep, lines, figs = analyse(runs, args)
        if args.confirm:  # the wave's declared families on these (fresh-seed, one-machine) runs, ahead of the rest
            w = wave.get(args.wave)
            name = confirm_study(args.folders[0], args.study, w)
            rep["confirmatory"], md = wave.confirmatory(w, name, rep, runs, args.folders)
            lines[2:2] = md
            store_plan(w, name, rep["confirmatory"], args.out or args.folders[0])
        elif any(os.path.isfile(os.path.join(d, "wall.json")) for d in args.folders):  # a pilot (tools/run_lines.sh)
            rep["wall"] = wave.confirm_wall(args.folders)
    except UserError as e:
        warn(str(e))
        return 2
    out = args.out or args.folders[0]
    try:
        os.makedirs(out, exist_ok=True)
        if not args.no_plots:
            rep["plots"] = save_figures(figs, out)
        md = "\n".join(lines) + "\n"
        write_analysis(out, rep, md)
    except OSError as e:
        warn(f"cannot write to {out}: {e}")
        return 1
    print(md, end="")
    print(f"wrote {os.path.join(out, 'analysis.md')} and analysis.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
