# The two commands a newcomer types are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help
ENV := . scripts/env.sh &&
# the releases the backend grid of kv-releases runs: every modelled one
KV_BACKEND_RELEASES := 0.10.2 0.11.2 0.12.0 0.13.0 0.14.1 0.15.1 0.16.0 0.17.1 0.18.1 0.19.1 0.20.2 0.21.0 0.22.1 0.23.0 \
	0.24.0 0.25.1 0.26.0 0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0

.PHONY: help venv sanity-venvs system-deps demo plan sizing test units sanity lint cores bench kv-releases clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

venv:  ## build .venv and the collection path (idempotent)
	@scripts/bootstrap

# ansible-test builds them on a first sanity run (about 30 CPU-seconds): installed before the tests
# start, not in the middle of their lanes
sanity-venvs: venv  ## build ansible-test sanity's venvs (once; make test and make sanity need them)
	@out=$$(scripts/test sanity --prime-venvs 2>&1) || { echo "$$out"; exit 1; }

system-deps:  ## install Docker, compose v2, sshd, gcc when missing (root; CI does it too)
	@if [ "$$(id -u)" = 0 ]; then scripts/install-system-deps; \
	 else echo "not root: skipping system packages (the twin and docker tests need them)"; fi

demo: system-deps venv  ## rehearse fv-ml1's rebalance on a twin of it: plan, dry run, gated apply, report (root, no GPU)
	@scripts/demo

plan: venv  ## print fv-ml1's plan from its inventory and recorded plateau snapshot (no host needed)
	$(ENV) ansible-playbook -i inventories/fv-ml1/hosts.yml playbooks/plan.yml \
	  -e seat_plan_cards_source=snapshot \
	  -e seat_plan_cards_snapshot=$(CURDIR)/inventories/fv-ml1/snapshots/plateau-20261007.json

sizing: venv  ## size the fv-ml1 seats' KV caches from inventories/fv-ml1
	$(ENV) ansible-playbook -i inventories/fv-ml1/hosts.yml playbooks/kv_sizing.yml

test: system-deps venv sanity-venvs  ## everything CI runs: unit and integration tests, ansible-test sanity, ansible-lint
	@scripts/test

units: venv  ## pytest only
	@scripts/test units

sanity: venv sanity-venvs  ## ansible-test sanity only
	@scripts/test sanity

lint: venv  ## ansible-lint (production profile) only
	@scripts/test lint

cores: venv  ## the unit tests and sanity on the other ansible-cores the collection supports (2.17, 2.18, 2.20, 2.21)
	@scripts/test cores

bench: venv  ## print sizing and placement figures
	$(ENV) for b in bench/*.py; do python "$$b"; done

kv-releases: venv  ## the full KV differential sweep: every modelled vLLM release against its own planning code (reads its sources out of its wheel on PyPI once, a few MB)
	$(ENV) python tests/differential/run_release_differential.py --release all --cases 1000 --report .build/kv-releases.json
	$(ENV) for release in $(KV_BACKEND_RELEASES); do python tests/differential/run_release_differential.py \
		--release $$release --backend-grid --report .build/kv-backends-$$release.json || exit 1; done

clean:  ## remove the venv and build outputs
	rm -rf .venv .build
