"""Files read on the controller are bounded before they are parsed: a device, a file larger than
the cap or JSON nested deeper than the cap is refused naming the bound."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmfleet.seats.plugins.module_utils._common.capped import (
    MAX_JSON_DEPTH,
    ReadCapError,
    load_json,
    loads_bounded,
    read_capped,
)


def test_a_device_is_never_read():
    with pytest.raises(ReadCapError, match=r"^expected a regular file"):
        read_capped("/dev/zero", 1024)


def test_a_file_over_the_cap_is_refused_by_its_size(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1025)
    with pytest.raises(ReadCapError, match=r"^larger than 1 KiB, the most it reads"):
        read_capped(str(path), 1024)
    assert read_capped(str(path), 1025) == b" " * 1025


@pytest.mark.parametrize("text", ["[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
                                  '{"a": ' * 100000 + "1" + "}" * 100000])
def test_json_nested_deeper_than_the_cap_is_refused_before_it_is_parsed(text):
    with pytest.raises(ReadCapError, match=r"^nested deeper than %d levels" % MAX_JSON_DEPTH):
        loads_bounded(text)


def test_brackets_inside_strings_do_not_count_and_a_document_at_the_cap_loads(tmp_path):
    document = {"note": "[[[[{{{{ \\" + '"' + " ]]", "deep": json.loads("[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1))}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(document))
    assert load_json(str(path)) == document
