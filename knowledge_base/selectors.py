"""The knowledge base as the agents read it: `DatabaseKBSource` (an `agents.sources.KBSource`).

`catalog()` is one query per table (segments, intents, services with their segment code,
packages without their content) whatever the catalog's size; `load_packages()` is one query that
also reads each package's latest history id, so a recorded call names the exact version it saw.
Only active rows are returned; a service of an inactive segment is not offered.
"""

import json
import logging
from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connections
from django.db.models import OuterRef, Subquery

from agents.context import CatalogSnapshot, IntentInfo, PackageInfo, SegmentInfo, ServiceInfo
from agents.parameters import ParameterSchemaError, parse_parameter_schema
from knowledge_base.models import Intent, KBPackage, Segment, Service

logger = logging.getLogger(__name__)


@cache
def _historical_package() -> Any:
    # simple-history builds a new manager on every `KBPackage.history` access (~1 ms); the
    # historical model itself never changes.
    return KBPackage.history.model


def _latest_history_id() -> Subquery:
    return Subquery(
        _historical_package()
        .objects.filter(id=OuterRef("pk"))
        .order_by("-history_id")
        .values("history_id")[:1]
    )


# The catalog's four reads, hand-written: every turn reads the catalog, and compiling the ORM's
# four queries cost the worker more CPU than running them (bench/worker_cpu.py).
# tests/knowledge_base/test_catalog_sql.py checks them against the ORM's, quoted here.
# Segment.objects.filter(is_active=True).order_by("code")
#     .values_list("code", "label", "health_sensitive")
SEGMENTS_SQL = f"""SELECT code, label, health_sensitive FROM {Segment._meta.db_table}
    WHERE is_active ORDER BY code"""
# Intent.objects.filter(is_active=True).order_by("code").values_list("code", "label")
INTENTS_SQL = f"SELECT code, label FROM {Intent._meta.db_table} WHERE is_active ORDER BY code"
# Service.objects.filter(is_active=True, segment__is_active=True)
#     .order_by("segment__code", "code")
#     .values_list("code", "label", "segment__code", "description", "parameter_schema")
SERVICES_SQL = f"""SELECT service.code, service.label, segment.code, service.description,
        service.parameter_schema
    FROM {Service._meta.db_table} service
    JOIN {Segment._meta.db_table} segment ON segment.id = service.segment_id
    WHERE service.is_active AND segment.is_active
    ORDER BY segment.code, service.code"""
# KBPackage.objects.filter(is_active=True).order_by("package_id")
#     .values_list("package_id", "title", "description", "health_sensitive")
PACKAGES_SQL = f"""SELECT package_id, title, description, health_sensitive
    FROM {KBPackage._meta.db_table} WHERE is_active ORDER BY package_id"""


class DatabaseKBSource:
    def catalog(self) -> CatalogSnapshot:
        with connections[Segment.objects.db].cursor() as cursor:
            cursor.execute(SEGMENTS_SQL)
            segments = {
                code: SegmentInfo(code, label, bool(health_sensitive))
                for code, label, health_sensitive in cursor.fetchall()
            }
            cursor.execute(INTENTS_SQL)
            intents = {code: IntentInfo(code, label) for code, label in cursor.fetchall()}
            cursor.execute(SERVICES_SQL)
            rows = cursor.fetchall()
            cursor.execute(PACKAGES_SQL)
            packages = {
                package_id: PackageInfo(package_id, title, description, bool(health_sensitive))
                for package_id, title, description, health_sensitive in cursor.fetchall()
            }
        services: dict[str, ServiceInfo] = {}
        for code, label, segment, description, stored_schema in rows:
            # As the JSONField reads it: PostgreSQL's jsonb and SQLite's text arrive as text.
            schema = json.loads(stored_schema) if isinstance(stored_schema, str) else stored_schema
            try:
                parameters = tuple(parse_parameter_schema(schema))
            except ParameterSchemaError as exc:
                # Saved schemas are validated; a bad one in the database must not stop every
                # conversation, so the service is offered without parameters and logged.
                logger.error("service_schema_invalid", extra={"service": code, "error": str(exc)})
                parameters = ()
            services[code] = ServiceInfo(code, label, segment, description, parameters)
        return CatalogSnapshot(
            segments=segments, intents=intents, services=services, packages=packages
        )

    def load_packages(self, package_ids: Sequence[str]) -> dict[str, PackageInfo]:
        if not package_ids:
            return {}
        rows = (
            KBPackage.objects.filter(is_active=True, package_id__in=list(package_ids))
            .annotate(version=_latest_history_id())
            .values_list(
                "package_id", "title", "description", "health_sensitive", "content", "version"
            )
        )
        return {
            package_id: PackageInfo(
                package_id, title, description, health_sensitive, content, version
            )
            for package_id, title, description, health_sensitive, content, version in rows
        }
