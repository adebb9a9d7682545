# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
# pytest-xdist workers for `make test`: auto = one per CPU core; 0 runs in one process (--pdb).
TEST_WORKERS ?= auto

.PHONY: run test install install-dev lint format migrate bootstrap serve worker beat messages clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Re-install only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[dev]"
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

.env:
	cp .env.example .env
	@echo "Created .env from .env.example (DEBUG=True, SQLite, eager Celery)."

migrate: install .env
	$(PY) manage.py migrate --noinput

bootstrap: migrate
	$(PY) manage.py bootstrap_dev

serve:
	$(PY) manage.py runserver $(HOST):$(PORT)

## make run: install, migrate SQLite, load the demo catalog and conversations, create a local admin, serve on :8000
run: bootstrap serve

## make test: lint, formatting, types, import contracts, migrations check and the test suite,
## on PostgreSQL when it answers on 127.0.0.1:5432 (else SQLite); the first lines say which (docs/development.md).
test: install-dev .env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	DEBUG=True ENV_FILE=/nonexistent $(PY) manage.py makemigrations --check --dry-run
	$(PY) scripts/with_test_services.py $(VENV)/bin/pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=INFO

beat: install
	$(VENV)/bin/celery -A config beat --loglevel=INFO

messages: install
	DEBUG=True $(PY) manage.py makemessages -l pt_BR --ignore=.venv
	DEBUG=True $(PY) manage.py compilemessages --ignore=.venv

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
