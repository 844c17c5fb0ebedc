"""Offline testing: a scripted Anthropic Messages API on 127.0.0.1.

`ScriptedMessagesAPI` is a real HTTP server that speaks the Messages API (SSE and plain JSON) and
answers from a script instead of a model. Point the provider's CLI at it with
`ScriptedMessagesAPI.settings()` and the whole real path runs: the bundled Claude Code CLI, the
per-query MCP bridge and your executors, with no network and no credentials.

In pytest, installing sf-provider is enough: the `scripted_api` fixture is a started server with
an empty script, and an `async def` test that uses it runs without any marker or plugin
(`docs/testing.md`)::

    from sf_provider import ClaudeAgentProvider, FunctionTool
    from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    async def test_agent_adds(scripted_api: ScriptedMessagesAPI) -> None:
        scripted_api.add(reply(tool_use("add", {"a": 2, "b": 3})), reply(text("5")))
        provider = ClaudeAgentProvider(scripted_api.settings())
        result = await provider.generate("2+3?", tools=[FunctionTool.from_function(add)])
        assert result.text == "5"
        assert scripted_api.requests[1].results()[0].text == "5"

Outside pytest, `async with ScriptedMessagesAPI(script) as api:` serves on the running event
loop, and `with ScriptedMessagesAPI(script) as api:` on a thread of its own (for sync code).

Tool names in scripted `tool_use` blocks may be the application's names (`add`): the server
resolves them against the tools of the request it is answering (`mcp__<bridge>__add`). A name
the request does not offer is the script's mistake: the query fails naming it (see `tool_use`).
`call_each_tool` is a ready-made function script for any request (`sf-provider gateway
--offline` serves it).

Besides replies, a script can hold HTTP errors (`http_error(529)`) and network faults
(`fault("drop")`, `fault("drop_mid_stream")`, `fault("malformed_sse")`, `fault("hang")`); see
`FaultReply` for what the CLI does with each.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .settings import ProviderSettings

__all__ = [
    "ROUTES_AWAY",
    "FaultKind",
    "FaultReply",
    "HTTPErrorReply",
    "RecordedRequest",
    "Reply",
    "ScriptExhaustedError",
    "ScriptItem",
    "ScriptedMessagesAPI",
    "SentToolResult",
    "arguments_for",
    "call_each_tool",
    "fault",
    "http_error",
    "offline_env",
    "redacted_thinking",
    "reply",
    "result_text",
    "text",
    "thinking",
    "tool_use",
]

#: The model name the scripted API reports when a reply does not name one.
SCRIPTED_MODEL = "claude-scripted"


#: What could take the CLI somewhere else than the scripted API, or hand it real credentials:
#: `offline_env` blanks these (the CLI reads "" as unset).
ROUTES_AWAY = (
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_FOUNDRY_BASE_URL",
    "ANTHROPIC_FOUNDRY_API_KEY",
    "ANTHROPIC_FOUNDRY_RESOURCE",
)


def offline_env(base_url: str, *, max_retries: int = 0) -> dict[str, str]:
    """The CLI environment that keeps it on loopback and quick to fail: the one place every
    offline run (`ScriptedMessagesAPI.settings()`, the `scripted_api` fixture, `sf-provider
    demo`, `check --probe`, `gateway --offline`) takes it from.

    `ROUTES_AWAY` is blanked, so no credential or cloud switch of this machine's reaches the
    CLI; `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` stops the CLI's extra calls (a
    title-generation request that would desynchronise a script, `HEAD /api/hello`, DNS
    look-ups); a low `CLAUDE_CODE_MAX_RETRIES` stops it retrying an HTTP error ten times over
    three minutes.
    """
    return {
        **dict.fromkeys(ROUTES_AWAY, ""),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-scripted-offline",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


# --------------------------------------------------------------------------- the script


class Reply(BaseModel):
    """One scripted model turn: Messages API content blocks plus how the turn ends.

    `content` holds plain Messages API blocks: `{"type": "text", "text": ...}`,
    `{"type": "tool_use", "name": ..., "input": {...}}` (an `id` is generated when absent),
    `{"type": "thinking", "thinking": ..., "signature": ...}`. Several `tool_use` blocks in one
    reply are parallel calls. A `tool_use` must name a tool the request offers, unless it says
    `"offered": false` (`tool_use(..., offered=False)`). `stop_reason` defaults to `tool_use`
    when the reply has a tool call and to `end_turn` otherwise.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reply"] = "reply"
    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    model: str | None = None
    chunk_size: int = Field(default=8, ge=1, description="Characters per streamed delta.")

    @field_validator("content")
    @classmethod
    def _blocks(cls, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A block the server could not send is the script's mistake, named here: sent, it
        failed far away (a dropped connection, then "no scripted reply left")."""
        for i, block in enumerate(content):
            kind = block.get("type")
            if kind not in _BLOCK_FIELDS:
                raise ValueError(
                    f"content[{i}]: type {kind!r} is not one of {', '.join(_BLOCK_FIELDS)} "
                    f"(build blocks with text(), tool_use(), thinking(), redacted_thinking())"
                )
            if kind == "tool_use" and not isinstance(block.get("input", {}), dict):
                raise ValueError(f"content[{i}]: a tool_use block's 'input' must be an object")
            for name, expected in _BLOCK_FIELDS[kind].items():
                if not isinstance(block.get(name), expected):
                    raise ValueError(
                        f"content[{i}]: a {kind} block needs {name!r} "
                        f"({expected.__name__}), got {block.get(name)!r}"
                    )
        return content


#: The blocks a scripted reply can hold, and the fields each needs.
_BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str},
    "tool_use": {"name": str},
    "thinking": {"thinking": str},
    "redacted_thinking": {"data": str},
}


class HTTPErrorReply(BaseModel):
    """A scripted HTTP error answer, shaped like the Messages API's error body."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["http_error"] = "http_error"
    status: int = Field(ge=400, le=599)
    error_type: str = "api_error"
    message: str = "scripted error"
    retry_after: float | None = None


#: The network faults `FaultReply` can script.
FaultKind = Literal["drop", "drop_mid_stream", "malformed_sse", "hang"]


class FaultReply(BaseModel):
    """A scripted network fault: the answer to one request goes wrong on the wire.

    What each kind sends, and what the bundled CLI (2.1.330) was seen doing with it. "Falls back"
    means the CLI repeats the request once with `stream: false`; the **next scripted item answers
    that fallback**, and a fallback that fails is not retried. A query that still fails ends in an
    API error result without an HTTP status (`APIError(status=None)` from the provider).

    - `drop`: the connection is closed without a byte of answer. Retried like an HTTP error, up to
      `CLAUDE_CODE_MAX_RETRIES` times (~0.5 s apart); with none left the query fails with
      "Connection dropped (ECONNRESET)".
    - `drop_mid_stream`: the SSE headers and the first `events` events of `reply` (a text by
      default) are sent, then the connection is closed. The CLI closes the partial message itself
      (it emits `content_block_stop` and `message_stop`), so **the partial text reaches the
      stream**. A stream cut after one or more events is retried as a stream while retries remain,
      then falls back; one cut right after the headers (`events=0`) falls back at once. A failed
      fallback reads "Connection to the API was lost (ECONNRESET)". A `stream: false` request
      gets the headers and half of the JSON body.
    - `malformed_sse`: the SSE headers, then each line of `garbage` as the `data:` of a
      `message_start` event, then the connection is closed. Nothing reaches the stream; the CLI
      falls back at once, whatever `CLAUDE_CODE_MAX_RETRIES` says. A `stream: false` request
      gets a 200 whose body is `garbage` (not JSON): "JSON Parse error: ...".
    - `hang`: nothing is sent; the connection stays open for `seconds` and is then closed (seen
      as a `drop`), or, with `seconds=None`, until the server stops (`__aexit__` ends it at
      once). The CLI waits without retrying, so only `ProviderSettings.idle_timeout` / `timeout`
      end the query (`QueryTimeoutError`).

    Every fault closes its connection; what comes next is a new connection and the next item.
    In a scenario file a fault is `{"kind": "drop"}` (or another kind, with the fields below).
    """

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind
    reply: Reply | None = Field(
        default=None,
        description="drop_mid_stream: the reply whose first events are sent (a text by default).",
    )
    events: int = Field(
        default=3, ge=0, description="drop_mid_stream: SSE events sent before the connection drops."
    )
    garbage: list[str] = Field(
        default_factory=lambda: ['{"type": "message_start", "message": {', "not json at all"],
        description="malformed_sse: the `data:` lines sent instead of JSON.",
    )
    seconds: float | None = Field(
        default=None,
        gt=0,
        description="hang: seconds before the connection is closed; None = until the server stops.",
    )


#: One scripted answer to a `POST /v1/messages`.
ScriptItem = Reply | HTTPErrorReply | FaultReply
Responder = Callable[["RecordedRequest"], ScriptItem | Awaitable[ScriptItem]]


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "scripted-signature") -> dict[str, Any]:
    """A thinking content block."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str = "scripted-redacted-data") -> dict[str, Any]:
    """A redacted thinking content block (the API's encrypted reasoning: opaque data, no text)."""
    return {"type": "redacted_thinking", "data": data}


def tool_use(
    name: str,
    input: Mapping[str, Any] | None = None,
    id: str | None = None,
    *,
    offered: bool = True,
) -> dict[str, Any]:
    """A tool_use content block; `name` may be the application's tool name.

    A call of a tool the request does not offer is the script's mistake (a typo): the server
    refuses to send it and names it in `ScriptedMessagesAPI.errors`. `offered=False` scripts
    such a call on purpose (a model making a name up); the block then carries
    `"offered": false`, which is not sent."""
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(input or {})}
    if id is not None:
        block["id"] = id
    if not offered:
        block["offered"] = False
    return block


