"""Models of communication: what a collective costs, fitted to real measurements.

Imports only downward (foundation, io, measure). The files, by idea:

* reading logs: ``logs/`` (nccl-tests text and JSON, OSU, vTrain, pybench results);
* the cost model of a collective on a system: ``topology`` (the model; ``topology_prediction`` one of its
  answers),
  ``topology_fit`` (fitting it), ``regimes`` (protocol regimes as NCCL picks them: the lower
  envelope of a few frames), ``link_cost`` (one link class's regimes), ``topology_schedules``
  (the one table of step counts per collective, algorithm and schedule; Open MPI's own choices
  in ``mpi_openmpi``), ``crossing`` (what crossing the network costs), ``described_crossing`` (the crossing
  of a node known by its description: its NICs and the algorithm such nodes cross by), ``switch_reduction``
  (a node whose switches reduce, at GPU counts not measured), ``node_count_bounds`` (fitted node counts
  bounding an asked one), ``determined`` (the layouts the inputs cannot determine, and why), ``beyond_sweep``
  (sizes past a sweep that it does not determine), ``system`` and
  ``systems/`` (hardware as data), ``system_detect`` (this machine as a description),
  ``description_checks`` (where a fit contradicts the description it is used with),
  ``link_presets`` (published link rates);
* the measured curve at a measured layout: ``piecewise_model`` (a sweep's model and its
  predictions; ``model_report`` its text report), ``piecewise`` (contiguous pieces between
  protocol switches, for interpolating between measured sizes), ``segment`` (one piece),
  ``jackknife``, ``residuals`` and ``anomalies`` (its band, its measured residuals, the sizes it leaves out);
* the one solver: ``relative_lsq`` (least squares on relative error, parameters >= 0);
* uncertainty: ``calibration`` (the one interval scheme of every prediction, its constants in
  ``calibration.json``), ``validation`` (leave-one-dataset-out, which chooses
  them, on the cases of ``validation_cases``), ``cross_validation`` (leave-one-size-out of one sweep);
* files: ``build`` (fit a file's sweeps), ``model_files`` / ``model_writer`` (read / write),
  ``sweeps_joined`` (a file's sweeps joined to their topology model).
"""
