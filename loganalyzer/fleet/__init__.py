"""Many runs: an incremental Parquet index of every run, and the fleet report built on it.

`discovery` finds the folders of logs under the roots named (and the W&B runs a root lists),
`manifest` says which of them changed since the last index, `worker` reads one folder once,
tells its runs apart by the run-identity rules, analyses each as `summary` does and writes it;
`engines` maps that task over a local process pool or a Ray cluster, `indexer` ties them
together; `document` is the one place that reads a summary document into a fleet row, and
`report` (on polars lazy scans of the dataset) with `view` builds what `fleet` shows.
The dataset's layout is in `layout`.
"""
