"""A declared format's TOML file, read and checked once, when it is loaded.

Every mistake a user can make in the file is refused here with one line that names the file
and the field (an `InputError`), so that reading a log never meets a half-valid format. The
schema itself is documented in the package docstring (`loganalyzer.declared`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from loganalyzer.errors import InputError
from loganalyzer.model import MODEL_FACTS, RUN_FACTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 backport, same API
    import tomli as tomllib

# Seconds in one of each time unit a step time or a clock may be printed in.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0}
# GB (1e9 bytes, the per-iteration table's unit) in one of each memory unit.
MEMORY_UNITS = {"GB": 1.0, "GiB": 2**30 / 1e9, "MB": 1e-3, "MiB": 2**20 / 1e9}
# What an MFU printed as a percentage or as a fraction is, as a fraction.
RATIO_UNITS = {"percent": 0.01, "fraction": 1.0}

# The fields a record line may name, by kind: what a kind's values mean and which units
# it takes (see the package docstring).
COUNTERS = ("iteration", "train_iters", "micro_step")
DURATIONS = ("step_time",)
CLOCKS = ("train_time",)
FIGURES = (
    "loss",
    "lr",
    "grad_norm",
    "loss_scale",
    "global_batch_size",
    "tokens",
    "samples_per_s",
    "tokens_per_s",
    "reported_tflops",
    "skipped_iterations",
    "nan_iterations",
)
RATIOS = ("mfu",)
MEMORY = ("mem_allocated_gb", "mem_max_allocated_gb")
STAMPS = ("timestamp",)
RECORD_FIELDS = (*COUNTERS, *DURATIONS, *CLOCKS, *FIGURES, *RATIOS, *MEMORY, *STAMPS)
# A group named `<field>_unit` carries the unit printed beside that field's value.
UNIT_SUFFIX = "_unit"

# The run facts a config line or a fixed value may state: those the FLOPs and the summary
# rest on, named like Megatron-LM's arguments, and a few more every summary shows.
CONFIG_KEYS = (
    *MODEL_FACTS,
    *RUN_FACTS,
    "vocab_size",
    "params",
    "train_iters",
    "batch_tokens",
    "framework_version",
)
TEXT_KEYS = ("gpu_name", "dtype", "recompute", "framework_version")
FLAG_KEYS = ("swiglu",)

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_METRIC = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_TOP_KEYS = {
    "name",
    "description",
    "tested_on",
    "framework",
    "notes",
    "metrics",
    "record",
    "lines",
    "config",
    "fixed",
}
_FIELD_OPTIONS = {"unit", "placeholders", "per"}


@dataclass(frozen=True)
class Field:
    """How one record field is read: its unit's factor, the printed values that mean "not
    measured", and, for a step time, whether it covers one micro-batch."""

    name: str
    factor: float | None = 1.0  # None: no unit declared, the line prints it (`<name>_unit`)
    placeholders: tuple[float, ...] = ()
    per_micro_step: bool = False


@dataclass(frozen=True)
class LinePattern:
    """A pattern and the names of its groups that carry values (in the pattern's order)."""

    pattern: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class DeclaredFormat:
    """A validated declared format (see the package docstring for each key)."""

    name: str
    description: str
    tested_on: tuple[str, ...]
    framework: str
    notes: tuple[str, ...]
    record: LinePattern
    fields: Mapping[str, Field]
    metrics: tuple[str, ...]
    lines: tuple[LinePattern, ...]
    config: tuple[LinePattern, ...]
    fixed: Mapping[str, object]
    origin: str  # the file (or package resource) it was read from


