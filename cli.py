"""
The plumbing every script shares: one command-line parser built from config dataclasses, one
error style, files written whole (atomic writes, a lock on a run folder), the provenance every
record carries (git commit, versions), and devices (CPU / CUDA, bf16 autocast, DDP).

    @dataclass
    class EvalConfig:
        run: str = flag("", "run folder", positional=True)
        samples: int = flag(2, "samples per (task, length, depth)")

    ec = parse(EvalConfig, argv, description=__doc__)   # --samples 4, --help lists each flag's text

A flag's help text is its dataclass field's own metadata, so `--help` never parses source text.
Bad input raises UserError, which `main` turns into one line on stderr and exit status 1.
"""
import argparse
import contextlib
import dataclasses
import errno
import fcntl
import json
import math
import os
import platform
import signal
import subprocess
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class UserError(Exception):
    """Bad input: reported as one line on stderr with a non-zero exit, never a traceback."""


def flag(default, help, positional=False):
    """A dataclass field that is also a command-line flag with this help text."""
    return dataclasses.field(default=default, metadata=dict(help=help, positional=positional))


BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def str2bool(v):
    if v.lower() in BOOL_WORDS:
        return BOOL_WORDS[v.lower()]
    raise argparse.ArgumentTypeError(f"expected true/false, got {v!r}")


def bool_words(args, names):
    """argv with each boolean flag in `names` written as --x=value: `--x` alone is --x=true wherever it
    stands, `--x false` is --x=false. The next word is taken only when it is a true/false word, so
    `--quiet RUN` leaves RUN to the positional argument (as argparse's store_true does)."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return out + args[i:]
        if a in names:
            nxt = args[i + 1] if i + 1 < len(args) else None
            take = nxt is not None and nxt.lower() in BOOL_WORDS
            out.append(f"{a}={nxt if take else 'true'}")
            i += 1 + take
            continue
        out.append(a)
        i += 1
    return out


def finite_float(v):
    """float that refuses nan and inf: no flag of this project means anything with them."""
    x = float(v)
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {v!r}")
    return x


TYPES = {int: int, float: finite_float, str: str, "int": int, "float": finite_float, "str": str}


class OneLineParser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and boolean flags as users type them (add_bool)."""

    def __init__(self, *args, **kw):
        kw.setdefault("allow_abbrev", False)  # a flag is its full name: --q is not --quiet
        super().__init__(*args, **kw)
        self.bools = set()

    def add_bool(self, name, default, help):
        """--name alone means true wherever it stands; --name false / --name=false turns it off."""
        self.bools.add(name)
        self.add_argument(name, type=str2bool, default=default, metavar="[true|false]", help=help)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(bool_words(args, self.bools), namespace)

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def add_flags(p, cls, skip=(), optional=False, prefix=""):
    """One flag per field of dataclass cls. Booleans take `--x` (wherever it stands) or `--x true|false`.
    optional=True: every default is None, so the caller sees which flags were given."""
    for f in dataclasses.fields(cls):
        if f.name in skip or "help" not in f.metadata:
            continue
        text = f"{prefix}{f.metadata['help']}".replace("%", "%%")
        if f.metadata.get("positional"):
            p.add_argument(f.name, help=text)
        elif f.type in (bool, "bool"):
            p.add_bool(f"--{f.name}", None if optional else f.default, f"{text} (default {f.default})")
        else:
            p.add_argument(f"--{f.name}", type=TYPES[f.type], default=None if optional else f.default,
                           help=f"{text} (default {f.default!r})")


_PARSERS = {}  # (cls, description, overrides) -> (parser, override names): tools/cost.py and the tests
# parse thousands of grid lines, and building a parser of ~100 flags costs more than parsing with it


def parse(cls, argv=None, description=None, overrides=None):
    """Parse argv into cls. overrides=(OtherConfig, "field"): OtherConfig's flags are offered too
    (skipping names cls already has); the ones given are collected as a dict into cls.field."""
    key = (cls, description, overrides)
    if key not in _PARSERS:
        p = OneLineParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
        add_flags(p, cls)
        names = []
        if overrides:
            other, into = overrides
            own = {f.name for f in dataclasses.fields(cls)}
            names = [f.name for f in dataclasses.fields(other) if f.name not in own and "help" in f.metadata]
            add_flags(p, other, skip=own, optional=True, prefix="model: ")
        _PARSERS[key] = p, names
    p, names = _PARSERS[key]
    args = vars(p.parse_args(argv))
    if overrides:
        given = {k: args.pop(k) for k in names}
        args[overrides[1]] = {k: v for k, v in given.items() if v is not None}
    return cls(**args)


