"""Click commands that the `loganalyzer` group adds; each module holds one family."""
