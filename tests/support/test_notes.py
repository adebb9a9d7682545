"""Internal notes (`support.notes`, `support.admin.notes`): who may write one, what a bad one is
answered, where a note shows (the transcript, the live endpoint, masked as the page) and where it
never goes (WhatsApp, the model's history, the export's messages), erasure, and the mentions'
e-mail and pending count."""

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks, Settings

from agents.sources import HistoryEntry
from conversations.agent_sources import DatabaseHistorySource
from conversations.models import Direction, Message, Session
from conversations.privacy.customer_data import (
    CustomerSelector,
    customer_data_erase,
    customer_data_export,
)
from conversations.turns.tasks import process_session
from support.admin.transcript import (
    MAX_TRANSCRIPT_MESSAGES,
    NoteEntry,
    note_entry,
    with_notes,
)
from support.live import MAX_LIVE_NOTES
from support.models import InternalNote, NoteMention
from support.notes import (
    MAX_NOTE_CHARS,
    mention_candidates,
    mentioned_users,
    note_mentions_pending,
    session_note_add,
)
from support.tasks import notify_note_mentions
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)  # 10:00 in São Paulo
PHONE = "5511912345678"
NOTE = "Maria Souza ligou: CPF 529.982.247-25, quer o *orçamento* hoje"
MASKED_NOTE = "M*** S*** ligou: CPF ***.***.***-**, quer o *orçamento* hoje"
JSON = {"Accept": "application/json"}
NOTE_LI = re.compile(r'<li class="([^"]+)"(?: id="note-\d+")? data-(message|note)-id="(\d+)"')


def note_url(session_id: int) -> str:
    return f"/admin/conversations/session/{session_id}/note/"


def change_url(session_id: int) -> str:
    return f"/admin/conversations/session/{session_id}/change/"


def live_url(session_id: int, query: str) -> str:
    return f"/admin/conversations/session/{session_id}/live/?{query}"


def body(response: HttpResponseBase) -> Any:
    assert response["Content-Type"] == "application/json"
    assert isinstance(response, HttpResponse)
    return json.loads(response.content)


def support(username: str, *, email: str = "", first_name: str = "") -> User:
    user = staff_member(SUPPORT)
    user.username, user.email, user.first_name = username, email, first_name
    user.save()
    return user


def conversation(state: str = "HUMAN") -> tuple[Session, Message, Message]:
    """Maria's conversation: her question at 10:00:00, Bruno's answer at 10:00:02."""
    bruno = support("bruno", email="bruno@lab.example", first_name="Bruno")
    session = recipes.session.make(
        customer_name="Maria Souza",
        customer_phone=PHONE,
        state=state,
        assigned_to=bruno,
        last_inbound_at=AT,
    )
    question = Message.objects.create(
        session=session, direction=Direction.INBOUND, content="Quero um orçamento", created_at=AT
    )
    answer = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Já vejo, Maria!",
        staff_user=bruno,
        created_at=AT + timedelta(seconds=2),
    )
    return session, question, answer


def note_at(session: Session, author: User | None, text: str, seconds: float) -> InternalNote:
    return InternalNote.objects.create(
        session=session, author=author, text=text, created_at=AT + timedelta(seconds=seconds)
    )


# --- Who may write one ------------------------------------------------------------------------


def test_anonymous_is_sent_to_the_login() -> None:
    session, _q, _a = conversation()

    response = Client().post(note_url(session.pk), {"text": "Oi"})

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert InternalNote.objects.count() == 0


@pytest.mark.parametrize("accept", [{}, JSON])
@pytest.mark.parametrize(
    "who",
    ["no permission", "view only", PROMPT_EDITORS],
)
def test_staff_who_do_not_attend_conversations_get_403(who: str, accept: dict[str, str]) -> None:
    session, _q, _a = conversation()
    user = {
        "no permission": lambda: staff_member(),
        "view only": lambda: staff_member(
            permissions=("conversations.view_session", "conversations.view_personal_data")
        ),
        PROMPT_EDITORS: lambda: staff_member(PROMPT_EDITORS),
    }[who]()

    response = logged_in(user).post(note_url(session.pk), {"text": "Oi"}, headers=accept)

    assert response.status_code == 403
    if accept:
        assert body(response) == {
            "error": "Você não pode escrever notas: você não atende conversas."
        }
    assert InternalNote.objects.count() == 0


