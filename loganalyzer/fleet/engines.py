"""The two engines that map the per-run task: a local process pool (the default) and Ray
(`--engine ray`, the optional `ray` extra) over a cluster. Both yield outcomes as runs
finish, so progress and the manifest advance together."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Protocol

from loganalyzer.errors import UsageProblem
from loganalyzer.fleet.worker import Outcome, Task, analyse_run

ENGINES = ("pool", "ray")


class Engine(Protocol):
    """Maps the per-run task over tasks, yielding outcomes in the order they finish."""

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]: ...


class PoolEngine:
    """A process pool over the local cores; one job runs in this process (no pool)."""

    def __init__(self, jobs: int, task: Callable[[Task], Outcome] = analyse_run) -> None:
        self.jobs = jobs
        self.task = task

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        if self.jobs == 1 or len(tasks) <= 1:
            yield from (self.task(t) for t in tasks)
            return
        # spawn, not fork: forking a process whose polars thread pool is running can hang
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(self.jobs, mp_context=context) as pool:
            pending = {pool.submit(self.task, t) for t in tasks}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    yield from (future.result() for future in done)
            finally:
                for future in pending:
                    future.cancel()


class RayEngine:
    """Ray tasks on the cluster at RAY_ADDRESS, or on a local one started for the job (and
    stopped after it) with `jobs` CPUs."""

    def __init__(self, jobs: int, task: Callable[[Task], Outcome] = analyse_run) -> None:
        self.jobs = jobs
        self.task = task

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        try:
            import ray
        except ImportError as exc:
            raise UsageProblem("--engine ray needs Ray: pip install 'loganalyzer[ray]'") from exc
        started_here = not ray.is_initialized()
        if started_here:
            address = os.environ.get("RAY_ADDRESS")
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                ray.init(address=address, **options)
            else:
                ray.init(num_cpus=self.jobs, **options)
        try:
            remote = ray.remote(self.task)
            pending = [remote.remote(t) for t in tasks]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            if started_here:
                ray.shutdown()


def make_engine(name: str, jobs: int) -> Engine:
    """The engine called `name` with `jobs` workers (local cores when 0)."""
    jobs = jobs or os.cpu_count() or 1
    if name == "ray":
        return RayEngine(jobs)
    return PoolEngine(jobs)
