"""Profiling real training steps (torch.profiler) beside the plan's prediction, and the probes that feed it.

Imports only downward (foundation, io, measure, model, plan).
"""
