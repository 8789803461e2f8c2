"""The parser plugin API: how loganalyzer learns to read a new format.

A parser is a class (or any object) registered in the entry-point group
``loganalyzer.parsers`` of a distribution's metadata::

    [project.entry-points."loganalyzer.parsers"]
    myformat = "mypackage.parser:MyFormatParser"

The built-in parsers are registered exactly this way, in loganalyzer's own pyproject.toml.
The entry point may name a class (instantiated without arguments) or an instance. It provides:

``name``
    Short identifier used by ``--format`` and shown by ``loganalyzer parsers``.
``description``
    One line: which frameworks and versions it reads.
``detect(path) -> float``
    A confidence in [0, 1] that this parser reads ``path`` (a file or a folder). Must be cheap:
    read at most the head of a file (``loganalyzer.sources.text_head`` of a text log, or
    ``read_head``), never the whole of it; must never raise (return 0.0 instead).
``parse(path) -> Run``
    Extract the run's config (every value with its provenance) and its per-iteration table
    (``loganalyzer.model.conform_table`` fills the columns a format lacks). Parsers extract;
    they never derive FLOPs, MFU or slow steps. Raise ``loganalyzer.errors.InputError`` with a
    one-line message naming the file (and line) for unreadable input; put anything skipped or
    assumed in ``Run.warnings``. Raise ``loganalyzer.errors.NothingReadError`` (an InputError)
    when the file holds none of the format's records: a file chosen by detection then goes on
    to the next parser that claims it, so a head that looked like this format costs nothing.
    A text parser also fills ``Run.endings`` with what the text says about how the run ended
    (tracebacks, launcher and scheduler lines): ``loganalyzer.endings.candidates`` of each
    chunk of lines it reads, then ``loganalyzer.endings.read_endings`` of them.
``tested_on`` (optional)
    The frameworks and versions whose real output the parser's tests read, e.g.
    ``("Megatron-LM core_r0.5.0", "Megatron-LM core_r0.12.0")``; ``loganalyzer parsers`` lists them.
``schemes`` (optional)
    URI schemes of sources that are not paths and that this parser may read, e.g.
    ``("wandb", "https")`` for ``wandb:ENTITY/PROJECT/RUN_ID`` and W&B run URLs (an MLflow or
    Neptune parser would list its own). A source written ``SCHEME:...`` with a scheme some
    parser lists is never looked up as a path: it is handed, as the string the user typed,
    to ``detect(source)`` and ``parse(source)`` of the parsers listing that scheme, and the
    most confident one reads it. Such a parser may use the network (with bounded timeouts)
    and must say so in its description.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # polars (under Run) is not needed to list or load parsers
    from loganalyzer.model import Run


@runtime_checkable
class Parser(Protocol):
    """What the registry needs of a parser plugin (see the module docstring)."""

    name: str
    description: str

    def detect(self, path: Path) -> float: ...

    def parse(self, path: Path) -> Run: ...


@runtime_checkable
class UriParser(Protocol):
    """A parser that also reads sources named by URI (see ``schemes`` above)."""

    name: str
    schemes: tuple[str, ...]

    def detect(self, source: str) -> float: ...

    def parse(self, source: str) -> Run: ...
