"""Reading `/metrics` as a scraper does: the samples of its Prometheus text by name and labels."""

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "test-metrics-token"


def parse(text: str) -> dict[str, float]:
    """``{'name{label="value",…}': value}`` for every sample (labels sorted by name)."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def scrape(client: Client) -> dict[str, float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return parse(response.content.decode())


def increase(before: dict[str, float], after: dict[str, float], prefix: str) -> dict[str, float]:
    """What changed between two scrapes among the samples whose key starts with `prefix`
    (the counters are the process's, shared by every test: a test asserts its own increase)."""
    return {
        key: round(value - before.get(key, 0.0), 9)
        for key, value in after.items()
        if key.startswith(prefix) and value != before.get(key, 0.0)
    }
