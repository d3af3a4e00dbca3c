"""tools/export.py --format hf: every supported family reloads in transformers with our logits, the tokenizer
gives tiktoken's ids, a QAT run exports its deployed model, and every unsupported flag is refused."""
import json
import os
import random
import shutil
import subprocess
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded

from conftest import ROOT, tiny_config
import data
from tools import export
import train
from train import config_from_checkpoint, load_run
from model import GPT, GPTConfig, load_checkpoint, save_checkpoint
from quant import fake_quant
from test_quant import randomised

transformers = export.import_transformers()  # once per module: the import is the slow part
TOL = 1e-4
SCALED = dict(block_size=64, rope_original_len=16, rope_factor=4.0)  # evaluated at 4x the original length

# (name, model flags, transformers class): every family, every RoPE scaling, windows past their width
FAMILIES = [
    ("llama", dict(mlp="swiglu", n_kv_head=2, tie_embeddings=False), "LlamaForCausalLM"),
    ("llama-pi", dict(mlp="swiglu", rope_scaling="pi", **SCALED), "LlamaForCausalLM"),
    ("llama-ntk", dict(mlp="swiglu", rope_scaling="ntk", **SCALED), "LlamaForCausalLM"),
    ("llama-dynamic", dict(mlp="swiglu", rope_scaling="dynamic_ntk", **SCALED), "LlamaForCausalLM"),
    ("llama-yarn", dict(mlp="swiglu", rope_scaling="yarn", yarn_beta_fast=8.0, yarn_beta_slow=0.5, **SCALED),
     "LlamaForCausalLM"),
    ("llama-llama3", dict(mlp="swiglu", rope_scaling="llama3", rope_theta=100.0, **SCALED), "LlamaForCausalLM"),
    ("arcee-relu2", dict(), "ArceeForCausalLM"),  # the project's default model
    ("arcee-gelu-yarn", dict(mlp="gelu", rope_scaling="yarn", tie_embeddings=False, **SCALED), "ArceeForCausalLM"),
    ("apertus", dict(qk_norm="head", n_kv_head=1, rope_scaling="llama3", rope_theta=100.0, **SCALED),
     "ApertusForCausalLM"),
    ("qwen3-swa-yarn", dict(mlp="swiglu", qk_norm="head", n_kv_head=2, window=8, global_every=2,
                            rope_scaling="yarn", **SCALED), "Qwen3ForCausalLM"),
    # RoPE scaled on the global layers alone (the paper longctx main recipe on its SWA cells)
    ("mellum-swa-yarn-global", dict(mlp="swiglu", qk_norm="head", n_kv_head=2, n_layer=4, window=8,
                                    layer_pattern="w,g,w,g", rope_scaling="yarn", rope_scaling_layers="global",
                                    **SCALED), "MellumForCausalLM"),
    ("granite-swa-ntk-global", dict(mlp="swiglu", n_kv_head=2, n_layer=4, window=8, layer_pattern="w,w,w,g",
                                    rope_scaling="ntk", rope_scaling_layers="global", **SCALED),
     "GraniteSWAForCausalLM"),
    ("olmo2-pi", dict(mlp="swiglu", qk_norm="layer", norm_order="post", n_kv_head=2, rope_scaling="pi", **SCALED),
     "Olmo2ForCausalLM"),
    ("olmo3-yarn-global", dict(mlp="swiglu", qk_norm="layer", norm_order="post", n_layer=4, window=8,
                               layer_pattern="w,g,w,g", rope_scaling="yarn", rope_scaling_layers="global", **SCALED),
     "Olmo3ForCausalLM"),
    ("olmo3-ntk-all", dict(mlp="swiglu", qk_norm="layer", norm_order="post", window=8, global_every=2,
                           rope_scaling="ntk", **SCALED), "Olmo3ForCausalLM"),
    ("phi3-partial", dict(mlp="swiglu", rope_frac=0.5, n_kv_head=2), "Phi3ForCausalLM"),
    ("phi3-yarn-swa", dict(mlp="swiglu", rope_frac=0.75, window=8, rope_scaling="yarn", **SCALED), "Phi3ForCausalLM"),
    # head_dim 44 with 30 rotated dims: int(44 * (30 / 44)) is 29 in floating point
    ("phi3-llama3-odd", dict(mlp="swiglu", n_embd=88, n_head=2, rope_frac=30 / 44, rope_scaling="llama3", **SCALED),
     "Phi3ForCausalLM"),
    ("smollm3-swan", dict(mlp="swiglu", swan=True, n_layer=4, window=8, global_every=2, rope_scaling="pi", **SCALED),
     "SmolLM3ForCausalLM"),
    ("smollm3-swan-global", dict(mlp="swiglu", swan=True, window=8, global_every=2, rope_scaling="yarn",
                                 rope_scaling_layers="global", **SCALED), "SmolLM3ForCausalLM"),  # no layer scaled
    ("smollm3-nope", dict(mlp="swiglu", pos="nope"), "SmolLM3ForCausalLM"),
    ("smollm3-swa-dynamic", dict(mlp="swiglu", window=8, layer_pattern="g,w", rope_scaling="dynamic_ntk", **SCALED),
     "SmolLM3ForCausalLM"),
]


