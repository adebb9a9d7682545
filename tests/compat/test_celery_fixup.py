"""config.celery_fixup, the project's adapter over Celery's Django fix-up: the classes and
receivers it overrides exist as it uses them, on the Celery version pyproject.toml pins — an
upgrade of Celery fails here first. (Its behaviour: tests/config/test_celery_fixup.py.)"""

import inspect

from celery.fixups import django as celery_django

from config.celery_fixup import CHECKED_VERSIONS, WorkerFixup
from tests.compat.pins import assert_pinned


def test_the_checked_version_is_pyprojects_and_the_installed_one() -> None:
    assert CHECKED_VERSIONS == {"celery": "~=5.7"}
    assert_pinned(CHECKED_VERSIONS)


def test_the_receivers_the_worker_fixup_overrides_exist_and_install_connects_them() -> None:
    # DjangoWorkerFixup is absent from celery-types' stubs.
    base = celery_django.DjangoWorkerFixup  # type: ignore[attr-defined]
    install = inspect.getsource(base.install)

    assert list(inspect.signature(base.on_task_prerun).parameters) == ["self", "sender", "kwargs"]
    assert list(inspect.signature(base.on_task_postrun).parameters) == ["self", "sender", "kwargs"]
    assert "signals.task_prerun.connect(self.on_task_prerun)" in install
    assert "signals.task_postrun.connect(self.on_task_postrun)" in install
    assert isinstance(inspect.getattr_static(celery_django.DjangoFixup, "worker_fixup"), property)
    assert "self.worker_fixup.install()" in inspect.getsource(
        celery_django.DjangoFixup.on_worker_init
    )
    assert WorkerFixup.on_task_postrun is not base.on_task_postrun
