"""Sandboxed tools an agent uses in an episode, and the per-episode `Environment` that runs them.

Tools: list_files, read_file, write_file (scratch workspace only), search_docs, read_doc (the task's
fixture docs), http_request (the task's fixture API, served in-process), run_python (subprocess without
network, with bounded time, memory and output).
"""

from advisor.tools.base import Tool, ToolError, ToolSpec, UnknownToolError, available_tools, get_tool
from advisor.tools.environment import Environment
from advisor.tools.fixture_api import API_BASE
from advisor.tools.sandbox import SandboxLimits, SandboxResult, run_sandboxed

__all__ = ["API_BASE", "Environment", "SandboxLimits", "SandboxResult", "Tool", "ToolError", "ToolSpec",
           "UnknownToolError", "available_tools", "get_tool", "run_sandboxed"]
