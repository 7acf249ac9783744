"""Stand-in agents: reading the rendered prompt, replaying the reference, and the stated parametric model."""

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.agent.chat import DEFAULT, parse_default, system_prompt
from advisor.agent.fake import FakeModel
from advisor.agent.formats import format_for
from advisor.agent.loop import run_episode
from advisor.records import ToolCall
from advisor.ladder import load_ladder
from advisor.standin import count_tokens, responder_for, truncate_tokens
from advisor.standin import behaviour as B
from advisor.suite import Limits, load_suite


@pytest.fixture(scope="module")
def suite_path():
    """The probe tests' small suite: a narrow task with a skill and a six-step one."""
    return Path(__file__).resolve().parent / "probe_data" / "suite.yaml"


@pytest.fixture(scope="module")
def ladder():
    return load_ladder("ladders/demo.yaml")


class FakeEnv:
    workspace = None
    api_log: list = []

    def specs(self):
        return [SimpleNamespace(name=n, description=n, parameters={"type": "object", "properties": {}})
                for n in ("read_file", "list_files", "write_file")]

    async def call(self, name, args):
        return ToolCall(name, args, f"ok {name}")


def episode(ladder, suite_path, rung, task_id, condition="baseline", seed=1):
    suite = load_suite(suite_path)
    task = suite.task(task_id)
    return asyncio.run(run_episode(task, ladder.rung(rung), FakeModel.standin(ladder, [suite_path]), FakeEnv(),
                                   Limits(max_turns=30), condition=condition, sampling={"seed": seed}))


def test_tokens_and_truncation():
    assert count_tokens("Hello, world!") == 4
    assert truncate_tokens("a b c d", 2) == ("a b", True)
    assert truncate_tokens("a b", 5) == ("a b", False)


def test_reads_its_own_format_and_replays_the_reference(ladder, suite_path):
    # A request seed whose plan converges and complies: the episode replays the reference through the loop.
    task = load_suite(suite_path).task("t-narrow")
    params = ladder.rung("super-120b").standin
    seed = next(s for s in range(200) if (lambda p: p.outcome == "converge" and p.complied and not p.wrong)(
        B.make_plan(params, task, True, s, "skill")))
    res = episode(ladder, suite_path, "super-120b", "t-narrow", "skill", seed=seed)
    ep = res.episode
    assert ep.stop_reason == "final"
    assert [c.name for c in ep.calls if c.name != "read_file" or c.arguments] [:1] == ["list_files"]
    assert ep.final == "The code word is heron."


def test_deterministic_for_the_same_request(ladder, suite_path):
    r = responder_for(ladder.rung("nano-30b"), [suite_path])
    task = load_suite(suite_path).task("t-multi")
    fmt = format_for("qwen3_coder")
    prompt = DEFAULT.render([{"role": "system", "content": system_prompt(fmt.render_tools(FakeEnv().specs()))},
                             {"role": "user", "content": task.instructions}])
    a = r(prompt, {"seed": 5, "max_tokens": 500})
    assert a == r(prompt, {"seed": 5, "max_tokens": 500})
    assert a.num_input_tokens == count_tokens(prompt)
    small = responder_for(ladder.rung("nano-12b"), [suite_path])  # below the floor: its episodes vary most
    outs = {small(prompt, {"seed": s, "max_tokens": 500}).text for s in range(40)}
    assert len(outs) > 1  # the request seed changes the episode


def test_unknown_task_naming_no_tool_is_answered_without_a_call(ladder, suite_path):
    """An agent prompt about no known task whose message names none of the tools: a labelled answer, no call
    (it does not look like a solved suite task: nothing was done)."""
    r = responder_for(ladder.rung("super-120b"), [suite_path])
    agent = system_prompt(format_for("qwen3_xml").render_tools(FakeEnv().specs()))  # the agent loop's prompt
    prompt = DEFAULT.render([{"role": "system", "content": agent}, {"role": "user", "content": "Something else."}])
    g = r(prompt, {"seed": 1, "max_tokens": 200})
    assert g.text.startswith("FINAL ANSWER: [SIMULATED super-120b]") and "<tool_call>" not in g.text


@pytest.mark.parametrize("text, expected", [
    ("Extract the order id from: ORD-1042 late", '[SIMULATED nano-30b] {"order_id": "ORD-1042"}'),
    ("extract the invoice numbers from INV-7 and INV-8", '{"invoice_numbers": ["INV-7", "INV-8"]}'),
    ("Say hello", "[SIMULATED nano-30b] Hello!"),
    ("Summarise the release notes.", 'You asked: "Summarise the release notes."'),
])
def test_plain_chat_gets_a_generic_labelled_answer(ladder, suite_path, text, expected):
    """A chat prompt that is no suite task (no agent system prompt) is answered, labelled simulated, never
    with the give-up line; the same prompt always gets the same reply."""
    r = responder_for(ladder.rung("nano-30b"), [suite_path])
    prompt = DEFAULT.render([{"role": "system", "content": "You are helpful."}, {"role": "user", "content": text}],
                            add_generation_prompt=True)
    g = r(prompt, {"seed": 3, "max_tokens": 200})
    assert expected in g.text and g.text.startswith("[SIMULATED nano-30b]") and B.GIVE_UP_TEXT not in g.text
    assert g == r(prompt, {"seed": 4, "max_tokens": 200})


def test_output_is_cut_at_max_tokens(ladder, suite_path):
    r = responder_for(ladder.rung("super-120b"), [suite_path])
    task = load_suite(suite_path).task("t-narrow")
    prompt = DEFAULT.render([{"role": "system", "content": "t"}, {"role": "user", "content": task.instructions}])
    g = r(prompt, {"seed": 1, "max_tokens": 3})
    assert g.finish_reason == "length" and g.num_output_tokens == 3


