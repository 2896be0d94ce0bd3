"""Profiling real training steps (torch.profiler) beside the plan's prediction, and the probes that feed it.

``step.profile_step`` is the entry point; ``runner`` measures one batch size, ``trace``
decomposes the profiler's trace, ``probes`` and ``overlap_profile`` measure what the overlap
prediction needs, ``predict`` puts the prediction beside a row, ``comm`` chooses or fits the
communication model, ``result`` holds the rows (document and table), ``trace_files`` saves the
traces, ``mlp`` is the synthetic model and ``rank`` what each rank of ``pybench profile`` runs.

``pipeline.profile_pipeline`` splits one device's step (no process group) into data wait,
host-to-device copy, forward, backward and optimizer, for a user's model and data loader;
``pipeline_result`` holds its rows (a PROFILE document of kind "pipeline", whose loader rate
``pybench plan --profile`` reads) and ``synthetic_pipeline`` is what ``pybench profile -n 1`` runs.

Imports only downward (foundation, io, measure, model, plan).
"""
