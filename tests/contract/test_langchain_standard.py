"""LangChain's standard tests (`langchain-tests`) for `ChatClaudeAgent`, the integration suite
through the real CLI against the scripted Messages API.

The scripted model answers every request the same way: with tools offered and no tool result
yet, it calls the tool the prompt names (else the first), with arguments made from the tool's
schema and the prompt's quoted strings and numbers in parentheses; otherwise it answers in text.

Tests the suites leave out through their own flags, and why:
- images (`supports_image_inputs`, `supports_image_tool_message`): the suite downloads its test
  image from the internet, which a test here must never do. Images are proven in
  `test_langchain_fidelity.py` and the behaviour matrix (`test_adapters_agree.py`).
- PDF, audio and video inputs: the provider sends no documents, audio or video (refused, with a
  test in `test_langchain_fidelity.py`).
- JSON mode (`supports_json_mode`): the Messages API has none; `method="json_mode"` is read as
  `"json_schema"`, as ChatAnthropic reads it (`test_langchain_fidelity.py`).
- `test_init_from_env` (`init_from_env_params`): the model reads no environment variable
  itself; the CLI reads `ANTHROPIC_API_KEY` and its other variables.
- `test_serdes` (`is_lc_serializable`): the model holds a provider, which is not serializable.
- `test_stream_time` (`enable_vcr_tests`): a benchmark over recorded HTTP cassettes of a model
  that calls the API itself; here the CLI makes the request.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]  # (anyio: the suites' async tests)

MODEL = "claude-sonnet-4-5"


def _example(schema: dict[str, Any], defs: dict[str, Any], name: str) -> Any:
    """A value that fits `schema` (the first choice of every union or enum)."""
    if "$ref" in schema:
        return _example(defs[schema["$ref"].split("/")[-1]], defs, name)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            choices = [s for s in schema[union] if s.get("type") != "null"]
            return _example(choices[0], defs, name)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {key: _example(s, defs, key) for key, s in schema.get("properties", {}).items()}
    if kind == "array":
        return [_example(schema.get("items", {"type": "string"}), defs, name)]
    examples = {"integer": 3, "number": 3.0, "boolean": True}
    return examples.get(str(kind), f"a {name or 'value'}")


def _prompt(request: RecordedRequest) -> str:
    """The text of the last user message that has any (the CLI's reminders left out)."""
    for message in reversed(request.messages):
        content = message["content"]
        if message["role"] != "user":
            continue
        if isinstance(content, str):
            return content
        texts = [
            b.get("text", "")
            for b in content
            if b.get("type") == "text" and "<system-reminder>" not in b.get("text", "")
        ]
        if texts:
            return " ".join(texts)
    return ""


def answer(request: RecordedRequest) -> Reply:
    last = request.messages[-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    offered = request.tools  # the bound tools (`mcp__sf__<name>`), or `StructuredOutput`
    if not offered or answered:
        return reply(text("Hello! The answer is 3."))
    prompt = _prompt(request)
    names = [t["name"].removeprefix("mcp__sf__") for t in offered]
    chosen = next((t for t, n in zip(offered, names, strict=True) if n in prompt), offered[0])
    schema = chosen.get("input_schema", {})
    arguments = _example(schema, schema.get("$defs", {}), "")
    quoted = re.findall(r"'([^']+)'", prompt)
    numbers = [int(n) for n in re.findall(r"\((\d+)\)", prompt)]
    for key, value in arguments.items():
        if isinstance(value, str) and quoted:
            arguments[key] = quoted[0]
        elif type(value) is int and numbers:
            arguments[key] = numbers.pop(0)
    return reply(tool_use(chosen["name"].removeprefix("mcp__sf__"), arguments))


class TestChatClaudeAgentUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChatClaudeAgent]:
        return ChatClaudeAgent

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": MODEL}


class TestChatClaudeAgentIntegration(ChatModelIntegrationTests):
    api: ClassVar[ScriptedMessagesAPI]

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def _scripted_api(cls) -> Iterator[None]:
        with ScriptedMessagesAPI(answer) as api:
            cls.api = api
            yield

    @property
    def chat_model_class(self) -> type[ChatClaudeAgent]:
        return ChatClaudeAgent

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"settings": self.api.settings(model=MODEL)}

    @property
    def model_override_value(self) -> str:
        return "claude-haiku-4-5"

    @property
    def supports_anthropic_inputs(self) -> bool:
        return True
