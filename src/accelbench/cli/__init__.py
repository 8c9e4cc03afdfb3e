"""The command line: one module per command, shared options, one error path."""
