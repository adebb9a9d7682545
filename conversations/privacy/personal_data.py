"""Who may read customers' personal data in the admin, and the masked copies the others see.

`conversations.view_personal_data` (declared on Session; Support has it, superusers have every
permission) governs unmasked display. Staff without it (the prompt editors) read every
conversation page with names, phones, CPF/CNPJ and e-mails masked by `agents.masking`: by the
row's session's known values and by pattern.

Pages render *display copies*: the row copied in memory, its text and JSON columns masked, with
the session it points to masked too (so its `str()` in titles and links says ``#12 M*** S***``).
A copy cannot be saved. The permission check reads the user's permission cache, which the
admin's own view-permission check has already filled: it costs no query.
"""

import copy
from typing import Any, TypeVar

from django.db import models

from agents.masking import PATTERNS_ONLY, KnownValues, Masker, known_values
from conversations.models import Session

VIEW_PERSONAL_DATA = "conversations.view_personal_data"

M = TypeVar("M", bound=models.Model)


def can_view_personal_data(user: Any) -> bool:
    return bool(user.has_perm(VIEW_PERSONAL_DATA))


def session_known_values(session: Session) -> KnownValues:
    """What one session knows of its customer: name, phone, user id, document and the collected
    data."""
    return known_values(
        customer_name=session.customer_name,
        customer_phone=session.customer_phone,
        customer_user_id=session.customer_user_id,
        customer_document=session.customer_document,
        data=[
            d
            for d in (session.registration_data, session.registration_extras)
            if isinstance(d, dict)
        ],
    )


def session_masker(session: Session) -> Masker:
    """The masker of one session's data: its known values, and the instance's own phone (when
    loaded) left readable."""
    keep = []
    if Session.instance.is_cached(session):
        keep.append(session.instance.display_phone)
    return Masker(session_known_values(session), keep_numbers=keep)


class MaskedCopyError(Exception):
    """Raised when code tries to save a display copy."""


def _refuse_save(*args: Any, **kwargs: Any) -> None:
    raise MaskedCopyError("a masked display copy is never saved")


def masker_of(obj: models.Model) -> Masker | None:
    """The masker a display copy was made with; None for an unmasked row."""
    return obj.__dict__.get("_personal_data_masker")


def masked_copy(obj: M, masker: Masker) -> M:
    """A display-only copy of `obj` with its loaded text and JSON columns masked.

    Columns with choices, keys and dates are left alone; deferred columns stay deferred (reading
    one on the copy loads it unmasked, so callers defer only what they never show).
    """
    masked = copy.copy(obj)
    loaded = obj.__dict__
    for field in obj._meta.concrete_fields:
        name = field.attname
        if name not in loaded or field.choices or field.is_relation:
            continue
        value = loaded[name]
        if isinstance(field, models.JSONField):
            masked.__dict__[name] = masker.value(value)
        elif isinstance(field, models.CharField | models.TextField) and isinstance(value, str):
            masked.__dict__[name] = masker.field(field.name, value)
    masked.__dict__["save"] = _refuse_save
    masked.__dict__["_personal_data_masker"] = masker
    return masked


def masked_session(session: Session, masker: Masker | None = None) -> Session:
    return masked_copy(session, masker or session_masker(session))


def masked_row(obj: M, *, maskers: dict[int, Masker]) -> M:
    """`obj` (a Session, or a row with a loaded `session`, or neither) as a display copy.

    `maskers` caches one masker per session across the rows of a page.
    """
    if isinstance(obj, Session):
        masker = maskers.get(obj.pk) or maskers.setdefault(obj.pk, session_masker(obj))
        return masked_copy(obj, masker)
    session_field = _session_field(obj)
    if session_field is None:
        return masked_copy(obj, PATTERNS_ONLY)
    session = getattr(obj, session_field.name)
    if session is None:
        return masked_copy(obj, PATTERNS_ONLY)
    masker = maskers.get(session.pk) or maskers.setdefault(session.pk, session_masker(session))
    masked = masked_copy(obj, masker)
    session_field.set_cached_value(masked, masked_copy(session, masker))
    return masked


def _session_field(obj: models.Model) -> Any:
    for field in obj._meta.concrete_fields:
        if field.is_relation and field.related_model is Session:
            return field
    return None
