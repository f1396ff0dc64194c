"""A fork server for `tidelog serve`: imports Tidelog once, then forks one broker per request.

Starting a broker costs seconds of imports on a loaded 2-core machine; a crash loop of hundreds
of SIGKILLs cannot pay that each time. The harness starts this process once (under LD_PRELOAD,
which the children inherit), writes one JSON line per broker to its stdin:

    {"argv": [...serve args...], "env": {...}, "stdout": path, "stderr": path}

and reads back `pid <n>`. The child's stdout (the ready line) goes to the given file. The
harness kills the child by that pid; the zygote reaps its dead children before each fork.
It exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys


def _serve_child(request: dict[str, object]) -> None:
    from tidelog.cli.main import main

    for key, value in dict(request.get("env") or {}).items():  # type: ignore[call-overload]
        os.environ[str(key)] = str(value)  # putenv: the shim's getenv sees it
    os.setsid()  # no signal from the harness' terminal reaches the broker
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    out = os.open(str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    err = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the child's stdout
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    argv = [str(arg) for arg in request["argv"]]  # type: ignore[attr-defined]
    try:
        main.main(args=argv, prog_name="tidelog", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
        os._exit(code)
    os._exit(0)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    # Import the broker before forking: that is the whole point of the zygote.
    import tidelog.broker.server
    import tidelog.cli.main  # noqa: F401

    print("zygote ready", flush=True)
    for line in sys.stdin:
        _reap()
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("reap"):
            print("reaped", flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _serve_child(request)
            finally:
                os._exit(1)
        print(f"pid {pid}", flush=True)
    _reap()


if __name__ == "__main__":
    main()
