"""The catalog's hand-written reads (knowledge_base/selectors.py) against the ORM queries they
replace, quoted in their comments: the same snapshot, active rows only, in the same order."""

import logging

import pytest
from model_bakery import baker

from agents.context import CatalogSnapshot, IntentInfo, PackageInfo, SegmentInfo, ServiceInfo
from agents.parameters import parse_parameter_schema
from knowledge_base.models import Intent, KBPackage, Segment, Service
from knowledge_base.selectors import DatabaseKBSource

pytestmark = pytest.mark.django_db

SCHEMA = [
    {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
    {"name": "quantidade", "label": "Quantidade", "type": "integer"},
]


def orm_catalog() -> CatalogSnapshot:
    segments = {
        code: SegmentInfo(code, label, health_sensitive)
        for code, label, health_sensitive in Segment.objects.filter(is_active=True)
        .order_by("code")
        .values_list("code", "label", "health_sensitive")
    }
    intents = {
        code: IntentInfo(code, label)
        for code, label in Intent.objects.filter(is_active=True)
        .order_by("code")
        .values_list("code", "label")
    }
    services = {
        code: ServiceInfo(code, label, segment, description, tuple(parse_parameter_schema(schema)))
        for code, label, segment, description, schema in Service.objects.filter(
            is_active=True, segment__is_active=True
        )
        .order_by("segment__code", "code")
        .values_list("code", "label", "segment__code", "description", "parameter_schema")
    }
    packages = {
        package_id: PackageInfo(package_id, title, description, health_sensitive)
        for package_id, title, description, health_sensitive in KBPackage.objects.filter(
            is_active=True
        )
        .order_by("package_id")
        .values_list("package_id", "title", "description", "health_sensitive")
    }
    return CatalogSnapshot(segments=segments, intents=intents, services=services, packages=packages)


def test_the_catalog_is_the_orm_s(caplog: pytest.LogCaptureFixture) -> None:
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

    assert catalog == orm_catalog()
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
