"""JSON Schema regular expressions in linear time (docs/adr/0010-linear-time-patterns.md).

jsonschema matches `pattern` and `patternProperties` with Python's backtracking `re`, where
`^(a+)+$` against 29 "a"s and a "!" holds the GIL (so every thread, the event loop too) for
tens of seconds. Here they are matched with RE2 (`google-re2`), whose time is linear in the
text: `validator_class` gives a validator class whose keywords that match a pattern use it.
A pattern RE2 cannot compile (a lookaround, a backreference) is refused when the tool is
defined (`pattern_problem`), never matched with another engine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

__all__ = ["pattern_problem", "validator_class"]

#: RE2's program size limit (bytes): a pattern that compiles larger is refused, not matched.
_MAX_MEM = 8 << 20


@functools.cache
def _options() -> Any:
    import re2  # on first use: `import sf_provider` loads no more than the SDK does

    options = re2.Options()
    options.log_errors = False  # RE2 would write each refused pattern to stderr
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    import re2

    return re2.compile(pattern, _options())


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 cannot match `pattern` (its own words), or None when it can."""
    import re2

    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return None


def _search(pattern: str, text: str) -> bool:
    return _compiled(pattern).search(text) is not None


# The keywords below are jsonschema's own (4.23+), with `re.search` replaced by RE2 and the
# same messages. `unevaluatedProperties` also matches `patternProperties`, inside jsonschema;
# a schema combining the two is refused when the tool is defined (`tools.py`).


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    }
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            names = sorted(extras, key=str)
            verb = "was" if len(names) == 1 else "were"
            joined = ", ".join(repr(each) for each in names)
            yield ValidationError(
                f"Additional properties are not allowed ({joined} {verb} unexpected)"
            )


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@functools.cache
def validator_class(base: type[Any]) -> type[Any]:
    """`base` (a jsonschema validator class) with its pattern keywords matched by RE2."""
    keywords = {k: v for k, v in _KEYWORDS.items() if k in base.VALIDATORS}
    extend: Any = jsonschema.validators.extend  # typed as Any by types-jsonschema's stubs
    extended: type[Any] = extend(base, validators=keywords)
    return extended
