"""File formats: the one registry of pybench's JSON schemas, the one bounded reader, the one atomic writer.

The lowest layer above the foundation modules (errors, sizes, collectives, _native): it
imports nothing else from pybench.
"""
