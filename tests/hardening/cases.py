"""The hostile-input corpus: every case is an argv for ``python -m pybench`` (and, for file
cases, a file in ``corpus/`` or one made at run time) with the exit codes it may end with.

Placeholders in an argv: ``{fix}`` tests/fixtures, ``{corpus}`` tests/hardening/corpus,
``{tmp}`` a fresh folder; special files made at run time (see test_corpus.special_files):
``{fifo}`` a FIFO nobody writes, ``{zero}`` a symlink to /dev/zero, ``{chardev}`` a mknod
copy of /dev/null, ``{folder}`` a folder, ``{sparse}`` a 2 GiB sparse file, ``{deep}``
a million nested brackets, ``{link}`` a symlink to ``{victim}``, ``{stdout}`` a symlink to
/proc/self/fd/1 (as /dev/stdout is).

Expected: 2 for bad input (one ``pybench: error:`` line, nothing else), 3 for an
environment fault, 0 for input that is odd but valid (``--timeout inf`` means "never").
Cases that fail because of a file this corpus's owner does not own are listed in
``KNOWN`` with the file and what it does; they are strict xfails, so fixing the code
makes them fail until they are taken off the list.
"""

from __future__ import annotations

MODEL = "{fix}/model_v1_allreduce.json"
RESULT = "{fix}/cpu_mpi2_allreduce.json"  # a complete result: the corpus must reach the hostile part
COMPUTE = "{fix}/compute_profile_v1.json"
RUN = ["allreduce", "--sizes", "1K", "--iters", "5", "--backend", "mpi"]  # a two-rank run of a second

# Files that are not pybench files, or are hostile ones: made at run time, then from corpus/.
BAD_INPUTS = ["{fifo}", "{zero}", "/dev/zero", "{chardev}", "{folder}", "{sparse}", "{deep}"] + [
    "{corpus}/" + name for name in (
        "nan_token.json", "infinity_token.json", "huge_float.json", "huge_int.json", "deep_nesting.json",
        "not_utf8.json", "empty.json", "truncated.json", "not_an_object.json", "wrong_schema.json",
        "future_version.json")]

# Every command that reads a file, with F where the file goes.
READERS = {
    "fit": ["fit", "F", "-o", "{tmp}/m.json"],
    "predict": ["predict", "F", "--sizes", "1M"],
    "compare": ["compare", "F", RESULT],
    "plot": ["plot", "F", "-o", "{tmp}/p.png"],
    "report": ["report", RESULT, "--model", "F", "-o", "{tmp}/r.html"],
    "plan": ["plan", "--params", "125M", "--model", "F", "--tflops", "100"],
    "ccr": ["ccr", "--params", "125M", "--model", MODEL, "--compute", "F", "--world", "8"],
}

# Valid JSON of the right schema with hostile values, for the reader of that schema.
BAD_DOCUMENTS = [
    ("compare", "result_records_not_list.json"), ("compare", "result_string_time.json"),
    ("compare", "result_negative_time.json"), ("compare", "result_no_records.json"),
    ("fit", "result_records_not_list.json"), ("fit", "result_string_time.json"),
    ("fit", "result_negative_time.json"), ("fit", "result_no_records.json"),
    ("ccr", "compute_zero_gemms.json"), ("ccr", "compute_zero_flops.json"), ("ccr", "compute_negative_flops.json"),
    ("ccr", "compute_overflowing_flops.json"),
    ("predict", "model_no_models.json"), ("predict", "model_broken_segments.json"),
    ("predict", "model_extreme_numbers.json"), ("plan", "model_broken_segments.json"),
    ("plan", "model_extreme_numbers.json"),
    # topology models (read by plan/ccr, and by predict --nodes): regimes inside regimes, a small-size
    # regime with more bandwidth than its link, a flag that is not a boolean
    ("plan", "model_topology_nested_regimes.json"), ("plan", "model_topology_regime_faster.json"),
    ("plan", "model_topology_absorbs_not_bool.json"),
    # OSU logs with a size past int64 (a traceback from numpy before the bound)
    ("fit", "osu_huge_size.txt"), ("fit", "osu_size_over_int64.txt"),
]

# Every command that writes a file, with O where the path goes (always with --force).
WRITERS = {
    "allreduce": [*RUN, "--json", "O", "--force"],
    "fit": ["fit", RESULT, "-o", "O", "--force"],
    "predict": ["predict", MODEL, "--sizes", "1M", "--json", "O", "--force"],
    "compare": ["compare", RESULT, RESULT, "--json", "O", "--force"],
    "ccr": ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "100", "--world", "8", "--json", "O",
            "--force"],
    "plan": ["plan", "--params", "125M", "--model", MODEL, "--tflops", "100", "--json", "O", "--force"],
    "plot": ["plot", RESULT, "-o", "O", "--force"],
    "report": ["report", RESULT, "-o", "O", "--force"],
}
BAD_OUTPUTS = ["{chardev}", "{fifo}", "{link}", "{folder}", "{stdout}"]