def reply(*content: dict[str, Any], stop_reason: str | None = None, **usage: int) -> Reply:
    """A scripted model turn made of the given content blocks."""
    return Reply(content=list(content), stop_reason=stop_reason, usage=dict(usage))


def http_error(
    status: int,
    message: str = "scripted error",
    *,
    error_type: str | None = None,
    retry_after: float | None = None,
) -> HTTPErrorReply:
    """A scripted HTTP error (401, 429, 500, 529, ...)."""
    default_types = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    return HTTPErrorReply(
        status=status,
        message=message,
        retry_after=retry_after,
        error_type=error_type or default_types.get(status, "api_error"),
    )


def fault(
    kind: FaultKind,
    *,
    reply: Reply | None = None,
    events: int = 3,
    garbage: Sequence[str] | None = None,
    seconds: float | None = None,
) -> FaultReply:
    """A scripted network fault (`drop`, `drop_mid_stream`, `malformed_sse`, `hang`).

    See `FaultReply` for what each does on the wire and what the CLI does with it. Example::

        # The stream breaks after message_start and one text delta; the CLI's non-streaming
        # fallback gets the good reply.
        script = [fault("drop_mid_stream", events=3), reply(text("Five."))]
    """
    extra: dict[str, Any] = {} if garbage is None else {"garbage": list(garbage)}
    return FaultReply(kind=kind, reply=reply, events=events, seconds=seconds, **extra)


