"""The Content-Security-Policy: its exact header on the admin, and the admin's pages written so that
they work under it — every script and stylesheet a same-origin file, no inline <script> or <style>
without a nonce the header allows, no style or on* attributes, no javascript: URLs.
"""

import uuid
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.test import Client
from model_bakery import baker

from conversations.models import Direction, HandoffSummary, Message, Session, WebhookDelivery
from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes
from versioning.admin import history_of

pytestmark = pytest.mark.django_db

EXPECTED_POLICY = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'"],
    "media-src": ["'self'"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
}


def parse_policy(header: str) -> dict[str, list[str]]:
    directives = {}
    for part in header.split(";"):
        name, *sources = part.split()
        directives[name] = sources
    return directives


class PolicyViolations(HTMLParser):
    """What a browser enforcing the policy would block (or what would need 'unsafe-inline')."""

    def __init__(self, nonces: set[str]) -> None:
        super().__init__()
        self.nonces = nonces
        self.violations: list[str] = []
        self.scripts: list[str] = []
        self.stylesheets: list[str] = []
        self._inline: str | None = None

    @staticmethod
    def same_origin(url: str) -> bool:
        return url.startswith("/") and not url.startswith("//")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        for name, value in attrs:
            if name == "style":
                self.violations.append(f"<{tag} style=...>")
            if name.startswith("on"):
                self.violations.append(f"<{tag} {name}=...>")
            if (value or "").strip().lower().startswith("javascript:"):
                self.violations.append(f"<{tag} {name}=javascript:...>")
        nonce = attributes.get("nonce")
        if tag == "script":
            src = attributes.get("src")
            if src:
                self.scripts.append(src)
                if not self.same_origin(src):
                    self.violations.append(f"<script src={src}>")
            elif nonce not in self.nonces:
                self._inline = "script"
                self.violations.append("inline <script> without an allowed nonce")
        elif tag == "style" and nonce not in self.nonces:
            self.violations.append("inline <style> without an allowed nonce")
        elif tag == "link" and attributes.get("rel") == "stylesheet":
            href = attributes.get("href") or ""
            self.stylesheets.append(href)
            if not self.same_origin(href):
                self.violations.append(f"<link href={href}>")
        elif tag == "img" and not self.same_origin(attributes.get("src") or ""):
            self.violations.append(f"<img src={attributes.get('src')}>")


def check_page(client: Client, url: str, status: int = 200) -> PolicyViolations:
    response = client.get(url)
    assert response.status_code == status, url
    policy = parse_policy(response.headers["Content-Security-Policy"])
    assert policy == EXPECTED_POLICY, url
    nonces = {
        source[len("'nonce-") : -1]
        for source in policy.get("script-src", []) + policy.get("style-src", [])
        if source.startswith("'nonce-")
    }
    parser = PolicyViolations(nonces)
    parser.feed(response.content.decode())
    assert parser.violations == [], url
    return parser


@pytest.fixture
def session() -> Session:
    session = baker.make(
        Session,
        instance=recipes.instance.make(name="Vale"),
        customer_name="Maria Souza",
        state="HUMAN",
    )
    turn = uuid.uuid4()
    baker.make(Message, session=session, direction=Direction.INBOUND, content="Olá", turn_id=turn)
    baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content="<script>alert(1)</script>",
        turn_id=turn,
    )
    baker.make(Message, session=session, direction=Direction.SYSTEM, message_type="handoff")
    baker.make(
        HandoffSummary,
        session=session,
        key_points=["quer analisar água"],
        collected_data={"nome": "Maria"},
    )
    return session


@pytest.fixture
def versioned() -> tuple[PromptOverride, KBPackage]:
    override = PromptOverride.objects.create(agent="triagem", content="Olá {{ agent_name }}")
    override.content = "Oi {{ agent_name }}"
    override.save()
    package = KBPackage.objects.create(
        package_id="PREPARO", title="Preparo", description="Preparo de exames", content="Jejum"
    )
    return override, package


def test_the_login_page_works_under_the_policy(client: Client) -> None:
    page = check_page(client, "/admin/login/")

    assert page.stylesheets == [
        "/static/admin/css/base.css",
        "/static/admin/css/dark_mode.css",
        "/static/admin/css/nav_sidebar.css",
        "/static/admin/css/login.css",
        "/static/admin/css/responsive.css",
    ]


