"""Reading the requests the fake model received."""

from typing import Any


def history_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's input items without the ``developer`` items an agent call sends around the
    history (the loaded packages before it, the context item after it: docs/decisions/0053)."""
    return [item for item in request["input"] if item.get("role") != "developer"]
