"""Built-in parser plugins, registered through the loganalyzer.parsers entry points."""
