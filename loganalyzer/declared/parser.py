"""A declared format as a parser plugin: detection by its record pattern in the head, and a
Run of what its lines state. Loaded from a file (`--format-file`) or from a package
resource named by an entry point (a data-only plugin)."""

from __future__ import annotations

from contextvars import ContextVar
from functools import lru_cache
from importlib.metadata import EntryPoint
from importlib.resources import files
from pathlib import Path

import polars as pl

from loganalyzer.declared.reader import chunk_scanner, config, records
from loganalyzer.declared.schema import DeclaredFormat, parse_format
from loganalyzer.endings import read_endings
from loganalyzer.errors import InputError, NothingReadError
from loganalyzer.model import ConfigValue, Provenance, Run, SourceInfo
from loganalyzer.sources import text_head
from loganalyzer.textlog import clean, scanned_chunks, strip_launcher

# Below every built-in parser's claim but the launcher's (an ending alone): a file a
# framework parser reads is its own, and is handed on to a declared format only when that
# parser finds no records in it (`readfiles`). More record lines in the head score higher,
# up to DETECT_CEILING, so that of two declared formats the one that reads more comes first.
DETECT_FLOOR = 0.1
DETECT_CEILING = 0.19

# The formats given with --format-file for the command running (`commands.options`).
GIVEN: ContextVar[tuple[DeclaredParser, ...]] = ContextVar("declared_formats", default=())


class DeclaredParser:
    """The parser a declared format makes (the plugin API is in loganalyzer.plugin)."""

    def __init__(self, fmt: DeclaredFormat) -> None:
        self.format = fmt
        self.name = fmt.name
        self.description = f"{fmt.description} (declared format)"
        self.tested_on = fmt.tested_on

    def detect(self, path: Path) -> float:
        try:
            if not path.is_file():
                return 0.0
            stat = path.stat()
            lines = _head_lines(str(path), stat.st_mtime_ns, stat.st_size)
            # an empty head matches nothing: no polars query per format (10,000 empty files
            # in a run folder cost 0.7 ms each in the six formats' queries)
            pattern = self.format.record.pattern
            matched = int(lines.str.contains(pattern).sum()) if len(lines) else 0
        except (OSError, pl.exceptions.PolarsError):
            return 0.0
        if not matched:
            return 0.0
        return DETECT_FLOOR + (DETECT_CEILING - DETECT_FLOOR) * (1 - 1 / (1 + matched))

    def parse(self, path: Path) -> Run:
        fmt, source = self.format, str(path)
        found: dict[str, list[pl.DataFrame]] = {}
        for chunk in scanned_chunks(path, chunk_scanner(fmt)):
            for key, part in chunk.items():
                found.setdefault(key, []).append(part)
        if not found:  # an empty file
            raise NothingReadError(f"{source}: no {fmt.name} record or config line found")
        parts = {key: pl.concat(frames) for key, frames in found.items()}
        read = records(fmt, parts, source)
        facts, notes = config(fmt, parts["config"], source)
        if read.train_iters is not None:
            facts.setdefault("train_iters", read.train_iters)
        if not read.table.height and not any(v.provenance.kind == "log" for v in facts.values()):
            raise NothingReadError(f"{source}: no {fmt.name} record or config line found")
        table = read.table
        facts, batch_note = _batch_from_tokens(facts, source)
        if batch_note:
            notes.append(batch_note)
        if "batch_tokens" in facts and table.select(pl.col("tokens").is_null().all()).item():
            table = table.with_columns(tokens=pl.lit(facts["batch_tokens"].value, dtype=pl.Int64))
        facts["framework"] = ConfigValue(fmt.framework, Provenance("config", fmt.origin))
        warnings = [f"{source}: read with the declared format {fmt.name} ({fmt.origin})"]
        warnings += [f"{source}: {note}" for note in (*fmt.notes, *read.notes)]
        warnings += notes
        if not table.height:
            warnings.append(f"{source}: no training steps logged (the run may have died early)")
        return Run(
            framework=fmt.framework,
            config=facts,
            table=table,
            metrics=read.metrics,
            sources=[SourceInfo(source, fmt.name, table.height, read.clock_resolution_s)],
            warnings=warnings,
            endings=read_endings([parts["endings"]], source),
        )


@lru_cache(maxsize=2)
def _head_lines(path: str, mtime_ns: int, size: int) -> pl.Series:
    """The non-empty lines of a file's head as a format's pattern sees them (colour codes
    and launcher labels off), split once for every declared format's detection (a head of
    millions of empty lines, a gzip bomb's, costs one split in polars, not one each)."""
    head = text_head(Path(path), json_too=True)
    if head is None:
        return pl.Series("text", [], dtype=pl.String)
    lines = pl.Series("text", [head]).str.split("\n").explode().str.strip_chars_end("\r")
    lines = lines.filter(lines.str.len_bytes() > 0)
    cleaned: pl.Series = lines.to_frame().select(strip_launcher(clean(pl.col("text")))).to_series()
    return cleaned


def _batch_from_tokens(
    facts: dict[str, ConfigValue], source: str
) -> tuple[dict[str, ConfigValue], str | None]:
    """The global batch in sequences from a batch printed in tokens (`batch_tokens`) and the
    sequence length, when the log states no batch in sequences and the division is exact."""
    tokens, seq = facts.get("batch_tokens"), facts.get("seq_length")
    if tokens is None or seq is None or "global_batch_size" in facts:
        return facts, None
    if not isinstance(tokens.value, int) or not isinstance(seq.value, int) or seq.value <= 0:
        return facts, None
    if tokens.value % seq.value:
        return facts, (
            f"{source}: the batch of {tokens.value} tokens ({tokens.provenance}) is not a whole"
            f" number of {seq.value}-token sequences: global batch size unknown"
        )
    where = Provenance("derived", f"batch_tokens / seq_length ({tokens.provenance})")
    facts["global_batch_size"] = ConfigValue(tokens.value // seq.value, where)
    return facts, None


def load_format_file(path: Path) -> DeclaredParser:
    """The parser a format file declares (InputError naming the file for any fault)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the format file ({exc})") from exc
    return DeclaredParser(parse_format(text, str(path)))


def from_entry_point(ep: EntryPoint) -> DeclaredParser:
    """The parser of a data-only plugin: an entry point `name = "package:file.toml"` names
    a TOML resource of an importable package."""
    package, _, resource = ep.value.partition(":")
    origin = f"{package.strip()}:{resource.strip()}"
    try:
        text = files(package.strip()).joinpath(resource.strip()).read_text(encoding="utf-8")
    except (OSError, ModuleNotFoundError, UnicodeDecodeError) as exc:
        raise InputError(f"{origin}: cannot read the format file ({exc})") from exc
    return DeclaredParser(parse_format(text, origin))


def given_formats() -> tuple[DeclaredParser, ...]:
    """The formats given with --format-file to the command running."""
    return GIVEN.get()
