"""Planning a training step: transformer shapes, compute timings, strategies, overlap, CCR and advice.

Imports only downward (foundation, io, measure, model).
"""
