"""Runs for the report's first-screen browser tests, written by the frameworks' own writers:
a Megatron-LM TensorBoard run (tensorboard's event-file writer, Megatron's tags) and a W&B
offline run (wandb itself, Megatron's keys as its training.py logs them). Both stall after
the validation at iterations 1000 and 2000 and have one 47x spike at 2345, so the first screen
has causes to rank and the step-time chart a spike that flattens a linear axis."""

from __future__ import annotations

from pathlib import Path

from tests.wandb_offline import write_offline_run

# Megatron-LM's arguments as its TensorBoard writer logs them (`<arg>/text_summary`).
ARGS = {
    "num_layers": "24",
    "hidden_size": "2048",
    "num_attention_heads": "16",
    "seq_length": "2048",
    "padded_vocab_size": "50304",
    "global_batch_size": "512",
    "micro_batch_size": "4",
    "bf16": "True",
    "eval_interval": "1000",
    "save_interval": "1000",
}
ITERATIONS = 3000
STEP_S = 1.5
SPIKE_AT = 2345  # 47 x the step time
VALIDATION_AT = (1000, 2000)
VALIDATION_S = 20.0


def step_time(iteration: int) -> float:
    """The iteration's time: the pace, 47x at the spike, plus the validation run before it."""
    if iteration == SPIKE_AT:
        return 47 * STEP_S
    return STEP_S + (VALIDATION_S if iteration - 1 in VALIDATION_AT else 0.0)


def write_tensorboard_run(folder: Path) -> Path:
    """A Megatron-LM event file: the arguments as text, then `iteration-time`, `lm loss` and
    `learning-rate` per iteration and `lm loss validation` at each evaluation."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    wall = 1_795_000_000.0
    for arg, value in ARGS.items():
        writer.add_event(
            Event(wall_time=wall, step=0, summary=text_pb(f"{arg}/text_summary", value))
        )

    def scalar(tag: str, value: float, step: int) -> None:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=wall, step=step, summary=summary))

    for iteration in range(1, ITERATIONS + 1):
        wall += step_time(iteration)
        scalar("iteration-time", step_time(iteration), iteration)
        scalar("lm loss", 9 - iteration / 1000, iteration)
        scalar("learning-rate", 1e-4, iteration)
        if iteration in VALIDATION_AT:
            scalar("lm loss validation", 8.5 - iteration / 1000, iteration)
    writer.close()
    (written,) = folder.glob("events.out.tfevents.*")
    return written


WANDB_SCRIPT = f"""
import wandb
step_s, spike, validation = {STEP_S}, {SPIKE_AT}, {VALIDATION_AT}
run = wandb.init(project="p", config={{
    "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
    "padded_vocab_size": 50304, "global_batch_size": 512, "micro_batch_size": 4, "bf16": True,
    "eval_interval": 1000, "save_interval": 1000}})
for iteration in range(1, {ITERATIONS} + 1):
    took = step_s + (20.0 if iteration - 1 in validation else 0.0)
    took = 47 * step_s if iteration == spike else took
    record = {{"lm loss": 9 - iteration / 1000, "iteration-time": took, "learning-rate": 1e-4}}
    if iteration in validation:
        record["lm loss validation"] = 8.5 - iteration / 1000
    wandb.log(record, step=iteration)
run.finish()
"""


def write_wandb_run(scratch: Path) -> Path:
    """The same run logged to W&B offline by wandb itself; its `.wandb` file."""
    return write_offline_run(WANDB_SCRIPT, scratch)
