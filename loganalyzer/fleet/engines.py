"""The two engines that map the index's tasks (detecting a folder's logs, analysing a run):
a local process pool (the default) and Ray (`--engine ray`, the optional `ray` extra) over a
cluster. Each is a context manager that holds its workers for the whole index, and yields
results as tasks finish, so that progress and the manifest advance together."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from types import TracebackType
from typing import Any, Protocol, TypeVar

from loganalyzer.errors import LogAnalyzerError, UsageProblem

ENGINES = ("pool", "ray")
POLARS_THREADS = "POLARS_MAX_THREADS"
PR_SET_PDEATHSIG = 1  # prctl(2)
Item = TypeVar("Item")
Result = TypeVar("Result")


class Engine(Protocol):
    """Maps a picklable function over items, yielding results in the order they finish."""

    def __enter__(self) -> Engine: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def map(
        self,
        function: Callable[[Item], Result],
        items: Sequence[Item],
        failed: Callable[[Item, str], Result] | None = None,
    ) -> Iterator[Result]:
        """`failed(item, why)` stands for the result of a task whose worker died or that
        ran past the engine's time limit; without it, that is an error."""
        ...


class PoolEngine:
    """Worker processes over the local cores; one job runs in this process (no pool).

    Each worker takes one task at a time, so that the task a worker was on when it died (the
    kernel's out-of-memory killer) or ran past `timeout` seconds (killed then) is known: it
    becomes `failed(item, why)`, a new worker takes the worker's place, and the other tasks
    go on. Workers ignore SIGINT and SIGTERM: the index decides when they stop (and kills
    them when it stops early)."""

    def __init__(self, jobs: int, timeout: float | None = None) -> None:
        self.jobs = jobs
        self.timeout = timeout
        self.pooled = False
        self.idle: list[_Worker] = []

    def __enter__(self) -> PoolEngine:
        self.pooled = self.jobs > 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for worker in self.idle:
            worker.stop()
        self.idle = []
        self.pooled = False

    def map(
        self,
        function: Callable[[Item], Result],
        items: Sequence[Item],
        failed: Callable[[Item, str], Result] | None = None,
    ) -> Iterator[Result]:
        if not self.pooled or len(items) <= 1:
            for item in items:
                yield _inline(function, item, self.timeout, failed)
            return
        waiting = deque(items)
        busy: list[_Worker] = []
        try:
            while waiting or busy:
                while waiting and len(busy) < self.jobs:
                    worker = self.idle.pop() if self.idle else _Worker()
                    worker.give(function, waiting.popleft())
                    busy.append(worker)
                ready = set(wait(_waitables(busy), _next_deadline(busy, self.timeout)))
                for worker in list(busy):
                    outcome = worker.collect(ready, self.timeout)
                    if outcome is None:
                        continue
                    busy.remove(worker)
                    kind, value = outcome
                    if kind == "done":
                        self.idle.append(worker)
                        yield value
                        continue
                    if kind == "raised":
                        self.idle.append(worker)
                        raise value
                    worker.stop()  # dead or killed: a new worker takes its place
                    yield _failure(failed, worker.item, value)
        finally:
            for worker in busy:  # stopped early (an error, Ctrl-C, SIGTERM): no waiting
                worker.stop()


class _Worker:
    """One worker process and the task it is on."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # fork can hang polars' thread pool
        self.connection, there = context.Pipe()
        self.process = context.Process(target=_serve, args=(there,), daemon=True)
        self.process.start()
        there.close()
        self.item: Any = None
        self.began = 0.0

    def give(self, function: Callable[[Any], Any], item: Any) -> None:
        self.item, self.began = item, time.monotonic()
        self.connection.send((function, item))

    def collect(self, ready: set[Any], timeout: float | None) -> tuple[str, Any] | None:
        """("done", result), ("raised", exception), ("lost", why), or None while at work."""
        try:
            while self.connection.poll():
                answer: tuple[str, Any] = self.connection.recv()
                if answer[0] == "started":  # the time limit counts from here
                    self.began = time.monotonic()
                    continue
                self.item = None
                return answer
        except (EOFError, OSError):
            self.process.join(1)
            return "lost", _death(self.process.exitcode)
        if self.process.sentinel in ready or not self.process.is_alive():
            self.process.join(1)
            return "lost", _death(self.process.exitcode)
        if timeout is not None and time.monotonic() - self.began > timeout:
            return "lost", f"timed out after {timeout:g} s"
        return None

    def stop(self) -> None:
        """End the process: told to when idle, killed when at work or unresponsive."""
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.connection.send(None)
            self.process.join(0.5 if self.item is None else 0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        self.connection.close()


def _serve(connection: Connection) -> None:
    """A worker's loop: a task in, its result (or the exception it raised) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    threading.Thread(target=_orphaned, args=(os.getppid(),), daemon=True).start()
    while True:
        try:
            task = connection.recv()
        except (EOFError, OSError):  # the index is gone
            return
        if task is None:
            return
        function, item = task  # unpickled: the function's modules are imported
        try:
            connection.send(("started", None))
            answer: tuple[str, Any] = ("done", function(item))
        except Exception as exc:  # raised in the index, as a pool's future does
            answer = ("raised", exc)
        try:
            connection.send(answer)
        except OSError:  # the index is gone
            return
        except Exception as exc:  # an exception that cannot be pickled: its words can
            connection.send(("raised", LogAnalyzerError(f"{type(exc).__name__}: {exc}")))


