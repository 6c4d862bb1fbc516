"""Runnable programs: the demo, examples and benchmarks (`python -m loomwork.apps.<name>`)."""