def _plans(params, task, skill, n=400):
    return [B.make_plan(params, task, skill, s, "skill" if skill else "baseline") for s in range(n)]


def test_floor_small_rung_rarely_converges(ladder):
    """The demo ladder's calibrated shape on the bundled example suite (mean convergence per class group)."""
    from pathlib import Path

    example = load_suite(Path(__file__).resolve().parent.parent / "suites" / "example" / "suite.yaml")
    small, mid, big = (ladder.rung(n).standin.capability for n in ("nano-12b", "nano-30b", "super-120b"))
    narrow = [t for t in example.tasks if t.task_class != "multi_step"]
    multi = [t for t in example.tasks if t.task_class == "multi_step"]
    rate = lambda c, tasks: sum(B.p_converge(c, t) for t in tasks) / len(tasks)  # noqa: E731
    # nano-12b is below the floor everywhere; nano-30b converges on narrow work, rarely on multi-step work;
    # super-120b converges on narrow work and more often than nano-30b on multi-step work (docs/standin.md).
    assert rate(small, narrow) < 0.1 and rate(small, multi) < 0.02
    assert rate(mid, narrow) > 0.8 and rate(mid, multi) < 0.2
    assert rate(big, narrow) > 0.9 and rate(mid, multi) + 0.1 < rate(big, multi) < rate(big, narrow) - 0.4


def test_per_class_calibration(ladder):
    """docs/standin.md, per-class calibration: conventions the instructions state are kept by nano-30b about as
    well as by super-120b (a skill document's far less), never by nano-12b; a single-file code change is easier
    than its four steps alone say; focused doc retrieval rarely ends in a wrong answer once the work is done."""
    example = load_suite(Path(__file__).resolve().parent.parent / "suites" / "example" / "suite.yaml")
    small, mid, big = (ladder.rung(n).standin for n in ("nano-12b", "nano-30b", "super-120b"))
    stated = [t for t in example.tasks if not t.has_skill]
    skilled = [t for t in example.tasks if t.has_skill]
    mean = lambda f, tasks: sum(map(f, tasks)) / len(tasks)  # noqa: E731
    assert mean(lambda t: B.p_comply(mid, t, False), stated) > 0.95 * mean(lambda t: B.p_comply(big, t, False), stated)
    assert mean(lambda t: B.p_comply(mid, t, True), skilled) < 0.5 * mean(lambda t: B.p_comply(big, t, True), skilled)
    assert mean(lambda t: B.p_comply(small, t, False), stated) < 0.01
    code = example.task("code-config-port")
    assert B.difficulty(code) == pytest.approx(B.DS * 4 + B.DT * 2 + B.CLASS_DIFFICULTY["code_change"])
    assert B.p_converge(mid.capability, code) > 0.8 > 0.05 > B.p_converge(small.capability, code)
    docs = example.task("docs-backup-retention")
    wrong = [p.wrong for p in _plans(big, docs, False) if p.outcome == "converge" and p.complied]
    assert sum(wrong) / len(wrong) < 0.2


def test_failure_modes_end_the_loop(ladder, suite_path):
    suite = load_suite(suite_path)
    small = ladder.rung("nano-12b")
    reasons = {episode(ladder, suite_path, "nano-12b", "t-multi", seed=s).episode.stop_reason for s in range(40)}
    assert {"stuck", "invalid_output", "final"} <= reasons
    assert B.p_converge(small.standin.capability, suite.task("t-multi")) < 0.01


def test_skill_lifts_compliance_above_the_floor_only(ladder, suite_path):
    task = load_suite(suite_path).task("t-narrow")
    small, big = ladder.rung("nano-12b").standin, ladder.rung("super-120b").standin
    lift_big = B.p_comply(big, task, True) - B.p_comply(big, task, False)
    lift_small = B.p_comply(small, task, True) - B.p_comply(small, task, False)
    assert lift_big > 0.2 and lift_small < 0.02


def test_skill_in_prompt_is_seen(ladder, suite_path):
    suite = load_suite(suite_path)
    task = suite.task("t-narrow")
    from advisor.standin.agent import StandinAgent

    a = StandinAgent(ladder.rung("nano-30b"), [suite_path])
    for skill in (None, task.skill_text):
        prompt = DEFAULT.render([{"role": "system", "content": system_prompt("tools", skill)},
                                 {"role": "user", "content": task.instructions}])
        found, seen, _ = a.read(prompt)
        assert found.id == task.id and seen is (skill is not None)


def test_small_rung_spends_more_turns(ladder, suite_path):
    suite = load_suite(suite_path)
    task = suite.task("t-narrow")
    mid, big = ladder.rung("nano-30b").standin, ladder.rung("super-120b").standin
    # For the same work (converged, every step kept) the smaller rung makes more calls: redundant re-reads.
    def mean_turns(p):
        lengths = [len(pl.actions) for pl in _plans(p, task, True) if pl.outcome == "converge" and pl.complied]
        return sum(lengths) / len(lengths)

    assert mean_turns(mid) > mean_turns(big) + 0.5


def test_history_is_parsed_with_its_own_format(ladder, suite_path):
    from advisor.standin.agent import StandinAgent

    a = StandinAgent(ladder.rung("nano-12b"), [suite_path])  # nemotron_json
    call = format_for("nemotron_json").render_call("read_file", {"path": "x"})
    prompt = DEFAULT.render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                             {"role": "assistant", "content": call}, {"role": "tool", "content": "obs"}])
    task, _, turns = a.read(prompt)
    assert task is None and a.history(turns) == [("call", "read_file", "obs")]
    assert parse_default(prompt)[2]["content"] == call
