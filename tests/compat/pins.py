"""Shared check of the adapters' pins: the specifier an adapter was checked against is the one
pyproject.toml declares, and the installed version satisfies it."""

import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def declared_specifiers() -> dict[str, str]:
    """Each dependency's name (canonical) -> its specifier, as pyproject.toml declares it."""
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirements = [Requirement(line) for line in dependencies]
    return {canonicalize_name(r.name): str(r.specifier) for r in requirements}


def assert_pinned(
    checked: dict[str, str], installed_version: Callable[[str], str] = version
) -> None:
    declared = declared_specifiers()
    for name, specifier in checked.items():
        assert declared[canonicalize_name(name)] == specifier, (
            f"pyproject.toml now declares {name}{declared[canonicalize_name(name)]}; the adapter "
            f"was checked against {name}{specifier}: check its private APIs, then update both"
        )
        installed = installed_version(name)
        assert Requirement(f"{name}{specifier}").specifier.contains(installed), (
            f"{name} {installed} is installed; the adapter was checked against {name}{specifier}"
        )
