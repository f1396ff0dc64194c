"""Helpers shared by the group handler modules."""

from __future__ import annotations

from typing import Any

from tidelog.broker import responses

NO_AUTHORIZED_OPERATIONS = -(2**31)  # "not requested", as Kafka answers


def classes(api_key: int, version: int) -> Any:
    """The kio module of a response version (for its nested classes)."""
    return responses.response_module(api_key, version)


def response(api_key: int, version: int, **fields: Any) -> Any:
    return responses.build(responses.response_class(api_key, version), throttle_time=0, **fields)
