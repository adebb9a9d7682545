"""The replay results' share of a customer's data: each result copies the recorded call's
message and the draft's answer to it, which may quote the customer. Registered with
`conversations.privacy.data_holders` when the app is ready, so anonymising a session masks them and
a customer's export lists them."""

from typing import Any

from django.db.models import Q, QuerySet

from agents.masking import Masker
from governance.models import ReplayResult

_TEXT_FIELDS = ("recorded_text", "replayed_text", "replayed_raw", "error")


def _results(session_id: int) -> QuerySet[ReplayResult]:
    return ReplayResult.objects.filter(
        Q(session_id=session_id) | Q(llm_call__session_id=session_id)
    )


class ReplayResultsHolder:
    section = "replay_results"

    def mask(self, *, session_id: int, masker: Masker) -> None:
        results = list(_results(session_id).only("id", *_TEXT_FIELDS))
        for result in results:
            for name in _TEXT_FIELDS:
                setattr(result, name, masker.text(getattr(result, name)))
        ReplayResult.objects.bulk_update(results, _TEXT_FIELDS)

    def export(self, *, session_id: int) -> list[dict[str, Any]]:
        return [
            {
                "run": result.run_id,
                "recorded_call": result.llm_call_id,
                "created_at": result.created_at.isoformat(),
                **{name: getattr(result, name) for name in _TEXT_FIELDS},
            }
            for result in _results(session_id).order_by("id")
        ]
