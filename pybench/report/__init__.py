"""Reports: comparing result files, plots and the single-file HTML report.

Imports only downward (foundation, io, measure, model, plan).
"""
