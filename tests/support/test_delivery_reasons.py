"""A failed delivery in the thread: Meta's error code read in pt-BR, Meta's own (English) title
for a code without a reason, masked like every text for staff without the permission."""

import pytest
from django.contrib.auth.models import User
from django.utils import translation

from conversations.labels import DELIVERY_ERROR_REASONS, delivery_error_text
from conversations.models import DeliveryStatus, Direction, Message
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, logged_in, staff_member

PHONE = "5511912345678"


@pytest.mark.parametrize(
    ("code", "title", "text"),
    [
        (
            131026,
            "Message undeliverable",
            "erro 131026: o WhatsApp não conseguiu entregar: o número pode não ter WhatsApp, ou"
            " ter uma versão antiga",
        ),
        (
            130429,
            "Rate limit hit",
            "erro 130429: o número do WhatsApp atingiu o limite de envios; tente mais tarde",
        ),
        (135000, "Generic user error", "erro 135000 Generic user error"),
        (None, "Something odd", "erro Something odd"),
    ],
)
def test_a_failure_reads_in_portuguese_when_its_code_is_known(
    code: int | None, title: str, text: str
) -> None:
    assert delivery_error_text(code, title) == text


def test_every_reason_is_translated() -> None:
    with translation.override("en"):
        english = {code: str(reason) for code, reason in DELIVERY_ERROR_REASONS.items()}

    assert [
        code for code, reason in DELIVERY_ERROR_REASONS.items() if str(reason) == english[code]
    ] == []


@pytest.mark.django_db
def test_an_unknown_code_s_title_is_masked_for_a_prompt_editor() -> None:
    session = recipes.session.make(customer_name="Maria Souza", customer_phone=PHONE)
    failed = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá!",
        wa_message_id="wamid.F1",
        delivery_status=DeliveryStatus.FAILED,
        delivery_error_code=135000,
        delivery_error_title=f"Recipient {PHONE} refused",
    )
    editor = staff_member(PROMPT_EDITORS)
    root = User.objects.create_superuser("root", "root@example.com", "x")

    masked = logged_in(editor).get(f"/admin/conversations/session/{session.pk}/live/?after=0")
    plain = logged_in(root).get(f"/admin/conversations/session/{session.pk}/live/?after=0")

    [seen_masked] = masked.json()["messages"]
    [seen_plain] = plain.json()["messages"]
    assert (seen_masked["id"], seen_masked["delivery"]) == (
        failed.pk,
        "falhou · erro 135000 Recipient ************* refused",
    )
    assert seen_plain["delivery"] == f"falhou · erro 135000 Recipient {PHONE} refused"
