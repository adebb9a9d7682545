"""The model provider's circuit breaker, read-only: staff see whether turns are handing off at
once because the provider keeps failing (agents/circuit.py); only the workers change it."""

from django.contrib import admin

from conversations.admin.logs import ReadOnlyAdmin
from conversations.models import ProviderCircuit


@admin.register(ProviderCircuit)
class ProviderCircuitAdmin(ReadOnlyAdmin[ProviderCircuit]):
    list_display = (
        "name",
        "state",
        "failures",
        "first_failure_at",
        "opened_at",
        "probe_started_at",
        "updated_at",
    )
    readonly_fields = list_display
