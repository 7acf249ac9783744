"""Sandboxed tools through `Environment`: each tool, and the sandbox limits (network, time, memory, output,
writes outside the workspace) reported as ok=False observations, never raised."""

import json

import pytest

from advisor.suite import Task
from advisor.tools import API_BASE, Environment, SandboxLimits, ToolSpec, UnknownToolError, available_tools, get_tool
from advisor.tools.docs import search

ALL = ["list_files", "read_file", "write_file", "search_docs", "read_doc", "http_request", "run_python"]


def _task(tools=ALL, **fixtures):
    check = {"type": "regex", "pattern": "x"}
    return Task.model_validate({
        "id": "t1", "class": "c", "instructions": "do it", "tools": tools,
        "fixtures": {"files": {"data/a.txt": "hello"},
                     "docs": {"kb-refunds": "# Refunds\nRefunds take 5 business days.",
                              "kb-auth": "# Auth\nSend a Bearer token in Authorization."},
                     "api": [{"method": "GET", "path": "/v1/items", "response": {"items": [1, 2]},
                              "require_headers": {"Authorization": "Bearer .+"}},
                             {"method": "POST", "path": "^/v1/items/\\d+/archive$", "response": {"ok": True}}],
                     **fixtures},
        "instruction_following": [{"name": "a", "weight": 100, "check": check}],
        "task_completion": [{"name": "b", "weight": 100, "check": check}],
    })


@pytest.fixture
def env(tmp_path):
    environment = Environment.create(_task(), tmp_path / "work", limits=SandboxLimits(timeout_s=3, memory_mb=256))
    yield environment
    environment.close()


def test_registry_specs_and_unknown_name():
    specs = available_tools()
    assert set(ALL) <= set(specs)
    assert all(isinstance(s, ToolSpec) and s.parameters["type"] == "object" for s in specs.values())
    with pytest.raises(UnknownToolError, match="Did you mean 'read_file'"):
        get_tool("read_fille")


def test_create_writes_fixtures_and_specs_follow_task_order(tmp_path):
    env = Environment.create(_task(tools=["run_python", "read_file"]), tmp_path)
    assert (env.workspace / "data/a.txt").read_text() == "hello"
    assert env.workspace.parent == tmp_path
    assert [s.name for s in env.specs()] == ["run_python", "read_file"]
    env.close()
    assert not env.workspace.exists()


async def test_file_tools(env):
    listing = await env.call("list_files", {})
    assert listing.ok and "data/a.txt" in listing.observation
    assert (await env.call("read_file", {"path": "data/a.txt"})).observation == "hello"
    wrote = await env.call("write_file", {"path": "out/r.md", "content": "# R\n"})
    assert wrote.ok and (env.workspace / "out/r.md").read_text() == "# R\n"
    missing = await env.call("read_file", {"path": "nope.txt"})
    assert not missing.ok and "no such file" in missing.observation


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "data/../../x"])
async def test_write_outside_workspace_is_refused(env, path):
    call = await env.call("write_file", {"path": path, "content": "x"})
    assert not call.ok and "sandbox" in call.observation
    assert not (env.workspace.parent / "escape.txt").exists()


async def test_symlink_escape_is_refused(env, tmp_path):
    (env.workspace / "link").symlink_to(tmp_path)
    call = await env.call("write_file", {"path": "link/evil.txt", "content": "x"})
    assert not call.ok and "escapes the workspace" in call.observation
    assert not (tmp_path / "evil.txt").exists()


async def test_doc_tools(env):
    found = await env.call("search_docs", {"query": "how long do refunds take"})
    assert found.ok and found.observation.startswith("[kb-refunds]")
    doc = await env.call("read_doc", {"doc_id": "kb-auth"})
    assert "Bearer" in doc.observation
    bad = await env.call("read_doc", {"doc_id": "kb-refund"})
    assert not bad.ok and "Did you mean 'kb-refunds'" in bad.observation
    assert search({"a": "x y", "b": "z"}, "nothing here") == []


async def test_http_request_routes_auth_and_log(env):
    ok = await env.call("http_request", {"method": "GET", "url": f"{API_BASE}/v1/items?page=2",
                                         "headers": {"Authorization": "Bearer k1"}})
    assert ok.ok and json.loads(ok.observation) == {"status": 200, "body": {"items": [1, 2]}}
    denied = await env.call("http_request", {"method": "GET", "url": "/v1/items"})
    assert json.loads(denied.observation)["status"] == 401
    posted = await env.call("http_request", {"method": "POST", "url": "/v1/items/7/archive", "json": {"why": "old"}})
    assert json.loads(posted.observation)["status"] == 200
    assert json.loads((await env.call("http_request", {"method": "DELETE", "url": "/v1/items"})).observation)["status"] == 405
    assert json.loads((await env.call("http_request", {"method": "GET", "url": "/v2/x"})).observation)["status"] == 404
    first, _, third = env.api_log[:3]
    assert first == {"method": "GET", "path": "/v1/items", "query": {"page": "2"},
                     "headers": {"authorization": "Bearer k1"}, "json": None, "status": 200}
    assert third["json"] == {"why": "old"} and third["path"] == "/v1/items/7/archive"


