"""One policy contract: every built-in registered where it is defined and listed on a fresh interpreter, batch
policies apart from episodic ones, and the probe, the comparison and the evaluation reading the registry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.errors import RouterError
from advisor.router.routing.policies import (POLICIES, EpisodicPolicy, Policy, baseline_policies, batch_policies,
                                             episodic_policies, make_policy, probe_chain_policies)

BUILT_IN = {"always", "baseline", "cascade", "chain", "class_floor", "default", "orchestrator", "router", "threshold",
            "value"}


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_a_fresh_interpreter_lists_every_built_in_policy_without_importing_them_first():
    got = _fresh("import json, sys\n"
                 "from advisor.router.routing.policies import POLICIES\n"
                 "before = 'advisor.orchestrator.policy' in sys.modules\n"
                 "print(json.dumps({'before': before, 'names': POLICIES.names()}))")
    assert not got["before"], "importing the registry imported the episodic policies eagerly"
    assert BUILT_IN <= set(got["names"]), sorted(BUILT_IN - set(got["names"]))


def test_import_advisor_registers_no_policy_module():
    got = _fresh("import json, sys, advisor\n"
                 "print(json.dumps([m for m in sys.modules if m.startswith(('advisor.router', 'advisor.orchestrator'))]))")
    assert got == []


def test_batch_and_episodic_policies_partition_the_registry():
    batch, episodic = set(batch_policies()), set(episodic_policies())
    assert batch | episodic == set(POLICIES.names()) and not batch & episodic
    assert "orchestrator" in episodic and {"router", "cascade", "default", "baseline"} <= batch
    for name in batch:
        assert issubclass(POLICIES.get(name), Policy), name
    for name in episodic:
        cls = POLICIES.get(name)
        assert issubclass(cls, EpisodicPolicy) and not hasattr(cls, "decide"), name


def test_the_probe_and_the_evaluation_read_their_policies_from_the_registry():
    assert probe_chain_policies() == ["router", "cascade"]  # single-shot first, then escalating
    assert [POLICIES.get(n).probe_mode for n in probe_chain_policies()] == ["single", "escalate"]
    assert set(baseline_policies()) == {"baseline", "class_floor", "threshold", "cascade"}


def test_a_policy_registered_later_is_found_by_the_probe(monkeypatch):
    monkeypatch.setattr(POLICIES, "_items", dict(POLICIES.items()))

    @POLICIES.register("cheap-first-test")
    class CheapFirst(Policy):
        name = "cheap-first-test"
        probe_mode = "escalate"
        baseline = True

    assert probe_chain_policies() == ["router", "cascade", "cheap-first-test"]
    assert "cheap-first-test" in baseline_policies()


def test_an_episodic_policy_is_refused_as_a_batch_decision_in_one_line():
    with pytest.raises(RouterError, match="episodic policy.*advisor probe --policy orchestrator"):
        make_policy("orchestrator", None)


def test_the_service_config_refuses_an_episodic_routing_policy(tmp_path):
    from advisor.errors import ConfigError
    from advisor.service.process.config import load_config

    path = tmp_path / "service.yaml"
    path.write_text("version: 1\nrouting: {policy: orchestrator}\n")
    with pytest.raises(ConfigError, match="routes inside an episode"):
        load_config(path)
