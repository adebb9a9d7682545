"""The conversation page shows what a media message holds (templates/admin/conversations/session/
media.html): an image as a thumbnail, a sticker, audio with its player and transcript, video, a
document link, a place with a map link, a contact card, and why a file is not there; the quoted
message of a reply, the customer's reaction and an interactive message's options. Staff who may
not read personal data get no media (the media view refuses them anyway)."""

import html
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, Settings

from conversations.models import (
    Direction,
    Instance,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
)
from support.admin import transcript as transcript_module
from tests import baker_recipes as recipes
from whatsapp.interactive import Option, list_message, reply_buttons

pytestmark = pytest.mark.django_db

AT = timezone.now() - timedelta(hours=1)


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


@pytest.fixture
def session(instance: Instance) -> Session:
    made: Session = recipes.session.make(
        instance=instance,
        customer_name="Maria Souza",
        customer_phone="5511912345678",
        state="HUMAN",
    )
    return made


def change_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


def media_url(message: Message) -> str:
    return f"/admin/conversations/message/{message.pk}/media/"


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def bubble_of(page: str, message: Message) -> str:
    """The markup of one message's bubble."""
    found = re.search(
        rf'<li class="bubble[^"]*" data-message-id="{message.pk}".*?\n  </li>', page, re.S
    )
    assert found is not None, f"no bubble for message {message.pk}"
    return found.group(0)


def message(session: Session, seconds: int = 0, **fields: Any) -> Message:
    fields.setdefault("direction", Direction.INBOUND)
    made: Message = Message.objects.create(
        session=session, created_at=AT + timedelta(seconds=seconds), **fields
    )
    return made


def media_message(
    session: Session,
    kind: str,
    *,
    content: bytes | None = b"bytes",
    seconds: int = 0,
    **fields: Any,
) -> Message:
    """An INBOUND media message; with `content`, its file downloaded."""
    stored = message(session, seconds, message_type=kind, content=fields.get("caption", ""))
    media = MessageMedia(message=stored, kind=kind, **fields)
    if content is not None:
        media.file.save("stored.bin", ContentFile(content), save=False)
        media.status = MediaStatus.DOWNLOADED
        media.file_size = media.file_size or len(content)
    media.save()
    return stored


def page_queries(client: Client, session: Session) -> int:
    """The queries of the page as it is now (after a first load warms the per-process caches):
    the count the media, quotes and reactions must not change (tests/support/
    test_admin_transcript.py explains each query)."""
    client.get(change_url(session))
    with CaptureQueriesContext(connection) as captured:
        client.get(change_url(session))
    return len(captured)


def page_of(client: Client, session: Session) -> str:
    response = client.get(change_url(session))
    assert response.status_code == 200
    return response.content.decode()


# --- Each kind ---------------------------------------------------------------------------------


def test_an_image_is_a_lazy_thumbnail_that_opens_the_file_in_a_new_tab(
    session: Session, support_client: Client
) -> None:
    photo = media_message(
        session,
        "image",
        mime_type="image/jpeg",
        caption="Rótulo da amostra",
        description="Um frasco com rótulo azul",
        reading_status=ReadingStatus.DONE,
    )

    bubble = bubble_of(page_of(support_client, session), photo)

    assert (
        f'<a class="media-open" href="{media_url(photo)}" target="_blank" '
        'rel="noopener noreferrer" title="Abrir a imagem inteira em uma nova aba">'
        f'<img class="media-thumb" src="{media_url(photo)}" alt="Imagem: Rótulo da amostra" '
        'loading="lazy"></a>'
    ) in bubble
    assert '<div class="media-caption">Rótulo da amostra</div>' in bubble
    assert (
        '<div class="media-description">Descrição automática: Um frasco com rótulo azul</div>'
    ) in bubble
    # The caption is the message's text too: shown once, under the media.
    assert text_of(bubble).count("Rótulo da amostra") == 1
    assert '<div class="text">' not in bubble


def test_a_sticker_is_a_small_image(session: Session, support_client: Client) -> None:
    sticker = media_message(session, "sticker", mime_type="image/webp")

    bubble = bubble_of(page_of(support_client, session), sticker)

    assert f'<img class="media-thumb media-sticker" src="{media_url(sticker)}"' in bubble


