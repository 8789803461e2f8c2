"""The text around any run: a log that holds no records of a known format but says how the
run ended (a Python traceback, slurm's CANCELLED line, torchrun's root cause, the DeepSpeed
or pdsh launcher's exit, a Kubernetes container's last lines). It is claimed with a low score,
so every framework's parser is tried first; what it reads is `Run.endings`
(`loganalyzer.endings`), with no iteration records: a run that died before its first
iteration, or the scheduler's output file beside a run's own logs.
"""

from loganalyzer.parsers.launcher.parser import LauncherParser

__all__ = ["LauncherParser"]
