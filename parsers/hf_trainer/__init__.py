"""Hugging Face Trainer runs: an output_dir's trainer_state.json, and the Trainer's stdout."""

from loganalyzer.parsers.hf_trainer.parser import HfTrainerParser

__all__ = ["HfTrainerParser"]
