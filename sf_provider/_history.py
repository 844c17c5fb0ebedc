"""Prior turns handed to the CLI natively: a session transcript it resumes from.

The CLI replays a resumed session to the API as native content blocks. The transcript holds the
history up to the last assistant turn; the turn to answer (user text, or the tool results the
application produced) is sent as the prompt, and `resume_session_at` pins the resume point to the
transcript's last entry, so the CLI neither repairs the pending tool calls nor inserts a reply of
its own. The request log then shows the app's `tool_use` / `tool_result` blocks with their ids.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from claude_agent_sdk import project_key_for_directory

from ._bridge import bridge_tool_name

__all__ = ["write_transcript"]


def _api_blocks(blocks: list[dict[str, Any]], bridge: str) -> list[dict[str, Any]]:
    named = []
    for block in blocks:
        if block.get("type") == "tool_use":
            block = {**block, "name": bridge_tool_name(bridge, str(block["name"]))}
        named.append(block)
    return named


def write_transcript(
    config_dir: Path, cwd: str, history: list[dict[str, Any]], *, bridge: str
) -> tuple[str, str]:
    """Write `history` as a session of the CLI; return (session id, uuid of the last entry)."""
    session_id = str(uuid.uuid4())
    project = config_dir / "projects" / project_key_for_directory(cwd)
    project.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    parent: str | None = None
    lines = []
    for index, turn in enumerate(history):
        entry_id = str(uuid.uuid4())
        message: dict[str, Any] = {
            "role": turn["role"],
            "content": _api_blocks(turn["content"], bridge),
        }
        if turn["role"] == "assistant":
            message |= {
                "id": f"msg_history_{index}",
                "type": "message",
                "model": "history",
                "stop_reason": "tool_use"
                if any(b.get("type") == "tool_use" for b in turn["content"])
                else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        lines.append(
            json.dumps(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": turn["role"],
                    "message": message,
                    "uuid": entry_id,
                    "timestamp": now,
                    "userType": "external",
                    "cwd": cwd,
                    "sessionId": session_id,
                },
                ensure_ascii=False,
            )
        )
        parent = entry_id
    (project / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert parent is not None
    return session_id, parent
