"""loganalyzer: how efficiently did a training run use its hardware?

Reads what a run left behind (stdout logs, TensorBoard, W&B), recomputes TFLOPS and MFU with
one documented formula, and finds the time lost to slow steps, stalls and restarts.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("loganalyzer")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"