STOPPED = 75  # exit status of a run stopped by SIGTERM / SIGUSR1 with its checkpoint written (sysexits.h
# EX_TEMPFAIL, "try again later"): sweep.sh reports such a job as stopped and resumable, not failed


class Stopped(Exception):
    """A graceful stop (stop_signals): the checkpoint is written; main prints the one line."""


class WriteError(UserError, OSError):
    """A write that failed (a full disk, a quota, an I/O error): one line naming the file and its size.
    Also an OSError, so that code which tolerates a failed optional write still does."""


def main(body, interrupted="interrupted", resume="rerun with --resume"):
    """Run a script's main body: UserError becomes one line on stderr and exit 1; so does an OS
    error (a folder that cannot be made, a full disk), with the file it names. A graceful stop
    (Stopped) is one line too, with how to resume, and exit status STOPPED."""
    try:
        body()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        print(f"error: {e.strerror or type(e).__name__}{where}", file=sys.stderr)
        sys.exit(1)
    except Stopped as e:
        if int(os.environ.get("RANK", 0)) == 0:  # one line for a DDP run, not one per process
            print(f"{e}; {resume}", file=sys.stderr)
        sys.exit(STOPPED)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        sys.exit(130)


# -----------------------------------------------------------------------------
# Stops: SIGTERM (a scheduler's preemption or time limit, SIGKILL follows) and SIGUSR1 (SLURM's
# --signal=B:USR1@120 warning) end a training run at its next step boundary, checkpointed

_STOP = dict(depth=0, signum=0)


@contextlib.contextmanager
def stop_signals():
    """While inside: SIGTERM and SIGUSR1 do not end the process but are recorded, and the training
    loop stops at its next step boundary (stop_requested). Nested blocks (extend.py around
    train.py's) share the record; the handlers of before are restored on leaving. Signals reach
    the main thread only: elsewhere (a test's worker thread) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _STOP["depth"]:
        _STOP["signum"] = 0

    def note(signum, frame):
        _STOP["signum"] = max(_STOP["signum"], signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGUSR1)}
    _STOP["depth"] += 1
    try:
        yield
    finally:
        _STOP["depth"] -= 1
        for s, handler in old.items():
            signal.signal(s, handler)


STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # the stop signals, larger number first (the one max() keeps)


def stop_flags():
    """This process's stop request as one flag per STOP_SIGNALS entry: what a DDP step folds into the
    loss all-reduce it runs anyway (summed over ranks), instead of an all-reduce of its own."""
    return [float(_STOP["signum"] == getattr(signal, s)) for s in STOP_SIGNALS]


def stop_from_flags(flags):
    """The stop signal of summed stop_flags() ('' = none): the larger number wins, as in stop_requested."""
    return next((s for s, f in zip(STOP_SIGNALS, flags) if f > 0), "")


def stop_requested(dist_info):
    """The name of the signal that asks this run to stop ('' = none). Under DDP every rank gets the
    same answer (the largest signal number any rank received: one all-reduce of one number per
    step), so that all stop at the same step even when the signal reached only some of them."""
    signum = _STOP["signum"]
    if dist_info.ddp:
        import torch
        import torch.distributed as dist
        t = torch.tensor([signum], device=dist_info.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        signum = int(t.item())
    return signal.Signals(signum).name if signum else ""


# -----------------------------------------------------------------------------
# Files: written whole or not at all

def atomic_write(path, data, mode="w"):
    """Write to a temp file in the same folder, then rename: readers never see half a file. data:
    what to write, or a function that writes into the open file (e.g. a torch.save). A write that
    fails (ENOSPC, EDQUOT, EIO) is one WriteError; the earlier file at path stays as it was and the
    temp file goes."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, mode) as f:
            data(f) if callable(data) else f.write(data)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch.save reports a failed write as a RuntimeError
        cause = os_error(e)
        if cause is None:
            raise
        raise write_error(path, cause, byte_count(data)) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def os_error(e):
    """The OSError behind exception e (itself, or the one it was raised from or while handling; a
    WriteError's is the one it reports)."""
    while e is not None and (not isinstance(e, OSError) or isinstance(e, WriteError)):
        e = e.__cause__ or e.__context__
    return e


def write_error(path, e, needed):
    """WriteError for the failed write of `needed` bytes to path (OSError e): the file, the size,
    the reason, and whether an earlier version of the file is still there."""
    code = errno.errorcode.get(e.errno, "")
    kept = f"the earlier {os.path.basename(path)} is kept" if os.path.exists(path) else "nothing written"
    return WriteError(f"cannot write {path} ({needed:,} bytes): {e.strerror or e}"
                      f"{f' [{code}]' if code else ''}; {kept}")


