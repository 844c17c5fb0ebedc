"""contracts/schemas/ holds the JSON Schemas of the public models, generated from them."""

from __future__ import annotations

import json
from pathlib import Path

from sf_provider.cli import main, public_schemas

SCHEMAS = Path(__file__).parents[2] / "contracts" / "schemas"


def test_checked_in_schemas_match_the_models() -> None:
    for name, schema in public_schemas().items():
        path = SCHEMAS / f"{name}.schema.json"
        assert path.is_file(), f"{path} missing: run `make schemas`"
        assert json.loads(path.read_text("utf-8")) == schema, f"{path} drifted: run `make schemas`"


def test_schemas_check_command_fails_on_a_stale_file(tmp_path: Path) -> None:
    assert main(["schemas", "--write", str(tmp_path)]) == 0
    assert main(["schemas", "--check", str(tmp_path)]) == 0
    stale = tmp_path / "Usage.schema.json"
    stale.write_text(stale.read_text("utf-8").replace("input_tokens", "input_tokenz"), "utf-8")
    assert main(["schemas", "--check", str(tmp_path)]) == 1
