"""The catalog as the agents read it (knowledge_base/selectors.py): active rows only, in code
order, a service of an inactive segment left out, a broken schema logged."""

import logging

import pytest
from model_bakery import baker

from knowledge_base.models import Intent, KBPackage, Segment, Service
from knowledge_base.selectors import DatabaseKBSource

pytestmark = pytest.mark.django_db

SCHEMA = [
    {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
    {"name": "quantidade", "label": "Quantidade", "type": "integer"},
]


def test_the_catalog_holds_the_active_rows_in_code_order(caplog: pytest.LogCaptureFixture) -> None:
    humano = baker.make(Segment, code="HUMANO", label="Humano", health_sensitive=True)
    agua = baker.make(Segment, code="AMBIENTAL", label="Ambiental", health_sensitive=False)
    closed = baker.make(Segment, code="ANIMAL", label="Animal", is_active=False)
    baker.make(Intent, code="ORCAMENTO", label="Orçamento")
    baker.make(Intent, code="DUVIDA", label="Dúvida")
    baker.make(Intent, code="OUTRO", label="Outro", is_active=False)
    baker.make(Service, code="POTABILIDADE", segment=agua, parameter_schema=SCHEMA)
    baker.make(Service, code="EXAME", segment=humano, parameter_schema=[], description="Sangue")
    baker.make(Service, code="A_AGUA", segment=agua, parameter_schema=[])
    baker.make(Service, code="INATIVO", segment=agua, parameter_schema=[], is_active=False)
    baker.make(Service, code="DE_SEGMENTO_INATIVO", segment=closed, parameter_schema=[])
    baker.make(KBPackage, package_id="PACOTE_B", health_sensitive=True)
    baker.make(KBPackage, package_id="PACOTE_A")
    baker.make(KBPackage, package_id="PACOTE_C", is_active=False)

    with caplog.at_level(logging.ERROR):
        catalog = DatabaseKBSource().catalog()

    assert list(catalog.segments) == ["AMBIENTAL", "HUMANO"]
    assert catalog.segments["HUMANO"].health_sensitive is True
    assert list(catalog.intents) == ["DUVIDA", "ORCAMENTO"]
    assert list(catalog.services) == ["A_AGUA", "POTABILIDADE", "EXAME"]
    assert [p.name for p in catalog.services["POTABILIDADE"].parameters] == [
        "tipo_amostra",
        "quantidade",
    ]
    assert list(catalog.packages) == ["PACOTE_A", "PACOTE_B"]
    assert catalog.packages["PACOTE_B"].health_sensitive is True
    assert caplog.records == []


def test_a_service_with_a_broken_schema_is_offered_without_parameters_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    segment = baker.make(Segment, code="AMBIENTAL")
    baker.make(Service, code="QUEBRADO", segment=segment, parameter_schema={"not": "a list"})

    with caplog.at_level(logging.ERROR):
        catalog = DatabaseKBSource().catalog()

    assert catalog.services["QUEBRADO"].parameters == ()
    assert [(r.message, r.service) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("service_schema_invalid", "QUEBRADO")
    ]