class _Counter:
    """A file that only counts what is written into it."""
    n = 0

    def write(self, b):
        n = len(b.encode()) if isinstance(b, str) else memoryview(b).nbytes
        self.n += n
        return n

    def flush(self):
        pass


def byte_count(data):
    """Bytes that atomic_write's data makes (a function is run again into a counter: only on failure)."""
    if callable(data):
        c = _Counter()
        data(c)
        return c.n
    return len(data.encode()) if isinstance(data, str) else memoryview(data).nbytes


class LineLog:
    """A file of lines appended one at a time (train.py's log.jsonl), unbuffered: each line is
    written whole, or, when the write fails (a full disk), cut off again and reported as one
    WriteError, so the file holds whole lines only."""

    def __init__(self, path):
        self.path, self.f = path, open(path, "ab", buffering=0)

    def write(self, line):
        data = line.encode()
        end = self.f.seek(0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[self.f.write(view):]
        except OSError as e:
            with contextlib.suppress(OSError):
                self.f.truncate(end)
            raise write_error(self.path, e, len(data)) from None

    def close(self):
        self.f.close()


def clean(x):
    """Strict JSON that pandas reads: NaN / inf anywhere -> None, numpy scalars -> Python numbers
    (not the strings json's default=str would make of them), tuples -> lists, keys -> str."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    return None if isinstance(x, float) and not math.isfinite(x) else x


def first_line(e):
    """The first line of an exception's message (its type name when the message is empty)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def write_json(path, obj):
    atomic_write(path, json.dumps(clean(obj), indent=2, default=str, allow_nan=False) + "\n")


_HELD = {}  # real path of a folder whose lock this process holds -> [lock file, holders]


def lock_folder(out_dir):
    """An exclusive lock on a run folder (its file .lock), held while this process writes into it:
    a second process gets a one-line error instead of interleaving its records with ours. Taken
    before the first write into the folder. Re-entrant within one process (extend.py holds a stage
    folder while train.py trains into it). Returns the key for unlock_folder."""
    key = os.path.realpath(out_dir)
    if key in _HELD:
        _HELD[key][1] += 1
        return key
    f = open(os.path.join(out_dir, ".lock"), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise UserError(f"another process is training into {out_dir}") from None
    _HELD[key] = [f, 1]
    return key


def unlock_folder(key):
    held = _HELD.get(key)
    if held:
        held[1] -= 1
        if not held[1]:
            held[0].close()
            del _HELD[key]


@contextlib.contextmanager
def locked(out_dir):
    key = lock_folder(out_dir)
    try:
        yield key
    finally:
        unlock_folder(key)


def remove_stale_tmp(folder):
    """Remove the temp files (name.tmpPID) of writes killed half-way: those of processes that no
    longer exist. Call it holding the folder's lock."""
    for name in os.listdir(folder):
        pid = name.rsplit(".tmp", 1)[1] if ".tmp" in name else ""
        if pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, name))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def check_out_file(path, flag, ours, what):
    """An output file named on the command line, checked before any work: its folder exists, it
    is not a folder, and an existing file is only replaced when ours(path) says it is an earlier
    output of the same kind (what), never an input such as a checkpoint or a record."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {path}: no folder {folder}")
    if os.path.isdir(path):
        raise UserError(f"{flag} {path} is a folder; name the output file")
    if os.path.exists(path) and not ours(path):
        raise UserError(f"{flag} {path} exists and is not an earlier {what}: not overwritten")


def git_commit():
    """The commit of this code, '-dirty' when tracked files differ from it; 'unknown' outside git."""
    try:
        out = subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "-uno"], capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions():
    import numpy
    import tiktoken
    import torch
    # torch_threads: CPU results are bit-identical across thread counts only where the kernels split
    # no reduction by thread (measured for the main command at 1 and 2: docs/runs.md), so record it;
    # cpu / cpu_capability: the kernels torch dispatches to (AVX2, AVX512) round differently, and a
    # QAT run's fake-quant rounding turns such last-bit differences into different runs (docs/runs.md);
    # cpu_model: cloud machines name their CPU generically ("AMD EPYC") and report AVX512 for Intel and
    # AMD alike, yet the two give different numbers, so vendor, family, model and stepping are kept too
    out = dict(python=platform.python_version(), torch=torch.__version__, numpy=numpy.__version__,
               tiktoken=tiktoken.__version__, torch_threads=torch.get_num_threads(), cpu=cpu_name(),
               cpu_capability=torch.backends.cpu.get_cpu_capability(), cpu_model=this_cpu_model())
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
    return out


def cpu_name():
    """The CPU's model name (Linux /proc/cpuinfo; platform.processor() elsewhere, which may be '')."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cpu_model(cpuinfo):
    """The CPU model that /proc/cpuinfo's text names, from its first processor: 'VENDOR family F model M
    stepping S: MODEL NAME' on x86 (e.g. 'AuthenticAMD family 25 model 1 stepping 1: AMD EPYC'), 'CPU
    implementer I part P variant V revision R' on ARM; '' when it names none."""
    fields = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the end of the first processor's block
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    x86 = [("vendor_id", ""), ("cpu family", "family "), ("model", "model "), ("stepping", "stepping ")]
    arm = [("CPU implementer", "CPU implementer "), ("CPU part", "part "), ("CPU variant", "variant "),
           ("CPU revision", "revision ")]
    for keys in (x86, arm):
        ident = " ".join(label + fields[k] for k, label in keys if fields.get(k))
        if ident:
            return ident + (": " + fields["model name"] if fields.get("model name") else "")
    return fields.get("model name", "")