@pytest.fixture(scope="module")
def enc512():
    return data.get_tokenizer("cl100k_base", 512)


def small(**kw):
    return GPTConfig(**{**dict(vocab_size=512, block_size=32, n_layer=2, n_head=4, n_embd=64), **kw})


def load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@torch.no_grad()
def max_diff(model, hf, T, seed=0):
    x = torch.randint(0, model.config.vocab_size, (2, T), generator=torch.Generator().manual_seed(seed))
    return (hf(input_ids=x, use_cache=False).logits - model(x)[0]).abs().max().item()


@pytest.mark.parametrize("name,flags,cls", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_family_logits_equal_ours(name, flags, cls, enc512, tmp_path):
    model = randomised(GPT(small(**flags)), seed=len(name)).eval()  # no zero-initialised rows: the test can fail
    export.write_hf(model, enc512, str(tmp_path))
    hf = load(str(tmp_path))
    assert type(hf).__name__ == cls
    c = model.config
    assert not c.window or c.block_size > 2 * c.window  # past the window
    assert max_diff(model, hf, c.block_size) <= TOL
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["rms_norm_eps"] == 1e-6 and cfg["tie_word_embeddings"] == c.tie_embeddings
    assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (511, 511)
    rope = cfg["rope_parameters"]
    if "rope_type" in rope:  # the transformers 4 keys say the same (Olmo 3's per-layer RoPE has none)
        assert cfg["rope_theta"] == rope["rope_theta"] and cfg.get("partial_rotary_factor") == rope.get("partial_rotary_factor")
        assert cfg["rope_scaling"] == (None if rope["rope_type"] == "default" else
                                       {k: v for k, v in rope.items() if k not in ("rope_theta", "partial_rotary_factor")})


def test_a_wrong_mapping_is_caught(enc512, tmp_path):
    """The comparison has the resolution to see a one-token window shift and YaRN measured from the
    wrong original length."""
    model = randomised(GPT(small(mlp="swiglu", qk_norm="head", window=8, global_every=2)), seed=3).eval()
    export.write_hf(model, enc512, str(tmp_path))
    cfg = json.load(open(tmp_path / "config.json"))
    json.dump({**cfg, "sliding_window": 9}, open(tmp_path / "config.json", "w"))
    assert max_diff(model, load(str(tmp_path)), 32) > 100 * TOL
    model = randomised(GPT(small(mlp="swiglu", rope_scaling="yarn", **SCALED)), seed=4).eval()
    export.write_hf(model, enc512, str(tmp_path))
    cfg = json.load(open(tmp_path / "config.json"))
    rope = {**cfg["rope_parameters"], "original_max_position_embeddings": 32}
    scaling = {**cfg["rope_scaling"], "original_max_position_embeddings": 32}  # the 4.x key, read first
    json.dump({**cfg, "rope_parameters": rope, "rope_scaling": scaling}, open(tmp_path / "config.json", "w"))
    assert max_diff(model, load(str(tmp_path)), 64) > 100 * TOL


# ---------------------------------------------------------------- tokenizer

SAMPLES = [export.TOKENIZER_SAMPLE, "", " ", "\n", "1234567890 12 345 6789", "x  \ny", "a\r\n\r\n  b",
           "tabs\t\t\tand   spaces   \n  ", "Ünïcödé ñ 中文 العربية 🎉", "it's I'LL we've they're",
           "<|endoftext|>", "a<|endoftext|>b<|endoftext|>", "  <|endoftext|>  \n"]
ALPHABET = list("aZ ső'\"\n\r\t0123456789.,;:!?()-_/ÆΩжא中🎉") + ["<|endoftext|>", "  ", "\n\n", "'s", "'LL"]


@pytest.mark.parametrize("vocab", [512, 4096])
def test_tokenizer_gives_tiktoken_ids(vocab, tmp_path):
    enc = data.get_tokenizer("cl100k_base", vocab)
    eot = "<|endoftext|>"
    transformers.PreTrainedTokenizerFast(tokenizer_object=export.hf_tokenizer(enc), bos_token=eot, eos_token=eot,
                                         clean_up_tokenization_spaces=False).save_pretrained(str(tmp_path))
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(tok) == vocab and tok.eos_token_id == tok.bos_token_id == vocab - 1
    rng = random.Random(vocab)
    fuzz = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    for text in SAMPLES + fuzz:
        want = enc.encode(text, allowed_special="all")
        assert tok(text, add_special_tokens=False)["input_ids"] == want, repr(text)
        assert tok.decode(want) == text
    assert enc.eot_token in enc.encode(export.TOKENIZER_SAMPLE, allowed_special="all")
    export.check_tokenizer(tok, enc, SAMPLES)  # the export's own check passes ...
    with pytest.raises(export.UserError, match="tokenizer disagrees"):  # ... and fails on another vocabulary
        export.check_tokenizer(tok, data.get_tokenizer("cl100k_base", vocab + 1), SAMPLES)


# ---------------------------------------------------------------- the command line

def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools/export.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})


