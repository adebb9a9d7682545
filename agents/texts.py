"""Short texts made from longer ones: a quote, a caption, a transcript in a marker. Pure module."""

ELLIPSIS = "…"


def shortened(text: str, limit: int) -> str:
    """`text` on one line (its runs of spaces and line breaks folded), at most `limit`
    characters: cut with "…" when longer, never mid-way through the ellipsis."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + ELLIPSIS
