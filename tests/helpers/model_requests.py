"""Reading the requests the fake model received."""

from typing import Any


def history_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's input items without the context item an agent call sends last (a
    ``developer`` message, docs/decisions/0053): the conversation as the model reads it."""
    items: list[dict[str, Any]] = list(request["input"])
    if items and items[-1].get("role") == "developer":
        items.pop()
    return items
