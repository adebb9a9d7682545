"""The files staff may send a customer, told by their content rather than by what the browser
says (docs/guia-atendimento.md, Enviar arquivos).

WhatsApp's Cloud API sends an image as JPEG or PNG (at most 5 MB) and a document of the office
types as a named download (at most 100 MB). What a file is comes from its first bytes: JPEG
(``FF D8 FF``), PNG (its 8-byte signature), PDF (``%PDF-``); the old Office formats share one
container (OLE2, ``D0 CF 11 E0 A1 B1 1A E1``) and the new ones are ZIP files, so for those the
extension says which of the three it claims to be, and a ZIP must also hold that format's main
part (``word/``, ``xl/``, ``ppt/``). Anything else is refused, a browser's Content-Type
included: an HTML page named ``laudo.pdf`` is HTML. Plain text has no signature to check, so
it is not offered.
"""

import re
import unicodedata
import zipfile
from dataclasses import dataclass
from typing import IO

# Meta's limits for what it accepts (the settings may set lower ones).
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_DOCUMENT_BYTES = 100 * 1024 * 1024
# Meta's limit for a media message's caption.
MAX_CAPTION_CHARS = 1024
# The file names a customer sees are short; the storage's own name never comes from them.
MAX_FILENAME_CHARS = 120


@dataclass(frozen=True, slots=True)
class SendableType:
    kind: str  # the message type WhatsApp sends it as: "image" or "document"
    mime_type: str
    extensions: tuple[str, ...]  # the first one is added to a name that has none of them
    zip_part: str = ""  # a ZIP-based Office file: the folder its main part lives in


JPEG = SendableType("image", "image/jpeg", (".jpg", ".jpeg"))
PNG = SendableType("image", "image/png", (".png",))
PDF = SendableType("document", "application/pdf", (".pdf",))
DOC = SendableType("document", "application/msword", (".doc",))
XLS = SendableType("document", "application/vnd.ms-excel", (".xls",))
PPT = SendableType("document", "application/vnd.ms-powerpoint", (".ppt",))
DOCX = SendableType(
    "document",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    (".docx",),
    zip_part="word/",
)
XLSX = SendableType(
    "document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    (".xlsx",),
    zip_part="xl/",
)
PPTX = SendableType(
    "document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    (".pptx",),
    zip_part="ppt/",
)
SENDABLE_TYPES = (JPEG, PNG, PDF, DOC, XLS, PPT, DOCX, XLSX, PPTX)
FILE_MESSAGE_TYPES = ("image", "document")
# What the file picker offers (the server checks the content anyway).
ACCEPT = ",".join(ext for t in SENDABLE_TYPES for ext in t.extensions)

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP = b"PK\x03\x04"
_SIGNATURES = ((b"\xff\xd8\xff", JPEG), (b"\x89PNG\r\n\x1a\n", PNG), (b"%PDF-", PDF))
_UNSAFE = re.compile(r"[^\w\s.()+,-]")
_SPACES = re.compile(r"\s+")


def max_bytes_of(kind: str) -> int:
    """Meta's limit for a kind of file."""
    return MAX_IMAGE_BYTES if kind == "image" else MAX_DOCUMENT_BYTES


def sendable_type(content: IO[bytes], filename: str) -> SendableType | None:
    """What `content` (seekable, read from its start) is, or None when WhatsApp is not sent it
    from here; `filename` only picks among the Office formats that share a container."""
    content.seek(0)
    head = content.read(8)
    content.seek(0)
    for signature, found in _SIGNATURES:
        if head.startswith(signature):
            return found
    claimed = _extension(filename)
    if head == _OLE2:
        return next((t for t in (DOC, XLS, PPT) if claimed in t.extensions), None)
    if head.startswith(_ZIP):
        office = next((t for t in (DOCX, XLSX, PPTX) if claimed in t.extensions), None)
        if office is not None and _zip_has(content, office.zip_part):
            return office
    return None


def _zip_has(content: IO[bytes], folder: str) -> bool:
    try:
        with zipfile.ZipFile(content) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    finally:
        content.seek(0)
    return "[Content_Types].xml" in names and any(name.startswith(folder) for name in names)


def sendable_filename(filename: str, sendable: SendableType) -> str:
    """The name the customer sees: no folders, no control or markup characters, at most
    `MAX_FILENAME_CHARS`, and an extension of what the file is (replacing another of the
    sendable ones, which would lie about it)."""
    name = unicodedata.normalize("NFC", filename).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    name = _SPACES.sub(" ", _UNSAFE.sub("_", name)).strip(" .")
    extension = _extension(name)
    if extension in sendable.extensions:
        stem = name[: -len(extension)]
    else:
        known = any(extension in t.extensions for t in SENDABLE_TYPES)
        stem = name[: -len(extension)] if known and extension else name
        extension = sendable.extensions[0]
    stem = stem.strip(" .")[: MAX_FILENAME_CHARS - len(extension)].strip(" .")
    return (stem or ("imagem" if sendable.kind == "image" else "documento")) + extension


def _extension(filename: str) -> str:
    base = filename.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""
