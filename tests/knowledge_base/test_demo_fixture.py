"""The `demo` fixture: the catalog `make run` opens with, and the codes other tools rely on."""

import io
from collections import Counter

import pytest
from django.core.management import call_command
from django.db.models import Model
from django.test import Client
from pytest_django import Settings

from conversations.models import Instance
from knowledge_base.models import Intent, KBPackage, Segment, Service
from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo() -> None:
    call_command("loaddata", "demo", verbosity=0)


def test_demo_instance(demo: None) -> None:
    instance = Instance.objects.get()
    assert (instance.phone_number_id, instance.is_active, instance.access_token) == (
        "100000000000001",
        True,
        "",
    )


def test_demo_segments_and_which_is_health_sensitive(demo: None) -> None:
    assert dict(Segment.objects.values_list("code", "health_sensitive")) == {
        "ALIMENTOS": False,
        "AMBIENTAL": False,
        "ANIMAL": False,
        "HUMANO": True,
    }


def test_demo_intents(demo: None) -> None:
    assert sorted(Intent.objects.values_list("code", flat=True)) == [
        "DUVIDA_TECNICA",
        "ORCAMENTO",
        "OUTRO",
        "RESULTADO",
    ]


def test_demo_has_at_least_two_services_per_segment(demo: None) -> None:
    per_segment = Counter(Service.objects.values_list("segment__code", flat=True))
    assert set(per_segment) == {"ALIMENTOS", "AMBIENTAL", "ANIMAL", "HUMANO"}
    assert min(per_segment.values()) >= 2


def test_demo_water_potability_service_schema(demo: None) -> None:
    service = Service.objects.get(code="AGUA_POTABILIDADE")
    assert service.segment.code == "AMBIENTAL"
    assert [(p["name"], p["type"], p["required"]) for p in service.parameter_schema] == [
        ("tipo_amostra", "text", True),
        ("quantidade_amostras", "integer", True),
        ("cidade_coleta", "text", False),
    ]


def test_demo_packages_and_which_is_health_sensitive(demo: None) -> None:
    assert dict(KBPackage.objects.values_list("package_id", "health_sensitive")) == {
        "COLETA_DE_AMOSTRAS": False,
        "COMPANY_INFO": False,
        "GOYOU": True,
        "PRAZOS_E_ENTREGA": False,
    }


@pytest.mark.parametrize(
    "model", [Instance, Segment, Intent, Service, KBPackage, RuntimeConfig], ids=str
)
def test_every_demo_row_passes_the_admin_validations(demo: None, model: type[Model]) -> None:
    rows = list(model._default_manager.all())
    for row in rows:
        row.full_clean()
    assert len(rows) >= 1


def test_demo_catalog_is_visible_in_the_admin(demo: None, admin_client: Client) -> None:
    page = admin_client.get("/admin/knowledge_base/service/").content.decode()
    assert "AGUA_POTABILIDADE" in page
    assert "Potabilidade da água" in page


def test_bootstrap_writes_a_history_baseline_for_the_demo_catalog(settings: Settings) -> None:
    settings.DEBUG = True
    out = io.StringIO()
    call_command("bootstrap_dev", stdout=out)
    assert "Loaded the demo catalog." in out.getvalue()
    history_counts = {
        model.__name__: model.history.count()
        for model in (Segment, Intent, Service, KBPackage, RuntimeConfig)
    }
    assert history_counts == {
        "Segment": 4,
        "Intent": 4,
        "Service": Service.objects.count(),
        "KBPackage": 4,
        "RuntimeConfig": 1,
    }
    assert (PromptOverride.history.count(), StrategicCompany.history.count()) == (0, 0)
