"""The arithmetic `benchmarks/service_overhead.py` prints beside its measurements (no servers: the helpers)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("service_overhead", ROOT / "benchmarks" / "service_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paired_rounds_compare_each_round_with_its_own_direct_round(bench):
    direct = [(1.0, [0.004] * 100, {}), (2.0, [0.008] * 100, {})]  # the machine halves its speed in round 2
    service = [(1.25, [0.005] * 100, {}), (2.5, [0.010] * 100, {})]
    ratios, added = bench.paired(service, direct)
    assert ratios == pytest.approx([0.8, 0.8])
    assert added == pytest.approx([1.0, 2.0])
    assert "throughput 0.80 [0.80, 0.80], 0/2 rounds >= 0.85" in bench.paired_line(32, "service", service, direct)


def test_cpu_budget_line_gives_what_the_goal_leaves_the_server(bench):
    cpu = {"direct": {"load generator": 0.8, "server": 0.0, "triton": 3.0},
           "floor": {"load generator": 0.3, "server": 1.0, "triton": 3.1},
           "service": {"load generator": 0.3, "server": 1.6, "triton": 3.3}}
    line = bench.cpu_budget_line(32, cpu)
    # direct 3.8 ms per request; the service path 5.2 -> about 0.73 of direct; at 0.85 its server may use
    # 3.8 / 0.85 - 0.3 - 3.3 = 0.87 ms
    assert "floor 0.86, service 0.73" in line
    assert "service 0.87 (uses 1.60)" in line and "floor 1.07 (uses 1.00)" in line


def test_bins_line_names_the_most_common_latencies(bench):
    latencies = [0.003] * 70 + [0.0041] * 20 + [0.00502] * 9 + [0.0031] * 1  # 3.1 ms falls in the 3.00 bin
    line = bench.bins_line(1, "direct", latencies)
    assert line.endswith("(top 3): 3.00 ms 71%, 4.00 ms 20%, 5.00 ms 9%")


def test_process_tree_finds_descendants_and_pin_tree_binds_them(bench):
    import os
    import subprocess
    import time

    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 5
        # until the shell's fork has run `sleep` (before its exec the child is a second `sh`)
        while (sorted(name for _, name in bench.cpu_by_process(child.pid)) != ["sh", "sleep"]
               and time.monotonic() < deadline):
            time.sleep(0.05)
        tree = bench.process_tree(child.pid)
        assert child.pid in tree and len(tree) == 2  # the shell and its sleep
        cpu = min(os.sched_getaffinity(0))
        assert bench.pin_tree(child.pid, {cpu}) == 2
        assert all(os.sched_getaffinity(pid) == {cpu} for pid in tree)
        assert sorted(name for _, name in bench.cpu_by_process(child.pid)) == ["sh", "sleep"]
    finally:
        for pid in bench.process_tree(child.pid):
            os.kill(pid, 9)
        child.wait()


def test_decision_seconds_are_read_from_the_services_metrics(bench):
    from advisor.service.records.metrics import Metrics

    metrics = Metrics()
    for seconds in (0.0004, 0.0006):
        metrics.decision_seconds.observe(seconds)
    body, _ = metrics.render()
    total, count = bench.decision_seconds_in(body.decode())
    assert count == 2 and total == pytest.approx(0.001)
    assert bench.decision_seconds_in("# no such metric\n") == (0.0, 0.0)
