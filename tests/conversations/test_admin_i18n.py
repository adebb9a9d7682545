"""The pt_BR catalog: every label of our models is translated, and the committed .mo is current."""

import gettext
import shutil
import subprocess
from pathlib import Path

import pytest
from django.apps import apps
from django.db import models
from django.utils import translation

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locale" / "pt_BR" / "LC_MESSAGES"
OUR_APPS = ("conversations", "support", "prompts_admin", "knowledge_base", "agents")


def compiled_catalog(mo_path: Path) -> dict[str | tuple[str, int], str]:
    # The parsed catalog is an attribute typeshed does not declare: read it through vars().
    with mo_path.open("rb") as handle:
        catalog: dict[str | tuple[str, int], str] = vars(gettext.GNUTranslations(handle))[
            "_catalog"
        ]
    return catalog


def labels_of_our_models() -> list[tuple[str, object]]:
    """(where, lazy label) for app names, model names, field labels, help texts and choices."""
    found: list[tuple[str, object]] = []
    for label in OUR_APPS:
        config = apps.get_app_config(label)
        found.append((label, config.verbose_name))
        for model in config.get_models():
            if model.__name__.startswith("Historical"):
                continue
            opts = model._meta
            found += [(opts.label, opts.verbose_name), (opts.label, opts.verbose_name_plural)]
            for field in opts.get_fields():
                if not isinstance(field, models.Field) or field.auto_created:
                    continue
                where = f"{opts.label}.{field.name}"
                found.append((where, field.verbose_name))
                if field.help_text:
                    found.append((where, field.help_text))
                found += [(where, choice) for _value, choice in field.flatchoices]
    return found


def test_every_model_field_and_choice_label_has_a_pt_br_translation() -> None:
    catalog = compiled_catalog(LOCALE / "django.mo")
    # A label with a context (pgettext_lazy) is stored as "context\x04msgid".
    in_context = {
        key.split("\x04", 1)[1] for key in catalog if isinstance(key, str) and "\x04" in key
    }
    with translation.override("en"):
        msgids = {where: str(label) for where, label in labels_of_our_models()}
        missing = sorted(
            f"{where}: {str(label)!r}"
            for where, label in labels_of_our_models()
            if str(label) not in catalog and str(label) not in in_context
        )
    assert len(msgids) > 50
    assert missing == []


@pytest.mark.parametrize(
    ("msgid", "translated"),
    [
        ("customer phone", "telefone do cliente"),
        ("With a human", "Com humano"),
        ("knowledge package", "pacote de conhecimento"),
        (
            "Invalid CNPJ (the check digits do not match).",
            "CNPJ inválido (dígitos verificadores não conferem).",
        ),
    ],
)
def test_labels_render_in_portuguese(msgid: str, translated: str) -> None:
    with translation.override("pt-br"):
        assert translation.gettext(msgid) == translated


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs GNU gettext's msgfmt")
def test_committed_mo_matches_the_po(tmp_path: Path) -> None:
    fresh = tmp_path / "django.mo"
    subprocess.run(
        ["msgfmt", "--check-format", "-o", str(fresh), str(LOCALE / "django.po")], check=True
    )
    assert compiled_catalog(LOCALE / "django.mo") == compiled_catalog(fresh)
