"""The apps form layers with no cycles: the import-linter contracts of pyproject.toml hold, and they
catch the cycles a function-level import would hide (docs/architecture.md, Layers).

`make test` runs `lint-imports` too; these tests also pin what the contracts see, on a copy of
the apps with one import added, so a change of configuration or of import-linter that stops
seeing an import inside a function fails here.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
APPS = [
    "config",
    "simulator",
    "support",
    "governance",
    "conversations",
    "prompts_admin",
    "knowledge_base",
    "versioning",
    "staff_auth",
]
APPS += ["whatsapp", "agents", "compat"]
CONTRACTS = [
    "The apps form layers: each imports only the layers below it",
    "agents imports no app",
    "whatsapp (the channel) imports no app and no Django",
    "knowledge_base and prompts_admin do not import conversations or governance",
    "compat (the adapters over libraries' private APIs) imports no app",
]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_of_the_apps(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for app in APPS:
        shutil.copytree(
            ROOT / app,
            tmp_path / app,
            ignore=shutil.ignore_patterns("__pycache__", "static", "templates", "migrations"),
        )
    return tmp_path


def test_the_apps_keep_their_import_contracts() -> None:
    result = lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in result.stdout
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


# Upward edges the contracts must catch, each written the way an import can hide it.
FUNCTION_LEVEL = "\n\ndef _late() -> None:\n    {statement}  # noqa\n"
MODULE_LEVEL = "\n{statement}  # noqa\n"
TYPE_CHECKING = "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    {statement}  # noqa\n"


@pytest.mark.parametrize(
    ("module", "template", "statement", "broken"),
    [
        # The prompt preview read sessions from conversations inside its functions.
        pytest.param(
            "prompts_admin/preview.py",
            FUNCTION_LEVEL,
            "from conversations.models import Session",
            "prompts_admin.preview -> conversations.models",
            id="preview-reads-a-session",
        ),
        pytest.param(
            "prompts_admin/preview.py",
            FUNCTION_LEVEL,
            "from conversations.turns.selectors import session_context",
            "prompts_admin.preview -> conversations.turns.selectors",
            id="preview-builds-the-context",
        ),
        # The catalog's admin took VersionedAdmin from prompts_admin.
        pytest.param(
            "knowledge_base/admin.py",
            MODULE_LEVEL,
            "from prompts_admin.admin import PromptOverrideAdmin",
            "knowledge_base.admin -> prompts_admin.admin",
            id="catalog-admin-from-prompts-admin",
        ),
        # The shared admin may not lean on an app that uses it.
        pytest.param(
            "versioning/admin.py",
            FUNCTION_LEVEL,
            "from knowledge_base.models import KBPackage",
            "versioning.admin -> knowledge_base.models",
            id="shared-admin-reads-an-app",
        ),
        # The pure core imports no app, not even under TYPE_CHECKING.
        pytest.param(
            "agents/invoker.py",
            TYPE_CHECKING,
            "from conversations.models import Session",
            "agents.invoker -> conversations.models",
            id="core-type-checks-on-a-model",
        ),
        pytest.param(
            "agents/sources.py",
            FUNCTION_LEVEL,
            "from prompts_admin.models import PromptOverride",
            "agents.sources -> prompts_admin.models",
            id="core-reads-an-override",
        ),
        pytest.param(
            "knowledge_base/selectors.py",
            FUNCTION_LEVEL,
            "from conversations.models import Message",
            "knowledge_base.selectors -> conversations.models",
            id="catalog-reads-messages",
        ),
        # The store announces a handoff; it does not call the support app's alert.
        pytest.param(
            "conversations/handoff.py",
            MODULE_LEVEL,
            "from support.tasks import enqueue_handoff_alert",
            "conversations.handoff -> support.tasks",
            id="store-alerts-the-team",
        ),
        pytest.param(
            "conversations/turns/commit.py",
            FUNCTION_LEVEL,
            "from simulator.simulation import SimulationError",
            "conversations.turns.commit -> simulator.simulation",
            id="bot-knows-the-simulator",
        ),
        # The simulator registers its page under the session admin; support never imports it.
        pytest.param(
            "support/admin/sessions.py",
            MODULE_LEVEL,
            "from simulator.admin import simulator_urls",
            "support.admin.sessions -> simulator.admin",
            id="session-admin-hosts-the-simulator",
        ),
        # The channel parses and sends; it reads no model and no setting.
        pytest.param(
            "whatsapp/payload.py",
            FUNCTION_LEVEL,
            "from conversations.models import Instance",
            "whatsapp.payload -> conversations.models",
            id="channel-reads-a-model",
        ),
        pytest.param(
            "whatsapp/client.py",
            MODULE_LEVEL,
            "from django.conf import settings",
            "whatsapp.client -> django",
            id="channel-reads-settings",
        ),
        # The adapters over libraries' private APIs sit below every app.
        pytest.param(
            "compat/django_private.py",
            FUNCTION_LEVEL,
            "from conversations.models import Session",
            "compat.django_private -> conversations.models",
            id="adapter-reads-a-model",
        ),
    ],
)
def test_an_upward_import_breaks_a_contract_wherever_it_is_written(
    tmp_path: Path, module: str, template: str, statement: str, broken: str
) -> None:
    apps = copy_of_the_apps(tmp_path)

    with (apps / module).open("a") as source:
        source.write(template.format(statement=statement))
    result = lint_imports(apps)

    assert result.returncode == 1
    assert broken in result.stdout


# Within the layers, no module imports itself back through another (grimp is import-linter's
# graph: every import statement, in functions and under TYPE_CHECKING included).
CYCLES_SCRIPT = """
import grimp
graph = grimp.build_graph(*{apps!r}, cache_dir=None)
for module in sorted(graph.modules):
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
        if graph.chain_exists(importer=imported, imported=module):
            print(module, "<->", imported)
"""


def import_cycles(cwd: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", CYCLES_SCRIPT.format(apps=APPS)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.splitlines()


def test_no_module_imports_itself_back_through_another() -> None:
    assert import_cycles(ROOT) == []


def test_a_function_level_import_back_is_a_cycle(tmp_path: Path) -> None:
    apps = copy_of_the_apps(tmp_path)

    with (apps / "conversations/publishers.py").open("a") as source:
        source.write(FUNCTION_LEVEL.format(statement="import conversations.inbound.tasks"))

    assert import_cycles(apps) == [
        "conversations.inbound.tasks <-> conversations.publishers",
        "conversations.publishers <-> conversations.inbound.tasks",
    ]
