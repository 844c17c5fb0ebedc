"""Tools as applications write them (`FunctionTool.from_function`), through the real CLI: what
the model is offered, what the function receives, and what a wrong call tells the model."""

from __future__ import annotations

import datetime
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


async def _run(tools: list[FunctionTool], *calls: dict[str, Any]) -> ScriptedMessagesAPI:
    """One query in which the model makes `calls` (each a tool_use block) in one turn."""
    async with ScriptedMessagesAPI([reply(*calls), reply(text("done"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("go", tools=tools)
    assert result.text == "done"
    return api


class _Database:
    """A dependency the application holds: not something the model could pass."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant


async def test_arguments_a_partial_binds_are_not_offered_to_the_model_nor_overridden() -> None:
    """`functools.partial(fn, user_id=...)` binds the argument for the app: the model is not
    offered it, and a call that passes it anyway is an invalid call, never run with its value."""
    seen: list[tuple[str, str]] = []

    def search_orders(user_id: str, query: str) -> str:
        """Search the user's orders."""
        seen.append((user_id, query))
        return f"orders of {user_id} matching {query}"

    tool = FunctionTool.from_function(functools.partial(search_orders, user_id="alice"))
    api = await _run(
        [tool],
        tool_use("search_orders", {"query": "shoes", "user_id": "mallory"}),
        tool_use("search_orders", {"query": "hats"}),
    )

    schema = api.requests[0].tools[0]["input_schema"]
    assert list(schema["properties"]) == ["query"]
    assert seen == [("alice", "hats")]
    overridden, ran = api.requests[1].results()
    assert overridden.is_error
    assert "Invalid arguments for tool 'search_orders'" in overridden.text
    assert "'user_id' was unexpected" in overridden.text
    assert (ran.text, ran.is_error) == ("orders of alice matching hats", False)


async def test_a_dependency_bound_with_partial_need_not_be_describable_as_json() -> None:
    def count_rows(db: _Database, table: str) -> str:
        """Count the rows of a table."""
        return f"{db.tenant}.{table}: 3 rows"

    tool = FunctionTool.from_function(functools.partial(count_rows, db=_Database("acme")))
    api = await _run([tool], tool_use("count_rows", {"table": "users"}))

    assert list(api.requests[0].tools[0]["input_schema"]["properties"]) == ["table"]
    [sent] = api.requests[1].results()
    assert (sent.text, sent.is_error) == ("acme.users: 3 rows", False)


async def test_arguments_the_functions_types_reject_are_an_invalid_call_naming_the_argument() -> (
    None
):
    """The schema cannot say everything the function's types check (a date-time's format, a
    validator): what they reject is told to the model as invalid arguments, by path, like a
    schema violation, not as the tool failing with pydantic's internals."""
    ran: list[datetime.datetime] = []

    def schedule(when: datetime.datetime, title: str) -> str:
        """Schedule a meeting."""
        ran.append(when)
        return "scheduled"

    tool = FunctionTool.from_function(schedule)
    api = await _run(
        [tool],
        tool_use("schedule", {"when": "next tuesday", "title": "sync"}),
        tool_use("schedule", {"when": "2026-12-01T10:00:00Z", "title": "sync"}),
    )

    invalid, valid = api.requests[1].results()
    assert invalid.is_error
    assert invalid.text.startswith("Invalid arguments for tool 'schedule': $.when: Input should be")
    assert "schedule_arguments" not in invalid.text
    assert "errors.pydantic.dev" not in invalid.text
    assert (valid.text, valid.is_error) == ("scheduled", False)
    assert ran == [datetime.datetime(2026, 12, 1, 10, tzinfo=datetime.UTC)]


async def test_an_executor_returning_an_async_generator_is_an_error_result_not_its_repr() -> None:
    async def rows() -> AsyncIterator[str]:
        yield "row"

    tool = FunctionTool(name="rows", description="Rows.", executor=lambda _: rows())
    api = await _run([tool], tool_use("rows"))

    [sent] = api.requests[1].results()
    assert sent.is_error
    assert "async generator" in sent.text
    assert "<async_generator object" not in sent.text


async def test_a_description_longer_than_the_clis_default_limit_reaches_the_model_whole() -> None:
    def lookup_order(order_id: str) -> str:
        return f"order {order_id}: shipped"

    # A docstring documenting many fields and cases, as real ones do: over 10,000 characters.
    lookup_order.__doc__ = "Look up an order." + " A documented case of the lookup." * 315
    written = FunctionTool(name="written", description="é" * 5000, executor=lambda _: "ok")
    tools = [FunctionTool.from_function(lookup_order), written]
    api = await _run(tools, tool_use("lookup_order", {"order_id": "7"}))

    offered = {t["name"]: t["description"] for t in api.requests[0].tools}
    assert offered["mcp__sf__lookup_order"] == tools[0].description
    assert offered["mcp__sf__written"] == "é" * 5000
    assert [r.text for r in api.requests[1].results()] == ["order 7: shipped"]


async def test_every_paragraph_of_a_docstring_reaches_the_model_in_executor_mode() -> None:
    def forecast(city: str, days: int = 3) -> str:
        """Weather forecast for a city.

        Args:
            city: The city's English name, e.g. "Munich", never a country.
            days: How many days ahead, 1 to 7.
        """
        return f"{city}: sunny for {days} days"

    tool = FunctionTool.from_function(forecast)
    api = await _run([tool], tool_use("forecast", {"city": "Munich"}))

    assert api.requests[0].tools[0]["description"] == tool.description
    assert "never a country" in tool.description
    assert [r.text for r in api.requests[1].results()] == ["Munich: sunny for 3 days"]
