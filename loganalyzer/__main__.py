"""`python -m loganalyzer` runs the command line."""

from loganalyzer.cli import main

main()
