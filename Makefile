# Developer shortcuts; CI runs .ci/run (the README's test command) only.
PY ?= python

.PHONY: install test check format bench

install:
	$(PY) -m pip install -e ".[test]"

test:
	$(PY) -m pytest

check:
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy

format:
	$(PY) -m ruff format src tests benchmarks
	$(PY) -m ruff check --fix src tests benchmarks

bench:
	$(PY) benchmarks/run.py
