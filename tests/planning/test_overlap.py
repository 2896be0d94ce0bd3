"""pybench.planning.overlap: bucket readiness and contention in the exposed time; pybench.profile.probes: measuring them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybench.errors import UsageError
from pybench.planning.overlap import (
    OverlapProfile,
    bucket_sizes,
    compute_slowdown,
    overlap_exposed_s,
    uniform_ready_fractions,
)
from pybench.profile.probes import HostCpuMeter, bucket_ready_fractions, machine_id

FIXTURES = (Path(__file__).resolve().parents[1] / "fixtures")


def t(size):
    """1000 bytes per second: sizes below read as milliseconds of transfer."""
    return size / 1000.0


def test_default_profile_is_the_uniform_model():
    # DDP's real 20M-MLP buckets: 33.6, 33.6, 16.8 (two layers, two layers, the first layer)
    sizes = [33.6, 33.6, 16.8]
    assert uniform_ready_fractions(sizes) == pytest.approx([0.4, 0.8, 1.0])
    uniform = overlap_exposed_s(84.0, 25.0, 1.0, t, sizes)
    assert overlap_exposed_s(84.0, 25.0, 1.0, t, sizes, ready_fractions=[0.4, 0.8, 1.0]) == pytest.approx(uniform)
    assert uniform == pytest.approx(0.0168)


def test_late_readiness_exposes_the_queue():
    # The first layer computes no input gradient, so the buckets of later layers are ready later in
    # backward than their bytes say: 4/9 and 8/9 instead of 0.4 and 0.8 (two GEMMs per layer, one for
    # the first). With 1 s of backward and a slow link (0.3 s per big bucket) the queue reaches the end:
    slow = lambda size: size / 112.0  # 33.6 -> 0.3 s, 16.8 -> 0.15 s
    uniform = overlap_exposed_s(84.0, 25.0, 1.0, slow, [33.6, 33.6, 16.8])
    late = overlap_exposed_s(84.0, 25.0, 1.0, slow, [33.6, 33.6, 16.8], ready_fractions=[4 / 9, 8 / 9, 1.0])
    # uniform: 0.4-0.7, 0.8-1.1, 1.1-1.25 -> 0.25; late: 0.444-0.744, 0.889-1.189, 1.189-1.339 -> 0.339
    assert uniform == pytest.approx(0.25)
    assert late == pytest.approx(8 / 9 + 0.45 - 1.0)


def test_contention_stretches_backward_under_a_bucket():
    # One bucket in flight from 0.5 to 0.8 s of a 1 s backward; compute loses half its speed meanwhile:
    # progress at 0.8 s is 0.5 + 0.15, backward ends at 0.8 + 0.35 = 1.15 s; the last bucket (ready then,
    # 0.1 s) ends at 1.25 -> exposed 0.25 (against 0.1 without contention).
    bt = lambda size: 0.3 if size > 1 else 0.1
    assert overlap_exposed_s(2.0, 1.0, 1.0, bt, [1.5, 0.5], [0.5, 1.0]) == pytest.approx(0.1)
    assert overlap_exposed_s(2.0, 1.0, 1.0, bt, [1.5, 0.5], [0.5, 1.0], slowdown=0.5) == pytest.approx(0.25)
    # compute stopped while a bucket is in flight: backward waits the whole 0.3 s, then the 0.1 s tail
    assert overlap_exposed_s(2.0, 1.0, 1.0, bt, [1.5, 0.5], [0.5, 1.0], slowdown=1.0) == pytest.approx(0.4)


def test_contention_is_paid_even_when_everything_hides():
    # 10 buckets of 0.01 s under 1 s of backward: without contention only the last one shows;
    # losing 40% of compute during the 0.09 s the others run adds 0.06 s of stretched backward.
    sizes = [10.0] * 10
    free = overlap_exposed_s(100.0, 10.0, 1.0, t, sizes)
    assert free == pytest.approx(0.01)
    assert overlap_exposed_s(100.0, 10.0, 1.0, t, sizes, slowdown=0.4) == pytest.approx(0.01 + 0.4 * 0.09)


def test_bucket_copies_are_paid_by_the_step():
    # 4 buckets of 0.1 s under 1 s of backward: only the last shows (0.1 s). Copying into the buckets
    # (0.2 s spread over backward) delays every bucket and backward alike: still 0.1 s after backward,
    # which itself is 0.2 s longer. Copying out (0.05 s) comes after the last bucket.
    sizes = [25.0] * 4
    bt = lambda size: 0.1
    assert overlap_exposed_s(100.0, 25.0, 1.0, bt, sizes) == pytest.approx(0.1)
    assert overlap_exposed_s(100.0, 25.0, 1.0, bt, sizes, copy_in_s=0.2) == pytest.approx(0.3)
    assert overlap_exposed_s(100.0, 25.0, 1.0, bt, sizes, copy_in_s=0.2, copy_out_s=0.05) == pytest.approx(0.35)


@settings(max_examples=80, deadline=None, database=None)
@given(n=st.integers(1, 12), backward=st.floats(0.0, 5.0), per=st.floats(0.0, 1.0),
       slow=st.floats(0.0, 1.0), fr=st.lists(st.floats(0.0, 1.0), min_size=12, max_size=12))
def test_exposed_bounds_hold_for_any_profile(n, backward, per, slow, fr):
    fractions = sorted(fr[:n - 1]) + [1.0]
    sizes = [1.0] * n
    exposed = overlap_exposed_s(float(n), 1.0, backward, lambda s: per, sizes, fractions, slow)
    serial = n * per
    # the last bucket never hides; contention can stretch compute by at most slow x (time in flight)
    assert per - 1e-9 <= exposed <= serial + slow * serial + 1e-9
    # more contention never hides more
    assert overlap_exposed_s(float(n), 1.0, backward, lambda s: per, sizes, fractions, min(1.0, slow + 0.1)) \
        >= exposed - 1e-9


def test_slowdown_from_cores():
    # 2 compute threads on 2 cores: every core the transfer burns is taken from compute
    assert compute_slowdown(0.2, 2, 2) == pytest.approx(0.1)
    # an idle core absorbs it
    assert compute_slowdown(0.9, 1, 2) == 0.0
    assert compute_slowdown(1.5, 1, 2) == pytest.approx(0.5)
    assert compute_slowdown(5.0, 2, 2) == 1.0 and compute_slowdown(0.0, 4, 2) == pytest.approx(0.5)
    with pytest.raises(UsageError):
        compute_slowdown(0.1, 0, 2)


def test_profile_checks_its_figures():
    with pytest.raises(UsageError, match="0..1"):
        OverlapProfile(ready_fractions=(0.5, 1.5))
    with pytest.raises(UsageError):
        OverlapProfile(backward_share=0.0)
    with pytest.raises(UsageError):
        OverlapProfile(compute_slowdown=-0.1)
    with pytest.raises(UsageError, match="2 ready fractions for 3 buckets"):
        overlap_exposed_s(84.0, 25.0, 1.0, t, [33.6, 33.6, 16.8], ready_fractions=[0.5, 1.0])
    with pytest.raises(UsageError, match="copy times"):
        OverlapProfile(copy_out_s=-1.0)
    assert OverlapProfile((0.4, 1.0), 0.6, 0.1, copy_in_s=0.02, source="x").to_dict() == {
        "ready_fractions": [0.4, 1.0], "backward_share": 0.6, "compute_slowdown": 0.1, "copy_in_s": 0.02,
        "copy_out_s": 0.0, "source": "x"}


def test_ccr_uses_the_profile():
    from pybench.planning.ccr import ccr, load_model_set
    # the gloo all-reduce model fitted through a 1 Gbit/s namespace link (84 MB in about 0.67 s)
    models = load_model_set(str(FIXTURES / "profile_torch_gloo_netns_1gbit_model.json"), backend="torch")
    kw = dict(models=models, flops_per_s=1e11, gpus_per_node=1, overlap=True, comm_bytes_per_value=4,
              device_memory_gb=1e6, bucket_sizes_bytes=[2, 2, 1])
    base = ccr("20M", 1, 4096, 2, "ddp", **kw).rows[0]
    same = ccr("20M", 1, 4096, 2, "ddp", overlap_profile=OverlapProfile(), **kw).rows[0]
    assert same.exposed_s == pytest.approx(base.exposed_s)
    late = ccr("20M", 1, 4096, 2, "ddp", overlap_profile=OverlapProfile((4 / 9, 8 / 9, 1.0), 0.64, 0.05),
               **kw).rows[0]
    assert late.exposed_s > base.exposed_s
    assert late.ccr == pytest.approx(base.ccr)  # the serial CCR does not depend on overlap
    res = ccr("20M", 1, 4096, 2, "ddp", overlap_profile=OverlapProfile((0.5, 0.9, 1.0)), **kw)
    assert res.config.to_dict()["overlap_profile"]["ready_fractions"] == [0.5, 0.9, 1.0]


# -- probes -------------------------------------------------------------------------------

def test_bucket_ready_fractions_follow_the_bytes():
    # backward 10..20; gradients of 4 layers (bytes 2, 2, 2, 1) ready at 12, 14.5, 17, 20
    ready = [(14.5, 2), (12.0, 2), (20.0, 1), (17.0, 2)]
    fr, span = bucket_ready_fractions(10.0, ready, [4, 2, 1])
    assert span == 10.0
    assert fr == pytest.approx([0.45, 0.7, 1.0])
    # buckets in another unit (fp16 reducer, bytes x 2): the same fractions
    assert bucket_ready_fractions(10.0, ready, [8, 4, 2])[0] == pytest.approx(fr)
    assert bucket_ready_fractions(10.0, [], [4]) is None and bucket_ready_fractions(20.0, ready, [7]) is None


def test_host_cpu_meter_sees_a_busy_core():
    import os
    import time
    meter = HostCpuMeter(idle_s=0.05)
    meter.baseline()
    assert meter.idle_cores is not None and 0.0 <= meter.idle_cores <= os.cpu_count() + 0.5
    cpu0 = time.process_time()
    with meter:
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
    mine = (time.process_time() - cpu0) / 0.3
    # the host was busy at least for this process's own spinning (whatever else ran beside it)
    (host,) = meter.samples
    assert mine > 0.2 and 0.8 * mine <= host <= os.cpu_count() + 0.5, (mine, host)
    assert meter.cores == pytest.approx(max(0.0, host - meter.idle_cores))


def test_machine_id_is_stable():
    assert machine_id() == machine_id() and machine_id()


def test_grad_readiness_times_a_real_backward():
    torch = pytest.importorskip("torch")
    from pybench.profile.probes import GradReadiness
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
    probe = GradReadiness(model)
    x = torch.randn(64, 256)
    model(x).sum().backward()
    assert probe.take() is None  # not armed: nothing recorded
    probe.arm()
    model(x).sum().backward()
    start, ready = probe.take()
    assert len(ready) == 8 and all(t >= start for t, _ in ready)
    assert sum(b for _, b in ready) == sum(p.numel() * 4 for p in model.parameters())
    fr, span = bucket_ready_fractions(start, ready, [256 * 257 * 4 * 2, 256 * 257 * 4 * 2])
    assert span > 0 and 0.0 <= fr[0] < fr[1] == 1.0
    probe.close()
    probe.arm()
    model(x).sum().backward()
    assert probe.take() is None  # hooks removed
    assert not math.isnan(span)


def test_grad_readiness_finds_tensors_in_structured_outputs():
    torch = pytest.importorskip("torch")
    from pybench.profile.probes import GradReadiness

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(64, 64)
            self.a, self.b = torch.nn.Linear(64, 8), torch.nn.Linear(64, 8)

        def forward(self, x):
            h = self.body(x)
            return {"a": self.a(h), "aux": [self.b(h), "not a tensor"]}

    model = TwoHeads()
    probe = GradReadiness(model)
    assert probe.available
    probe.arm()
    out = model(torch.randn(16, 64))
    (out["a"].sum() + out["aux"][0].sum()).backward()
    start, ready = probe.take()
    assert len(ready) == 6 and min(t for t, _ in ready) >= start
    probe.close()


def test_bucket_copies_are_timed_and_scaled_past_the_sample(monkeypatch):
    torch = pytest.importorskip("torch")
    from pybench.profile import probes as overlap_probe
    copy_in, copy_out = overlap_probe.time_bucket_copies(8 << 20, 2)
    assert copy_in > 0 and copy_out > 0
    view_in, view_out = overlap_probe.time_bucket_copies(8 << 20, 2, as_view=True)
    assert view_out == 0.0 and view_in > 0  # gradients in the buckets: only the 1/world scaling is left
    # past the sample size only the sample is allocated (no 2 x model-size buffers), and the time is scaled
    allocated = []
    real_ones = torch.ones
    monkeypatch.setattr(torch, "ones", lambda n, **kw: allocated.append(n) or real_ones(n, **kw))
    monkeypatch.setattr(overlap_probe, "COPY_SAMPLE_BYTES", 1 << 20)
    scaled_in, scaled_out = overlap_probe.time_bucket_copies(64 << 20, 2, repeats=1)
    assert allocated == [(1 << 20) // 4] and scaled_in > 0 and scaled_out > 0


# --- the cursor of the exposed-time simulation against a scan from the start ----------------------------------

def _naive_wall(progress, busy, rate_busy):
    t = p = 0.0
    for start, end in busy:
        if start > t:
            if p + (start - t) >= progress:
                return t + (progress - p)
            p += start - t
            t = start
        if end > t:
            gain = (end - t) * rate_busy
            if rate_busy > 0 and p + gain >= progress:
                return t + (progress - p) / rate_busy
            p += gain
            t = end
    return t + (progress - p)


def _naive_exposed(sizes, fractions, backward_s, t, slowdown, copy_in_s, copy_out_s):
    busy, end_s, reached, work_s = [], 0.0, 0.0, backward_s + copy_in_s
    for size, frac in zip(sizes, fractions):
        reached = max(reached, frac)
        start = max(end_s, _naive_wall(work_s * reached, busy, 1.0 - slowdown))
        end_s = start + t(size)
        busy.append((start, end_s))
    return max(0.0, max(end_s, _naive_wall(work_s, busy, 1.0 - slowdown)) + copy_out_s - backward_s)


@settings(max_examples=150, deadline=None, database=None)
@given(n=st.integers(1, 40), backward=st.floats(0.0, 5.0), alpha=st.floats(0.0, 0.3), slowdown=st.floats(0.0, 1.0),
       copy_in=st.floats(0.0, 1.0), copy_out=st.floats(0.0, 1.0), data=st.data())
def test_exposed_time_matches_a_scan_from_the_start(n, backward, alpha, slowdown, copy_in, copy_out, data):
    fractions = data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    sizes = bucket_sizes(1000.0 * n, 1000.0)
    t = lambda size: alpha + size / 1e4
    fast = overlap_exposed_s(1000.0 * n, 1000.0, backward, t, None, fractions, slowdown, copy_in, copy_out)
    assert fast == pytest.approx(_naive_exposed(sizes, fractions, backward, t, slowdown, copy_in, copy_out),
                                 rel=1e-12, abs=1e-12)
