"""The real logs the tests use live in the repository, verbatim, with their origin written down."""

import hashlib
import re

from conftest import REPO, SHARED_DATA

SOURCES = REPO / "tests" / "fixtures" / "SHARED_SOURCES.md"


def _listed() -> dict[str, str]:
    rows = re.findall(r"^\| (\S+) \| .+ \| ([0-9a-f]{64}) \|$", SOURCES.read_text(), flags=re.M)
    return dict(rows)


def test_shared_data_is_inside_the_repository_and_mirrors_the_shared_layout():
    assert SHARED_DATA.is_dir() and SHARED_DATA.resolve().is_relative_to(REPO)
    for folder in ("nccl-tests", "osu", "vtrain"):
        assert (SHARED_DATA / folder).is_dir()
    assert sorted(p.name for p in (SHARED_DATA / "vtrain").iterdir()) == [
        f"a100_nvswitch_allreduce_{n}gpu.csv" for n in range(2, 9)]


def test_every_copy_is_listed_with_its_checksum_and_unchanged():
    files = {p.relative_to(SHARED_DATA).as_posix(): p for p in SHARED_DATA.rglob("*") if p.is_file()}
    listed = _listed()
    assert sorted(files) == sorted(listed), "a copied log is missing from SHARED_SOURCES.md, or the reverse"
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], f"{name} is no longer verbatim"


def test_each_log_names_its_source_on_its_first_line():
    for path in [*SHARED_DATA.glob("nccl-tests/*.txt"), *SHARED_DATA.glob("osu/*.txt")]:
        first = path.read_text().splitlines()[0]
        assert first.upper().startswith("# SOURCE: ") and "SYSTEM:" in first.upper(), path.name