@pytest.mark.parametrize(
    ("reading_status", "transcript", "shown", "absent"),
    [
        (
            ReadingStatus.DONE,
            "Quero saber o preço",
            "Transcrição Quero saber o preço",
            "Transcrevendo",
        ),
        (ReadingStatus.PENDING, "", "Transcrevendo…", "Transcrição"),
        (ReadingStatus.FAILED, "", "Não foi possível transcrever o áudio", "Transcrição"),
        (ReadingStatus.NOT_READ, "", "", "Transcri"),
    ],
    ids=["done", "pending", "failed", "not read"],
)
def test_an_audio_has_a_player_and_its_transcript(
    session: Session,
    support_client: Client,
    reading_status: str,
    transcript: str,
    shown: str,
    absent: str,
) -> None:
    voice = media_message(
        session,
        "audio",
        mime_type="audio/ogg; codecs=opus",
        voice=True,
        transcript=transcript,
        reading_status=reading_status,
    )

    bubble = bubble_of(page_of(support_client, session), voice)

    assert (
        f'<audio class="media-player" controls preload="metadata" src="{media_url(voice)}">'
        in bubble
    )
    assert shown in text_of(bubble)
    assert absent not in text_of(bubble)


def test_a_video_has_a_player(session: Session, support_client: Client) -> None:
    video = media_message(session, "video", mime_type="video/mp4")

    bubble = bubble_of(page_of(support_client, session), video)

    assert (
        f'<video class="media-player media-video" controls preload="metadata" '
        f'src="{media_url(video)}"></video>'
    ) in bubble


def test_a_document_is_a_named_download_with_its_size_and_type(
    session: Session, support_client: Client
) -> None:
    report = media_message(
        session,
        "document",
        mime_type="application/pdf",
        filename="laudo <2026>.pdf",
        file_size=1_258_291,
    )

    bubble = bubble_of(page_of(support_client, session), report)

    assert (
        f'<a class="media-download" href="{media_url(report)}" download title="Baixar">'
        "laudo &lt;2026&gt;.pdf</a>"
    ) in bubble
    assert '<div class="media-details">1,2\xa0MB · application/pdf</div>' in bubble


def test_a_location_shows_its_place_coordinates_and_a_map_link(
    session: Session, support_client: Client
) -> None:
    place = media_message(
        session,
        "location",
        content=None,
        status=MediaStatus.NOT_APPLICABLE,
        data={
            "latitude": -22.9711,
            "longitude": -47.0001,
            "name": "Laboratório Vale",
            "address": "Rua das Flores, 10",
        },
    )

    bubble = bubble_of(page_of(support_client, session), place)

    assert "Laboratório Vale Rua das Flores, 10 -22.9711, -47.0001 · Abrir o mapa" in (
        text_of(bubble)
    )
    assert (
        '<a href="https://www.openstreetmap.org/?mlat=-22.9711&amp;mlon=-47.0001#map=17/-22.9711/'
        '-47.0001" target="_blank" rel="noopener noreferrer">Abrir o mapa</a>'
    ) in bubble


def test_a_location_without_coordinates_has_no_map_link(
    session: Session, support_client: Client
) -> None:
    place = media_message(
        session,
        "location",
        content=None,
        status=MediaStatus.NOT_APPLICABLE,
        data={"latitude": None, "longitude": None, "name": "Casa", "address": ""},
    )

    bubble = bubble_of(page_of(support_client, session), place)

    assert "Casa" in text_of(bubble)
    assert "openstreetmap" not in bubble


def test_a_contact_card_shows_names_and_phones_as_people_read_them(
    session: Session, support_client: Client
) -> None:
    card = media_message(
        session,
        "contacts",
        content=None,
        status=MediaStatus.NOT_APPLICABLE,
        data={
            "contacts": [
                {
                    "name": "João Lima",
                    "phones": [
                        {"phone": "+55 19 99876-5432", "wa_id": "5519998765432"},
                        {"phone": "(11) 3333-4444", "wa_id": ""},
                    ],
                },
                {"name": "", "phones": [{"phone": "ramal 12", "wa_id": ""}]},
            ]
        },
    )

    bubble = bubble_of(page_of(support_client, session), card)

    assert (
        '<li class="media-contact"><span class="media-contact-name">João Lima</span>'
        '<span class="media-contact-phone">+55 19 99876-5432</span>'
        '<span class="media-contact-phone">+55 11 3333-4444</span></li>'
        '<li class="media-contact"><span class="media-contact-name">—</span>'
        '<span class="media-contact-phone">ramal 12</span></li>'
    ) in bubble


@pytest.mark.parametrize(
    ("status", "sentence"),
    [
        (MediaStatus.PENDING, "Baixando mídia…"),
        (MediaStatus.EXPIRED, "A mídia expirou no WhatsApp antes de ser baixada"),
        (MediaStatus.TOO_LARGE, "Arquivo maior que o limite configurado"),
        (MediaStatus.FAILED, "Não foi possível baixar a mídia"),
    ],
)
def test_a_media_not_downloaded_says_why(
    session: Session, support_client: Client, status: str, sentence: str
) -> None:
    photo = media_message(
        session, "image", content=None, status=status, mime_type="image/jpeg", caption="Laudo"
    )

    bubble = bubble_of(page_of(support_client, session), photo)

    assert f'<div class="media-note">{sentence}</div>' in bubble
    assert '<div class="media-caption">Laudo</div>' in bubble
    assert "/media/" not in bubble


