"""The knowledge base as the agents read it: `DatabaseKBSource` (an `agents.sources.KBSource`).

`catalog()` is one query per table (segments, intents, services with their segment code,
packages without their content) whatever the catalog's size; its packages and `load_packages()`
also read each package's latest history id in the same query, so a session pins the versions of
its first turn and a recorded call names the exact version it saw. Only active rows are returned;
a service of an inactive segment is not offered. `load_packages()` given versions reads the
pinned ones in one query, and the live ones only for those it could not read.
"""

import logging
from collections.abc import Mapping, Sequence

from agents.context import CatalogSnapshot, IntentInfo, PackageInfo, SegmentInfo, ServiceInfo
from agents.parameters import ParameterSchemaError, ParameterSpec, parse_parameter_schema
from knowledge_base.models import Intent, KBPackage, Segment, Service
from versioning.history import historical_model, latest_version

logger = logging.getLogger(__name__)


class DatabaseKBSource:
    def catalog(self) -> CatalogSnapshot:
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
            code: ServiceInfo(code, label, segment, description, _parameters(code, schema))
            for code, label, segment, description, schema in Service.objects.filter(
                is_active=True, segment__is_active=True
            )
            .order_by("segment__code", "code")
            .values_list("code", "label", "segment__code", "description", "parameter_schema")
        }
        return CatalogSnapshot(
            segments=segments, intents=intents, services=services, packages=self.packages()
        )

    def packages(self) -> dict[str, PackageInfo]:
        """The catalog's packages: the active ones with their version, without content (one
        query)."""
        return {
            package_id: PackageInfo(package_id, title, description, health, version=version)
            for package_id, title, description, health, version in KBPackage.objects.filter(
                is_active=True
            )
            .annotate(version=latest_version(KBPackage))
            .order_by("package_id")
            .values_list("package_id", "title", "description", "health_sensitive", "version")
        }

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        pinned = {pid: versions[pid] for pid in package_ids if versions and pid in versions}
        found: dict[str, PackageInfo] = {}
        if pinned:
            rows = (
                historical_model(KBPackage)
                .objects.filter(history_id__in=list(pinned.values()))
                .values_list(*_PACKAGE_COLUMNS, "history_id")
            )
            # A history id of another package (a stale or hand-written pin) is not this one's.
            found = {row[0]: PackageInfo(*row) for row in rows if pinned.get(row[0]) == row[-1]}
        missing = [pid for pid in package_ids if pid not in found]
        if not missing:
            return found
        rows = (
            KBPackage.objects.filter(is_active=True, package_id__in=missing)
            .annotate(version=latest_version(KBPackage))
            .values_list(*_PACKAGE_COLUMNS, "version")
        )
        return found | {row[0]: PackageInfo(*row) for row in rows}


_PACKAGE_COLUMNS = ("package_id", "title", "description", "health_sensitive", "content")


def _parameters(service: str, schema: object) -> tuple[ParameterSpec, ...]:
    try:
        return tuple(parse_parameter_schema(schema))
    except ParameterSchemaError as exc:
        # Saved schemas are validated; a bad one in the database must not stop every
        # conversation, so the service is offered without parameters and logged.
        logger.error("service_schema_invalid", extra={"service": service, "error": str(exc)})
        return ()
