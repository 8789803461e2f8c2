"""The two engines that map the index's tasks (detecting a folder's logs, analysing a run):
a local process pool (the default) and Ray (`--engine ray`, the optional `ray` extra) over a
cluster. Each is a context manager that holds its workers for the whole index, and yields
results as tasks finish, so that progress and the manifest advance together."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, wait
from types import TracebackType
from typing import Any, Protocol, TypeVar

from loganalyzer.errors import UsageProblem

ENGINES = ("pool", "ray")
POLARS_THREADS = "POLARS_MAX_THREADS"
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
        self, function: Callable[[Item], Result], items: Sequence[Item]
    ) -> Iterator[Result]: ...


class PoolEngine:
    """A process pool over the local cores; one job runs in this process (no pool)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: Executor | None = None

    def __enter__(self) -> PoolEngine:
        if self.jobs > 1:
            # spawn, not fork: forking a process whose polars thread pool runs can hang
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=context)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def map(self, function: Callable[[Item], Result], items: Sequence[Item]) -> Iterator[Result]:
        if self.pool is None or len(items) <= 1:
            yield from (function(item) for item in items)
            return
        pending = {self.pool.submit(function, item) for item in items}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from (future.result() for future in done)
        finally:
            for future in pending:
                future.cancel()


class RayEngine:
    """Ray tasks on the cluster at RAY_ADDRESS, or on a local one started for the index (and
    stopped after it) with `jobs` CPUs."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
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

    def map(self, function: Callable[[Item], Result], items: Sequence[Item]) -> Iterator[Result]:
        ray = _ray()
        remote = ray.remote(function)
        pending = [remote.remote(item) for item in items]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            for ref in pending:
                ray.cancel(ref)


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageProblem("--engine ray needs Ray: pip install 'loganalyzer[ray]'") from exc
    return ray


def make_engine(name: str, jobs: int) -> Engine:
    """The engine called `name` with `jobs` workers (local cores when 0)."""
    jobs = jobs or os.cpu_count() or 1
    if name == "ray":
        _ray()  # a missing extra fails before anything is read
        return RayEngine(jobs)
    return PoolEngine(jobs)