def parse_format(text: str, origin: str) -> DeclaredFormat:
    """The format `text` declares; InputError naming `origin` and the field for any fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{origin}: not valid TOML ({exc})") from exc
    return _Checker(origin).format(data)


class _Checker:
    """Checks one file's tables, every message naming the file."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, where: str, message: str) -> InputError:
        return InputError(f"{self.origin}: {where}: {message}")

    def format(self, data: dict[str, Any]) -> DeclaredFormat:
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise self.fail(
                unknown[0], f"unknown key; a format file has {', '.join(sorted(_TOP_KEYS))}"
            )
        name = self.text(data, "name", required=True)
        if not _NAME.match(name):
            raise self.fail("name", f"{name!r} is not lowercase letters, digits, '-' or '_'")
        record = data.get("record")
        if not isinstance(record, dict):
            raise self.fail("record", "missing: a [record] table with the record line's pattern")
        metrics = self.strings(data, "metrics", "metrics")
        for metric in metrics:
            if not _METRIC.match(metric) or metric in RECORD_FIELDS:
                raise self.fail("metrics", f"{metric!r} is not a free metric name")
        record_line = self.pattern(record, "record", set(RECORD_FIELDS) | set(metrics), units=True)
        if "iteration" not in record_line.groups:
            raise self.fail("record.pattern", "has no group (?P<iteration>...): the step number")
        fields = self.fields(record, record_line)
        lines = tuple(
            self.pattern(table, f"lines[{n}]", {"iteration", *metrics}, units=False)
            for n, table in enumerate(self.tables(data, "lines"))
        )
        for n, line in enumerate(lines):
            if not set(line.groups) - {"iteration"}:
                raise self.fail(f"lines[{n}].pattern", "names none of record.metrics")
        config = tuple(
            self.pattern(table, f"config[{n}]", set(CONFIG_KEYS), units=False)
            for n, table in enumerate(self.tables(data, "config"))
        )
        return DeclaredFormat(
            name=name,
            description=self.text(data, "description", required=True),
            tested_on=self.strings(data, "tested_on", "tested_on"),
            framework=self.text(data, "framework") or name,
            notes=self.strings(data, "notes", "notes"),
            record=record_line,
            fields=fields,
            metrics=metrics,
            lines=lines,
            config=config,
            fixed=self.fixed(data.get("fixed", {})),
            origin=self.origin,
        )

    def text(self, data: dict[str, Any], key: str, required: bool = False) -> str:
        value = data.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "missing or not a non-empty string")
        return value.strip()

    def strings(self, data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, "not a list of strings")
        return tuple(value)

    def tables(self, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(key, f"not an array of tables ([[{key}]])")
        return value

    def pattern(
        self, table: dict[str, Any], where: str, allowed: set[str], units: bool
    ) -> LinePattern:
        extra = sorted(set(table) - {"pattern", "fields"})
        if extra or (where != "record" and set(table) - {"pattern"}):
            bad = extra[0] if extra else sorted(set(table) - {"pattern"})[0]
            raise self.fail(f"{where}.{bad}", "unknown key")
        pattern = table.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise self.fail(f"{where}.pattern", "missing or not a string")
        groups = _groups(pattern, lambda message: self.fail(f"{where}.pattern", message))
        for group in groups:
            field = group.removesuffix(UNIT_SUFFIX)
            if units and group.endswith(UNIT_SUFFIX) and field in (*DURATIONS, *CLOCKS, *MEMORY):
                if field not in groups:
                    raise self.fail(f"{where}.pattern", f"group {group!r} without {field!r}")
                continue
            if group not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail(
                    f"{where}.pattern", f"group {group!r} is not a field it may name ({known})"
                )
        return LinePattern(pattern, groups)

    def fields(self, record: dict[str, Any], line: LinePattern) -> dict[str, Field]:
        options = record.get("fields", {})
        if not isinstance(options, dict):
            raise self.fail("record.fields", "not a table")
        for name in options:
            if name not in line.groups:
                raise self.fail(
                    f"record.fields.{name}", f"the pattern has no group (?P<{name}>...)"
                )
        found: dict[str, Field] = {}
        for name in line.groups:
            if name.endswith(UNIT_SUFFIX) and name not in RECORD_FIELDS:
                continue
            given = options.get(name, {})
            if not isinstance(given, dict):
                raise self.fail(f"record.fields.{name}", "not a table")
            found[name] = self.field(name, given, line.groups)
        return found

    def field(self, name: str, given: dict[str, Any], groups: tuple[str, ...]) -> Field:
        where = f"record.fields.{name}"
        extra = sorted(set(given) - _FIELD_OPTIONS)
        if extra:
            raise self.fail(f"{where}.{extra[0]}", f"unknown option ({', '.join(_FIELD_OPTIONS)})")
        placeholders = given.get("placeholders", [])
        if not isinstance(placeholders, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in placeholders
        ):
            raise self.fail(f"{where}.placeholders", "not a list of numbers")
        per = given.get("per", "step")
        if per not in ("step", "micro_step") or (per == "micro_step" and name != "step_time"):
            raise self.fail(f"{where}.per", f"{per!r}: only step_time may be per = 'micro_step'")
        if per == "micro_step" and "micro_step" not in groups:
            raise self.fail(f"{where}.per", "per = 'micro_step' needs a (?P<micro_step>...) group")
        units = _units_of(name)
        unit = given.get("unit")
        printed = name + UNIT_SUFFIX in groups
        factor: float | None = 1.0
        if units is None:
            if unit is not None:
                raise self.fail(f"{where}.unit", f"{name} takes no unit")
        elif unit is None and not printed:
            raise self.fail(f"{where}.unit", f"missing: one of {', '.join(units)}")
        elif unit is not None and unit not in units:
            raise self.fail(f"{where}.unit", f"{unit!r} is not one of {', '.join(units)}")
        else:
            factor = units[unit] if unit is not None else None
        return Field(
            name,
            factor,
            tuple(float(v) for v in placeholders),
            per_micro_step=per == "micro_step",
        )

    def fixed(self, values: object) -> dict[str, object]:
        if not isinstance(values, dict):
            raise self.fail("fixed", "not a table")
        for key, value in values.items():
            if key not in CONFIG_KEYS:
                raise self.fail(f"fixed.{key}", f"not a run fact ({', '.join(CONFIG_KEYS)})")
            want: tuple[type, ...] = (
                (str,) if key in TEXT_KEYS else (bool,) if key in FLAG_KEYS else (int, float)
            )
            if not isinstance(value, want) or (bool not in want and isinstance(value, bool)):
                raise self.fail(f"fixed.{key}", f"{value!r} is not a {want[0].__name__}")
        return dict(values)


def _units_of(name: str) -> Mapping[str, float] | None:
    """The units a field's values may be printed in, None for a field without units."""
    if name in (*DURATIONS, *CLOCKS):
        return TIME_UNITS
    if name in MEMORY:
        return MEMORY_UNITS
    if name in RATIOS:
        return RATIO_UNITS
    return None


def unit_factors(name: str) -> Mapping[str, float]:
    """The factor of each unit a `<name>_unit` group may print."""
    return _units_of(name) or {}


def _groups(pattern: str, fail: Any) -> tuple[str, ...]:
    """The named groups of `pattern` as the regex engine that reads logs (polars') sees
    it; a pattern it refuses, or one without named groups, fails with its reason."""
    try:
        dtype = pl.select(pl.lit("", dtype=pl.String).str.extract_groups(pattern)).to_series().dtype
    except pl.exceptions.PolarsError as exc:
        reason = str(exc).strip().splitlines()
        raise fail(f"not a valid regular expression ({reason[-1] if reason else exc})") from exc
    assert isinstance(dtype, pl.Struct)
    names = tuple(f.name for f in dtype.fields if not f.name.isdigit())
    if not names:
        raise fail("has no named group (?P<name>...)")
    if len(set(names)) != len(names):
        raise fail("names a group twice")
    return names
