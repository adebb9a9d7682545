"""Every relative link of the README, docs/ and bench/README.md names a file that exists and,
with an ``#anchor``, a heading of that file (GitHub's slugs): a moved section or a renamed file
fails here instead of leaving a dead link for a reader."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def markdown_files() -> list[Path]:
    return sorted(
        [ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")]
    )


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text without markup, lowercased, every character but
    letters, digits, spaces, hyphens and underscores dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of the file whose target file or heading does not exist."""
    broken = []
    for line in prose_lines(path.read_text()):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, anchor = target.partition("#")
            destination = (path.parent / file_part).resolve() if file_part else path
            if not destination.exists():
                broken.append(f"{target} (no file {destination.relative_to(root)})")
            elif anchor and (destination.is_dir() or anchor not in anchors(destination)):
                broken.append(f"{target} (no heading #{anchor})")
    return broken


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


def test_the_documents_checked_are_the_readme_the_guides_and_the_bench_notes() -> None:
    names = {str(p.relative_to(ROOT)) for p in markdown_files()}

    assert {
        "README.md",
        "bench/README.md",
        "docs/operations.md",
        "docs/architecture.md",
        "docs/development.md",
        "docs/guia-atendimento.md",
        "docs/guia-prompts.md",
        "docs/decisions/README.md",
        "docs/DESIGN.md",
    } <= names


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Tests: recipes and fixtures", "tests-recipes-and-fixtures"),
        ("Ações na página da conversa", "ações-na-página-da-conversa"),
        ("Measured: `bench/latency.py`", "measured-benchlatencypy"),
        ("Staff login: lockout, sessions, admin URL", "staff-login-lockout-sessions-admin-url"),
        ("pipeline_turn.py", "pipeline_turnpy"),
    ],
)
def test_anchors_are_githubs_slugs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_missing_file_a_missing_heading_and_a_repeated_heading_are_told_apart(
    tmp_path: Path,
) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Setup\n\n## Setup\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md#setup) [second](other.md#setup-1) [self](#page) [web](https://x.example/a)\n"
        "[gone](missing.md) [no heading](other.md#teardown) [third](other.md#setup-2)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n"
    )

    assert broken_links(page, root=tmp_path) == [
        "missing.md (no file missing.md)",
        "other.md#teardown (no heading #teardown)",
        "other.md#setup-2 (no heading #setup-2)",
    ]
