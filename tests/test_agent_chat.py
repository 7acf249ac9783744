"""Chat templates: the default template, and a model's own template loaded from a tokenizer folder."""

import json

import pytest

from advisor.agent.chat import DEFAULT, load_chat_template, parse_default, system_prompt, template_for
from advisor.errors import ConfigError

MESSAGES = [
    {"role": "system", "content": "sys text"},
    {"role": "user", "content": "do the task"},
    {"role": "assistant", "content": "<tool_call>x</tool_call>"},
    {"role": "tool", "content": "obs\nline 2"},
]

# A small Qwen-style template written for this test (tool role, generation prompt, special tokens).
QWEN_LIKE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message['content'] }}\n</tool_response>"
    "<|im_end|>\n{% else %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# A strict template that only accepts user/assistant/system (like many older templates).
STRICT = (
    "{% for message in messages %}{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('Only user, assistant and system roles are supported!') }}{% endif %}"
    "[{{ message['role'] | upper }}] {{ message['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT] {% endif %}"
)


def _tokenizer(tmp_path, template, **extra):
    folder = tmp_path / "tok"
    folder.mkdir()
    config = {"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": template, **extra}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_default_template_round_trips():
    prompt = DEFAULT.render(MESSAGES)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert parse_default(prompt) == MESSAGES


def test_model_template_from_tokenizer_config(tmp_path):
    tpl = load_chat_template(_tokenizer(tmp_path, QWEN_LIKE))
    prompt = tpl.render(MESSAGES)
    assert prompt.startswith("<s><|im_start|>system\nsys text<|im_end|>")
    assert "<tool_response>\nobs\nline 2\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_named_template_list_picks_default(tmp_path):
    folder = _tokenizer(tmp_path, [{"name": "tool_use", "template": "TOOL"}, {"name": "default", "template": "DEF"}])
    assert load_chat_template(folder).render(MESSAGES) == "DEF"


def test_chat_template_jinja_file(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    (folder / "chat_template.jinja").write_text("{{ messages | length }} messages{{ eos_token }}")
    assert load_chat_template(folder).render(MESSAGES) == "4 messages</s>"


def test_template_without_tool_role_gets_observations_as_user(tmp_path):
    tpl = load_chat_template(_tokenizer(tmp_path, STRICT))
    prompt = tpl.render(MESSAGES)
    assert "[USER] <tool_response>\nobs\nline 2\n</tool_response></s>" in prompt
    assert prompt.endswith("[ASSISTANT] ")


def test_template_for_uses_the_models_tokenizer_path(tmp_path):
    class M:
        tokenizer_path = str(_tokenizer(tmp_path, QWEN_LIKE))

    class N:
        tokenizer_path = None

    assert template_for(M()).render(MESSAGES).startswith("<s>")
    assert template_for(N()) is DEFAULT


@pytest.mark.parametrize("config,match", [
    ({"eos_token": "</s>"}, "no chat_template"),
    ({"chat_template": "{% for x in %}"}, "does not compile"),
])
def test_bad_tokenizer_folders_are_config_errors(tmp_path, config, match):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=match):
        load_chat_template(folder)
    with pytest.raises(ConfigError, match="not a folder"):
        load_chat_template(tmp_path / "missing")


def test_template_that_raises_names_its_source(tmp_path):
    tpl = load_chat_template(_tokenizer(tmp_path, "{{ raise_exception('nope') }}"))
    with pytest.raises(ConfigError, match="tokenizer_config.json.*nope"):
        tpl.render(MESSAGES[:2])


def test_system_prompt_carries_skill_only_when_given():
    assert "# Skill" not in system_prompt("TOOLS")
    with_skill = system_prompt("TOOLS", "Always use the v2 endpoint.")
    assert "TOOLS" in with_skill and "Always use the v2 endpoint." in with_skill