# ------------------------------------------------------------ a scripted model for any request


def call_each_tool(request: RecordedRequest) -> Reply:
    """A scripted model for any conversation (what `sf-provider gateway --offline` serves): it
    calls each tool the request offers that the conversation has not called yet, with arguments
    valid for the tool's schema (`arguments_for`), all in one turn and in name order; then it
    answers in text,
    quoting the results it was sent. Without tools it answers in text at once.

    It keeps the request's `tool_choice`: `none` answers in text, `tool` calls that tool, `any`
    calls one even when every tool was called already, and `disable_parallel_tool_use` calls
    one at a time. The CLI's `StructuredOutput` tool (an answer's JSON schema) is called last,
    in place of the text answer. Use it as a function script::

        async with ScriptedMessagesAPI(call_each_tool) as api:
            result = await ClaudeAgentProvider(api.settings()).generate("Hi", tools=tools)
    """
    # In name order, whatever order the request lists them in.
    tools = {str(t.get("name")): t for t in sorted(request.tools, key=lambda t: str(t.get("name")))}
    called = {str(b.get("name")) for b in request.tool_uses()}
    choice = request.body.get("tool_choice") or {}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "none":
        due: list[str] = []
    elif kind == "tool":
        due = [name for name in tools if name == choice.get("name")]
    else:
        due = [n for n in tools if n not in called and n != _STRUCTURED_OUTPUT]
        if not due and _STRUCTURED_OUTPUT in tools and _STRUCTURED_OUTPUT not in called:
            due = [_STRUCTURED_OUTPUT]
        if not due and kind == "any" and tools:
            due = [next(iter(tools))]
    if isinstance(choice, dict) and choice.get("disable_parallel_tool_use"):
        due = due[:1]
    if due:
        return reply(
            *(tool_use(name, arguments_for(tools[name].get("input_schema") or {})) for name in due)
        )
    return reply(text(_offline_answer(request)))


#: The tool the CLI adds for an answer that must match a JSON schema.
_STRUCTURED_OUTPUT = "StructuredOutput"


def _offline_answer(request: RecordedRequest) -> str:
    """`call_each_tool`'s text: the tool results it was sent, or what the user said last."""
    sent = {b.get("tool_use_id"): result_text(b) for b in request.tool_results()}
    # In the order of the calls, whatever order the results came back in; without the note the
    # CLI appends to a tool's output.
    results = [
        f"{_app_name(str(call.get('name')))} returned "
        f"{_clip(sent[call.get('id')].split('<system-reminder>')[0].strip())!r}"
        for call in request.tool_uses()
        if call.get("id") in sent
    ]
    if results:
        return f"Offline model: {'; '.join(results)}."
    said = ""
    for message in request.messages:
        if message.get("role") == "user":
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            texts = [b.get("text") for b in blocks or [] if isinstance(b, dict)]
            said = next((t for t in reversed(texts) if isinstance(t, str) and t.strip()), said)
    return f"Offline model: you said {_clip(said.strip())!r}."


