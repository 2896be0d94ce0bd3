"""Models of communication: log importers, alpha-beta fits, algorithm formulas, fitted-model files.

Imports only downward (foundation, io, measure).
"""
