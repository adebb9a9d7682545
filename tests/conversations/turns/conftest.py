"""Fixtures of the turn tests. `catalog` (the catalog and runtime texts a turn reads) is not
autouse: the turn modules ask for it in their `pytestmark`; the task, delivery and worker tests
here keep their own data."""

from typing import Any

import pytest
from pytest_django import DjangoCaptureOnCommitCallbacks

from tests.helpers.pipeline import (
    CLOSED_TEXT,
    INVALID_FORMAT_TEXT,
    OPEN_TEXT,
    PACKAGE_TEXT,
    WATER_SCHEMA,
)


@pytest.fixture
def catalog(db: None) -> None:
    from knowledge_base.models import Intent, KBPackage, Segment, Service
    from prompts_admin.models import RuntimeConfig

    ambiental = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Segment.objects.create(code="HUMANO", label="Saúde humana", health_sensitive=True)
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(
        code="AGUA_POTABILIDADE",
        label="Potabilidade da água",
        segment=ambiental,
        parameter_schema=WATER_SCHEMA,
    )
    KBPackage.objects.create(
        package_id="COLETA_DE_AMOSTRAS",
        title="Coleta de amostras",
        description="Como coletar amostras",
        content=PACKAGE_TEXT,
    )
    KBPackage.objects.create(
        package_id="COMPANY_INFO", title="Empresa", description="Quem somos", content="Desde 1990."
    )
    KBPackage.objects.create(
        package_id="PACOTE_ANTIGO",
        title="Antigo",
        description="Inativo",
        content="x",
        is_active=False,
    )
    config = RuntimeConfig.load()
    config.handoff_message_open = OPEN_TEXT
    config.handoff_message_closed = CLOSED_TEXT
    config.invalid_format_message = INVALID_FORMAT_TEXT
    config.save()


@pytest.fixture
def capture(django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Any:
    return django_capture_on_commit_callbacks
