"""The replay results' and prompt test cases' share of a customer's data: each result copies the
recorded call's message and the draft's answer to it, which may quote the customer; a test case
copies the call's context and history (unmasked when its author may read personal data).
Registered with `conversations.privacy.data_holders` when the app is ready, so anonymising a
session masks them and a customer's export lists them."""

from typing import Any

from django.db.models import Q, QuerySet

from agents.masking import Masker
from governance.models import PromptTestCase, ReplayResult

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


_CASE_FIELDS = ("context_snapshot", "history_entries", "recorded_text", "masked")


def _cases(session_id: int) -> QuerySet[PromptTestCase]:
    return PromptTestCase.objects.filter(
        Q(session_id_recorded=session_id) | Q(llm_call__session_id=session_id)
    )


def _case_masked(row: Any, masker: Masker) -> None:
    row.context_snapshot = masker.value(row.context_snapshot)
    row.history_entries = masker.value(row.history_entries)
    row.recorded_text = masker.text(row.recorded_text)
    row.masked = True


class PromptTestCasesHolder:
    section = "prompt_test_cases"

    def mask(self, *, session_id: int, masker: Masker) -> None:
        """The cases and every version of them: an erased customer must not survive in a
        case's history. Written in place, no new version (the editor changed nothing)."""
        cases = list(_cases(session_id).only("id", *_CASE_FIELDS))
        for case in cases:
            _case_masked(case, masker)
        PromptTestCase.objects.bulk_update(cases, _CASE_FIELDS)
        versions = list(PromptTestCase.history.filter(id__in=[case.pk for case in cases]))
        for version in versions:
            _case_masked(version, masker)
        PromptTestCase.history.model.objects.bulk_update(versions, _CASE_FIELDS)

    def export(self, *, session_id: int) -> list[dict[str, Any]]:
        return [
            {
                "case": case.pk,
                "title": case.title,
                "recorded_call": case.llm_call_id,
                "created_at": case.created_at.isoformat(),
                "recorded_text": case.recorded_text,
                "context_snapshot": case.context_snapshot,
                "history_entries": case.history_entries,
            }
            for case in _cases(session_id).order_by("id")
        ]