def this_cpu_model():
    """This machine's cpu_model (/proc/cpuinfo); platform.processor() without it; else 'unknown'."""
    try:
        with open("/proc/cpuinfo") as f:
            model = cpu_model(f.read())
    except OSError:
        model = ""
    return model or platform.processor() or "unknown"


# -----------------------------------------------------------------------------
# Devices: the one place that knows about CUDA, autocast and DDP (torch is imported here, not at
# the top: data.py's prepare workers import this file and need no torch)

@dataclasses.dataclass
class Dist:
    ddp: bool = False
    rank: int = 0
    world: int = 1
    device: str = "cpu"
    backend: str = ""  # the process group's: nccl | gloo ("" without DDP)
    owner: bool = True  # this setup started the process group (and ends it); False: a caller's (extend.py)

    @property
    def master(self):
        return self.rank == 0


def resolve_device(name="auto"):
    """auto | cpu | cuda | cuda:N -> a device string that exists here. Raises UserError."""
    import torch
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return name
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise UserError(f"--device {name} requested but CUDA is not available")
        if ":" in name and int(name[5:]) >= torch.cuda.device_count():
            raise UserError(f"--device {name}: only {torch.cuda.device_count()} CUDA devices")
        return name
    raise UserError(f"unknown --device {name!r}: auto | cpu | cuda | cuda:N")


def under_torchrun():
    return "WORLD_SIZE" in os.environ and (int(os.environ["WORLD_SIZE"]) > 1 or "LOCAL_RANK" in os.environ)


def setup_device(name, timeout_s=1800):
    """Pick the device, start DDP under torchrun (gloo on CPU, NCCL on CUDA). Any torchrun launch is
    DDP, --nproc_per_node 1 included (one process through the process group and the DDP wrapper:
    how a single GPU checks the NCCL path); a plain `python` launch is not. timeout_s: how long a
    collective waits for a missing process before it fails (instead of hanging). A process group
    already started is reused, and left to its owner to end (extend.py's, over all its stages:
    starting a second one in a torchrun worker hung at its rendezvous)."""
    want = resolve_device(name)
    if under_torchrun():
        import datetime
        import torch
        import torch.distributed as dist
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        if want.startswith("cuda"):
            want = f"cuda:{local}"
            torch.cuda.set_device(want)
        backend = "nccl" if want.startswith("cuda") else "gloo"
        owner = not dist.is_initialized()
        if owner:
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
        return Dist(True, rank, world, want, dist.get_backend(), owner)
    return Dist(False, 0, 1, want)


def autocast(device):
    """bf16 autocast on CUDA; plain fp32 on CPU (deterministic, and fast enough for tiny models)."""
    import contextlib
    import torch
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


EVAL_LOGITS = dict(cpu=2 ** 21, cuda=2 ** 28)  # fp32 logits per evaluation batch: 8 MiB on CPU, 1 GiB on CUDA


def eval_batch_tokens(device, vocab_size, given=0):
    """Tokens per evaluation forward pass: `given` when > 0, else as many as keep the batch's fp32
    logits (tokens x vocab, a small model's largest tensor) within EVAL_LOGITS. On CPU that is the
    fastest size measured for the tiny models (bigger batches fall out of cache: docs/speed.md); on
    CUDA it bounds memory at any context length. A caller runs at least one row whatever this says."""
    if given > 0:
        return given
    return max(1, EVAL_LOGITS["cuda" if str(device).startswith("cuda") else "cpu"] // max(vocab_size, 1))


def to_device(t, device):
    """A host tensor onto the device: on CUDA through pinned memory and without blocking the host
    (the copy queues behind the work already launched); elsewhere a plain .to (a no-op on CPU)."""
    if str(device).startswith("cuda"):
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def all_reduce_sum(t, dist_info):
    if dist_info.ddp:
        import torch.distributed as dist
        dist.all_reduce(t)
    return t
