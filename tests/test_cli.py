"""Flags as users type them: a boolean flag alone means true wherever it stands (it never swallows a
positional argument), `--flag false` / `--flag=false` turns it off, and a value that is neither a
true/false word nor a known argument is a one-line error."""
import json
import os

import pytest

import analyze
import cli
import data
import evaluate
from tools import export
import extend
import train
from conftest import write_corpus


@pytest.mark.parametrize("parse", [extend.parse_args, evaluate.parse_args,
                                   lambda a: cli.parse(export.ExportConfig, a)], ids=["extend", "evaluate", "export"])
def test_boolean_before_the_run_folder_leaves_it_alone(parse):
    flag = "--quiet" if parse in (extend.parse_args, evaluate.parse_args) else "--xz"  # export has no --quiet
    c = parse([flag, "out/base"])
    assert c.run == "out/base" and getattr(c, flag[2:]) is True
    c = parse([flag, "false", "out/base"])
    assert c.run == "out/base" and getattr(c, flag[2:]) is False
    c = parse(["out/base", f"{flag}=no"])
    assert c.run == "out/base" and getattr(c, flag[2:]) is False
    assert getattr(parse(["out/base"]), flag[2:]) is False  # the default


def test_extend_quiet_then_run_then_flags():
    c = extend.parse_args(["--quiet", "out/base", "--factor", "2"])
    assert (c.run, c.quiet, c.factor) == ("out/base", True, 2.0)


def test_train_booleans_alone_and_turned_off():
    c = train.parse_args(["--quiet", "--bits", "6", "--compile", "--swan", "--resume", "false"])
    assert c.quiet and c.compile and not c.resume and c.model["bits"] == 6 and c.model["swan"] is True
    c = train.parse_args(["--tie_embeddings", "false", "--quiet"])
    assert c.model["tie_embeddings"] is False and c.quiet


def test_a_stray_word_after_a_boolean_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["--quiet", "out/base"])  # train.py has no positional: the word is not eaten as a value
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: out/base" in err
    with pytest.raises(SystemExit):
        train.parse_args(["--qui"])  # no abbreviations: a flag is its full name
    assert "unrecognized arguments: --qui" in capsys.readouterr().err


def test_data_prepare_quiet_before_its_folders(tmp_path, capsys):
    src = write_corpus(str(tmp_path / "src"), n_docs=3, words=200)
    out = str(tmp_path / "prep")
    data.main(["prepare", "--quiet", src, out, "--vocab_size", "512", "--val_frac", "0.34"])
    assert os.path.exists(os.path.join(out, "manifest.json")) and "prepared" in capsys.readouterr().out


def test_analyze_no_plots_before_the_folder(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "result.json").write_text(json.dumps({"config": {"bits": 16, "lr": 1.0, "warmdown": 0.33, "seed": 0,
                                                            "size": "1M"}, "metrics": {"val_loss": 3.0}}))
    assert analyze.main(["--no_plots", str(tmp_path)]) == 0
    assert (tmp_path / "analysis.json").exists() and not list(tmp_path.glob("*.png"))


AMD_CPUINFO = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 1
model name	: AMD EPYC
stepping	: 1
flags		: fpu avx512f

processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
stepping	: 0
"""
INTEL_CPUINFO = """processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Processor
stepping	: 8
"""
ARM_CPUINFO = """processor	: 0
BogoMIPS	: 50.00
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1
"""


def test_cpu_model_tells_apart_cpus_of_one_generic_name():
    """versions.cpu_model: vendor, family, model and stepping beside the model name (of the first processor),
    so an Intel Xeon and an AMD EPYC, both 'AVX512' and named generically, are told apart; ARM by its part."""
    assert cli.cpu_model(AMD_CPUINFO) == "AuthenticAMD family 25 model 1 stepping 1: AMD EPYC"
    assert cli.cpu_model(INTEL_CPUINFO) == "GenuineIntel family 6 model 143 stepping 8: Intel(R) Xeon(R) Processor"
    assert cli.cpu_model(ARM_CPUINFO) == "CPU implementer 0x41 part 0xd0c variant 0x3 revision 1"
    assert cli.cpu_model("model name\t: Some CPU\n") == "Some CPU" and cli.cpu_model("") == ""
    assert cli.this_cpu_model() and cli.versions()["cpu_model"] == cli.this_cpu_model()