def test_support_posts_a_form_and_is_sent_back_to_the_page_with_a_message() -> None:
    session, _q, _a = conversation()
    ana = support("ana")
    client = logged_in(ana)

    response = client.post(note_url(session.pk), {"text": f"  {NOTE}\n"})

    [note] = InternalNote.objects.all()
    assert response.status_code == 303
    assert response["Location"] == f"{change_url(session.pk)}#note-{note.pk}"
    assert (note.session_id, note.author, note.text) == (session.pk, ana, NOTE)
    page = client.get(response["Location"]).content.decode()
    assert "Nota salva; só a equipe a vê." in page


def test_a_superuser_posting_json_gets_the_note() -> None:
    session, _q, _a = conversation()
    root = User.objects.create_superuser("root", "root@example.com", "x")

    response = logged_in(root).post(note_url(session.pk), {"text": NOTE}, headers=JSON)

    [note] = InternalNote.objects.all()
    assert response.status_code == 200
    assert body(response) == {
        "ok": True,
        "message": "Nota salva; só a equipe a vê.",
        "note": {
            "id": note.pk,
            "author": "Nota interna · root",
            "text": NOTE,
            "html": "Maria Souza ligou: CPF 529.982.247-25, quer o <strong>orçamento</strong> hoje",
            "meta": timezone.localtime(note.created_at).strftime("%d/%m/%Y %H:%M"),
            "created_at": note.created_at.isoformat(),
        },
        "mentioned": [],
    }


def test_a_note_s_html_is_escaped() -> None:
    session, _q, _a = conversation()

    data = body(
        logged_in(support("ana")).post(
            note_url(session.pk), {"text": "<script>alert(1)</script> *ok*"}, headers=JSON
        )
    )
    page = logged_in(support("carla")).get(change_url(session.pk)).content.decode()

    assert data["note"]["html"] == "&lt;script&gt;alert(1)&lt;/script&gt; <strong>ok</strong>"
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; <strong>ok</strong>" in page


def test_staff_who_attend_without_personal_data_get_the_note_masked() -> None:
    session, _q, _a = conversation()
    user = staff_member(permissions=("conversations.view_session", "conversations.attend_session"))

    data = body(logged_in(user).post(note_url(session.pk), {"text": NOTE}, headers=JSON))

    assert (data["note"]["text"], InternalNote.objects.get().text) == (MASKED_NOTE, NOTE)


def test_a_get_is_refused() -> None:
    session, _q, _a = conversation()

    response = logged_in(support("ana")).get(note_url(session.pk))

    assert response.status_code == 405


def test_a_post_without_the_csrf_token_is_refused() -> None:
    session, _q, _a = conversation()
    client = Client(enforce_csrf_checks=True)
    client.force_login(support("ana"))

    response = client.post(note_url(session.pk), {"text": "Oi"})

    assert response.status_code == 403
    assert InternalNote.objects.count() == 0


# --- Bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "Escreva a nota antes de salvá-la."),
        (" \n\t ", "Escreva a nota antes de salvá-la."),
        (
            "x" * (MAX_NOTE_CHARS + 1),
            "A nota tem 4097 caracteres; uma nota comporta no máximo 4096.",
        ),
        (
            "Oi\x00",
            "O texto tem um caractere inválido (NUL). Apague-o e envie de novo.",
        ),
    ],
)
def test_a_bad_text_is_a_400_with_a_sentence(text: str, error: str) -> None:
    session, _q, _a = conversation()
    client = logged_in(support("ana"))

    as_json = client.post(note_url(session.pk), {"text": text}, headers=JSON)
    as_form = client.post(note_url(session.pk), {"text": text}, follow=True)

    assert (as_json.status_code, body(as_json)) == (400, {"error": error})
    assert as_form.redirect_chain == [(f"{change_url(session.pk)}#transcript", 303)]
    assert error in as_form.content.decode()
    assert InternalNote.objects.count() == 0


@pytest.mark.parametrize("length", [1, MAX_NOTE_CHARS - 1, MAX_NOTE_CHARS])
def test_a_note_of_up_to_4096_characters_is_saved(length: int) -> None:
    session, _q, _a = conversation()

    response = logged_in(support("ana")).post(
        note_url(session.pk), {"text": "x" * length}, headers=JSON
    )

    assert response.status_code == 200
    assert len(InternalNote.objects.get(session=session).text) == length