@pytest.mark.parametrize("url", ["https://example.com/v1/items", "http://169.254.169.254/latest", "ftp://api.example.test/x"])
async def test_http_request_to_other_hosts_is_refused(env, url):
    call = await env.call("http_request", {"method": "GET", "url": url})
    assert not call.ok and "network access refused" in call.observation
    assert env.api_log == []


async def test_unknown_tool_and_bad_arguments_never_raise(tmp_path):
    env = Environment.create(_task(tools=["read_file"]), tmp_path)
    not_allowed = await env.call("run_python", {"code": "print(1)"})
    assert not not_allowed.ok and "not available in this task" in not_allowed.observation
    unknown = await env.call("reed_file", {"path": "x"})
    assert not unknown.ok and "Did you mean 'read_file'" in unknown.observation
    bad = await env.call("read_file", {"path": 3})
    assert not bad.ok and "bad arguments" in bad.observation
    not_dict = await env.call("read_file", ["data/a.txt"])
    assert not not_dict.ok and "JSON object" in not_dict.observation
    env.close()


async def test_run_python_runs_in_workspace(env):
    call = await env.call("run_python", {"code": "import sys\nprint(open('data/a.txt').read(), sys.argv[1:])\n"
                                                 "open('made.txt', 'w').write('y')", "args": ["--x"]})
    assert call.ok, call.observation
    assert "hello ['--x']" in call.observation and (env.workspace / "made.txt").read_text() == "y"
    failing = await env.call("run_python", {"code": "raise SystemExit(3)"})
    assert failing.ok and failing.observation.startswith("exit code 3")


async def test_run_python_network_attempt_is_stopped(env):
    call = await env.call("run_python", {"code": "import socket\ns = socket.create_connection(('1.1.1.1', 80), timeout=2)\n"
                                                 "print('connected')"})
    assert not call.ok and "network access refused" in call.observation and "connected" not in call.observation


async def test_run_python_infinite_loop_is_stopped(env):
    call = await env.call("run_python", {"code": "while True:\n    pass"})
    assert not call.ok and "time limit exceeded" in call.observation


async def test_run_python_write_outside_workspace_is_refused(env):
    call = await env.call("run_python", {"code": "open('/usr/outside.txt', 'w').write('x')"})
    assert not call.ok and "write outside the workspace refused" in call.observation  # more in test_sandbox.py


async def test_run_python_huge_output_is_stopped(env):
    call = await env.call("run_python", {"code": "while True:\n    print('x' * 10000)"})
    assert not call.ok and "output limit exceeded" in call.observation
    assert len(call.observation) < 40_000


async def test_run_python_memory_limit(env):
    call = await env.call("run_python", {"code": "block = bytearray(1024 * 1024 * 1024)\nprint('allocated')"})
    assert not call.ok and "memory limit exceeded" in call.observation


async def test_concurrent_episodes_are_isolated(tmp_path):
    import asyncio

    envs = [Environment.create(_task(), tmp_path) for _ in range(6)]
    calls = await asyncio.gather(*[e.call("run_python", {"code": f"open('n.txt', 'w').write('{i}'); print({i} * 7)"})
                                   for i, e in enumerate(envs)])
    assert [c.observation.splitlines()[-1] for c in calls] == [str(i * 7) for i in range(6)]
    assert [(e.workspace / "n.txt").read_text() for e in envs] == [str(i) for i in range(6)]
    assert len({e.workspace for e in envs}) == 6
    for e in envs:
        e.close()


async def test_list_files_does_not_follow_links_out(env, tmp_path):
    """A link to a host file (or folder) outside the workspace is named, never followed: no host size, no host
    listing; the judge's transcript leaves it out too."""
    from advisor.checks.judge_transcript import _files

    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_text("x" * 651)
    (env.workspace / "shadow").symlink_to(outside / "secret.txt")
    (env.workspace / "hostdir").symlink_to(outside)
    listing = await env.call("list_files", {})
    assert listing.ok and "651" not in listing.observation and "secret.txt" not in listing.observation
    assert "shadow  (symbolic link, not followed)" in listing.observation
    assert "hostdir  (symbolic link, not followed)" in listing.observation
    assert all(name not in ("shadow", "hostdir") for name, _ in _files(env))