@pytest.fixture(scope="module")
def qat_run(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("qat"), bits=4, quant_embed=True, ptq_bits="")
    return cfg, train.train(cfg)


def test_qat_run_exports_its_deployed_model(qat_run, tmp_path, capsys):
    cfg, result = qat_run
    out = str(tmp_path / "hf")
    r = run_cli(cfg.out_dir, "--format", "hf", "--out", out)  # the real entry point
    assert r.returncode == 0, r.stderr
    assert "ArceeForCausalLM" in r.stdout and "recorded deployed" in r.stdout, r.stdout
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(out))
    rec = json.load(open(os.path.join(cfg.out_dir, "export.json")))
    assert (rec["format"], rec["architecture"], rec["path"], rec["bits"]) == ("hf", "ArceeForCausalLM", out, 4)
    assert rec["val_loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-5)  # the deployed loss
    model, _, _ = load_run(cfg.out_dir)  # QAT on: its forward is the deployed model
    hf = load(out)
    assert max_diff(model.eval(), hf, 32) <= TOL
    assert torch.equal(hf.model.layers[0].self_attn.q_proj.weight, fake_quant(model.blocks[0].attn.c_q.weight, 4))
    assert torch.equal(hf.model.embed_tokens.weight, fake_quant(model.wte.weight, 4))  # quant_embed: on the grid too
    tok = transformers.AutoTokenizer.from_pretrained(out)
    enc = data.get_tokenizer("cl100k_base", 512)
    assert tok("the king and queen<|endoftext|>")["input_ids"] == enc.encode("the king and queen<|endoftext|>",
                                                                             allowed_special="all")
    # a second export replaces the first (in this process: transformers is imported already); a folder
    # holding other files is never overwritten
    export.main([cfg.out_dir, "--format", "hf", "--out", out])
    assert load(out).config.model_type == "arcee" and not [n for n in os.listdir(tmp_path) if n != "hf"]
    open(os.path.join(out, "notes.txt"), "w").write("mine")
    with pytest.raises(SystemExit):
        export.main([cfg.out_dir, "--format", "hf", "--out", out])
    assert "not overwritten" in capsys.readouterr().err and os.path.exists(os.path.join(out, "notes.txt"))


def fake_run(parent, folder, **flags):
    """A finished run folder holding a random model with these flags (no training needed to be refused)."""
    ckpt = load_checkpoint(os.path.join(parent, "ckpt.pt"))
    model = GPT(GPTConfig.from_dict({**ckpt["model_config"], "bits": 16, "quant_embed": False, **flags}))
    os.makedirs(folder)
    save_checkpoint(os.path.join(folder, "ckpt.pt"), model, [], 1, config_from_checkpoint(ckpt),
                          model.config)
    shutil.copy(os.path.join(parent, "result.json"), folder)
    return folder


UNSUPPORTED = [  # (model flags, what the one-line error names)
    (dict(pos="alibi"), "pos alibi"),
    (dict(pos="hope"), "pos hope"),
    (dict(pos="expe"), "pos expe"),
    (dict(pos="learned"), "pos learned"),
    (dict(pos="sinusoidal"), "pos sinusoidal"),
    (dict(pos="expe", expe_on="qk"), "pos expe"),
    (dict(pos_pattern="rope,alibi"), "pos_pattern 'rope,alibi'"),
    (dict(mlp="swiglu", swan=True, window=8, global_every=2, logn_scale=True), "logn_scale"),
    (dict(chunk_layers="all", chunk_size=8), "chunk_layers 'all'"),
    (dict(qk_norm="layer"), "qk_norm layer with norm_order pre"),
    (dict(norm_order="post", qk_norm="layer"), "norm_order post with qk_norm layer and mlp relu2"),
    (dict(window=8, global_every=2), "window 8"),
    (dict(pos="nope"), "pos nope"),
    (dict(qk_norm="head", mlp="swiglu", rope_frac=0.5), "rope_frac 0.5"),
    (dict(mlp="swiglu", window=8, global_every=2, rope_scaling="pi", rope_factor=2.0,
          rope_scaling_layers="global"), "rope_scaling_layers global"),
    (dict(mlp="swiglu", rope_frac=0.5, rope_scaling="dynamic_ntk", rope_factor=2.0), "rope_scaling dynamic_ntk"),
    (dict(mlp="swiglu", rope_frac=0.5, window=8, global_every=2), "window 8 on some layers"),
]


@pytest.mark.parametrize("flags,named", UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
def test_unsupported_flag_is_a_one_line_error(qat_run, tmp_path, capsys, flags, named):
    run = fake_run(qat_run[0].out_dir, str(tmp_path / "run"), **flags)
    before = sorted(os.listdir(run))
    with pytest.raises(SystemExit) as e:
        export.main([run, "--format", "hf"])  # the command line's own entry point, in this process
    err = capsys.readouterr().err.strip()
    assert e.value.code != 0 and named in err and "no exact transformers counterpart" in err, err
    assert len(err.splitlines()) == 1 and sorted(os.listdir(run)) == before  # nothing written


def test_unsupported_flag_through_the_process(qat_run, tmp_path):
    run = fake_run(qat_run[0].out_dir, str(tmp_path / "run"), pos="alibi")
    r = run_cli(run, "--format", "hf", "--out", str(tmp_path / "hf"))
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "pos alibi" in r.stderr and not os.path.exists(tmp_path / "hf")


@pytest.mark.parametrize("args,msg", [(["--keep", "fp16"], "--keep and --xz apply to --format int"),
                                      (["--bits", "1"], "bits"), (["--out", "FILE"], "is a file")])
def test_bad_hf_arguments(qat_run, tmp_path, capsys, args, msg):
    (tmp_path / "FILE").write_text("x")
    with pytest.raises(SystemExit):
        export.main([qat_run[0].out_dir, "--format", "hf", *[a.replace("FILE", str(tmp_path / "FILE")) for a in args]])
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1, err


def test_every_paper_longctx_cell_shape_exports(enc512, tmp_path):
    """HELMET / RULER score the paper longctx models through transformers: every cell shape of
    `SCALE=paper sweep.sh --dry-run longctx` (its model flags, at toy width: 4 heads, KV heads in the
    grid's ratio, window 8, 4 layers) exports and reloads with our logits past the window, as
    pretrained, NTK-extended on every layer and on the global layers alone (the main recipe: a SWA
    cell maps to Mellum with per-head QK-norm, to GraniteSWA without)."""
    import shlex
    p = subprocess.run(["bash", os.path.join(ROOT, "sweep.sh"), "--dry-run", "longctx"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "SCALE": "paper", "OUT": str(tmp_path / "o")})
    assert p.returncode == 0, p.stderr
    shapes = set()
    train_lines = [ln for ln in p.stdout.splitlines() if shlex.split(ln)[1] == "train.py"]  # not the 2nd-pass evaluations
    assert len(train_lines) == 81  # the LongPPL evaluator's line, then the 80 cells' (5 seeds); the evaluator is cell 0000's shape
    for line in train_lines:
        cfg = train.parse_args(shlex.split(line.split(" && ")[0])[2:])
        m = cfg.model
        pattern = m.get("layer_pattern", "")
        if m.get("window"):  # one global layer in 4, the last one global (as Olmo 3's layout ends)
            spans = pattern.split(",")
            assert len(spans) == 14 and spans[-1] == "g" and spans.count("g") == 4, pattern
        shapes.add((m["qk_norm"], 4 * m["n_kv_head"] // 12, bool(m.get("window")), m["mlp"]))
    assert len(shapes) == 8
    for i, (qk, kv, swa, mlp) in enumerate(sorted(shapes)):  # the layout at 4 layers: w,w,w,g
        base = dict(qk_norm=qk, n_kv_head=kv, mlp=mlp, n_layer=4, **(dict(window=8, layer_pattern="w,w,w,g") if swa else {}))
        for j, ext in enumerate([dict(block_size=64), dict(rope_scaling="ntk", **SCALED)]):
            model = randomised(GPT(small(**base, **ext)), seed=2 * i + j).eval()
            out = str(tmp_path / f"cell{i}_{j}")
            export.write_hf(model, enc512, out)
            assert max_diff(model, load(out), model.config.block_size) <= TOL, (base, ext)
        model = randomised(GPT(small(**base, rope_scaling="ntk", rope_scaling_layers="global", **SCALED)), seed=i).eval()
        out = str(tmp_path / f"cell{i}_g")
        export.write_hf(model, enc512, out)  # without SWA every layer is global: the same model as scaling all
        hf = load(out)
        assert max_diff(model, hf, model.config.block_size) <= TOL, (base, "global")
        expect = {(False, "none"): "Llama", (False, "head"): "Qwen3", (True, "none"): "GraniteSWA", (True, "head"): "Mellum"}
        assert type(hf).__name__ == expect[(swa, qk)] + "ForCausalLM", (base, type(hf).__name__)


def test_hf_refuses_a_positional_kind_it_does_not_know():
    """tools/export.py lists what transformers computes (HF_POS), not what it refuses: a kind it has never
    heard of (a new encoding not yet mapped) is refused, as are the kinds of model.py outside HF_POS."""
    from types import SimpleNamespace as NS
    import model
    c = NS(pos="xpos", pos_pattern="", swan=False, expe_on="qk", logn_scale=False, chunk_layers="")
    with pytest.raises(export.UserError, match="pos xpos has no exact transformers counterpart"):
        export.hf_unsupported(c, [NS(pos="xpos", chunk=False)])
    for kind in set(model.POS_KINDS) - set(export.HF_POS):
        with pytest.raises(export.UserError, match=f"pos {kind}"):
            export.hf_unsupported(NS(**{**vars(c), "pos": kind}), [NS(pos=kind, chunk=False)])
