"""``/metrics`` (config.metrics_view): its bearer token (404 when unset, 401, 403, 200), the
multiprocess mode summing what several processes counted, and the sample Grafana dashboard."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from pytest_django import Settings

from conversations import prometheus as metrics
from tests.helpers.metrics import TOKEN, parse

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("token", "authorization", "status"),
    [
        pytest.param("", f"Bearer {TOKEN}", 404, id="no METRICS_TOKEN: disabled"),
        pytest.param(TOKEN, None, 401, id="no Authorization"),
        pytest.param(TOKEN, f"Basic {TOKEN}", 401, id="not a bearer token"),
        pytest.param(TOKEN, "Bearer wrong", 403, id="a wrong token"),
        pytest.param(TOKEN, f"Bearer {TOKEN}x", 403, id="the token and more"),
        pytest.param(TOKEN, f"Bearer {TOKEN}", 200, id="the token"),
    ],
)
def test_only_the_bearer_of_the_token_reads_the_metrics(
    client: Client, settings: Settings, token: str, authorization: str | None, status: int
) -> None:
    settings.METRICS_TOKEN = token
    headers = {"Authorization": authorization} if authorization else {}

    response = client.get("/metrics", headers=headers)

    assert response.status_code == status
    if status == 401:
        assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    if status == 200:
        assert response["Content-Type"] == "text/plain; version=1.0.0; charset=utf-8"
        assert "no-cache" in response["Cache-Control"]
        assert "# TYPE lab_attendance_turns_total counter" in response.content.decode()


def test_metrics_answer_get_only(client: Client, settings: Settings) -> None:
    settings.METRICS_TOKEN = TOKEN

    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def test_metrics_are_exempt_from_the_https_redirect(client: Client, settings: Settings) -> None:
    settings.METRICS_TOKEN = TOKEN
    settings.SECURE_SSL_REDIRECT = True

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 200


COUNT_IN_A_PROCESS = (
    "import django; django.setup(); from conversations import prometheus as metrics; "
    "metrics.turn_counted('committed'); metrics.send_counted('failed', 131047); "
    "metrics.model_call_observed(agent='triagem', model='gpt-4o-mini', latency_ms=1500, "
    "tokens_input=100, tokens_output=10, tokens_cached=40)"
)


@pytest.mark.slow
def test_the_multiprocess_mode_sums_what_every_process_counted(
    client: Client, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.METRICS_TOKEN = TOKEN
    env = os.environ | {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    for _ in range(2):  # two worker processes
        subprocess.run([sys.executable, "-c", COUNT_IN_A_PROCESS], env=env, cwd=ROOT, check=True)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    samples = parse(response.content.decode())
    call = 'agent="triagem",model="gpt-4o-mini"'
    assert {
        k: v
        for k, v in samples.items()
        if not k.startswith("lab_attendance_model_call_seconds_bucket")
    } == {
        'lab_attendance_turns_total{outcome="committed"}': 2.0,
        'lab_attendance_sends_total{error_code="131047",outcome="failed"}': 2.0,
        f"lab_attendance_model_call_seconds_count{{{call}}}": 2.0,
        f"lab_attendance_model_call_seconds_sum{{{call}}}": 3.0,
        'lab_attendance_model_call_tokens_total{agent="triagem",direction="input",model="gpt-4o-mini"}': 200.0,
        'lab_attendance_model_call_tokens_total{agent="triagem",direction="output",model="gpt-4o-mini"}': 20.0,
        f"lab_attendance_model_call_cached_tokens_total{{{call}}}": 80.0,
        # Twice (60 × 0.15 + 40 × 0.075 + 10 × 0.60) / 1 000 000 USD.
        f"lab_attendance_model_call_cost_usd_total{{{call}}}": 0.000036,
        "lab_attendance_oldest_pending_inbound_age_seconds{}": 0.0,
        "lab_attendance_leases_expired{}": 0.0,
    }
    assert (
        samples[
            'lab_attendance_model_call_seconds_bucket{agent="triagem",le="1.0",model="gpt-4o-mini"}'
        ]
        == 0.0
    )
    assert (
        samples[
            'lab_attendance_model_call_seconds_bucket{agent="triagem",le="2.0",model="gpt-4o-mini"}'
        ]
        == 2.0
    )


def metric_names() -> set[str]:
    """Every series name the endpoint can expose."""
    names = {
        metrics.OLDEST_PENDING_INBOUND,
        metrics.LEASES_EXPIRED,
        metrics.CIRCUIT_STATE,
        f"{metrics.MODEL_CALL_SECONDS._name}_bucket",
        f"{metrics.MODEL_CALL_SECONDS._name}_sum",
        f"{metrics.MODEL_CALL_SECONDS._name}_count",
    }
    counters = [
        metrics.WEBHOOK_DELIVERIES,
        metrics.TURNS,
        metrics.HANDOFFS,
        metrics.MODEL_CALL_TOKENS,
        metrics.MODEL_CALL_CACHED_TOKENS,
        metrics.MODEL_CALL_COST,
        metrics.SENDS,
    ]
    return names | {f"{c._name}_total" for c in counters}


def test_the_grafana_dashboard_charts_only_metrics_that_exist() -> None:
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())

    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    used = {name for expr in expressions for name in re.findall(r"\blab_attendance_[a-z_]+", expr)}
    assert used == metric_names()  # every metric charted, none unknown
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    assert {p["datasource"]["uid"] for p in dashboard["panels"]} == {"${datasource}"}
