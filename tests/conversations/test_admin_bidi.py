"""Bidi controls in stored names and texts are shown on every admin page as ``[U+202E]``, never
applied (config.middleware.BidiControlsVisibleMiddleware): an override cannot make a page show a
name or a text other than the stored one."""

import pytest
from django.test import Client
from django.utils import timezone
from model_bakery import baker

from config.middleware import bidi_controls_visible
from conversations.models import Direction, Lead, Message, Session

pytestmark = pytest.mark.django_db

# "Maria", a right-to-left override, "oãsiV": displayed it reads "Maria Visão".
SPOOFED_NAME = "Maria\u202eoãsiV"
SPOOFED_TEXT = "Pagamento \u2067aprovado\u2069 pelo \u202alab\u202c"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u202ab", "a[U+202A]b"),
        ("a\u202bb\u202cc\u202dd\u202ee", "a[U+202B]b[U+202C]c[U+202D]d[U+202E]e"),
        ("a\u2066b\u2067c\u2068d\u2069e", "a[U+2066]b[U+2067]c[U+2068]d[U+2069]e"),
        # Just outside both ranges: a paragraph separator, a narrow no-break space, an
        # invisible plus and the deprecated inhibit-symmetric-swapping; and the marks
        # (LRM, RLM), which embed nothing.
        ("a\u2029b\u202fc\u2064d\u206ae", "a\u2029b\u202fc\u2064d\u206ae"),
        ("a\u200eb\u200fc", "a\u200eb\u200fc"),
        ("Visão", "Visão"),
    ],
    ids=["LRE", "RLE PDF LRO RLO", "isolates", "neighbours", "marks", "plain"],
)
def test_each_bidi_control_and_only_those_is_made_visible(text: str, shown: str) -> None:
    assert bidi_controls_visible(text.encode()).decode() == shown


@pytest.fixture
def spoofed() -> Session:
    session = baker.make(
        Session,
        customer_name=SPOOFED_NAME,
        customer_phone="5511912345678",
        state="HUMAN",  # waiting in the queue
        handed_off_at=timezone.now(),
        is_simulated=False,
    )
    baker.make(Message, session=session, direction=Direction.INBOUND, content=SPOOFED_TEXT)
    baker.make(Lead, session=session, data={"cadastro": {"nome": SPOOFED_NAME}})
    return session


NAME = "Maria[U+202E]oãsiV"
TEXT = "Pagamento [U+2067]aprovado[U+2069] pelo [U+202A]lab[U+202C]"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("/admin/conversations/session/", NAME),
        ("/admin/conversations/session/{pk}/change/", NAME),
        ("/admin/conversations/session/queue/", NAME),
        ("/admin/conversations/message/", TEXT),
        ("/admin/conversations/lead/", NAME),
    ],
)
def test_a_spoofed_name_or_text_shows_its_controls_on_the_admin_pages(
    admin_client: Client, spoofed: Session, url: str, shown: str
) -> None:
    response = admin_client.get(url.format(pk=spoofed.pk))
    page = response.content.decode()

    assert response.status_code == 200
    assert shown in page
    assert [c for c in "\u202a\u202c\u202e\u2067\u2069" if c in page] == []
    if response.has_header("Content-Length"):
        assert int(response["Content-Length"]) == len(response.content)


def test_the_conversation_page_shows_the_name_and_the_message_visibly(
    admin_client: Client, spoofed: Session
) -> None:
    page = admin_client.get(f"/admin/conversations/session/{spoofed.pk}/change/").content.decode()

    # The title names the conversation by its id; the customer panel shows the name.
    assert f"<title>Conversa #{spoofed.pk} |" in page
    assert NAME in page
    assert SPOOFED_NAME not in page
    assert TEXT in page


def test_a_download_is_not_rewritten(admin_client: Client, spoofed: Session) -> None:
    lead = Lead.objects.get()

    response = admin_client.post(
        "/admin/conversations/lead/",
        {"action": "export_csv", "_selected_action": [str(lead.pk)], "index": "0"},
    )

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert SPOOFED_NAME in response.content.decode("utf-8-sig")