def test_an_unknown_conversation_is_a_404_or_the_list_with_a_message() -> None:
    client = logged_in(support("ana"))

    as_json = client.post(note_url(987654), {"text": "Oi"}, headers=JSON)
    as_form = client.post(note_url(987654), {"text": "Oi"}, follow=True)

    assert (as_json.status_code, body(as_json)) == (
        404,
        {"error": "A conversa #987654 não existe."},
    )
    assert as_form.redirect_chain == [("/admin/conversations/session/", 303)]
    assert "A conversa #987654 não existe." in as_form.content.decode()


def test_a_closed_conversation_takes_notes() -> None:
    session, _q, _a = conversation(state="CLOSED")

    response = logged_in(support("ana")).post(
        note_url(session.pk), {"text": "Cliente ligou depois do encerramento."}, headers=JSON
    )

    assert response.status_code == 200
    assert InternalNote.objects.get().text == "Cliente ligou depois do encerramento."


def test_an_erased_conversation_takes_no_notes() -> None:
    session, _q, _a = conversation()
    customer_data_erase(CustomerSelector(phone=PHONE), now=AT, operator="ops")

    response = logged_in(support("ana")).post(note_url(session.pk), {"text": NOTE}, headers=JSON)

    assert (response.status_code, body(response)) == (
        400,
        {"error": "Os dados pessoais desta conversa foram apagados: ela não aceita novas notas."},
    )
    assert InternalNote.objects.count() == 0


# --- Never sent to WhatsApp, never in the model's history --------------------------------------


def test_a_note_is_never_sent_to_whatsapp(
    fake_graph: FakeGraphAPI, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    session, _q, _a = conversation()
    messages_before = Message.objects.count()

    with django_capture_on_commit_callbacks(execute=True) as hooks:
        response = logged_in(support("ana")).post(
            note_url(session.pk), {"text": NOTE}, headers=JSON
        )

    assert response.status_code == 200
    assert fake_graph.requests == []
    assert hooks == []  # no send, nothing else after the commit
    assert Message.objects.count() == messages_before


def test_the_model_s_history_of_a_conversation_with_a_note_is_its_messages() -> None:
    session, question, answer = conversation()
    note_at(session, None, NOTE, 1)
    note_at(session, None, "Segunda nota", 3)

    assert DatabaseHistorySource().history(session.pk, 50) == [
        HistoryEntry(session.pk, "INBOUND", "Quero um orçamento", "", question.pk),
        HistoryEntry(session.pk, "OUTBOUND", "Já vejo, Maria!", "", answer.pk, staff=True),
    ]


def test_a_turn_after_a_note_neither_reads_nor_sends_it(
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = recipes.session.make(customer_phone=PHONE, state="TRIAGE")
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Oi, quero um orçamento",
        wa_message_id="wamid.IN1",
        wa_timestamp=datetime.now(UTC),
    )
    assert logged_in(support("ana")).post(note_url(session.pk), {"text": NOTE}).status_code == 303
    openai_settings.queue_text('{"s":1}Olá! Qual análise você procura?')

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk)

    [request] = openai_settings.requests
    assert "Oi, quero um orçamento" in json.dumps(request, ensure_ascii=False)
    assert "ligou" not in json.dumps(request, ensure_ascii=False)
    assert [r.json["text"]["body"] for r in fake_graph.sends] == ["Olá! Qual análise você procura?"]


# --- In the transcript ------------------------------------------------------------------------


def test_the_page_shows_the_notes_among_the_messages_by_time() -> None:
    session, question, answer = conversation()
    ana = support("ana")
    first = note_at(session, ana, NOTE, 1)
    last = note_at(session, None, "Combinado por telefone", 5)

    page = logged_in(ana).get(change_url(session.pk)).content.decode()

    assert [(css, kind, int(pk)) for css, kind, pk in NOTE_LI.findall(page)] == [
        ("bubble customer", "message", question.pk),
        ("bubble note", "note", first.pk),
        ("bubble staff", "message", answer.pk),
        ("bubble note", "note", last.pk),
    ]
    bubble = page.split(f'data-note-id="{first.pk}">', 1)[1].split("</li>", 1)[0]
    assert '<div class="who">Nota interna · ana</div>' in bubble
    assert "quer o <strong>orçamento</strong> hoje" in bubble
    assert '<div class="meta">20/11/2026 10:00</div>' in bubble
    assert '<div class="who">Nota interna</div>' in page  # the author's account is gone
    assert "support/admin/notes.css" in page


def test_a_prompt_editor_reads_the_notes_masked_and_gets_no_note_url() -> None:
    session, _q, _a = conversation()
    note_at(session, None, NOTE, 1)

    response = logged_in(staff_member(PROMPT_EDITORS)).get(change_url(session.pk))

    page = response.content.decode()
    assert MASKED_NOTE.replace("*orçamento*", "<strong>orçamento</strong>") in page
    assert "529.982" not in page
    assert "note_url" not in response.context


