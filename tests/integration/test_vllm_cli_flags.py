"""The collection's table of each release's ``vllm serve`` flags and parser names
(plugins/module_utils/_engines/vllm_flags.py) is what each release's own source defines:
regenerated from the wheels' sources (tests/differential/vllm_cli_flags.py) it must come out
byte for byte."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests" / "differential"))
import vllm_cli_flags  # noqa: E402  (the differential's reader)

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_the_table_is_what_each_releases_source_defines():
    regenerated = vllm_cli_flags.table_text(
        {release: vllm_cli_flags.flags_of(release) for release in vllm_cli_flags.RELEASES},
        {release: vllm_cli_flags.parsers_of(release) for release in vllm_cli_flags.RELEASES})
    assert regenerated == vllm_cli_flags.TABLE.read_text(), \
        "stale: run python tests/differential/vllm_cli_flags.py --write"
