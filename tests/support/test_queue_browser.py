"""The queue in a real browser: Support logs in, the queue shows a handed-off customer, refreshes
itself in place (scroll and filter kept, no reload), and a click opens the conversation page.

Playwright drives Debian's chromium (`CHROMIUM`, launched by path, never downloaded). Screenshots
of the queue and the conversation page at 1,366 px go to `BROWSER_SCREENSHOTS_DIR` (default: a
new temporary directory); the path is printed.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone
from model_bakery import baker
from pytest_django.live_server_helper import LiveServer

from conversations.models import Direction, HandoffSummary, Instance, Message, Session
from tests.helpers.browser import PASSWORD, VIEWPORT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def support_user(username: str, **fields: Any) -> User:
    """A Support member. A transactional test (here or before) empties the tables, and the
    groups come from data migrations, so the group is made again with what the queue and the
    conversation page need of Support's permissions."""
    group, _created = Group.objects.get_or_create(name="Support")
    group.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="conversations",
            codename__in=["view_session", "view_personal_data", "attend_session"],
        )
    )
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True, **fields)
    user.groups.add(group)
    return user


def waiting_customer(instance: Instance, *, name: str, phone: str, minutes: int) -> Session:
    at = timezone.now() - timedelta(minutes=minutes)
    session = baker.make(
        Session,
        instance=instance,
        state="HUMAN",
        customer_name=name,
        customer_phone=phone,
        handoff_reason="model_requested",
        handoff_detail="pedido_cliente",
        handed_off_at=at,
        last_inbound_at=at,
        last_message_at=at,
    )
    Message.objects.create(
        session=session, direction=Direction.INBOUND, content="Quero falar com uma pessoa"
    )
    return session


def test_support_opens_a_waiting_customer_from_the_queue(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    support_user("ana", first_name="Ana")
    instance = baker.make(Instance, name="Vale Analítico", display_phone="551140000000")
    maria = waiting_customer(instance, name="Maria Souza", phone="5511912345678", minutes=40)
    baker.make(HandoffSummary, session=maria, next_action="Enviar orçamento de potabilidade")
    for i in range(25):  # enough rows to scroll
        waiting_customer(instance, name=f"Cliente {i}", phone=f"55119000000{i:02d}", minutes=i)
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/queue/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/queue/")

    first = page.locator("#queue-rows tr").first
    assert first.locator(".queue-customer").inner_text() == "Maria Souza (+55 11 91234-5678)"
    assert first.locator(".queue-reason").inner_text() == "Cliente pediu um atendente"
    assert first.locator(".queue-waiting").inner_text() == "40 min"
    assert first.get_attribute("class") == "queue-row sla-late"
    assert first.locator(".queue-next-action").inner_text() == "Enviar orçamento de potabilidade"
    assert page.locator("#waiting-customers strong").inner_text() == "26"
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "queue.png"), full_page=True)

    # A new customer waits: the page refreshes itself in place, scroll position kept.
    page.evaluate("window.__notReloaded = true; window.scrollTo(0, 400)")
    waiting_customer(instance, name="João Lima", phone="5511987654321", minutes=60)
    assert page.evaluate("window.queueRefresh()") is True
    assert page.locator("#queue-rows tr").first.locator(".queue-customer").inner_text() == (
        "João Lima (+55 11 98765-4321)"
    )
    assert page.locator("#waiting-customers strong").inner_text() == "27"
    assert page.locator("#queue-count").inner_text() == "27 clientes aguardando"
    assert page.evaluate("window.__notReloaded") is True
    assert page.evaluate("window.scrollY") == 400
    page.evaluate("window.scrollTo(0, 0)")

    page.get_by_role("link", name="Maria Souza (+55 11 91234-5678)").click()
    page.wait_for_url(f"**/admin/conversations/session/{maria.pk}/change/")
    assert "Quero falar com uma pessoa" in page.locator("ol.transcript").inner_text()
    page.screenshot(path=str(screenshots_dir / "conversation.png"), full_page=True)


def test_the_mine_filter_survives_the_refresh(live_server: LiveServer, browser_page: Any) -> None:
    user = support_user("ana")
    instance = baker.make(Instance)
    mine = waiting_customer(instance, name="Maria Souza", phone="5511912345678", minutes=5)
    mine.assigned_to = user
    mine.save()
    waiting_customer(instance, name="Outro Cliente", phone="5511911111111", minutes=9)
    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/queue/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.get_by_role("link", name="Minhas").click()
    page.wait_for_url("**/queue/?assigned=me")

    newer = waiting_customer(instance, name="Nova Cliente", phone="5511922222222", minutes=30)
    newer.assigned_to = user
    newer.save()
    assert page.evaluate("window.queueRefresh()") is True

    names = page.locator("#queue-rows .queue-customer").all_inner_texts()
    assert names == ["Nova Cliente (+55 11 92222-2222)", "Maria Souza (+55 11 91234-5678)"]
    assert page.url.endswith("/queue/?assigned=me")


def test_a_refresh_after_the_login_expired_leaves_the_page_as_it_is(
    live_server: LiveServer, browser_page: Any
) -> None:
    support_user("ana")
    waiting_customer(baker.make(Instance), name="Maria Souza", phone="5511912345678", minutes=5)
    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/queue/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/queue/")

    page.context.clear_cookies()  # the staff login is gone: the fetch lands on the login page

    assert page.evaluate("window.queueRefresh()") is False
    assert page.locator("#queue-rows .queue-customer").all_inner_texts() == [
        "Maria Souza (+55 11 91234-5678)"
    ]


NOTIFICATION_RECORDER = """
window.__notifications = [];
window.Notification = function (title, options) {
  window.__notifications.push({ title: title, body: options.body });
};
window.Notification.permission = "granted";
window.Notification.requestPermission = function () { return Promise.resolve("granted"); };
"""


def test_who_opted_in_is_notified_when_a_customer_joins(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    support_user("ana")
    instance = baker.make(Instance)
    waiting_customer(instance, name="Maria Souza", phone="5511912345678", minutes=5)
    page = browser_page
    # The browser's notifications, recorded: headless chromium shows none.
    page.add_init_script(NOTIFICATION_RECORDER)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/queue/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/queue/")
    title = page.title()

    # Not opted in: no notification, no badge.
    waiting_customer(instance, name="João Lima", phone="5511987654321", minutes=1)
    assert page.evaluate("window.queueRefresh()") is True
    assert page.evaluate("window.__notifications") == []
    assert page.title() == title

    page.check("#queue-notify")
    assert page.evaluate("localStorage.getItem('support.queue.notify')") == "1"
    waiting_customer(instance, name="Nova Cliente", phone="5511922222222", minutes=0)
    assert page.evaluate("window.queueRefresh()") is True

    assert page.evaluate("window.__notifications") == [
        {"title": "Um cliente entrou na fila", "body": "Nova Cliente (+55 11 92222-2222)"}
    ]
    assert page.title() == f"(1) {title}"
    page.screenshot(path=str(screenshots_dir / "queue-notify.png"))
    # Looking at the page clears the badge; the choice survives a reload.
    page.click("#queue-count")
    assert page.title() == title
    page.reload()
    assert page.is_checked("#queue-notify")
