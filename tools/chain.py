"""
A sweep job's steps in one process (sweep.sh's runner, CHAIN=1, and tools/rehearse.py's packs):

    python tools/chain.py "PYTHON a.py ARGS && PYTHON b.py ARGS"

Each step runs as `python script.py args` would, in a fresh __main__, stopping at the first that
fails; the exit status is that step's (cli.STOPPED for a step stopped by a signal).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project's libraries
import cli  # noqa: E402


def chain(line):
    """Run the ' && '-joined steps of a sweep job (each `PYTHON script.py args`) one after the other
    in this one process, each as `python script.py args` runs it (a fresh __main__, its own argv
    and sys.path[0]), stopping at the first that fails; -> the exit status. A job then pays the
    start-up of Python and torch (~2.6 s) once, not once a step: a longctx job has 12. Every script
    seeds its own RNGs at its start, so its numbers are those of a process of its own. Stops as the
    sweep's job shell stops a chain of processes: a SIGTERM / SIGUSR1 / SIGHUP ends a step that does
    not handle it at once (a training step checkpoints at its next step boundary) and runs no further
    step, with status STOPPED. A line with any other kind of step (or two interpreters) runs in bash."""
    import runpy
    import shlex
    steps = [shlex.split(s) for s in line.split(" && ")]
    at = [next((i for i, a in enumerate(s) if a.endswith(".py")), 0) for s in steps]
    if not all(at) or len({tuple(s[:i]) for s, i in zip(steps, at)}) != 1:
        os.execvp("bash", ["bash", "-c", line])

    def stop(signum, frame):  # what the signal's default would do to a step of its own, plus the status
        raise SystemExit(cli.STOPPED)

    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, stop)
    for s, i in zip(steps, at):
        script = s[i]
        argv, path0 = sys.argv, sys.path[0]
        sys.argv, sys.path[0] = s[i:], os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:  # how the scripts end: cli.main's exit 1 on bad input, argparse's 2
            code = e.code if isinstance(e.code, int) or e.code is None else (print(e.code, file=sys.stderr) or 1)
        finally:
            sys.argv, sys.path[0] = argv, path0
            sys.stdout.flush()
            sys.stderr.flush()
        if not code and cli._STOP["signum"]:  # a signal a finished training step noted (cli: the scripts' module)
            code = cli.STOPPED
        if code:
            return code
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/chain.py 'PYTHON a.py ARGS && PYTHON b.py ARGS'")
    sys.exit(chain(sys.argv[1]))
