"""The agent loop and what it needs: tool-call formats per rung, chat templates, the act-observe-decide loop."""

from advisor.agent.chat import DEFAULT, ChatTemplate, load_chat_template, system_prompt, template_for
from advisor.agent.formats import FINAL_MARKER, FORMATS, Parsed, ToolFormat, format_for
from advisor.agent.loop import EpisodeResult, ModelClient, is_stuck, run_episode

__all__ = [
    "DEFAULT", "ChatTemplate", "load_chat_template", "system_prompt", "template_for",
    "FINAL_MARKER", "FORMATS", "Parsed", "ToolFormat", "format_for",
    "EpisodeResult", "ModelClient", "is_stuck", "run_episode",
]
