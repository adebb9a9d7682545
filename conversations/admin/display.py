"""How values read on the staff pages: collected data (sim/não, CPF/CNPJ with their
punctuation) and WhatsApp's ``*bold*`` in a message bubble.

Applied to display copies after masking: a masked document (``***********``) gets the same
punctuation as a readable one, so staff without the personal-data permission still see which
kind of document it is (``***.***.***-**``).
"""

import json
import re
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

# Keys whose values are a CPF or a CNPJ (the registration's `documento`, the session's column).
DOCUMENT_KEYS = frozenset({"documento", "cpf", "cnpj", "customer_document"})
_DOCUMENT_SYMBOLS = re.compile(r"[\s./-]")
_CPF_SHAPE = re.compile(r"^([\d*]{3})([\d*]{3})([\d*]{3})([\d*]{2})$")
_CNPJ_SHAPE = re.compile(r"^([\d*]{2})([\d*]{3})([\d*]{3})([\d*]{4})([\d*]{2})$")
# WhatsApp's bold: *text*, the asterisks touching the text and not inside a word, on one line.
_WHATSAPP_BOLD = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![\w*])")


def format_document(value: str) -> str:
    """A CPF as ``000.000.000-00``, a CNPJ as ``00.000.000/0000-00`` (masked digits too); any
    other value as it is."""
    compact = _DOCUMENT_SYMBOLS.sub("", value)
    if match := _CPF_SHAPE.match(compact):
        return "{}.{}.{}-{}".format(*match.groups())
    if match := _CNPJ_SHAPE.match(compact):
        return "{}.{}.{}/{}-{}".format(*match.groups())
    return value


def format_data_value(value: Any, key: str = "") -> str:
    """One collected value as staff read it: sim/não, a formatted document, JSON for a
    structure, "—" for nothing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return gettext("yes") if value else gettext("no")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    if key.lower() in DOCUMENT_KEYS:
        return format_document(str(value))
    return str(value)


def whatsapp_html(text: str) -> SafeString:
    """`text` escaped for HTML, with WhatsApp's ``*bold*`` as ``<strong>`` (the asterisks
    dropped). Escaped first: a message's ``<script>`` stays text."""
    escaped = str(escape(text))
    return mark_safe(_WHATSAPP_BOLD.sub(r"<strong>\1</strong>", escaped))
