"""Markdown from the model → WhatsApp markup, and long texts → parts WhatsApp accepts.

`format_ai_message_for_whatsapp(text)` parses the text with markdown-it-py (CommonMark plus
strikethrough and tables; raw HTML is left as text) and renders WhatsApp's own markup:

=====================  ======================================
Markdown               WhatsApp
=====================  ======================================
``**bold**``           ``*bold*``
``_italic_``           ``_italic_``
``*text*``             ``*text*`` (kept: see below)
``~~strike~~``         ``~strike~``
``# Heading``          ``*Heading*`` on its own line
``- item`` / ``1.``    ``- item`` / ``1. item`` (nested: indented)
``[text](url)``        ``text (url)`` (just the URL when the text is the URL)
```` `code` ````       ```` `code` ````
fenced code            `````` ```code``` `````` (monospace)
``> quote``            ``> quote``
table                  one line per row, cells separated by `` | ``
=====================  ======================================

A single-asterisk emphasis is Markdown's italic but WhatsApp's bold; the prompts ask the model
for WhatsApp's own ``*negrito*`` and ``_itálico_``, so ``*text*`` is kept as written (bold on
WhatsApp) and only ``_text_`` becomes italic. WhatsApp's ``~text~`` and ```` ```text``` ```` pass
through unchanged. Line breaks inside a paragraph are kept: on WhatsApp a line break is meant.
WhatsApp has no escape character, so a literal ``*`` or ``_`` may still be read as markup there.

`split_for_whatsapp(text, limit=4096)` cuts a text longer than WhatsApp's 4,096-character limit
at the last paragraph break that fits, else the last line break, else the last sentence end,
else the last space, else exactly at the limit. Pure module: no Django import.
"""

import re
from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

WHATSAPP_TEXT_LIMIT = 4096

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_INDENT = "   "


def format_ai_message_for_whatsapp(text: str) -> str:
    """The model's Markdown rendered as WhatsApp markup (see the module docstring)."""
    if not text.strip():
        return ""
    tree = SyntaxTreeNode(_MARKDOWN.parse(text))
    return "\n\n".join(block for block in _blocks(tree.children) if block).strip()


def _blocks(nodes: Iterable[SyntaxTreeNode]) -> list[str]:
    return [_block(node) for node in nodes]


def _block(node: SyntaxTreeNode) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline_of(node)
    if kind == "heading":
        title = _inline_of(node, bold=True)
        return f"*{title}*" if title else ""
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind in ("fence", "code_block"):
        code = node.content.rstrip("\n")
        return f"```{code}```" if code else ""
    if kind == "blockquote":
        inner = "\n\n".join(b for b in _blocks(node.children) if b)
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
    if kind == "hr":
        return "———"
    if kind == "table":
        return _table(node)
    if kind == "html_block":  # pragma: no cover - HTML is off, kept for safety
        return node.content.strip()
    return "\n\n".join(b for b in _blocks(node.children) if b)


def _list(node: SyntaxTreeNode) -> str:
    ordered = node.type == "ordered_list"
    number = int(node.attrs.get("start", 1)) if ordered else 0
    lines: list[str] = []
    for item in node.children:
        marker = f"{number}. " if ordered else "- "
        number += 1
        body = "\n".join(b for b in _blocks(item.children) if b)
        first, *rest = body.split("\n") if body else [""]
        lines.append(f"{marker}{first}".rstrip())
        lines.extend(f"{_INDENT}{line}" if line else "" for line in rest)
    return "\n".join(lines)


def _table(node: SyntaxTreeNode) -> str:
    rows: list[str] = []
    for section in node.children:  # thead, tbody
        header = section.type == "thead"
        for row in section.children:
            cells = [_inline_of(cell, bold=header) for cell in row.children]
            if header:
                cells = [f"*{cell}*" if cell else "" for cell in cells]
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _inline_of(node: SyntaxTreeNode, *, bold: bool = False) -> str:
    """The rendered inline content of a block node (paragraph, heading, table cell)."""
    return "".join(_inline(child, bold=bold) for child in node.children).strip()


def _wrap(marker: str, inner: str) -> str:
    # WhatsApp only reads a marker that touches the text: keep surrounding spaces outside.
    stripped = inner.strip()
    if not stripped:
        return inner
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    return f"{lead}{marker}{stripped}{marker}{trail}"


def _inline(node: SyntaxTreeNode, *, bold: bool) -> str:
    kind = node.type
    if kind in ("text", "html_inline"):
        return node.content
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        # Same number of backticks as written: ```x``` is WhatsApp's monospace, `x` inline code.
        return f"{node.markup}{node.content}{node.markup}"
    # Inside a bold span WhatsApp cannot nest another bold: render the children plain.
    makes_bold = kind == "strong" or (kind == "em" and node.markup == "*")
    inner = "".join(_inline(child, bold=bold or makes_bold) for child in node.children)
    if kind == "inline":
        return inner
    if kind == "strong":
        return inner if bold else _wrap("*", inner)
    if kind == "em":
        if node.markup == "*":
            # WhatsApp's own bold, which the prompts ask for: keep it as the model wrote it.
            return inner if bold else _wrap("*", inner)
        return _wrap("_", inner)
    if kind == "s":
        return _wrap("~", inner)
    if kind == "link":
        href = str(node.attrs.get("href", ""))
        label = inner.strip()
        if label and href in (f"mailto:{label}", f"tel:{label}"):
            return label
        if not label or href in (label, f"https://{label}", f"http://{label}"):
            # The text is the address itself: write it once, in full, so it stays clickable.
            return href
        return f"{inner} ({href})"
    if kind == "image":
        src = str(node.attrs.get("src", ""))
        alt = inner.strip() or str(node.attrs.get("alt", "")).strip()
        return f"{alt} ({src})" if alt else src
    return inner


# --- Splitting ----------------------------------------------------------------------------

# A sentence ends at . ! ? or an ellipsis, with any closing quotes or brackets, before a space.
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?=\s)")


def _cut_point(text: str, limit: int) -> int:
    """Where to cut `text` (longer than `limit`) so the first part fits."""
    window = text[: limit + 1]  # a boundary right at the limit still fits
    for separator in ("\n\n", "\n"):
        position = window.rfind(separator, 1, limit + 1)
        if position > 0:
            return position
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() <= limit]
    if ends:
        return ends[-1]
    position = max(window.rfind(" ", 1, limit + 1), window.rfind("\t", 1, limit + 1))
    if position > 0:
        return position
    return limit


def split_for_whatsapp(text: str, limit: int = WHATSAPP_TEXT_LIMIT) -> list[str]:
    """Parts of at most `limit` characters, cut at the best boundary; no empty part."""
    if limit < 1:
        raise ValueError("limit must be positive")
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = _cut_point(rest, limit)
        part = rest[:cut].rstrip()
        if part:
            parts.append(part)
        rest = rest[cut:].lstrip()
    if rest:
        parts.append(rest)
    return parts
