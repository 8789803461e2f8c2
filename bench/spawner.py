"""Starts the harness's measured commands from a small process of its own.

Linux reports as a child's peak RSS (`ru_maxrss`) at least the peak RSS of the process that
started it: at `exec` the kernel records the high-water mark of the memory the child was
forked (or vforked) with, which is its parent's. The harness writes inputs with polars, builds
synthetic runs and writes TensorBoard files, so its own peak grows to hundreds of MB; a
command it started itself would report that, not its own (`grep -c` showed 449 MB). This
process imports nothing beyond the standard library and stays at about 10 MB, the floor of
every figure. One JSON request a line on stdin, one JSON answer a line on stdout:

    {"argv": [...], "env": {...}, "stdout": PATH, "stderr": PATH}
    {"seconds": wall, "cpu_seconds": user + system, "peak_kib": ru_maxrss, "exit": code}
"""

import json
import os
import sys
import time


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        redirect = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),  # not the requests' pipe
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_DUP2, err, 2),
        ]
        start = time.perf_counter()
        pid = os.posix_spawnp(
            request["argv"][0], request["argv"], request["env"], file_actions=redirect
        )
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - start
        os.close(out)
        os.close(err)
        answer = {
            "seconds": seconds,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_kib": usage.ru_maxrss,
            "exit": os.waitstatus_to_exitcode(status),
        }
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
