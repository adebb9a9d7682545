"""What a file staff send is, told by its first bytes (whatsapp.outbound_media): no database."""

import io
import zipfile

import pytest

from whatsapp.outbound_media import (
    DOC,
    DOCX,
    JPEG,
    PDF,
    PNG,
    PPTX,
    XLS,
    XLSX,
    SendableType,
    sendable_filename,
    sendable_type,
)

JPEG_BYTES = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"x" * 64
PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"x" * 64
PDF_BYTES = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n%%EOF\n"
OLE2_BYTES = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64
HTML_BYTES = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"


def office_zip(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(name, "<xml/>")
    return buffer.getvalue()


DOCX_BYTES = office_zip("[Content_Types].xml", "word/document.xml")


@pytest.mark.parametrize(
    ("content", "filename", "expected"),
    [
        (JPEG_BYTES, "foto.jpg", JPEG),
        (JPEG_BYTES, "foto.png", JPEG),  # the content wins over the name
        (JPEG_BYTES, "sem-extensao", JPEG),
        (PNG_BYTES, "print.PNG", PNG),
        (PDF_BYTES, "laudo.pdf", PDF),
        (PDF_BYTES, "laudo.docx", PDF),
        (OLE2_BYTES, "pedido.doc", DOC),
        (OLE2_BYTES, "planilha.XLS", XLS),
        (DOCX_BYTES, "relatorio.docx", DOCX),
        (office_zip("[Content_Types].xml", "xl/workbook.xml"), "dados.xlsx", XLSX),
        (office_zip("[Content_Types].xml", "ppt/presentation.xml"), "slides.pptx", PPTX),
    ],
)
def test_a_file_is_what_its_first_bytes_say(
    content: bytes, filename: str, expected: SendableType
) -> None:
    assert sendable_type(io.BytesIO(content), filename) == expected


@pytest.mark.parametrize(
    ("content", "filename"),
    [
        (HTML_BYTES, "laudo.pdf"),  # a page named as a PDF is a page
        (b"texto simples", "notas.txt"),
        (b"", "vazio.pdf"),
        (b"\xff\xd8", "curto.jpg"),  # one byte short of JPEG's signature
        (OLE2_BYTES, "pedido.pdf"),  # an OLE2 container that names no Office format
        (OLE2_BYTES, "instalador.msi"),
        (DOCX_BYTES, "relatorio.xlsx"),  # a Word file claiming to be Excel
        (office_zip("[Content_Types].xml", "word/document.xml"), "arquivo.zip"),
        (office_zip("word/document.xml"), "relatorio.docx"),  # no content types part
        (b"PK\x03\x04" + b"\x00" * 40, "quebrado.docx"),  # not a readable ZIP
        (b"GIF89a" + b"x" * 20, "animacao.gif"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "logo.png"),
    ],
)
def test_anything_else_is_refused(content: bytes, filename: str) -> None:
    assert sendable_type(io.BytesIO(content), filename) is None


def test_the_check_leaves_the_file_at_its_start() -> None:
    content = io.BytesIO(DOCX_BYTES)
    content.seek(5)

    sendable_type(content, "relatorio.docx")

    assert content.tell() == 0


@pytest.mark.parametrize(
    ("filename", "sendable", "expected"),
    [
        ("Laudo Março 2026.pdf", PDF, "Laudo Março 2026.pdf"),
        ("C:\\Users\\ana\\Desktop\\laudo.pdf", PDF, "laudo.pdf"),
        ("../../etc/passwd.pdf", PDF, "passwd.pdf"),
        ("laudo<x>;\"'.pdf", PDF, "laudo_x____.pdf"),
        ("<b>laudo</b>.pdf", PDF, "b_.pdf"),  # the slash ends a folder
        ("laudo\r\n\x00.pdf", PDF, "laudo.pdf"),
        ("FOTO.JPG", JPEG, "FOTO.jpg"),
        ("scan.png", JPEG, "scan.jpg"),  # a sendable extension that lies is replaced
        ("relatorio.html", PDF, "relatorio.html.pdf"),  # any other is kept, and one added
        ("sem-extensao", PDF, "sem-extensao.pdf"),
        ("", PDF, "documento.pdf"),
        ("...", JPEG, "imagem.jpg"),
        ("a" * 200 + ".pdf", PDF, "a" * 116 + ".pdf"),
    ],
)
def test_the_name_the_customer_sees_is_cleaned_and_ends_in_what_the_file_is(
    filename: str, sendable: SendableType, expected: str
) -> None:
    assert sendable_filename(filename, sendable) == expected
