"""Rendering a conversation into the prompt text a rung receives (Triton's `text_input` is already templated).

Two sources of a chat template, in this order:

1. the model's own template: when the ladder gives a rung a `tokenizer_path`, its ``tokenizer_config.json``
   (key ``chat_template``: a string, or a list of ``{name, template}`` with a ``default`` entry) or a
   ``chat_template.jinja`` file beside it, rendered with jinja2 in a sandbox with the variables Hugging Face
   templates expect (``messages``, ``add_generation_prompt``, ``bos_token``, ``eos_token``, ``tools``,
   ``raise_exception``, ``strftime_now``);
2. else the **default template** (ChatML), documented here because stand-ins read it back::

       <|im_start|>system\\n{system prompt: role, tool list, skill}<|im_end|>\\n
       <|im_start|>user\\n{task instructions}<|im_end|>\\n
       <|im_start|>assistant\\n{model reply}<|im_end|>\\n
       <|im_start|>tool\\n{observation}<|im_end|>\\n
       ...
       <|im_start|>assistant\\n

Messages are dicts ``{"role": system|user|assistant|tool, "content": str}``; tool observations use the role
``tool``. A template that rejects the ``tool`` role is retried with observations as ``user`` messages wrapped
in ``<tool_response>`` tags.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from advisor.errors import ConfigError
from advisor.nesting import load_json
from advisor.triton.weights import gguf_metadata, gguf_path

DEFAULT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

SKILL_HEADER = "# Skill"


def system_prompt(tools_text: str, skill_text: str | None = None) -> str:
    """The system prompt: the agent's role, its tools (rendered by the rung's format) and, when given, the skill."""
    parts = ["You are an agent working on a task in a sandboxed workspace. Use the tools to act, read each "
             "result, and decide the next step.", tools_text]
    if skill_text:
        parts.append(f"{SKILL_HEADER}\n\nFollow this guidance document while you work:\n\n{skill_text.strip()}")
    return "\n\n".join(parts)


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


@dataclass(frozen=True)
class ChatTemplate:
    """A jinja chat template and the special tokens it uses."""

    source: str  #: file the template came from, or "default"
    template: str
    bos_token: str = ""
    eos_token: str = ""

    def render(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        """Render the messages (ConfigError naming the template when it cannot render them)."""
        compiled = _compile(self.template, self.source)
        variables = dict(bos_token=self.bos_token, eos_token=self.eos_token, tools=None,
                         add_generation_prompt=add_generation_prompt)
        try:
            return compiled.render(messages=list(messages), **variables)
        except Exception as first:  # noqa: BLE001 - templates raise anything (raise_exception, TypeError)
            if not any(m.get("role") == "tool" for m in messages):
                raise ConfigError(f"{self.source}: chat template cannot render the conversation ({first})") from None
        # Templates without a tool role: observations become user turns.
        mapped = [{"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
                  if m.get("role") == "tool" else m for m in messages]
        try:
            return compiled.render(messages=mapped, **variables)
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"{self.source}: chat template cannot render the conversation ({exc})") from None


_COMPILED: dict[str, Any] = {}


def _compile(template: str, source: str):
    if template in _COMPILED:
        return _COMPILED[template]
    # heavy dependency, imported on use: jinja2
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str):
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    try:
        compiled = env.from_string(template)
    except TemplateError as exc:
        raise ConfigError(f"{source}: chat template does not compile ({exc})") from None
    _COMPILED[template] = compiled
    return compiled


DEFAULT = ChatTemplate("default", DEFAULT_TEMPLATE)


def load_chat_template(tokenizer_path: str | Path) -> ChatTemplate:
    """The chat template of a tokenizer folder (``tokenizer_config.json`` or ``chat_template.jinja``).

    Raises ConfigError naming the folder or file when there is no usable template.
    """
    folder = Path(tokenizer_path)
    config_file = folder / "tokenizer_config.json"
    if not folder.is_dir():
        raise ConfigError(f"{folder}: tokenizer_path is not a folder")
    config: dict[str, Any] = {}
    if config_file.exists():
        try:
            config = load_json(config_file.read_text(encoding="utf-8"), str(config_file))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{config_file}: cannot read tokenizer config ({exc})") from None
    template = config.get("chat_template")
    source = str(config_file)
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    jinja_file = folder / "chat_template.jinja"
    if not template and jinja_file.exists():
        template, source = jinja_file.read_text(encoding="utf-8"), str(jinja_file)
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{folder}: no chat_template in tokenizer_config.json and no chat_template.jinja")
    _compile(template, source)
    return ChatTemplate(source, template, _token_text(config.get("bos_token")), _token_text(config.get("eos_token")))


def template_for(model: Any) -> ChatTemplate:
    """The template a ladder model's prompts are rendered with: its tokenizer folder's, else (a llama.cpp model)
    its GGUF file's, else the default."""
    path = getattr(model, "tokenizer_path", None)
    if path:
        return load_chat_template(path)
    llama = getattr(model, "llama_cpp", None)
    if llama is not None:
        return _gguf_template(model)
    return DEFAULT


_GGUF_TEMPLATES: dict[str, ChatTemplate] = {}


def _gguf_template(model: Any) -> ChatTemplate:
    key = model.llama_cpp.weights.sha256
    if key not in _GGUF_TEMPLATES:
        _GGUF_TEMPLATES[key] = gguf_chat_template(gguf_path(model))
    return _GGUF_TEMPLATES[key]


def parse_default(prompt: str) -> list[dict[str, str]]:
    """Messages back from a prompt rendered with the default template (used by stand-in rungs)."""
    return [{"role": r, "content": c} for r, c in
            re.findall(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\n", prompt, re.S)]


def gguf_chat_template(path: str | Path):
    """The model's own chat template from its GGUF metadata (`advisor.agent.chat.ChatTemplate`)."""
    meta = gguf_metadata(path)
    template = meta.get("tokenizer.chat_template")
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{path}: no tokenizer.chat_template in the GGUF metadata")
    tokens = meta.get("tokenizer.ggml.tokens") or []

    def token(key: str) -> str:
        i = meta.get(key)
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else ""

    source = f"{path} (GGUF tokenizer.chat_template)"
    _compile(template, source)
    return ChatTemplate(source, template, token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id"))
