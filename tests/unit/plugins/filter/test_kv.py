"""The KV and size filters: the module's numbers, AnsibleFilterError on bad input (a real
render through ansible runs in tests/integration/test_kv_budget_ansible.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.seats.plugins.filter.kv import FilterModule

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "model_configs"
FILTERS = FilterModule().filters()
QWEN3_8B = json.loads((FIXTURES / "qwen3-8b.json").read_text())


def test_every_filter_has_its_yaml_doc():
    docs = {path.stem for path in (Path(__file__).resolve().parents[4] / "plugins" / "filter")
            .glob("*.yml")}
    assert set(FILTERS) <= docs


def test_kv_cache_tokens_and_bytes():
    assert FILTERS["kv_cache_tokens"](QWEN3_8B, 32768, "8G") == 58240
    assert FILTERS["kv_cache_tokens"](str(FIXTURES / "qwen3-8b.json"), 32768, 8 * 2 ** 30,
                                      kv_cache_dtype="fp8") == 116496
    assert FILTERS["kv_cache_bytes"](QWEN3_8B, "published") == 8053063680
    # 1.07 x 2,560 blocks = 2,740 blocks of 2,359,296 bytes, rounded up to 25 x 256 MiB
    assert FILTERS["kv_cache_bytes"](QWEN3_8B, "published", kv_factor=1.07,
                                     kv_round_to="256MiB") == 25 * 256 * 2 ** 20


def test_kv_budget_sizes_or_evaluates():
    sized = FILTERS["kv_budget"](QWEN3_8B, 32768)
    evaluated = FILTERS["kv_budget"](QWEN3_8B, 32768, sized["kv_cache_memory_bytes"])
    assert sized["kv_factor"] == 1.25 and "kv_factor" not in evaluated
    assert evaluated["kv_cache_tokens"] == sized["kv_cache_tokens"]


def test_published_window_and_sizes():
    assert FILTERS["published_max_model_len"](QWEN3_8B) == 40960
    assert FILTERS["to_bytes"]("5.5GiB") == 5905580032
    assert FILTERS["human_bytes"](5905580032) == "5.5 GiB"
    assert FILTERS["human_bytes"]("3840MiB", unit="GiB") == "3.75 GiB"


@pytest.mark.parametrize("name, args, message", [
    ("kv_cache_tokens", (QWEN3_8B, 32768, "8.5G"), "mixes decimals"),
    ("kv_cache_tokens", (42, 32768, "8G"), "model config: expected a dict, a config.json path or a model directory, got int"),
    ("kv_cache_bytes", (QWEN3_8B, "auto"), "\"auto\" fits the length"),
    ("kv_budget", ({"model_type": "llama"}, 4096), "num_hidden_layers"),
    ("to_bytes", ("lots",), "to_bytes: cannot read 'lots'"),
    ("human_bytes", ([1],), "human_bytes: expected a byte count"),
    ("published_max_model_len", ("/nonexistent",), "cannot read it"),
])
def test_bad_input_raises_ansible_filter_error(name, args, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("(", r"\(")):
        FILTERS[name](*args)
