"""Many runs: an incremental Parquet index of every run, and the fleet report built on it.

`discovery` finds the runs under the roots named, `manifest` says which of them changed since
the last index, `worker` analyses one run exactly as `summary` does and writes its tables,
`engines` maps that task over a local process pool or a Ray cluster, `indexer` ties them
together; `document` is the one place that reads a summary document into a fleet row, and
`report` (on polars lazy scans of the dataset) with `view` builds what `fleet` shows.
The dataset's layout is in `layout`.
"""
