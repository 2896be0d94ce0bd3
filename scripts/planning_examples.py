#!/usr/bin/env python3
"""Regenerate docs/planning.md: the `pybench ccr` and `pybench plan` examples with their real output.

Every example runs here, on the real logs kept in tests/fixtures/shared_data, so the figures in the
document are what this version of pybench prints; tests/planning/test_planning_examples.py fails
when the committed document and this script's output differ. Run from the repository root:

    python scripts/planning_examples.py            # rewrite docs/planning.md
    python scripts/planning_examples.py --check    # exit 1 if docs/planning.md is stale
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "planning.md"
LOGS = "tests/fixtures/shared_data"

# (model file, logs fitted into it, and fit's options: the H100 log lists no hosts, so it says its 2 nodes)
MODELS = [
    ("h100n.json", [f"{LOGS}/nccl-tests/h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", "--nodes", "2"]),
    ("a100n.json", [f"{LOGS}/nccl-tests/a100_2node_16gpu_oci_roce_allreduce.txt"]),
    ("a100node.json", [f"{LOGS}/vtrain/a100_nvswitch_allreduce_{n}gpu.csv" for n in (2, 8)]),
]

# (heading, what it shows, command)
EXAMPLES = [
    ("7B on 8 x H100 nodes, by strategy",
     "The CCR table from the shared 2 x 8 H100 all-reduce log. No H100 was measured here, so the achieved "
     "FLOP/s is given (`--tflops 400`); `mem_GB` is the memory each row needs, checkpointed where the row "
     "fits only with activation checkpointing.",
     "ccr --params 7B --seq 4096 --batch 1,4 --world 8,16,64 --gpus-per-node 8 --strategy ddp,zero3,tp+dp "
     "--model h100n.json --tflops 400 --overlap --price-per-node-hour 98"),
    ("7B with a throughput target",
     "The plan weighs every layout within its bounds (strategy, tp, pp, dp, micro-batch and gradient "
     "accumulation, checkpointing) and recommends the cheapest per sample that meets the target without "
     "being comm-bound. Accumulating micro-batches lets a small micro-batch fit without checkpointing while "
     "the step amortises the gradient exchange.",
     "plan --params 7B --seq 4096 --model h100n.json --tflops 400 --target-samples-per-s 66.3"),
    ("A target out of reach",
     "Nothing within `--max-world` reaches it: the nearest is the fastest layout searched, and the plan "
     "says that the bound held it.",
     "plan --params 7B --seq 4096 --model h100n.json --tflops 400 --target-samples-per-s 1000"),
    ("Stragglers and a slow node",
     "The wait for the slowest rank is shown apart from the network wherever CCR is.",
     "plan --params 7B --seq 4096 --model h100n.json --tflops 400 --straggler-cv 0.1 --slow-node 0.9 "
     "--target-samples-per-s 60"),
    ("A job starved by its data loader",
     "No scale-out while one device waits for data; the unmet target is named.",
     "plan --params 125M --seq 2048 --model h100n.json --tflops 400 --loader-samples-per-s 100 "
     "--target-samples-per-s 2000"),
    ("No named need, billed per device",
     "One device suffices; the plan quotes what filling the node would give and prices the devices used.",
     "plan --params 1.3B --seq 2048 --model h100n.json --tflops 400 --price-per-device-hour 12.25"),
    ("A model file from one node",
     "The search stays on one node and says what would let it weigh more.",
     "plan --params 1.3B --seq 2048 --model a100node.json --tflops 250"),
    ("A named global batch",
     "The global batch is a training hyperparameter (Megatron's `--global-batch-size`): with `--global-batch` "
     "every layout trains exactly that many sequences per step, split into data-parallel replicas x "
     "micro-batch x micro-batches, and a layout whose replicas cannot share it evenly is not weighed. "
     "Without it the global batch is free within `--global-batch-limit`, and the plan says so.",
     "plan --params 7B --seq 4096 --model h100n.json --tflops 400 --global-batch 256 --target-samples-per-s 66.3"),
    ("A link preset the model file already covers",
     "The 2-node A100 log prices inter-node links from measurements, so `--link eth-25g` cannot apply: "
     "one line on stderr, and a note in the output and the JSON.",
     "plan --params 1.3B --seq 2048 --model a100n.json --tflops 250 --link eth-25g --max-world 16"),
]


# How `plan` decides, in words (the code: pybench/planning/advice.py, choice.py and search.py).
RULES = [
    "How `plan` decides:", "",
    "- It checks memory on one device, then whether one device is well used (GEMMs against a datasheet peak, "
    "the data loader against the device), then searches every layout within its bounds and picks, among those "
    "that meet the named need (`--target-samples-per-s`, or memory that does not fit one node) without being "
    "comm-bound, the cheapest per sample; costs within 1% count as equal, and among equals fewer nodes, then "
    "fewer devices, win. Without a named need it stays on one node.",
    "- The search: ddp, ZeRO-1/2/3, tp, pp, tp+dp and tp x pp x dp; every tp degree up to the node that "
    "divides the attention and key/value heads; a degree that does not divide the node (tp 5 or 3 on nodes of "
    "8) runs across nodes as Megatron and NeMo users run it: as many ranks per node as whole tp groups fit "
    "(5 or 6 of 8), the other GPUs idle, so that no group's per-layer all-reduce crosses the network (Megatron "
    "forms tp groups from consecutive ranks; `--ntasks-per-node 5` keeps each inside a node). Billed per node, "
    "the idle GPUs are paid for; billed per device, only the devices used are. For each size of the largest "
    "pipeline stage, ceil(layers / p), "
    "the fewest stages (3 for 32 layers: 11, 11 and 10; 12 to 15 stages hold no fewer layers each than 11 "
    "do); every device count up to 8 nodes (part of a node included), then every whole-node count up to 32 "
    "nodes, then whole nodes doubling, up to `--max-world`; micro-batches up to `--max-batch` with gradient "
    "accumulation; activation checkpointing where a layout needs it. The plan's `searched` line states these "
    "bounds and the JSON's `search` holds them.",
    "- Not every combination is priced: one that spans nodes is priced only where the rules could choose it. "
    "Its step takes at least its compute, bubble and wait for the slowest rank, which bounds its samples/s "
    "from above and its cost per sample from below; when a layout already priced, not comm-bound and on no "
    "more nodes, is faster than that bound and cheaper beyond the 1% tolerance (or, once a target is met, "
    "no dearer on fewer nodes), it can never be chosen. Once a layout its bands allow meets the target, a "
    "combination that cannot meet it is never chosen either, and when that layout costs within the 1% "
    "tolerance of the least bound of any combination, nothing on more nodes or devices can beat it. The "
    "communication that never overlaps (tp and pp activations, ZeRO's parameter all-gathers) is added to a "
    "bound only where compute, bubble and wait alone do not settle it. Without a named need nothing across "
    "nodes is priced but what the advice quotes (DDP scale-out at every node count to 8 nodes, then at powers "
    "of two; the first ZeRO and tp x pp x dp layouts that fit).",
    "- The global batch: `--global-batch N` holds the batch you train with, as Megatron's "
    "`--global-batch-size` and NeMo's auto-configurator do; the layout, micro-batch and accumulation are "
    "chosen for it. Without it the global batch is free within `--global-batch-limit` (default 1024 "
    "sequences), so a pick may accumulate many micro-batches to amortise communication or a pipeline's "
    "bubble; the plan says so, and names the batch it chose beside the one asked for.",
]


def _run(argv: list[str]) -> tuple[int, str, str]:
    from pybench.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def render() -> str:
    """The document, from running every example in a temporary folder."""
    here = os.getcwd()
    parts = ["# Planning examples", "",
             "Generated by `python scripts/planning_examples.py` from the logs in `tests/fixtures/shared_data`; "
             "do not edit by hand (a test checks that this file is what the script prints). Commands run "
             "from the repository root.", "", *RULES, ""]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, logs in MODELS:
                files = [str(REPO / a) if a.startswith(LOGS) else a for a in logs]
                rc, _, err = _run(["fit", *files, "-o", str(Path(tmp) / name)])
                if rc:
                    raise SystemExit(f"fitting {name} failed: {err.strip()}")
            os.chdir(tmp)
            parts += ["Model files:", "", "```"]
            parts += [f"python -m pybench fit {' '.join(logs)} -o {name}" for name, logs in MODELS]
            parts += ["```", ""]
            for heading, what, command in EXAMPLES:
                rc, out, err = _run(shlex.split(command))
                parts += [f"## {heading}", "", what, "", "```", f"$ python -m pybench {command}"]
                parts += [line for line in err.splitlines() if not line.startswith("# wrote")]
                parts += out.rstrip("\n").splitlines()
                parts += [f"(exit {rc})"] if rc else []
                parts += ["```", ""]
        finally:
            os.chdir(here)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/planning.md differs from the output")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        same = DOC.exists() and DOC.read_text() == text
        print(f"{DOC}: {'up to date' if same else 'stale; run python scripts/planning_examples.py'}",
              file=sys.stderr)
        return 0 if same else 1
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)
    print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