def test_a_downloaded_media_whose_file_was_erased_says_so(
    session: Session, support_client: Client
) -> None:
    photo = media_message(session, "image", content=None, status=MediaStatus.DOWNLOADED)

    bubble = bubble_of(page_of(support_client, session), photo)

    assert "O arquivo foi apagado com os dados pessoais da conversa" in text_of(bubble)
    assert "/media/" not in bubble


def test_staff_who_may_not_read_personal_data_get_no_media_and_masked_texts(
    session: Session, prompt_editor_client: Client
) -> None:
    photo = media_message(
        session, "image", mime_type="image/jpeg", caption="Foto da Maria Souza", filename="x.jpg"
    )
    card = media_message(
        session,
        "contacts",
        content=None,
        seconds=1,
        status=MediaStatus.NOT_APPLICABLE,
        data={"contacts": [{"name": "João", "phones": [{"phone": "", "wa_id": "5519998765432"}]}]},
    )

    page = page_of(prompt_editor_client, session)

    note = "Mídia oculta: ver mídias exige a permissão de ver dados pessoais"
    assert "/media/" not in page
    assert "<img" not in bubble_of(page, photo)
    assert f"Imagem {note} Foto da M*** S***" in text_of(bubble_of(page, photo))
    assert "x.jpg" not in page
    assert note in text_of(bubble_of(page, card))
    assert "99876" not in page
    assert "João" not in bubble_of(page, card)


# --- Quotes, reactions, interactive messages ----------------------------------------------------


def test_a_reply_shows_the_message_it_quotes(session: Session, support_client: Client) -> None:
    long_text = "Segue o orçamento nº " + "1234567890" * 12
    quoted = message(
        session, 0, direction=Direction.OUTBOUND, content=long_text, wa_message_id="wamid.Q1"
    )
    reply = message(session, 1, content="Pode ser amanhã?", reply_to_wamid="wamid.Q1")
    lost = message(session, 2, content="E essa?", reply_to_wamid="wamid.NOT_HERE")

    page = page_of(support_client, session)

    assert (
        '<blockquote class="quote"><span class="quote-label">Em resposta a:</span> '
        f"{long_text[:119]}…</blockquote>"
    ) in bubble_of(page, reply)
    assert "Em resposta a: mensagem não encontrada" in text_of(bubble_of(page, lost))
    assert "quote" not in bubble_of(page, quoted)


def test_a_quote_is_masked_for_staff_who_may_not_read_personal_data(
    session: Session, prompt_editor_client: Client
) -> None:
    message(session, 0, content="Sou a Maria Souza, CPF 529.982.247-25", wa_message_id="w.M")
    reply = message(
        session, 1, direction=Direction.OUTBOUND, content="Obrigado!", reply_to_wamid="w.M"
    )

    page = page_of(prompt_editor_client, session)

    assert "Em resposta a: Sou a M*** S***, CPF ***.***.***-**" in text_of(bubble_of(page, reply))
    assert "529.982" not in page


def test_a_quoted_media_message_without_text_is_named_by_its_kind(
    session: Session, support_client: Client
) -> None:
    photo = media_message(session, "image", mime_type="image/jpeg")
    Message.objects.filter(pk=photo.pk).update(wa_message_id="wamid.PHOTO")
    reply = message(session, 1, content="Essa foto", reply_to_wamid="wamid.PHOTO")

    page = page_of(support_client, session)

    assert "Em resposta a: Imagem" in text_of(bubble_of(page, reply))


def test_a_quote_of_another_conversation_is_not_found(
    session: Session, instance: Instance, support_client: Client
) -> None:
    other = recipes.session.make(instance=instance)
    message(other, 0, content="De outra conversa", wa_message_id="wamid.OTHER")
    reply = message(session, 1, content="Oi", reply_to_wamid="wamid.OTHER")

    page = page_of(support_client, session)

    assert "Em resposta a: mensagem não encontrada" in text_of(bubble_of(page, reply))
    assert "De outra conversa" not in page


def test_a_reaction_is_a_badge_on_its_message_and_its_row_is_not_a_bubble(
    session: Session, support_client: Client
) -> None:
    answer = message(
        session, 0, direction=Direction.OUTBOUND, content="Orçamento enviado", reaction="👍"
    )
    event = message(session, 1, message_type="reaction", content="👍")

    page = page_of(support_client, session)

    assert '<span class="reaction" title="Reação do cliente">👍</span>' in bubble_of(page, answer)
    assert f'data-message-id="{event.pk}"' not in page


