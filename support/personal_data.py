"""The internal notes' share of a customer's data: staff write about the customer in them, and
may quote them. Registered with `conversations.privacy.data_holders` when the app is ready
(`support.apps`), so anonymising a session masks the notes' text as it masks its messages, and a
customer's export lists them under their own key, apart from the messages they never were."""

from typing import Any

from agents.masking import Masker
from support.models import InternalNote


class InternalNotesHolder:
    section = "internal_notes"

    def mask(self, *, session_id: int, masker: Masker) -> None:
        notes = list(InternalNote.objects.filter(session_id=session_id).only("id", "text"))
        for note in notes:
            note.text = masker.text(note.text)
        InternalNote.objects.bulk_update(notes, ["text"], batch_size=500)

    def export(self, *, session_id: int) -> list[dict[str, Any]]:
        # The text and its time: who on the team wrote it is the team's, not the customer's.
        return [
            {"id": note.pk, "text": note.text, "created_at": note.created_at.isoformat()}
            for note in InternalNote.objects.filter(session_id=session_id)
            .only("id", "text", "created_at")
            .order_by("created_at", "id")
        ]
