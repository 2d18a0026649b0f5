# The two commands a newcomer types are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help
ENV := . scripts/env.sh &&

.PHONY: help venv demo test units sanity lint bench clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

venv:  ## build .venv and the collection path (idempotent)
	@scripts/bootstrap

demo: venv  ## size the fv-ml1 seats from inventories/fv-ml1 (no GPU needed)
	$(ENV) ansible-playbook -i inventories/fv-ml1 playbooks/kv-sizing.yml

test: venv  ## everything CI runs: unit and integration tests, ansible-test sanity, ansible-lint
	@scripts/test

units: venv  ## pytest only
	@scripts/test units

sanity: venv  ## ansible-test sanity only
	@scripts/test sanity

lint: venv  ## ansible-lint (production profile) only
	@scripts/test lint

bench: venv  ## print sizing and placement figures
	$(ENV) for b in bench/*.py; do python "$$b"; done

clean:  ## remove the venv and build outputs
	rm -rf .venv .build