# Numbers and strings on the command line: (id, argv, allowed exit codes).
ARGV_CASES = [
    # Either refused in one line or "never" (the watchdog saturates); never a watchdog that fires at once.
    ("timeout-inf", [*RUN, "--timeout", "inf"], (0, 2)),
    ("timeout-1e10", [*RUN, "--timeout", "1e10"], (0, 2)),
    ("timeout-nan", [*RUN, "--timeout", "nan"], (2,)),
    ("ranks-1000", ["allreduce", "--sizes", "1K", "--np", "1000", "--backend", "mpi"], (2,)),
    ("iters-1e20", ["allreduce", "--sizes", "1K", "--iters", "100000000000000000000", "--backend", "mpi"], (2,)),
    ("max-iters-1e20", ["allreduce", "--sizes", "1K", "--max-iters", "100000000000000000000"], (2,)),
    ("warmup-1e12", ["allreduce", "--sizes", "1K", "--warmup", "1000000000000", "--backend", "mpi"], (2,)),
    ("check-1e12", ["allreduce", "--sizes", "1K", "--check", "1000000000000", "--backend", "mpi"], (2,)),
    ("root-huge", ["broadcast", "--sizes", "1K", "--root", "99999999999999999999", "--backend", "mpi"], (2,)),
    ("sizes-fullwidth-digits", ["allreduce", "--sizes", "\uff11K", "--backend", "mpi"], (2,)),
    ("sizes-arabic-indic-digits", ["allreduce", "--sizes", "\u0661\u0660\u0660", "--backend", "mpi"], (2,)),
    ("sizes-superscript-factor", ["allreduce", "--sizes", "1K:1M:\u00b2", "--backend", "mpi"], (2,)),
    ("sizes-exabyte", ["allreduce", "--sizes", "1K:1E", "--backend", "mpi"], (2,)),
    ("sizes-30-digits", ["allreduce", "--sizes", "9" * 30, "--backend", "mpi"], (2,)),
    ("sizes-nan", ["allreduce", "--sizes", "nan", "--backend", "mpi"], (2,)),
    ("p2p-window-1e9", ["p2p", "--sizes", "1K", "--test", "bw", "--window", "1e9"], (2,)),
    ("p2p-window-1000000000", ["p2p", "--sizes", "1K", "--test", "bw", "--window", "1000000000"], (2,)),
    ("p2p-window-0", ["p2p", "--sizes", "1K", "--test", "bw", "--window", "0"], (2,)),
    ("plan-gpus-per-node-0", ["plan", "--params", "125M", "--model", MODEL, "--tflops", "100",
                              "--gpus-per-node", "0"], (2,)),
    ("plan-gpus-per-node-minus-1", ["plan", "--params", "125M", "--model", MODEL, "--tflops", "100",
                                    "--gpus-per-node", "-1"], (2,)),
    ("plan-tflops-minus-5", ["plan", "--params", "125M", "--model", MODEL, "--tflops", "-5"], (2,)),
    ("plan-tflops-nan", ["plan", "--params", "125M", "--model", MODEL, "--tflops", "nan"], (2,)),
    ("plan-max-world-1e12", ["plan", "--params", "125M", "--model", MODEL, "--tflops", "100",
                             "--max-world", "1000000000000"], (0, 2)),
    ("ccr-gpus-per-node-0", ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "100", "--world", "8",
                             "--gpus-per-node", "0"], (2,)),
    ("ccr-tflops-nan", ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "nan", "--world", "8",
                        "--json", "{tmp}/c.json"], (2,)),
    ("ccr-tflops-inf", ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "inf", "--world", "8"], (2,)),
    ("ccr-tflops-0", ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "0", "--world", "8"], (2,)),
    ("ccr-world-1e12", ["ccr", "--params", "125M", "--model", MODEL, "--tflops", "100",
                        "--world", "1000000000000"], (0, 2)),
    ("ccr-params-nan", ["ccr", "--params", "nan", "--model", MODEL, "--tflops", "100", "--world", "8"], (2,)),
    ("compute-hidden-40000", ["compute", "--hidden", "40000", "--layers", "1", "--engine", "numpy"], (2,)),
    ("compute-seq-1e9", ["compute", "--params", "125M", "--seq", "1000000000", "--engine", "numpy"], (0, 2)),
    ("profile-params-100T", ["profile", "--params", "100T"], (2,)),
    ("profile-params-1e400", ["profile", "--params", "1e400"], (2,)),
    ("profile-batch-1e9", ["profile", "--params", "1M", "--batch", "1000000000"], (2,)),
    ("predict-world-0", ["predict", MODEL, "--sizes", "1M", "--world", "0"], (2,)),
    ("predict-sizes-1e30", ["predict", MODEL, "--sizes", "9" * 30], (2,)),
    ("compare-fail-on-regression-nan", ["compare", RESULT, RESULT, "--fail-on-regression", "nan"], (2,)),
    ("fit-min-points-1e12", ["fit", RESULT, "-o", "{tmp}/m.json", "--min-points", "1000000000000"], (2,)),
    ("unknown-command-unicode", ["\u202eallreduce"], (2,)),
    ("dtype-unicode", ["allreduce", "--sizes", "1K", "-d", "f\u0131oat32", "--backend", "mpi"], (2,)),
]

# Cases that fail today because of code this corpus's owner does not own: {case id: "file: what"}.
KNOWN: dict[str, str] = {}  # every case passes (the 20 listed at first were fixed by their owners)