def test_support_gets_the_note_url() -> None:
    session, _q, _a = conversation()

    response = logged_in(support("ana")).get(change_url(session.pk))

    assert response.context["note_url"] == note_url(session.pk)


def entry(created_at: datetime) -> Any:
    """What `with_notes` reads of a message's entry."""

    class Entry:
        message = Message(created_at=created_at)

    return Entry()


def test_with_notes_keeps_the_messages_order_and_places_each_note_by_time() -> None:
    session = recipes.session.make()
    early, late = note_at(session, None, "a", -10), note_at(session, None, "b", 10)
    notes: list[NoteEntry] = [note_entry(n, masker=None) for n in (early, late)]
    # Conversation order, not time order: the second message was stamped first.
    m1, m2, m3 = entry(AT), entry(AT - timedelta(seconds=20)), entry(AT + timedelta(seconds=5))

    merged = with_notes([m1, m2, m3], notes)

    assert merged == [notes[0], m1, m2, m3, notes[1]]
    assert with_notes([], notes) == notes
    assert with_notes([m1], []) == [m1]


def test_the_omitted_messages_line_counts_the_messages_not_the_notes() -> None:
    session = recipes.session.make()
    Message.objects.bulk_create(
        Message(session=session, direction=Direction.INBOUND, content=f"m{i}", created_at=AT)
        for i in range(MAX_TRANSCRIPT_MESSAGES + 1)
    )
    for i in range(3):
        note_at(session, None, f"nota {i}", i)

    page = logged_in(support("ana")).get(change_url(session.pk)).content.decode()

    assert f"Exibindo as {MAX_TRANSCRIPT_MESSAGES} mensagens mais recentes" in page
    assert page.count('class="bubble note"') == 3


