"""Personal data of a conversation kept by the apps above this one (the replay results of the
governance app, the internal notes of the support app): they register a `SessionDataHolder`
when ready, and anonymising a session (`conversations.privacy.retention.session_anonymise`) and
a customer's export (`conversations.privacy.customer_data.customer_data_export`) reach their
rows through it without importing them.
"""

from typing import Any, Protocol

from agents.masking import Masker


class SessionDataHolder(Protocol):
    """One app's rows about a session: masked with the session, listed in its export."""

    # The key of the rows in the session's export ("replay_results").
    section: str

    def mask(self, *, session_id: int, masker: Masker) -> None:
        """Mask the session's personal data in these rows (inside the caller's transaction)."""
        ...

    def export(self, *, session_id: int) -> list[dict[str, Any]]:
        """The rows about the session, JSON-ready."""
        ...


_holders: dict[str, SessionDataHolder] = {}


def session_data_holder_register(holder: SessionDataHolder) -> None:
    """Called once by each app that keeps personal data of conversations, when it is ready."""
    _holders[holder.section] = holder


def session_data_holders() -> list[SessionDataHolder]:
    return list(_holders.values())
