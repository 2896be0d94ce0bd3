"""The command line: argument parsing and error mapping only. Nothing in pybench imports it.

The entry point is :func:`pybench.cli.main.main` (``pybench`` and ``python -m pybench``).
"""
