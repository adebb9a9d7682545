"""The live endpoint's media, quotes and reactions (`support.live`): a new media message comes
with the page's own block (media.html), the blocks still changing are sent again when asked
(``media=``), a reaction reaches a bubble already shown, reaction rows never become bubbles, and
none of it costs a query per message."""

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import DjangoAssertNumQueries, Settings

from conversations.models import (
    Direction,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
)
from support.admin.media_block import media_block, media_html
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member
from tests.support.test_live import body, conversation, live_url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def voice_note(session: Session, *, status: str = MediaStatus.PENDING) -> MessageMedia:
    message = Message.objects.create(
        session=session, direction=Direction.INBOUND, message_type="audio"
    )
    return MessageMedia.objects.create(
        message=message,
        kind="audio",
        mime_type="audio/ogg",
        status=status,
        reading_status=ReadingStatus.NOT_READ,
    )


def downloaded(media: MessageMedia, *, transcript: str = "") -> None:
    media.file.save("voz.ogg", ContentFile(b"OggS"), save=False)
    media.status = MediaStatus.DOWNLOADED
    media.transcript = transcript
    media.reading_status = ReadingStatus.DONE if transcript else ReadingStatus.PENDING
    media.save()


def test_a_new_media_message_comes_with_the_page_s_block() -> None:
    session, _question, answer = conversation()
    media = voice_note(session)
    downloaded(media, transcript="Quero saber o preço")

    data = body(logged_in(staff_member(SUPPORT)).get(live_url(session.pk, after=str(answer.pk))))

    [message] = data["messages"]
    assert message["media_html"] == str(media_html(media_block(media, masker=None)))
    assert (
        f'<audio class="media-player" controls preload="metadata" '
        f'src="/admin/conversations/message/{media.message_id}/media/"></audio>'
    ) in message["media_html"]
    assert "Transcrição</span> Quero saber o preço" in message["media_html"]


def test_a_prompt_editor_s_block_hides_the_file() -> None:
    session, _question, answer = conversation()
    downloaded(voice_note(session), transcript="Sou a Maria Souza")

    data = body(
        logged_in(staff_member(PROMPT_EDITORS)).get(live_url(session.pk, after=str(answer.pk)))
    )

    [message] = data["messages"]
    assert "/media/" not in message["media_html"]
    assert "Mídia oculta" in message["media_html"]
    assert "Sou a M*** S***" in message["media_html"]


def test_a_block_asked_for_again_is_sent_as_it_is_now() -> None:
    session, _question, _answer = conversation()
    media = voice_note(session)
    client = logged_in(staff_member(SUPPORT))
    asked = live_url(session.pk, after=str(media.message_id)) + f"&media={media.message_id}"

    before = body(client.get(asked))["media"]
    downloaded(media)
    during = body(client.get(asked))["media"]
    media.transcript, media.reading_status = "Bom dia", ReadingStatus.DONE
    media.save()
    after = body(client.get(asked))["media"]

    assert [(b["id"], b["state"]) for b in before] == [(media.message_id, "pending:")]
    assert "Baixando mídia…" in before[0]["html"]
    assert [(b["id"], b["state"]) for b in during] == [(media.message_id, "downloaded:pending")]
    assert "Transcrevendo…" in during[0]["html"]
    assert [b["state"] for b in after] == ["downloaded:done"]
    assert "Bom dia" in after[0]["html"]


def test_a_block_of_another_conversation_is_never_sent() -> None:
    session, _question, _answer = conversation()
    mine = voice_note(session)
    elsewhere = voice_note(recipes.session.make(instance=session.instance))

    data = body(
        logged_in(staff_member(SUPPORT)).get(
            live_url(session.pk, after=str(mine.message_id))
            + f"&media={elsewhere.message_id},{mine.message_id}"
        )
    )

    assert [b["id"] for b in data["media"]] == [mine.message_id]


@pytest.mark.parametrize("media", ["abc", "1,,2", "-1", ",".join(["1"] * 31)])
def test_a_media_list_that_is_not_message_ids_is_a_400(media: str) -> None:
    session, _question, _answer = conversation()

    response = logged_in(staff_member(SUPPORT)).get(live_url(session.pk) + f"&media={media}")

    assert response.status_code == 400
    assert body(response) == {"error": "media: os ids das mensagens, separados por vírgulas."}


def test_a_reaction_reaches_the_bubble_shown_and_its_row_is_no_message() -> None:
    session, question, answer = conversation()
    Message.objects.filter(pk=answer.pk).update(reaction="🙏")
    Message.objects.create(
        session=session, direction=Direction.INBOUND, message_type="reaction", content="🙏"
    )

    data = body(logged_in(staff_member(SUPPORT)).get(live_url(session.pk, after=str(answer.pk))))

    assert data["messages"] == []
    assert [(s["id"], s["reaction"]) for s in data["statuses"]] == [(answer.pk, "🙏")]
    assert question.pk < answer.pk


def test_a_new_reply_quotes_an_older_message() -> None:
    session, question, answer = conversation()
    Message.objects.filter(pk=answer.pk).update(wa_message_id="wamid.OUT1")
    reply = Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Pode ser amanhã?",
        reply_to_wamid="wamid.OUT1",
    )

    data = body(logged_in(staff_member(SUPPORT)).get(live_url(session.pk, after=str(answer.pk))))

    assert [(m["id"], m["quote"]) for m in data["messages"]] == [
        (reply.pk, "Olá, *Maria*! Já vejo o orçamento.")
    ]
    assert question.pk < reply.pk


@pytest.mark.parametrize("n_media", [3, 30])
def test_media_messages_add_no_query_per_message(
    n_media: int, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session, _question, answer = conversation()
    client = logged_in(staff_member(SUPPORT))
    client.get(live_url(session.pk, after=str(answer.pk)))  # the permissions, cached
    with CaptureQueriesContext(connection) as without_media:
        client.get(live_url(session.pk, after=str(answer.pk)))
    pending = [voice_note(session) for _ in range(n_media)]
    ids = ",".join(str(m.message_id) for m in pending[:30])

    # The new media come with their messages (a join); the blocks asked for again, one query.
    with django_assert_num_queries(len(without_media)):
        data = body(client.get(live_url(session.pk, after=str(answer.pk))))
    with django_assert_num_queries(len(without_media) + 1):
        again = body(client.get(live_url(session.pk, after=str(answer.pk)) + f"&media={ids}"))

    assert len([m for m in data["messages"] if m["media_html"]]) == n_media
    assert len(again["media"]) == n_media


def test_the_page_and_the_live_answer_render_the_same_block(admin_client: Client) -> None:
    session, _question, answer = conversation()
    media = voice_note(session)
    downloaded(media, transcript="Bom dia")

    page = admin_client.get(f"/admin/conversations/session/{session.pk}/change/").content.decode()
    data = body(admin_client.get(live_url(session.pk, after=str(answer.pk))))

    assert data["messages"][0]["media_html"].strip() in page
