"""Measuring: configs, the stop rule, statistics, the runner, launch, results, tables and backends.

Imports only the foundation modules and :mod:`pybench.io`; never the model, plan, profile,
report or cli layers.
"""
