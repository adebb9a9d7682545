"""The "failed sends" filter of the message log and of the sessions: replies the customer never
got (Graph refused them for good, WhatsApp reported them failed, or they were still unsent when
the 24-hour window closed — conversations.sweeps), and replies still being retried."""

from typing import Any

from django.contrib import admin
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from conversations.models import UNSENT_OUTBOUND, DeliveryStatus, Direction, Message

FAILED = "failed"
RETRYING = "retrying"

FAILED_SENDS = Q(direction=Direction.OUTBOUND, delivery_status=DeliveryStatus.FAILED)
# Tried at least once, not sent yet: Graph is failing and the retries (or the sweep) go on.
RETRYING_SENDS = UNSENT_OUTBOUND & Q(send_attempts__gt=0)
_CONDITIONS = {FAILED: FAILED_SENDS, RETRYING: RETRYING_SENDS}


class FailedSendsFilter(admin.SimpleListFilter):
    title = _("failed sends")
    parameter_name = "failed_sends"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [(FAILED, _("failed")), (RETRYING, _("being retried"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        condition = _CONDITIONS.get(self.value() or "")
        if condition is None:
            return queryset
        return self.filter(queryset, condition)

    def filter(self, queryset: QuerySet[Any], condition: Q) -> QuerySet[Any]:
        return queryset.filter(condition)


class SessionFailedSendsFilter(FailedSendsFilter):
    """Sessions with at least one such reply."""

    def filter(self, queryset: QuerySet[Any], condition: Q) -> QuerySet[Any]:
        return queryset.filter(Exists(Message.objects.filter(condition, session_id=OuterRef("pk"))))
