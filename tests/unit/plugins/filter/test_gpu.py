"""The gpu filters as Ansible calls them: through the FilterModule, bad input as AnsibleFilterError."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.seats.plugins.filter.gpu import FilterModule

FILTERS = FilterModule().filters()
CARDS = {"source": "nvml", "gpus": [
    {"index": 0, "uuid": "GPU-5a1c0c6e-3b7e", "name": "NVIDIA H200", "memory_total_mib": 143771,
     "memory_used_mib": 20490, "memory_free_mib": 122769, "memory_reserved_mib": 512, "unattributed_mib": 10,
     "processes": [{"pid": 42, "used_mib": 20480, "compose_project": "fv", "compose_service": "gen-small",
                    "container": "fv-gen-small-1"}]},
    {"index": 1, "uuid": "GPU-6b2d1d7f-4c8f", "name": "NVIDIA H200", "memory_total_mib": 143771,
     "memory_used_mib": 0, "memory_free_mib": 143771, "processes": []},
]}


def test_every_documented_filter_is_provided():
    assert sorted(FILTERS) == ["beszel_gpus", "beszel_mib", "gpu_by_uuid", "gpu_free_mib_by_uuid",
                               "gpu_seat_mib", "gpu_summary"]


def test_lookups_on_a_gpu_info_result():
    assert FILTERS["gpu_free_mib_by_uuid"](CARDS) == {"GPU-5a1c0c6e-3b7e": 122769, "GPU-6b2d1d7f-4c8f": 143771}
    assert FILTERS["gpu_by_uuid"](CARDS)["GPU-6b2d1d7f-4c8f"]["index"] == 1
    assert FILTERS["gpu_seat_mib"](CARDS) == {"gen-small": {"GPU-5a1c0c6e-3b7e": 20480}}
    assert FILTERS["gpu_seat_mib"](CARDS, compose_project="other") == {}
    assert FILTERS["beszel_mib"](86480.27) == 88556


def test_summary_of_a_result_and_of_one_gpu():
    lines = FILTERS["gpu_summary"](CARDS)
    assert lines == [
        "GPU 0 (GPU-5a1c0c6e) NVIDIA H200: 20,490 / 143,771 MiB used, 122,769 free, 512 reserved | "
        "gen-small 20,480 | unattributed 10",
        "GPU 1 (GPU-6b2d1d7f) NVIDIA H200: 0 / 143,771 MiB used, 143,771 free | no processes",
    ]
    assert FILTERS["gpu_summary"](CARDS["gpus"][1]) == lines[1]
    assert FILTERS["gpu_summary"](CARDS["gpus"]) == lines


@pytest.mark.parametrize("name, value, expected", [
    ("gpu_free_mib_by_uuid", "cards", "gpu_free_mib_by_uuid: expected a gpu_info result or its gpus list, got str"),
    ("gpu_summary", {"gpus": "x"}, "gpu_summary: expected a gpu_info result or its gpus list, got dict"),
    ("gpu_seat_mib", [{"uuid": None}], "gpu_seat_mib: gpus[0]: expected a GPU with a uuid, got {'uuid': None}"),
    ("beszel_mib", "n/a", "beszel_mib: expected a Beszel memory reading (a number such as 86480.27), got 'n/a'"),
    ("beszel_gpus", {"g": {"0": 5}}, "beszel_gpus: g.0: expected an object with mu/mt, got 5"),
])
def test_bad_input_is_an_ansible_filter_error(name, value, expected):
    with pytest.raises(AnsibleFilterError) as failure:
        FILTERS[name](value)
    assert expected in str(failure.value)
