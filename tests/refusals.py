"""The one check of a wire reader's refusal, shared by the readers' table-driven tests."""

from __future__ import annotations

from sf_provider._wire import UnsupportedParameterError
from sf_provider.errors import ProviderError
from sf_provider.gateway._errors import error_info


def assert_refusal(
    raised: ProviderError, error: type[ProviderError], named: str, advice: str
) -> None:
    """`raised` is exactly `error`, a 400 on the gateway, names `named` first (as its `param`,
    for an `UnsupportedParameterError`) and says what to do (`advice`)."""
    assert type(raised) is error
    if isinstance(raised, UnsupportedParameterError):
        assert raised.param == named
        assert str(raised).startswith(f"parameter {named!r}: ")
    else:
        assert str(raised).startswith(named)
    assert advice in str(raised)
    assert error_info(raised).status == 400
