"""Which `Host` a keyless gateway serves (`allowed_host`), on plain strings: a loopback name or
address with any port, in any letter case, IPv6 in brackets or not; a name `--allow-host` lists;
never a name that only starts like a loopback address. Served end to end in
tests/contract/test_gateway_hostile.py."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from sf_provider.gateway._browsers import allowed_host, refusal


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("LocalHost:8080", True),
        ("127.0.0.1:8080", True),
        ("127.3.2.1", True),
        ("[::1]:8080", True),
        ("[::1]", True),
        ("::1", True),
        ("127.0.0.1.attacker.example", False),
        ("localhost.attacker.example:8080", False),
        ("[::ffff:8.8.8.8]:80", False),
        ("0.0.0.0:8080", False),
        ("gateway.internal:443", False),
        ("", False),
        (None, False),
    ],
)
def test_without_allowed_hosts_only_loopback_names_are_served(
    host: str | None, allowed: bool
) -> None:
    assert allowed_host(host, frozenset()) is allowed


def test_an_allowed_host_is_served_at_any_port_and_a_star_serves_every_host() -> None:
    assert allowed_host("gateway.internal:443", frozenset({"gateway.internal"}))
    assert not allowed_host("other.internal", frozenset({"gateway.internal"}))
    assert allowed_host("anything.example", frozenset({"*"}))
    assert allowed_host(None, frozenset({"*"}))


def test_a_request_without_a_host_header_is_refused_saying_what_to_connect_to() -> None:
    info = refusal(Headers({}), frozenset(), frozenset(), keyed=False)
    assert info is not None
    assert (info.status, info.code) == (403, "host_not_allowed")
    assert "not 'no Host header'" in info.message
    assert "Connect to 127.0.0.1, or start the gateway with --api-key" in info.message
    assert refusal(Headers({}), frozenset(), frozenset(), keyed=True) is None