def test_an_interactive_message_shows_its_buttons_and_a_tap_its_marker(
    session: Session, support_client: Client
) -> None:
    buttons = message(
        session,
        0,
        direction=Direction.OUTBOUND,
        message_type="interactive",
        content="Confirma os dados?",
        interactive=reply_buttons(
            "Confirma os dados?", [Option("confirm", "Confirmar"), Option("fix", "Corrigir")]
        ),
    )
    rows = message(
        session,
        1,
        direction=Direction.OUTBOUND,
        message_type="interactive",
        content="Qual segmento?",
        interactive=list_message(
            "Qual segmento?", [Option("a", "Água"), Option("s", "Solo")], button="Ver opções"
        ),
    )
    tap = message(
        session,
        2,
        message_type="interactive",
        content="Confirmar",
        interactive={"type": "button_reply", "id": "confirm", "title": "Confirmar"},
    )
    row = message(
        session,
        3,
        message_type="interactive",
        content="Solo",
        interactive={"type": "list_reply", "id": "s", "title": "Solo"},
    )

    page = page_of(support_client, session)

    assert (
        '<ul class="options"><li class="chip">Confirmar</li><li class="chip">Corrigir</li></ul>'
    ) in bubble_of(page, buttons)
    assert '<li class="chip">Água</li><li class="chip">Solo</li>' in bubble_of(page, rows)
    assert '<div class="reply-kind"><span class="chip">botão</span></div>' in bubble_of(page, tap)
    assert '<div class="reply-kind"><span class="chip">lista</span></div>' in bubble_of(page, row)
    assert "options" not in bubble_of(page, tap)


# --- Queries -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n_media", [3, 30])
def test_media_messages_add_no_query_per_message(
    session: Session,
    admin_client: Client,
    django_assert_num_queries: DjangoAssertNumQueries,
    n_media: int,
) -> None:
    message(session, 0, content="Oi")
    without_media = page_queries(admin_client, session)
    kinds = ["image", "audio", "document", "location", "contacts", "video"]
    for i in range(n_media):
        kind = kinds[i % len(kinds)]
        without_file = kind in {"location", "contacts"}
        media_message(
            session,
            kind,
            content=None if without_file else b"x",
            seconds=1 + i,
            status=MediaStatus.NOT_APPLICABLE if without_file else MediaStatus.PENDING,
            data={"latitude": -22.9, "longitude": -47.0} if kind == "location" else {},
        )

    # The media come with their messages (a join): the count of the page without media.
    with django_assert_num_queries(without_media):
        page = admin_client.get(change_url(session)).content.decode()

    assert page.count('<div class="media media-') == n_media


@pytest.mark.parametrize("n_replies", [2, 20])
def test_quotes_older_than_the_page_cost_one_query_for_all(
    session: Session,
    admin_client: Client,
    django_assert_num_queries: DjangoAssertNumQueries,
    monkeypatch: pytest.MonkeyPatch,
    n_replies: int,
) -> None:
    for i in range(n_replies):
        message(session, i, direction=Direction.OUTBOUND, content=f"p{i}", wa_message_id=f"w{i}")
    for i in range(n_replies):
        message(session, 100 + i, content=f"r{i}")
    # Only the replies fit the page: every quoted message is older than it.
    monkeypatch.setattr(transcript_module, "MAX_TRANSCRIPT_MESSAGES", n_replies)
    without_quotes = page_queries(admin_client, session)
    for i in range(n_replies):
        Message.objects.filter(content=f"r{i}").update(reply_to_wamid=f"w{i}")

    with django_assert_num_queries(without_quotes + 1):  # the quoted messages, at once
        page = admin_client.get(change_url(session)).content.decode()

    assert [f"Em resposta a: p{i}" in text_of(page) for i in range(n_replies)] == [True] * (
        n_replies
    )


def test_quotes_of_messages_on_the_page_cost_no_query(
    session: Session, admin_client: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    for i in range(5):
        message(session, i, direction=Direction.OUTBOUND, content=f"p{i}", wa_message_id=f"w{i}")
        message(session, 10 + i, content=f"r{i}")
    without_quotes = page_queries(admin_client, session)
    for i in range(5):
        Message.objects.filter(content=f"r{i}").update(reply_to_wamid=f"w{i}")

    with django_assert_num_queries(without_quotes):
        page = admin_client.get(change_url(session)).content.decode()

    assert text_of(page).count("Em resposta a: p") == 5
