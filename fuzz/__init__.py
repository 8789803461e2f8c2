"""Fuzzing targets and the atheris harness (see fuzz_parsers.py)."""
