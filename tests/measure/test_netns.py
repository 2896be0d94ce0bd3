"""pybench.measure.netns: namespaces joined by tbf-shaped veth links, created and removed without leftovers.

Skips cleanly without root or without `ip netns` (checked by trying).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pybench.measure import netns


@pytest.fixture(scope="module")
def can_netns():
    ok, why = netns.netns_available()
    if not ok:
        pytest.skip(why)


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def _assert_gone(lab) -> None:
    assert netns.leftovers(lab.prefix) == []
    assert lab.prefix not in _links()


def test_create_shape_teardown_leaves_nothing(can_netns):
    links_before = _links().count("veth")
    lab = netns.NetnsLab(3, rate="200mbit")
    try:
        lab.create()
        assert len(netns.leftovers(lab.prefix)) == 4  # 3 hosts + the switch
        q = lab.qdisc(1)
        assert "tbf" in q and "200Mbit" in q
        lab.set_rate("1gbit")
        assert "1Gbit" in lab.qdisc(1)
        # every host reaches every other through the bridge
        r = lab.exec(2, [sys.executable, "-c", "import socket; s = socket.socket(); s.settimeout(5); "
                         "print(s.connect_ex(('10.231.0.1', 9)))"])
        assert r.returncode == 0 and r.stdout.strip() == "111"  # connection refused: routed, nothing listening
    finally:
        lab.close()
    _assert_gone(lab)
    assert _links().count("veth") == links_before


def test_teardown_on_failure_kills_processes(can_netns):
    with pytest.raises(RuntimeError):
        with netns.NetnsLab(2, rate="1gbit") as lab:
            sleeper = lab.popen(1, [sys.executable, "-c", "import time; time.sleep(600)"])
            raise RuntimeError("boom")
    _assert_gone(lab)
    assert sleeper.poll() is not None


def test_sigterm_removes_everything(can_netns, tmp_path):
    code = ("import sys, time\nfrom pybench.measure.netns import NetnsLab\n"
            "with NetnsLab(2) as lab:\n    print(lab.prefix, flush=True)\n    time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        prefix = p.stdout.readline().strip()
        assert prefix and netns.leftovers(prefix)
        p.terminate()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
    assert netns.leftovers(prefix) == []


def test_sigkill_of_the_owner_removes_namespaces_links_and_children(can_netns, tmp_path):
    """SIGKILL runs no handler: the guard process removes what the owner made."""
    code = ("import sys, time\nfrom pybench.measure.netns import NetnsLab\n"
            "lab = NetnsLab(3, rate='200mbit')\nlab.create()\n"
            "child = lab.popen(1, [sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "print(lab.prefix, child.pid, flush=True)\ntime.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        prefix, child = p.stdout.readline().split()
        assert len(netns.leftovers(prefix)) == 4  # 3 hosts + the switch
        p.kill()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
    deadline = time.monotonic() + 30  # the guard needs a moment; this bounds a hang, it is not a timed assert
    while netns.leftovers(prefix) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert netns.leftovers(prefix) == []
    assert prefix not in _links()
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}"), "a process started in a namespace outlived its owner"


def test_shaped_rate_orders_links(can_netns):
    """200 Mbit/s is much slower than 1 Gbit/s: behaviour of the shaper, not a timing threshold."""
    rates = {}
    with netns.NetnsLab(2, rate="1gbit") as lab:
        rates["1gbit"] = netns.tcp_rate(lab, 0, 1, nbytes=16 << 20)
        lab.set_rate("200mbit")
        rates["200mbit"] = netns.tcp_rate(lab, 0, 1, nbytes=16 << 20)
    _assert_gone(lab)
    assert rates["1gbit"] > 2 * rates["200mbit"], rates


def test_torch_ranks_run_in_namespaces(can_netns, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "ar.json"
    with netns.NetnsLab(2, rate="1gbit") as lab:
        res = lab.run_ranks(["-m", "pybench", "allreduce", "--backend", "torch", "--sizes", "1M", "--iters", "3",
                             "-w", "1", "--json", str(out)], timeout=120, cwd=str(tmp_path))
    _assert_gone(lab)
    assert [r.returncode for r in res] == [0, 0], res[0].stderr[-2000:] + res[1].stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["link_class"] == "inter-node" and len(d["hosts"]) == 2 and d["records"][0]["wrong"] == 0


def test_bad_arguments():
    with pytest.raises(Exception, match="at least 2"):
        netns.NetnsLab(1)