def _die_with_parent() -> None:
    """On Linux, have the kernel kill the worker the instant the index dies (SIGKILL): it
    must not write into the dataset after the next index took it over."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _orphaned(parent: int) -> None:
    """Elsewhere, end the worker soon after the index dies."""
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def _waitables(busy: Sequence[_Worker]) -> list[Any]:
    return [w.connection for w in busy] + [w.process.sentinel for w in busy]


def _next_deadline(busy: Sequence[_Worker], timeout: float | None) -> float | None:
    if timeout is None:
        return None
    first = min(w.began for w in busy) + timeout
    return max(0.0, first - time.monotonic()) + 0.01


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"worker died: signal {-exitcode}"
    return f"worker died: exit code {exitcode}"


class _TimedOut(BaseException):
    """Raised by the alarm inside a task run in this process; not an Exception, so that the
    task's own error handling does not record it as the run's error."""


def _inline(
    function: Callable[[Item], Result],
    item: Item,
    timeout: float | None,
    failed: Callable[[Item, str], Result] | None,
) -> Result:
    """A task run in this process, stopped by an alarm after `timeout` seconds (where
    signals can be had: the main thread of a POSIX process)."""
    alarm = getattr(signal, "SIGALRM", None)
    if (
        timeout is None
        or alarm is None
        or threading.current_thread() is not threading.main_thread()
    ):
        return function(item)

    def ring(signum: int, frame: Any) -> None:
        raise _TimedOut

    before = signal.signal(alarm, ring)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return function(item)
    except _TimedOut:
        return _failure(failed, item, f"timed out after {timeout:g} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(alarm, before)


def _failure(failed: Callable[[Item, str], Result] | None, item: Item, why: str) -> Result:
    if failed is None:
        raise LogAnalyzerError(f"{why} (a worker of the index)")
    return failed(item, why)


class RayEngine:
    """Ray tasks on the cluster at RAY_ADDRESS, or on a local one started for the index (and
    stopped after it) with `jobs` CPUs. Each task is limited to `timeout` seconds from its
    start on a worker (an alarm in the worker, which runs it in its main thread), not from
    its submission: on a cluster the tasks queue for its CPUs."""

    def __init__(self, jobs: int, timeout: float | None = None) -> None:
        self.jobs = jobs
        self.timeout = timeout
        self.started_here = False

    def __enter__(self) -> RayEngine:
        ray = _ray()
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            address = os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, **options)
            else:
                ray.init(num_cpus=self.jobs, **options)
            self.started_here = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.started_here:
            _ray().shutdown()
            self.started_here = False

    def map(
        self,
        function: Callable[[Item], Result],
        items: Sequence[Item],
        failed: Callable[[Item, str], Result] | None = None,
    ) -> Iterator[Result]:
        ray = _ray()
        remote = ray.remote(_inline)
        pending = {remote.remote(function, item, self.timeout, failed): item for item in items}
        names = ("WorkerCrashedError", "OutOfMemoryError")  # the latter since Ray 2.2
        crashed = tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                item = pending.pop(done[0])
                try:
                    result = ray.get(done[0])
                except crashed:
                    result = _failure(failed, item, "worker died")
                yield result
        finally:
            for ref in pending:
                ray.cancel(ref)


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageProblem("--engine ray needs Ray: pip install 'loganalyzer[ray]'") from exc
    return ray


def make_engine(name: str, jobs: int, timeout: float | None = None) -> Engine:
    """The engine called `name` with `jobs` workers (local cores when 0), each task limited
    to `timeout` seconds."""
    jobs = jobs or os.cpu_count() or 1
    if name == "ray":
        _ray()  # a missing extra fails before anything is read
        return RayEngine(jobs, timeout)
    return PoolEngine(jobs, timeout)
