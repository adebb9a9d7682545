"""How staff read a colleague's name: one spelling for a person on every page, e-mail and event."""

from typing import Protocol


class NamedUser(Protocol):
    def get_full_name(self) -> str: ...

    def get_username(self) -> str: ...


def staff_name(user: NamedUser) -> str:
    """The colleague's full name ("Camila Demo"), or their username when they have none."""
    return user.get_full_name().strip() or user.get_username()
