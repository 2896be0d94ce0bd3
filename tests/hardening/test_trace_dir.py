"""``profile --trace-dir`` is refused before any rank starts when no file can be made there
(/proc, /sys): one line, exit 2, and nothing left in a folder that can be written."""

from __future__ import annotations

import pytest

from pybench.cli.main import main


@pytest.mark.parametrize("folder", ["/proc", "/proc/self", "/sys", "/sys/kernel"])
def test_a_trace_dir_no_file_can_be_made_in_is_one_line_exit_2(folder, capsys):
    assert main(["profile", "--params", "1M", "--batch", "1", "-n", "2", "--trace-dir", folder]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pybench: error: --trace-dir {folder}: cannot make a file there ("), err


def test_the_probe_leaves_nothing_in_a_writable_trace_dir(tmp_path):
    from pybench.cli import profile
    profile._probe_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []
