"""The conversations' side of the prompt preview (`prompts_admin.preview`): who may pick a real
session, how one is read and masked, the recent sessions to pick from, and the production invoker.

`ConversationsConfig.ready` registers `DatabasePreviewSessionSource` with the preview: this app
imports prompts_admin, so the preview receives its session reading from here instead of
importing conversations (the apps form layers, docs/architecture.md, Layers).
"""

from typing import Any

from agents.context import InstanceInfo
from agents.invoker import AgentInvoker
from agents.masking import mask_as
from conversations.agent_sources import build_agent_invoker
from conversations.models import Instance, Session
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from conversations.turns.selectors import session_context
from prompts_admin.preview import PreviewSession


class DatabasePreviewSessionSource:
    def may_pick_session(self, user: Any) -> bool:
        return bool(user.has_perm("conversations.view_session"))

    def may_view_personal_data(self, user: Any) -> bool:
        return can_view_personal_data(user)

    def sample_instance(self) -> InstanceInfo | None:
        instance = Instance.objects.filter(is_active=True).order_by("pk").first()
        if instance is None:
            return None
        return InstanceInfo(
            name=instance.name,
            display_phone=instance.display_phone,
            brand_context=instance.brand_context,
            health_sensitive=instance.health_sensitive,
        )

    def session(self, session_id: int, *, mask_personal_data: bool) -> PreviewSession | None:
        session = Session.objects.select_related("instance").filter(pk=session_id).first()
        if session is None:
            return None
        return PreviewSession(
            context=session_context(session),
            masker=session_masker(session) if mask_personal_data else None,
        )

    def recent_sessions(self, limit: int, *, mask_personal_data: bool) -> list[tuple[int, str]]:
        rows = Session.objects.select_related("instance").order_by("-last_message_at", "-id")
        labels = []
        for s in rows[:limit]:
            name, phone = s.customer_name, s.customer_phone
            if mask_personal_data:
                name, phone = mask_as("name", name), mask_as("number", phone)
            labels.append((s.pk, f"#{s.pk} {name or phone} — {s.get_state_display()}"))
        return labels

    def invoker(self) -> AgentInvoker:
        return build_agent_invoker()
