"""One schema per format at the io boundary (pybench.io.schemas): every reader of a result gets
the same typed, bounded document, and hostile values are refused in one line naming the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pybench.errors import FileFormatError
from pybench.measure.results import load_result
from pybench.model.logs import load_measurements

RESULT = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json"

HOSTILE = [
    (("records", 0, "size_bytes"), 2**63 - 1, "records[0].size_bytes"),
    (("records", 0, "size_bytes"), 2**60, "records[0].size_bytes"),
    (("records", 0, "time_s"), 1e300, "records[0].time_s"),
    (("records", 0, "time_s"), 0, "records[0].time_s"),
    (("records", 0, "samples_s"), [1e-5, -1e-5], "records[0].samples_s[1]"),
    (("world_size",), 0, "world_size"),
    (("world_size",), -4, "world_size"),
    (("hosts",), {"h": 0}, "hosts.h"),
]


@pytest.mark.parametrize("path, value, field", HOSTILE, ids=[f"{f}={v}"[:40] for _, v, f in HOSTILE])
@pytest.mark.parametrize("reader", [load_result, load_measurements], ids=["load_result", "load_measurements"])
def test_hostile_values_are_refused_naming_the_field(tmp_path, reader, path, value, field):
    doc = json.loads(RESULT.read_text())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError) as info:
        reader(f)
    assert field in str(info.value) and "\n" not in str(info.value)


def test_a_4000_digit_integer_and_a_lone_surrogate_are_refused_by_the_reader(tmp_path):
    doc = json.loads(RESULT.read_text())
    doc["records"][0]["size_bytes"] = 123456789
    (tmp_path / "digits.json").write_text(json.dumps(doc).replace("123456789", "9" * 4000))
    surrogate = copy.deepcopy(json.loads(RESULT.read_text()))
    surrogate["backend"] = "mp\ud800i"
    (tmp_path / "surrogate.json").write_text(json.dumps(surrogate))
    for name, why in (("digits.json", "does not fit in 64 bits"), ("surrogate.json", "lone surrogate")):
        for reader in (load_result, load_measurements):
            with pytest.raises(FileFormatError, match=why):
                reader(tmp_path / name)


def test_a_valid_result_still_reads():
    assert len(load_result(RESULT).records) == len(json.loads(RESULT.read_text())["records"])


def test_every_format_pybench_reads_has_a_schema():
    """The registry names a pydantic schema for every format a reader checks; the three only written
    (a prediction, a plan, a copy bandwidth result) are the exceptions."""
    import importlib

    from pydantic import BaseModel

    from pybench.io.formats import BODY_SCHEMAS, COPY, FORMATS, PLAN, PREDICTION
    assert set(FORMATS) - set(BODY_SCHEMAS) == {PREDICTION.schema, PLAN.schema, COPY.schema}
    for name, where in BODY_SCHEMAS.items():
        module, cls = where.split(":")
        assert issubclass(getattr(importlib.import_module(f"pybench.io.{module}"), cls), BaseModel), name


def test_a_topology_model_fitted_at_zero_ranks_is_refused_where_it_is_read(tmp_path):
    """It once reached plan, ccr and predict --world as a ZeroDivisionError."""
    from pybench.model.model_files import load_models
    model = Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json"
    doc = json.loads(model.read_text())
    doc["topology"] = [{"collective": "allreduce", "algorithm": "ring", "fitted": [[0, 0]],
                        "size_range": [1024, 1 << 20]}]
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"topology\[0\]\.fitted\[0\]\[0\]: Input should be greater than"):
        load_models(bad)


def test_a_list_past_its_bound_is_refused_by_its_length_before_its_items_are_checked():
    """pydantic counts a list only after validating each item: a million bad items would each be an error."""
    from pybench.io.formats import COMPARISON, check_document, stamp
    doc = stamp(COMPARISON, {"sizes": [0] * ((1 << 20) + 1)})
    with pytest.raises(FileFormatError, match=r"^c: sizes: 1048577 items, more than the 1048576 a pybench file"):
        check_document(doc, COMPARISON, "c")


@pytest.mark.parametrize("edit, said", [
    ({"world_size": 7}, "hosts hold 2 ranks, world_size says 7"),
    ({"hosts": {"a": 1, "b": 1}}, "link_class intra-node, but hosts name 2 hosts"),
])
def test_a_result_whose_fields_contradict_each_other_is_refused(tmp_path, edit, said):
    """A hand-edited result of 7 ranks on hosts holding 2 was fitted as a 7-rank model ('2 ranks on 1 host(s)' in
    its notes); an intra-node result on two hosts as 'fitted at 2 ranks on 2 nodes'."""
    doc = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json").read_text())
    path = tmp_path / "edited.json"
    path.write_text(json.dumps({**doc, **edit}))
    with pytest.raises(FileFormatError, match=rf"^{path}: its fields disagree: {said}; was it edited by hand\?$"):
        load_measurements(path)
