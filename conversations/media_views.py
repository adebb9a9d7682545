"""A media message's readable part, as the models read it (`agents.media_markers`): from the
columns the hand-written worker reads select (`conversations.agent_sources.HISTORY_SQL`,
`conversations.turns.selectors.PENDING_INBOUND_SQL`: one column list for both), or from the
ORM's MessageMedia (the operational summary's transcript)."""

from django.db import connections

from agents.media_markers import MediaView, media_text
from conversations.models import Message, MessageMedia, ReadingStatus

# The columns of the one-to-one MessageMedia joined as ``mm`` (LEFT JOIN on its unique index).
MEDIA_COLUMNS_SQL = """mm.kind AS media_kind, mm.caption AS media_caption,
        mm.filename AS media_filename, mm.transcript AS media_transcript,
        mm.description AS media_description, mm.data AS media_data,
        mm.reading_status AS media_reading"""
MEDIA_JOIN_SQL = "LEFT JOIN conversations_messagemedia mm ON mm.message_id = m.id"
_MEDIA_DATA = MessageMedia._meta.get_field("data")


# What a view is made of, by MessageMedia's field names (``media_<name>`` in the raw columns).
_VIEW_FIELDS = ("kind", "caption", "filename", "transcript", "description")


def media_view_of(row: Message) -> MediaView | None:
    """The readable part of a message read with `MEDIA_COLUMNS_SQL`; None without media."""
    # `raw()` sets the joined columns as plain attributes of the row.
    columns = row.__dict__
    if columns.get("media_kind") is None:
        return None
    connection = connections[Message.objects.db]
    # As the ORM reads the column (a JSON text on SQLite, as psycopg hands it on PostgreSQL).
    data = _MEDIA_DATA.from_db_value(columns["media_data"], None, connection)  # type: ignore[arg-type]
    return _view({name: columns[f"media_{name}"] for name in _VIEW_FIELDS}, data)


def media_view(media: MessageMedia) -> MediaView:
    """The readable part of a media read through the ORM (the summary's transcript)."""
    return _view({name: getattr(media, name) for name in _VIEW_FIELDS}, media.data)


def _view(fields: dict[str, str], data: object) -> MediaView:
    return MediaView(**fields, data=data if isinstance(data, dict) else {})


def message_text(message: Message) -> str:
    """What the model reads of a message read through the ORM with its media
    (``select_related("media")``): the media's marker or transcript, else its text."""
    try:
        media = message.media
    except MessageMedia.DoesNotExist:
        return message.content
    return media_text(media_view(media))


def media_being_read(row: Message) -> bool:
    """Whether the bot is still reading this message's media (a transcription, a description):
    its turn waits for it."""
    return row.__dict__.get("media_reading") == ReadingStatus.PENDING