def _clip(value: str, limit: int = 200) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def arguments_for(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments valid for a tool's JSON Schema, made up: its required properties, each from
    its `const`, `default`, `examples` or `enum` when it has one, else a plain value of its
    type (nested objects and arrays too; `$ref`s within the schema followed).

    Falls back to `{}` when the sample does not validate and `{}` does; a schema it cannot
    satisfy gets the sample anyway (the tool's own validation then says why)::

        arguments_for({"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]})  # {"city": "example"}
    """
    import jsonschema
    import referencing

    try:
        value = _sample(schema, schema, 0)
    except Exception:  # an exotic schema: let the tool's own validation speak
        value = {}
    arguments: dict[str, Any] = value if isinstance(value, dict) else {}
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        # A registry of its own: no remote reference is ever fetched.
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())
        if not validator.is_valid(arguments) and validator.is_valid({}):
            return {}
    except Exception:  # a schema jsonschema cannot use: the sample as it is
        pass
    return arguments


_FORMATS = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def _sample(schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    if depth > 10 or not isinstance(schema, Mapping):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for key in ref[2:].split("/"):
            target = target.get(key) if isinstance(target, Mapping) else None
        return _sample(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    for key in ("examples", "enum"):
        listed = schema.get(key)
        if isinstance(listed, list) and listed:
            return listed[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _sample(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and "properties" in schema:
        kind = "object"
    return _sample_of_type(kind, schema, root, depth)


def _sample_of_type(
    kind: Any, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int
) -> Any:
    match kind:
        case "object":
            properties = schema.get("properties") or {}
            required: Sequence[str] = schema.get("required") or []
            return {name: _sample(properties.get(name, {}), root, depth + 1) for name in required}
        case "string":
            value = _FORMATS.get(str(schema.get("format")), "example")
            value = value.ljust(int(schema.get("minLength", 0)), "x")
            return value[: int(schema.get("maxLength", len(value)))]
        case "integer" | "number":
            number: float = 1
            if "minimum" in schema:
                number = max(number, schema["minimum"])
            if "exclusiveMinimum" in schema:
                number = max(number, schema["exclusiveMinimum"] + 1)
            if "maximum" in schema:
                number = min(number, schema["maximum"])
            return int(number) if kind == "integer" else float(number)
        case "boolean":
            return False
        case "array":
            item = _sample(schema.get("items", {}), root, depth + 1)
            return [item] * int(schema.get("minItems", 0))
        case _:
            return None


class ScriptExhaustedError(AssertionError):
    """The CLI asked for more model turns than the script holds: the `scripted_api` fixture's
    failure for a test whose script ran out.

    The scripted API answers the request past the script's end with HTTP 410 and the kit's
    message (`no scripted reply left for request #N`), so the query fails with the provider's
    `APIError` carrying it, and notes it in `ScriptedMessagesAPI.errors`. A test using the
    fixture that passes all the same (it caught that error, or its framework swallowed it)
    fails at teardown with this error, listing `errors`. Outside the fixture, read `errors`.
    """


@dataclass
class RecordedRequest:
    """One HTTP request the scripted API received, with helpers to read a Messages API body."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    index: int = 0
    #: `time.monotonic()` when the request was read: gaps between requests show retry delays.
    received_at: float = 0.0

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The `tools` the model was offered in this request."""
        return list(self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the model was offered."""
        return [str(t.get("name")) for t in self.tools]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The `messages` of this request."""
        return list(self.body.get("messages") or [])

    def blocks(self, block_type: str) -> list[dict[str, Any]]:
        """Every content block of `block_type` in this request's messages, in order."""
        found: list[dict[str, Any]] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list):
                found.extend(
                    b for b in content if isinstance(b, dict) and b.get("type") == block_type
                )
        return found

    def tool_results(self) -> list[dict[str, Any]]:
        """Every `tool_result` block in this request's messages, raw, as the CLI sent it: its
        `content` is a list of blocks or a plain string, and `is_error` may be absent. For one
        shape whatever was sent, use `results()`."""
        return self.blocks("tool_result")

    def results(self) -> list[SentToolResult]:
        """Every tool result the model was sent in this request, in order, in one shape
        (`SentToolResult`) whatever the CLI sent: a success or an error, a result of this
        query's tools or one replayed from history.

        Example::

            [sent] = api.requests[1].results()
            assert (sent.text, sent.is_error) == ('{"city": "Paris", "celsius": 21}', False)
        """
        return [SentToolResult.from_block(block) for block in self.tool_results()]

    def tool_uses(self) -> list[dict[str, Any]]:
        """Every `tool_use` block in this request's (assistant) messages."""
        return self.blocks("tool_use")

    def tool_result_texts(self) -> list[str]:
        """The text of every `tool_result` block, in order, whatever its shape (a string, as
        for errors, or a list of text blocks, as for successes)."""
        return [result_text(block) for block in self.tool_results()]


@dataclass(frozen=True)
class SentToolResult:
    """One tool result as the model received it, in one shape whatever the CLI sent.

    The CLI sends a `tool_result` block's `content` as a list of blocks (a success of a tool of
    this query) or as a plain string (an error, or a result replayed from history), and leaves
    `is_error` out when false. Here `text` is always the text, `content` always a list of
    blocks and `is_error` always a bool. `as_dict()` gives `{"tool_use_id", "is_error",
    "text"}`, handy to compare with a literal.
    """

    tool_use_id: str
    is_error: bool
    text: str
    #: The content as blocks (a string content becomes one text block).
    content: list[dict[str, Any]] = field(default_factory=list, compare=False)

    @classmethod
    def from_block(cls, block: Mapping[str, Any]) -> SentToolResult:
        """The uniform shape of one raw `tool_result` block."""
        content = block.get("content")
        if content is None:
            blocks: list[dict[str, Any]] = []
        elif isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        else:
            blocks = [dict(b) for b in content if isinstance(b, Mapping)]
        return cls(
            tool_use_id=str(block.get("tool_use_id", "")),
            is_error=bool(block.get("is_error")),
            text=result_text(block),
            content=blocks,
        )

    def as_dict(self) -> dict[str, Any]:
        """`{"tool_use_id": ..., "is_error": ..., "text": ...}`."""
        return {"tool_use_id": self.tool_use_id, "is_error": self.is_error, "text": self.text}


def result_text(block: Mapping[str, Any]) -> str:
    """The text of one `tool_result` block: its content string, or its text blocks joined."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


@dataclass
class _State:
    script: list[ScriptItem] | Responder
    cursor: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: A request came after the script's last item (see `ScriptExhaustedError`).
    ran_out: bool = False


# --------------------------------------------------------------------------- the server


class ScriptedMessagesAPI:
    """A scripted Messages API served over HTTP on 127.0.0.1 (an ephemeral port).

    `script` is either a list of `Reply` / `HTTPErrorReply` / `FaultReply` items, answered in order
    one per `POST /v1/messages`, or a function (sync or async) of the `RecordedRequest` returning
    one. Every request is recorded in `.requests` (other paths get a 404 and are recorded too).
    When the script cannot answer a request (a list that ran out, a function that raised, a
    reply calling a tool the request does not offer), the server notes it in `.errors` and
    answers HTTP 410 with the same text, which the CLI ends the query with at once (no retry):
    the provider raises `APIError` carrying it. A request whose messages hold `tool_use` /
    `tool_result` blocks but that defines no tools is answered HTTP 400, as the Messages API
    answers it, without spending a scripted item.

    Use it as an async context manager (`async with`: served on the running event loop) or as
    a plain one (`with`: served on an event loop in a thread of its own, for sync code and for
    tests that run on any event loop; a function script then runs on that thread too);
    `.base_url` is set while it runs. Leaving it closes
    every connection and ends answers still being made (a `hang` fault, a slow function
    script) at once. `add()` appends replies to a list script, also while it runs.
    """

    def __init__(self, script: Sequence[ScriptItem | Mapping[str, Any]] | Responder) -> None:
        if callable(script):
            items: list[ScriptItem] | Responder = script
        else:
            items = [_coerce_item(item) for item in script]
        self._state = _State(script=items)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._thread_stop: Callable[[], object] | None = None
        self.base_url = ""

    def add(self, *items: ScriptItem | Mapping[str, Any]) -> ScriptedMessagesAPI:
        """Append script items (replies, HTTP errors, faults), answered after those already
        there; returns the server, so calls chain. Works before and while the server runs."""
        script = self._state.script
        if callable(script):
            raise TypeError("add() extends a list script; this server answers with a function")
        script.extend(_coerce_item(item) for item in items)
        return self

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every `POST /v1/messages` body received, in order."""
        return [r for r in self._state.requests if _is_model_turn(r.method, r.path)]

    @property
    def all_requests(self) -> list[RecordedRequest]:
        """Every HTTP request received, whatever its path."""
        return list(self._state.requests)

    @property
    def errors(self) -> list[str]:
        """Problems the server met (script exhausted, unreadable request): empty in a good run."""
        return list(self._state.errors)

    @property
    def remaining(self) -> int:
        """Scripted items not yet served (0 for a function script)."""
        script = self._state.script
        return 0 if callable(script) else len(script) - self._state.cursor

    def settings(self, **overrides: Any) -> ProviderSettings:
        """`ProviderSettings` whose CLI talks to this server, offline (see `offline_env`: no
        credential or cloud switch of this machine's reaches it, unless `env` sets one), with
        `max_retries=0` unless `max_retries` or `env`'s `CLAUDE_CODE_MAX_RETRIES` is given."""
        if not self.base_url:
            raise RuntimeError(
                "ScriptedMessagesAPI.settings() needs the server running "
                "(`async with ScriptedMessagesAPI(...)` or `with ...`)"
            )
        env = offline_env(self.base_url)
        del env["CLAUDE_CODE_MAX_RETRIES"]  # a typed setting: no retries unless asked
        env.update(overrides.pop("env", {}) or {})
        if "CLAUDE_CODE_MAX_RETRIES" not in env:
            overrides.setdefault("max_retries", 0)
        return ProviderSettings(env=env, **overrides)

    async def __aenter__(self) -> ScriptedMessagesAPI:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
            # Connections still open (a keep-alive client, a hang, a slow responder) would keep
            # their handlers alive past the test: end them now.
            for task in self._handlers:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*self._handlers, return_exceptions=True), 2)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def __enter__(self) -> ScriptedMessagesAPI:
        if self._thread is not None or self._server is not None:
            raise RuntimeError("this ScriptedMessagesAPI is already running")
        started = threading.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            try:
                await self.__aenter__()
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            self._thread_stop = lambda: loop.call_soon_threadsafe(stop.set)
            started.set()
            try:
                await stop.wait()
            finally:
                await self.__aexit__(None, None, None)

        self._thread = threading.Thread(
            target=asyncio.run, args=(serve(),), name="scripted-messages-api", daemon=True
        )
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        thread, stop = self._thread, self._thread_stop
        self._thread = self._thread_stop = None
        if stop is not None:
            stop()
        if thread is not None:
            thread.join()

    # -- HTTP plumbing

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                method, path, headers, raw = request
                keep_alive = await self._answer(writer, method, path, headers, raw)
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # The server is closing under a reply still being made (a hang, a slow responder):
            # end this connection quietly; asyncio would otherwise log the cancelled handler.
            pass
        finally:
            writer.close()

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
    ) -> bool:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        recorded = RecordedRequest(
            method,
            path,
            headers,
            body if isinstance(body, dict) else {},
            received_at=time.monotonic(),
        )
        self._state.requests.append(recorded)
        if not _is_model_turn(method, path):
            await _write_json(writer, 404, _error_body("not_found_error", f"no route {path}"))
            return True
        recorded.index = len(self.requests) - 1
        refusal = _refusal(recorded.body)
        if refusal is not None:
            # As the Messages API answers it, before any scripted reply is spent.
            await _write_json(writer, 400, _error_body("invalid_request_error", refusal))
            return True
        try:
            item = await self._next_item(recorded)
        except Exception as exc:  # a script function's mistake: named, not a dropped connection
            return await self._script_problem(
                writer,
                f"the script failed on request #{recorded.index}: {type(exc).__name__}: {exc}",
            )
        if item is None:
            self._state.ran_out = True
            held = len(self._state.script) if not callable(self._state.script) else 0
            return await self._script_problem(
                writer,
                f"no scripted reply left for request #{recorded.index} (the script held "
                f"{held} item(s)); script one reply for each model request the query makes",
            )
        scripted = item.reply if isinstance(item, FaultReply) else item
        if isinstance(scripted, Reply):
            problem = _unoffered_call(scripted, recorded)
            if problem is not None:
                return await self._script_problem(writer, problem)
        if isinstance(item, HTTPErrorReply):
            extra = {"retry-after": f"{item.retry_after:g}"} if item.retry_after is not None else {}
            await _write_json(
                writer, item.status, _error_body(item.error_type, item.message), extra
            )
            return True
        if isinstance(item, FaultReply):
            await self._fault(writer, item, recorded)
            return False
        message = self._message(item, recorded)
        if recorded.body.get("stream"):
            await _write_sse(writer, message, item.chunk_size)
            return False
        await _write_json(writer, 200, message)
        return True

    async def _script_problem(self, writer: asyncio.StreamWriter, problem: str) -> bool:
        """Answer a request the script cannot answer: noted in `errors`, and sent as an error
        the CLI ends the query with at once, its text intact (`_SCRIPT_PROBLEM_STATUS`)."""
        problem = f"ScriptedMessagesAPI: {problem}"
        self._state.errors.append(problem)
        await _write_json(
            writer,
            _SCRIPT_PROBLEM_STATUS,
            _error_body("invalid_request_error", problem),
            {"x-should-retry": "false"},
        )
        return True

    async def _fault(
        self, writer: asyncio.StreamWriter, item: FaultReply, request: RecordedRequest
    ) -> None:
        """Play a network fault; the caller closes the connection afterwards."""
        streamed = bool(request.body.get("stream"))
        if item.kind == "drop":
            return
        if item.kind == "hang":
            # Cancelled by __aexit__ when seconds is None (or longer than the test).
            await asyncio.sleep(item.seconds if item.seconds is not None else math.inf)
            return
        if item.kind == "drop_mid_stream":
            partial = item.reply or reply(text(_PARTIAL_TEXT))
            message = self._message(partial, request)
            if streamed:
                events = _sse_events(message, partial.chunk_size)
                writer.write(_SSE_HEAD + b"".join(events[: item.events]))
            else:
                data = json.dumps(message).encode()
                writer.write(_json_head(200, len(data)) + data[: len(data) // 2])
        else:  # malformed_sse
            if streamed:
                garbage = b"".join(
                    f"event: message_start\ndata: {line}\n\n".encode() for line in item.garbage
                )
                writer.write(_SSE_HEAD + garbage)
            else:
                data = "\n".join(item.garbage).encode()
                writer.write(_json_head(200, len(data)) + data)
        await writer.drain()

    async def _next_item(self, request: RecordedRequest) -> ScriptItem | None:
        script = self._state.script
        if callable(script):
            produced = script(request)
            if inspect.isawaitable(produced):
                produced = await produced
            return _coerce_item(produced)
        if self._state.cursor >= len(script):
            return None
        item = script[self._state.cursor]
        self._state.cursor += 1
        return item

    def _message(self, item: Reply, request: RecordedRequest) -> dict[str, Any]:
        offered = request.tool_names
        content: list[dict[str, Any]] = []
        for block in item.content:
            block = dict(block)
            if block.get("type") == "tool_use":
                block.pop("offered", None)
                block.setdefault("id", f"toolu_scripted_{next(self._ids):04d}")
                block["name"] = _resolve_tool_name(str(block.get("name", "")), offered)
                block.setdefault("input", {})
            content.append(block)
        content, stop_sequence = _honour_stops(content, request.body.get("stop_sequences"))
        choice = request.body.get("tool_choice") or {}
        if choice.get("type") == "none" and any(b.get("type") == "tool_use" for b in content):
            self._state.errors.append(
                f"ScriptedMessagesAPI: request #{request.index} has tool_choice none, but its "
                f"scripted reply calls a tool (the API would never send one)"
            )
        stop = item.stop_reason or (
            "stop_sequence"
            if stop_sequence is not None
            else "tool_use"
            if any(b.get("type") == "tool_use" for b in content)
            else "end_turn"
        )
        usage = {
            "input_tokens": 25,
            "output_tokens": 12,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        usage.update(item.usage)
        return {
            "id": f"msg_scripted_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": item.model or request.body.get("model") or SCRIPTED_MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }


#: The status the server answers a request with when the script cannot answer it (it ran out,
#: its function raised, its reply calls a tool not offered). The CLI ends the query on a 410 at
#: once, whatever its retry setting, and passes the text on as it is; it retries a 5xx (adding
#: "a server-side issue, usually temporary, try again") and tries a 400 three times.
_SCRIPT_PROBLEM_STATUS = 410

_TOOLS_NEEDED = "Requests which include `tool_use` or `tool_result` blocks must define tools."
#: The Messages API's answer to a forced tool choice with thinking on.
_FORCED_CHOICE_WITH_THINKING = "Thinking may not be enabled when tool_choice forces tool use."


def _refusal(body: Mapping[str, Any]) -> str | None:
    """The Messages API's 400 for a request it refuses before the model runs, or None."""
    if not body.get("tools") and _has_tool_blocks(body):
        return _TOOLS_NEEDED
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    thinking = body.get("thinking")
    thinking_on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    if choice.get("type") in ("any", "tool") and thinking_on:
        return _FORCED_CHOICE_WITH_THINKING
    names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if choice.get("type") == "tool" and choice.get("name") not in names:
        return f"tool_choice.name: Tool '{choice.get('name')}' not found in provided tools"
    return None


def _honour_stops(
    content: list[dict[str, Any]], stops: Any
) -> tuple[list[dict[str, Any]], str | None]:
    """`content` as the API would have ended it at the first stop sequence in a text block (the
    text before it; nothing after), and that sequence; unchanged, and None, without one."""
    if not isinstance(stops, list) or not stops:
        return content, None
    for index, block in enumerate(content):
        if block.get("type") != "text":
            continue
        found = [(block["text"].find(s), s) for s in stops if isinstance(s, str) and s]
        hits = sorted((at, -len(s), s) for at, s in found if at >= 0)
        if hits:
            at, _, stop = hits[0]
            kept = content[:index] + ([{**block, "text": block["text"][:at]}] if at else [])
            return kept, stop
    return content, None


def _has_tool_blocks(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _is_model_turn(method: str, path: str) -> bool:
    return method == "POST" and path.split("?", 1)[0] == "/v1/messages"


def _coerce_item(item: Any) -> ScriptItem:
    if isinstance(item, Reply | HTTPErrorReply | FaultReply):
        return item
    if isinstance(item, Mapping):
        if item.get("kind") == "http_error" or "status" in item:
            return HTTPErrorReply.model_validate(dict(item))
        if item.get("kind") in get_args(FaultKind):
            return FaultReply.model_validate(dict(item))
        return Reply.model_validate(dict(item))
    raise TypeError(
        f"a script item must be a Reply, an HTTPErrorReply, a FaultReply or a mapping, not {item!r}"
    )


def _unoffered_call(item: Reply, request: RecordedRequest) -> str | None:
    """The script's mistake when `item` calls a tool `request` does not offer, else None (a
    block that says `"offered": false` is such a call on purpose)."""
    offered = request.tool_names
    for block in item.content:
        if block.get("type") != "tool_use" or block.get("offered") is False:
            continue
        name = str(block.get("name", ""))
        if _resolve_tool_name(name, offered) in offered:
            continue
        listed = ", ".join(_app_name(o) for o in offered) or "none"
        return (
            f"the scripted reply to request #{request.index} calls {name!r}, a tool the request "
            f"does not offer (offered: {listed}); fix the name in the script, or script "
            f"tool_use({name!r}, ..., offered=False) for a call of an unknown tool on purpose"
        )
    return None


def _app_name(name: str) -> str:
    """A tool's name as the application wrote it: `add` for the bridge's `mcp__sf__add`."""
    if name.startswith("mcp__"):
        return name.split("__", 2)[-1]
    return name


def _resolve_tool_name(name: str, offered: list[str]) -> str:
    """Map an application tool name to the bridge name the model was offered (`mcp__x__name`)."""
    if name in offered:
        return name
    matches = [o for o in offered if o.startswith("mcp__") and o.endswith(f"__{name}")]
    return matches[0] if len(matches) == 1 else name


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        raw = b"".join(chunks)
    else:
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, path, headers, raw


_REASONS = {200: "OK", 404: "Not Found", 410: "Gone", 500: "Internal Server Error"}


def _json_head(status: int, length: int, extra: Mapping[str, str] | None = None) -> bytes:
    head = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "content-type: application/json",
        f"content-length: {length}",
        "request-id: req_scripted",
        *(f"{k}: {v}" for k, v in (extra or {}).items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


async def _write_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    extra: Mapping[str, str] | None = None,
) -> None:
    data = json.dumps(body).encode()
    writer.write(_json_head(status, len(data), extra) + data)
    await writer.drain()


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"request-id: req_scripted\r\nconnection: close\r\n\r\n"
)

#: The text a `drop_mid_stream` fault starts to stream when it names no reply.
_PARTIAL_TEXT = "This answer is cut off before it ends."


def _sse_events(message: dict[str, Any], chunk_size: int) -> list[bytes]:
    """The SSE events streaming `message`, one encoded event each, in order."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], chunk_size)]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": c}
                for c in _chunks(block["thinking"], chunk_size)
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            encoded = json.dumps(block.get("input", {}), ensure_ascii=False)
            deltas = [
                {"type": "input_json_delta", "partial_json": c}
                for c in _chunks(encoded, max(chunk_size, 16))
            ]
        else:
            opening, deltas = block, []
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        events.extend(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in deltas
        )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                },
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


async def _write_sse(
    writer: asyncio.StreamWriter, message: dict[str, Any], chunk_size: int
) -> None:
    writer.write(_SSE_HEAD)
    for event in _sse_events(message, chunk_size):
        writer.write(event)
        await writer.drain()