@pytest.mark.parametrize("n_notes", [2, 40])
def test_the_page_s_query_count_does_not_grow_with_the_notes(
    n_notes: int, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session, _q, _a = conversation()
    ana = support("ana")
    for i in range(n_notes):
        note_at(session, ana if i % 2 else None, f"nota {i}", i)
    client = logged_in(ana)
    client.get(change_url(session.pk))  # warm the per-process caches (content types)

    # As tests/support/test_admin_transcript.py's TRANSCRIPT_QUERIES for Support, with the
    # permission checks of a group member, the closed window's templates (the picker), the
    # labels box and the handoff events of the history panel.
    with django_assert_num_queries(17):
        response = client.get(change_url(session.pk))

    assert response.content.decode().count('class="bubble note"') == n_notes


# --- In the live endpoint ---------------------------------------------------------------------


def test_the_live_endpoint_answers_the_notes_after_the_one_shown() -> None:
    session, _q, answer = conversation()
    ana = support("ana")
    shown = note_at(session, ana, "primeira", 3)
    new = note_at(session, ana, NOTE, 4)
    client = logged_in(ana)

    data = body(client.get(live_url(session.pk, f"after={answer.pk}&after_note={shown.pk}")))
    without = body(client.get(live_url(session.pk, f"after={answer.pk}")))

    assert (data["notes"], data["notes_more"]) == (
        [
            {
                "id": new.pk,
                "author": "Nota interna · ana",
                "text": NOTE,
                "html": "Maria Souza ligou: CPF 529.982.247-25, quer o <strong>orçamento</strong>"
                " hoje",
                "meta": "20/11/2026 10:00",
                "created_at": "2026-11-20T13:00:04+00:00",
            }
        ],
        False,
    )
    assert data["messages"] == []
    assert (without["notes"], without["notes_more"]) == ([], False)


def test_a_prompt_editor_polls_the_notes_masked() -> None:
    session, _q, _a = conversation()
    note_at(session, None, NOTE, 1)

    data = body(
        logged_in(staff_member(PROMPT_EDITORS)).get(live_url(session.pk, "after=0&after_note=0"))
    )

    assert [(n["author"], n["text"]) for n in data["notes"]] == [("Nota interna", MASKED_NOTE)]


@pytest.mark.parametrize("after_note", ["abc", "-1", "", "1.5", "99999999999999999999"])
def test_an_after_note_that_is_not_a_note_id_is_a_400(after_note: str) -> None:
    session, _q, _a = conversation()

    response = logged_in(support("ana")).get(
        live_url(session.pk, f"after=0&after_note={after_note}")
    )

    assert (response.status_code, body(response)) == (
        400,
        {"error": "after_note: o id da última nota mostrada, um número inteiro (0 para nenhuma)."},
    )


def test_a_long_gap_of_notes_is_answered_in_pages() -> None:
    session = recipes.session.make()
    InternalNote.objects.bulk_create(
        InternalNote(session=session, text=f"n{i}") for i in range(MAX_LIVE_NOTES + 2)
    )
    client = logged_in(support("ana"))

    first = body(client.get(live_url(session.pk, "after=0&after_note=0")))
    rest = body(client.get(live_url(session.pk, f"after=0&after_note={first['notes'][-1]['id']}")))

    assert (len(first["notes"]), first["notes_more"], first["notes"][0]["text"]) == (
        MAX_LIVE_NOTES,
        True,
        "n0",
    )
    assert ([n["text"] for n in rest["notes"]], rest["notes_more"]) == (["n50", "n51"], False)


@pytest.mark.parametrize("n_notes", [2, 40])
@pytest.mark.parametrize(
    ("group", "queries"),
    # The 9 (7) of a poll without notes (tests/support/test_live.py), the new notes with their
    # authors, and the reader's mentions seen (one UPDATE, only when notes came).
    [(SUPPORT, 11), (PROMPT_EDITORS, 11), ("superuser", 9)],
)
def test_the_live_query_count_does_not_grow_with_the_notes(
    n_notes: int, group: str, queries: int, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session, _q, answer = conversation()
    author = support("ana")
    for i in range(n_notes):
        note_at(session, author, f"nota {i}", i)
    if group == "superuser":
        user = User.objects.create_superuser("root", "root@example.com", "x")
    else:
        user = staff_member(group)
    client = logged_in(user)
    newest = InternalNote.objects.order_by("-pk").first()
    assert newest is not None

    with django_assert_num_queries(queries):
        response = client.get(live_url(session.pk, f"after={answer.pk}&after_note=0"))
    with django_assert_num_queries(queries - 2):  # no new note, a fresh heartbeat
        client.get(live_url(session.pk, f"after={answer.pk}&after_note={newest.pk}"))

    assert len(body(response)["notes"]) == n_notes


# --- Mentions ---------------------------------------------------------------------------------


def test_the_mention_candidates_are_the_at_names_in_order() -> None:
    text = "@bruno, fale com @ana.lima. E-mail joao@bruno.com; de novo @bruno e @"

    assert mention_candidates(text) == ["bruno", "ana.lima.", "ana.lima"]


def test_only_active_colleagues_who_attend_are_mentioned_the_author_left_out() -> None:
    ana = support("ana")
    bruno = support("bruno")
    carla = support("carla")
    carla.is_active = False
    carla.save()
    editor = staff_member(PROMPT_EDITORS)
    root = User.objects.create_superuser("root", "root@example.com", "x")

    found = mentioned_users(f"@root @carla @{editor.username} @ana @nobody @bruno.", author=ana)

    assert found == [root, bruno]


def test_a_mention_e_mails_the_colleague_once_after_the_commit(
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.SITE_URL = "https://atendimento.example.com.br"
    settings.DEFAULT_FROM_EMAIL = "atendimento@lab.example"
    session, _q, _a = conversation()
    ana = support("ana", first_name="Ana")
    support("carla")  # no e-mail address: skipped

    with caplog.at_level(logging.INFO):
        with django_capture_on_commit_callbacks(execute=True) as hooks:
            added = session_note_add(
                session_id=session.pk, user=ana, text=f"@bruno @carla veja: {NOTE}", now=AT
            )
        again = notify_note_mentions.delay(added.note.pk).get()

    assert (added.mentioned, added.message) == (
        ["bruno", "carla"],
        "Nota salva; só a equipe a vê. Avisamos: Bruno, carla.",
    )
    assert hooks[0].__qualname__ == f"_notify_later({added.note.pk})"
    [email] = mail.outbox
    assert (email.to, email.from_email, email.subject) == (
        ["bruno@lab.example"],
        "atendimento@lab.example",
        f"Ana mencionou você numa nota: conversa #{session.pk}",
    )
    assert email.body == (
        f"Ana mencionou você numa nota interna da conversa #{session.pk}:\n"
        "\n"
        f"@bruno @carla veja: {MASKED_NOTE}\n"
        "\n"
        f"Abrir: https://atendimento.example.com.br/admin/conversations/session/{session.pk}"
        "/change/\n"
    )
    assert again == 0  # bruno was e-mailed already; carla has no address
    emailed = dict(NoteMention.objects.values_list("user__username", "emailed_at"))
    assert emailed == {"bruno": emailed["bruno"], "carla": None}
    assert emailed["bruno"] is not None
    logged = [(r.getMessage(), getattr(r, "user_id", None)) for r in caplog.records]
    assert ("note_mention_email_sent", User.objects.get(username="bruno").pk) in logged
    for record in caplog.records:
        written = json.dumps(record.__dict__, default=str, ensure_ascii=False)
        assert "bruno@lab.example" not in written
        assert "529.982" not in written
        assert "Maria" not in written


def test_a_note_without_mentions_e_mails_nobody(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session, _q, _a = conversation()

    with django_capture_on_commit_callbacks(execute=True) as hooks:
        session_note_add(session_id=session.pk, user=support("ana"), text="@ sem menção", now=AT)

    assert (hooks, mail.outbox, NoteMention.objects.count()) == ([], [], 0)


def test_a_mail_server_that_refuses_is_logged_and_the_mention_stays_unsent(
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    session, _q, _a = conversation()

    with django_capture_on_commit_callbacks(execute=True):
        session_note_add(session_id=session.pk, user=support("ana"), text="@bruno oi", now=AT)

    [failed] = [r for r in caplog.records if r.getMessage() == "note_mention_email_failed"]
    assert failed.error == "ConnectionRefusedError"  # type: ignore[attr-defined]
    assert NoteMention.objects.get().emailed_at is None


def test_a_mention_is_pending_until_the_colleague_opens_the_conversation() -> None:
    session, _q, _a = conversation()
    other, _q2, _a2 = conversation_of_someone_else(session)
    bruno = User.objects.get(username="bruno")
    ana = support("ana")
    session_note_add(session_id=session.pk, user=ana, text="@bruno veja", now=AT)
    session_note_add(session_id=other.pk, user=ana, text="@bruno e esta", now=AT)

    before = note_mentions_pending(bruno.pk)
    logged_in(bruno).get(change_url(session.pk))

    assert [(m.session_id, m.author) for m in before] == [(other.pk, "ana"), (session.pk, "ana")]
    assert [m.session_id for m in note_mentions_pending(bruno.pk)] == [other.pk]
    assert note_mentions_pending(ana.pk) == []


def test_a_mention_the_live_poll_brings_is_seen() -> None:
    session, _q, answer = conversation()
    bruno = User.objects.get(username="bruno")
    client = logged_in(bruno)
    client.get(change_url(session.pk))
    session_note_add(session_id=session.pk, user=support("ana"), text="@bruno veja", now=AT)

    pending = note_mentions_pending(bruno.pk)
    data = body(client.get(live_url(session.pk, f"after={answer.pk}&after_note=0")))

    assert (len(pending), len(data["notes"]), note_mentions_pending(bruno.pk)) == (1, 1, [])


def conversation_of_someone_else(beside: Session) -> tuple[Session, Message, Message]:
    """João's conversation on the same number as `beside`."""
    session = recipes.session.make(instance=beside.instance, customer_name="João", state="HUMAN")
    question = Message.objects.create(session=session, direction=Direction.INBOUND, content="Oi")
    return session, question, question


# --- The customer's data ----------------------------------------------------------------------


def test_the_export_lists_the_notes_apart_from_the_messages() -> None:
    session, _q, _a = conversation()
    first = note_at(session, User.objects.get(username="bruno"), NOTE, 1)

    [exported] = customer_data_export(CustomerSelector(phone=PHONE))["sessions"]

    assert exported["internal_notes"] == [
        {"id": first.pk, "text": NOTE, "created_at": "2026-11-20T13:00:01+00:00"}
    ]
    assert [m["content"] for m in exported["messages"]] == [
        "Quero um orçamento",
        "Já vejo, Maria!",
    ]


def test_erasure_masks_the_notes_as_it_masks_the_messages() -> None:
    session, _q, answer = conversation()
    first = note_at(session, None, NOTE, 1)
    other, _q2, _a2 = conversation_of_someone_else(session)
    untouched = note_at(other, None, NOTE, 1)

    report = customer_data_erase(CustomerSelector(phone=PHONE), now=AT, operator="ops")

    first.refresh_from_db()
    answer.refresh_from_db()
    untouched.refresh_from_db()
    assert report.sessions == 1
    assert (first.text, answer.content) == (MASKED_NOTE, "Já vejo, M***!")
    assert untouched.text == NOTE
