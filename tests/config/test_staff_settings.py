"""The staff sign-in settings read from the environment: admin URL, session length, lockout."""

import pytest

from tests.config.test_settings import PRODUCTION_ENV, run_python

ROUTES = (
    "import django; django.setup(); from django.conf import settings as s; "
    "from django.urls import Resolver404, resolve, reverse\n"
    "def route(path):\n"
    "    try:\n"
    "        return resolve(path).view_name\n"
    "    except Resolver404:\n"
    "        return '404'\n"
    "print(s.ADMIN_URL, reverse('admin:index'), reverse('admin:login'), "
    "route('/gestao-7f3k/'), route('/admin/'), route('/admin/login/'))\n"
    "from django.test import Client\n"
    "root = Client(HTTP_HOST='atendimento.example.com.br').get('/', secure=True)\n"
    "print(root.status_code, root.get('Location', '-'))"
)


def test_admin_url_moves_the_admin() -> None:
    result = run_python(ROUTES, {**PRODUCTION_ENV, "ADMIN_URL": "gestao-7f3k/"})

    # The bare domain does not give the admin's own path away.
    assert result.stdout.strip().splitlines() == [
        "gestao-7f3k/ /gestao-7f3k/ /gestao-7f3k/login/ admin:index 404 404",
        "404 -",
    ]


def test_the_admin_stays_under_admin_by_default() -> None:
    result = run_python(ROUTES, PRODUCTION_ENV)

    # The bare domain leads to the admin.
    assert result.stdout.strip().splitlines() == [
        "admin/ /admin/ /admin/login/ 404 admin:index admin:login",
        "302 /admin/",
    ]


@pytest.mark.parametrize("value", ["/gestao/", "gestao", "", "gestao//", "<slug:x>/", "a b/"])
def test_a_malformed_admin_url_refuses_to_start(value: str) -> None:
    result = run_python("import django; django.setup()", {**PRODUCTION_ENV, "ADMIN_URL": value})

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"django.core.exceptions.ImproperlyConfigured: ADMIN_URL={value!r}: use a relative path "
        "of letters, digits, '.', '_', '~', '-' that ends with a slash, such as 'admin/'."
    )


SIGN_IN = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.SESSION_COOKIE_AGE, s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME, "
    "s.AXES_LOCKOUT_PARAMETERS, s.AXES_HANDLER, s.USE_X_FORWARDED_FOR)"
)


def test_sign_in_defaults() -> None:
    result = run_python(SIGN_IN, PRODUCTION_ENV)

    assert result.stdout.strip() == (
        "43200 5 0:15:00 [['username', 'ip_address']] "
        "axes.handlers.database.AxesDatabaseHandler False"
    )


def test_sign_in_settings_come_from_the_environment() -> None:
    env = {
        **PRODUCTION_ENV,
        "SESSION_COOKIE_AGE": "3600",
        "AXES_FAILURE_LIMIT": "3",
        "AXES_COOLOFF_MINUTES": "60",
        "USE_X_FORWARDED_FOR": "True",
    }

    result = run_python(SIGN_IN, env)

    assert result.stdout.strip() == (
        "3600 3 1:00:00 [['username', 'ip_address']] "
        "axes.handlers.database.AxesDatabaseHandler True"
    )