@pytest.mark.parametrize(
    "url",
    [
        "/admin/",
        "/admin/conversations/session/",
        "/admin/conversations/message/",
        "/admin/prompts_admin/promptoverride/",
        "/admin/prompts_admin/promptoverride/add/",
        "/admin/knowledge_base/kbpackage/",
        "/admin/knowledge_base/kbpackage/add/",
        "/admin/prompts_admin/promptoverride/preview/triagem/",
        "/admin/axes/accessattempt/",
    ],
)
def test_admin_lists_and_forms_work_under_the_policy(admin_client: Client, url: str) -> None:
    check_page(admin_client, url)


def test_the_session_transcript_works_under_the_policy(
    admin_client: Client, session: Session
) -> None:
    page = check_page(admin_client, f"/admin/conversations/session/{session.pk}/change/")

    assert "/static/support/admin/session.css" in page.stylesheets
    assert page.scripts  # Django's admin scripts, every one a same-origin file


def test_a_webhook_delivery_page_works_under_the_policy(admin_client: Client) -> None:
    delivery = baker.make(
        WebhookDelivery, raw_body=b'{"object": "whatsapp_business_account"}', outcome="processed"
    )

    page = check_page(admin_client, f"/admin/conversations/webhookdelivery/{delivery.pk}/change/")

    assert "/static/conversations/admin/webhook_delivery.css" in page.stylesheets


def test_the_queue_and_its_refresh_script_work_under_the_policy(
    admin_client: Client, session: Session
) -> None:
    page = check_page(admin_client, "/admin/conversations/session/queue/")

    assert "/static/support/admin/queue.css" in page.stylesheets
    assert "/static/support/admin/queue.js" in page.scripts


def test_the_prompt_preview_works_under_the_policy(
    admin_client: Client, session: Session, versioned: tuple[PromptOverride, KBPackage]
) -> None:
    override, _package = versioned
    page = check_page(
        admin_client,
        f"/admin/prompts_admin/promptoverride/{override.pk}/preview/?session={session.pk}",
    )

    assert "/static/prompts_admin/admin/prompt_tools.css" in page.stylesheets


def test_the_versioned_change_forms_and_history_work_under_the_policy(
    admin_client: Client, versioned: tuple[PromptOverride, KBPackage]
) -> None:
    override, package = versioned
    for obj, base in [
        (override, "/admin/prompts_admin/promptoverride/"),
        (package, "/admin/knowledge_base/kbpackage/"),
    ]:
        version = history_of(obj).earliest().history_id
        for url in [
            f"{base}{obj.pk}/change/",
            f"{base}{obj.pk}/history/",
            f"{base}{obj.pk}/history/compare/",
            f"{base}{obj.pk}/history/{version}/",
        ]:
            page = check_page(admin_client, url)
            assert "/static/versioning/admin/versioned.css" in page.stylesheets, url


def test_the_monospace_text_areas_take_their_font_from_a_class(
    admin_client: Client, versioned: tuple[PromptOverride, KBPackage]
) -> None:
    override, _package = versioned
    page = admin_client.get(f"/admin/prompts_admin/promptoverride/{override.pk}/change/")

    assert 'class="vLargeTextField monospace"' in page.content.decode()


def test_the_lockout_page_works_under_the_policy(client: Client) -> None:
    User.objects.create_user("alice", password="Senha-correta-2026!", is_staff=True)
    for _ in range(5):
        client.post("/admin/login/", {"username": "alice", "password": "errada"})

    response = client.post("/admin/login/", {"username": "alice", "password": "errada"})

    assert response.status_code == 429
    assert parse_policy(response.headers["Content-Security-Policy"]) == EXPECTED_POLICY
    parser = PolicyViolations(set())
    parser.feed(response.content.decode())
    assert parser.violations == []


def test_a_page_with_an_inline_script_or_style_is_caught() -> None:
    """The checker itself: what it must flag."""
    parser = PolicyViolations({"abc"})
    parser.feed(
        '<script>alert(1)</script><script nonce="abc">ok()</script>'
        '<script src="https://cdn.example.com/x.js"></script><style>p{}</style>'
        '<p style="color:red" onclick="x()"><a href="javascript:alert(1)">x</a></p>'
    )

    assert parser.violations == [
        "inline <script> without an allowed nonce",
        "<script src=https://cdn.example.com/x.js>",
        "inline <style> without an allowed nonce",
        "<p style=...>",
        "<p onclick=...>",
        "<a href=javascript:...>",
    ]


def test_other_responses_carry_the_policy_too(client: Client) -> None:
    response = client.get("/healthz")

    assert parse_policy(response.headers["Content-Security-Policy"]) == EXPECTED_POLICY
