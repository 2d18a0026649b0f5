"""_litellm_config on a LiteLLM config shaped like the seeds' gateway after the renumbering:
every api_base and pass-through target judged against the seats, moved ones repointed by
editing only host:port, comments and quoting kept, and the rewrite idempotent."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.seats.plugins.module_utils._gateway import litellm_config as lc

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "gateway"
CONFIG = (FIXTURES / "litellm_config_fv.yaml").read_text()
SEATS = yaml.safe_load((FIXTURES / "litellm_config_fv_seats.yaml").read_text())
OLD, NEW = "10.250.50.54", "10.251.50.54"


def yaml_nodes(text):
    return yaml.compose(text, Loader=yaml.SafeLoader)


def audit(text=CONFIG, seats=None, **kwargs):
    return lc.audit(text, seats or SEATS, yaml_nodes, **kwargs)


def by_where(findings):
    return {finding["where"]: finding for finding in findings}


def test_every_target_is_found_with_its_line():
    targets = lc.find_targets(CONFIG, yaml_nodes)
    assert [(t["kind"], t["where"], t["route"], t["line"]) for t in targets] == [
        ("api_base", "model_list[0]", "gen-small", 7),
        ("api_base", "model_list[1]", "char-rp", 11),
        ("api_base", "model_list[2]", "char-rp-reasoning", 15),
        ("api_base", "model_list[3]", "coder", 18),
        ("api_base", "model_list[4]", "sec", 22),
        ("api_base", "model_list[6]", "summarizer", 30),
        ("api_base", "model_list[7]", "cloud-mini", 34),
        ("pass_through", "pass_through_endpoints[0]", "/judge/score", 41),
    ]
    start, end = targets[1]["span"]
    assert CONFIG[start:end] == '"http://10.250.50.54:8016/v1"'


def test_statuses():
    findings = audit(external_hosts=["API.openai.com"])[0]
    found = by_where(findings)
    assert {where: f["status"] for where, f in found.items()} == {
        "model_list[0]": "moved", "model_list[1]": "moved", "model_list[2]": "moved",
        "model_list[3]": "ok", "model_list[4]": "unresolved", "model_list[6]": "unknown",
        "model_list[7]": "external", "pass_through_endpoints[0]": "moved",
    }
    judge = found["pass_through_endpoints[0]"]
    assert judge["seat"] == "scalar-judge"
    assert judge["new_target"] == "http://%s:8030/score" % NEW
    assert judge["detail"] == "seat scalar-judge moved from %s:8030 to %s:8030" % (OLD, NEW)
    assert found["model_list[2]"]["seat"] == "char-rp", "the thinking alias is char-rp's too"
    assert found["model_list[4]"]["detail"] == "resolved from the gateway's environment; not checked"
    assert found["model_list[6]"]["detail"] == "no seat at 10.251.50.99:8040"


def test_without_external_hosts_a_cloud_base_is_unknown():
    found = by_where(audit()[0])
    assert found["model_list[7]"]["status"] == "unknown"
    assert found["model_list[7]"]["detail"] == "no seat at api.openai.com:443"


def test_rewrite_changes_only_host_and_keeps_everything_else():
    findings, spans = audit()
    new_text, rewrites = lc.rewrite(CONFIG, findings, spans, yaml_nodes)
    assert [(r["where"], r["old"], r["new"]) for r in rewrites] == [
        ("model_list[0]", "http://%s:8011/v1" % OLD, "http://%s:8011/v1" % NEW),
        ("model_list[1]", "http://%s:8016/v1" % OLD, "http://%s:8016/v1" % NEW),
        ("model_list[2]", "http://%s:8016/v1" % OLD, "http://%s:8016/v1" % NEW),
        ("pass_through_endpoints[0]", "http://%s:8030/score" % OLD, "http://%s:8030/score" % NEW),
    ]
    changed = [line for line in difflib.ndiff(CONFIG.splitlines(), new_text.splitlines())
               if line[:1] in "+-"]
    assert changed == [
        "-       api_base: http://10.250.50.54:8011/v1   # Qwen3.5 35B-A3B, GPU 1",
        "+       api_base: http://10.251.50.54:8011/v1   # Qwen3.5 35B-A3B, GPU 1",
        '-       api_base: "http://10.250.50.54:8016/v1"',
        '+       api_base: "http://10.251.50.54:8016/v1"',
        "-       api_base: 'http://10.250.50.54:8016/v1'",
        "+       api_base: 'http://10.251.50.54:8016/v1'",
        "-       target: http://10.250.50.54:8030/score",
        "+       target: http://10.251.50.54:8030/score",
    ]
    # The comment naming the old network is history, not a target: it stays.
    assert "10.250/16 -> 10.251/16" in new_text
    again, again_spans = audit(new_text)
    assert lc.rewrite(new_text, again, again_spans, yaml_nodes) == (new_text, [])
    assert [(f["route"], f["status"]) for f in again if f["status"] in lc.PROBLEMS] == [
        ("summarizer", "unknown"), ("cloud-mini", "unknown")]


def test_port_move_and_default_ports():
    seats = [{"name": "asr", "host": "fv-ml1", "port": 8091, "previous_port": 8090},
             {"name": "web", "host": "seat-b", "port": 80, "previous_host": "seat-a"}]
    text = ("model_list:\n"
            "  - model_name: asr\n    litellm_params: {model: openai/asr, api_base: http://FV-ML1:8090}\n"
            "  - model_name: web\n    litellm_params: {model: openai/web, api_base: http://seat-a/v1}\n")
    findings, spans = lc.audit(text, seats, yaml_nodes)
    new_text, rewrites = lc.rewrite(text, findings, spans, yaml_nodes)
    assert [r["new"] for r in rewrites] == ["http://fv-ml1:8091", "http://seat-b/v1"]
    assert "api_base: http://fv-ml1:8091}" in new_text


def test_wrong_seat_names_who_serves_the_model():
    text = ("model_list:\n  - model_name: coder\n    litellm_params:\n"
            "      model: hosted_vllm/coder\n      api_base: http://%s:8011/v1\n" % NEW)
    finding = audit(text)[0][0]
    assert finding["status"] == "wrong_seat"
    assert finding["detail"] == ("seat gen-small at %s:8011 does not serve coder; it is served"
                                 " by seat coder at %s:8013" % (NEW, NEW))


def test_a_seat_listing_no_names_is_matched_by_address_alone():
    seats = [{"name": "judge", "host": "h", "port": 1}]
    text = "model_list:\n  - litellm_params: {model: openai/anything, api_base: http://h:1}\n"
    assert lc.audit(text, seats, yaml_nodes)[0][0]["status"] == "ok"


def test_two_seats_that_left_the_same_address_are_not_guessed():
    seats = [{"name": "a", "host": "h2", "port": 1, "previous_host": "h1"},
             {"name": "b", "host": "h3", "port": 1, "previous_host": "h1"}]
    text = "general_settings:\n  pass_through_endpoints:\n    - {path: /x, target: http://h1:1/x}\n"
    finding = lc.audit(text, seats, yaml_nodes)[0][0]
    assert finding["status"] == "unknown" and finding["new_target"] is None
    assert "seats a, b all moved away from h1:1" in finding["detail"]


def test_problems_message_names_line_route_and_fix():
    findings = audit()[0]
    message = lc.problems_message(findings, "/srv/litellm/config.yaml")
    assert message.startswith("/srv/litellm/config.yaml: 6 gateway target(s) do not point at"
                              " their seat: line 7 model_list[0] (gen-small) api_base"
                              " http://10.250.50.54:8011/v1: moved - seat gen-small moved from")
    assert "line 41 pass_through_endpoints[0] (/judge/score) target http://10.250.50.54:8030/score:" \
        " moved" in message
    assert lc.problems_message([f for f in findings if f["status"] == "ok"]) == ""


def test_empty_and_cloud_only_configs_have_no_targets():
    assert lc.find_targets("", yaml_nodes) == []
    assert lc.find_targets("model_list:\n  - model_name: x\n    litellm_params: {model: gpt-4o}\n"
                           "general_settings: {}\n", yaml_nodes) == []


@pytest.mark.parametrize("text, message", [
    ("model_list: [\n", "cfg.yaml: not readable as YAML:"),
    ("- a\n- b\n", "cfg.yaml: expected a LiteLLM config (a mapping with model_list), got a YAML"
                   " sequence"),
    ("model_list: {a: 1}\n", "cfg.yaml: model_list: expected a list, got a YAML mapping"),
    ("general_settings:\n  pass_through_endpoints: x\n",
     "cfg.yaml: general_settings.pass_through_endpoints: expected a list, got a YAML scalar"),
])
def test_unreadable_configs_name_the_file(text, message):
    with pytest.raises(lc.RouteAuditError) as error:
        lc.find_targets(text, yaml_nodes, "cfg.yaml")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("seats, message", [
    ([], "seats: expected a non-empty list"),
    ([{"host": "h", "port": 1}], "seats[0].name: expected the seat's name, got None"),
    ([{"name": "a", "host": "h", "port": 1}, {"name": "a", "host": "h", "port": 2}],
     "seats[1] (a): the name is listed twice"),
    ([{"name": "a", "host": "http://h", "port": 1}], "seat a: host: expected a host name"),
    ([{"name": "a", "host": "h", "port": 70000}], "seat a: port: expected a TCP port (1-65535)"),
    ([{"name": "a", "host": "h", "port": "x"}], "seat a: port: expected a TCP port"),
    ([{"name": "a", "host": "h", "port": 1, "served_model_names": "a"}],
     "seat a: served_model_names: expected a list of names"),
    ([{"name": "a", "host": "h", "port": 1}, {"name": "b", "host": "H", "port": 1}],
     "seat b: h:1 is also seat a's address"),
    ([{"name": "a", "host": "h", "port": 1, "previous_port": 0}],
     "seat a: previous_port: expected a TCP port"),
])
def test_bad_seats_are_named(seats, message):
    with pytest.raises(lc.RouteAuditError) as error:
        lc.normalize_seats(seats)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("url, parts", [
    ("http://10.251.50.54:8016/v1", ("10.251.50.54", 8016, "10.251.50.54:8016")),
    ("https://GW.example", ("gw.example", 443, "GW.example")),
    ("http://[fd00::5]:8000/score?x=1", ("[fd00::5]", 8000, "[fd00::5]:8000")),
])
def test_split_url(url, parts):
    address = lc.split_url(url)
    assert (address["host"], address["port"], address["authority"]) == parts


@pytest.mark.parametrize("url", ["os.environ/BASE", "10.0.0.1:8000", "", None, "ftp://h/x"])
def test_split_url_rejects(url):
    assert lc.split_url(url) is None


SEAT_KEY = "sk-seat-0123456789abcdef"
KEYED = """model_list:
  - model_name: guarded
    litellm_params:
      model: hosted_vllm/guarded
      api_base: http://10.251.50.54:8040/v1
%s
"""
KEYED_SEATS = [{"name": "guarded", "host": "10.251.50.54", "port": 8040, "served_model_names": ["guarded"],
                "api_key": SEAT_KEY}]


@pytest.mark.parametrize("route_key, status", [
    ("", "no_key"),
    ("      api_key: ''", "no_key"),
    ("      api_key: sk-someone-elses-key", "wrong_key"),
    ("      api_key: %s" % SEAT_KEY, "ok"),
    ("      api_key: os.environ/GUARDED_KEY", "ok"),
])
def test_a_route_to_a_keyed_seat_must_carry_the_seats_key(route_key, status):
    finding = audit(KEYED % route_key, KEYED_SEATS)[0][0]
    assert finding["status"] == status
    assert finding["seat"] == "guarded"
    message = lc.problems_message([finding])
    assert (message != "") == (status != "ok")
    if status == "no_key":
        assert message == ("config.yaml: 1 gateway target(s) do not point at their seat: line 5 model_list[0] (guarded)"
                           " api_base http://10.251.50.54:8040/v1: no_key - seat guarded has an api_key; route guarded"
                           " must carry the seat's key (litellm_params.api_key, e.g. os.environ/NAME)")
    for text in (message, repr(finding)):
        assert SEAT_KEY not in text and "sk-someone-elses-key" not in text, "no key value in what is shown"
        assert lc._digest(SEAT_KEY) not in text


def test_a_seat_without_a_key_needs_none_on_its_routes():
    unkeyed = [dict(KEYED_SEATS[0], api_key=None)]
    assert audit(KEYED % "", unkeyed)[0][0]["status"] == "ok"
    assert audit(KEYED % "", [dict(KEYED_SEATS[0], api_key="")])[0][0]["status"] == "ok"


def test_a_seat_key_that_is_no_text_is_refused_without_showing_it():
    with pytest.raises(lc.RouteAuditError) as refused:
        audit(KEYED % "", [dict(KEYED_SEATS[0], api_key=["sk-in-a-list"])])
    assert str(refused.value) == "seat guarded: api_key: expected the seat's key as text (its value is not shown)"


def test_the_files_own_keys_are_handed_over_to_be_hidden(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KEYED % "      api_key: sk-someone-elses-key")
    hidden = []
    result, failure = lc.check_routes(str(path), KEYED_SEATS, yaml_nodes, backup_date="20261005", hide=hidden.append)
    assert hidden == ["sk-someone-elses-key"]
    assert "wrong_key" in failure and "route guarded carries an api_key that is not seat guarded's key" in failure
    assert result["targets"][0]["route_key"] == "literal"
    assert "sk-someone-elses-key" not in repr(result) + failure


LIMITED = """model_list:
  - model_name: guarded
    litellm_params:
      model: hosted_vllm/guarded
      api_base: http://10.251.50.54:8040/v1
    model_info:
%s
"""
SERVED = [{"name": "guarded", "host": "10.251.50.54", "port": 8040, "served_model_names": ["guarded"],
           "max_model_len": 32768, "max_new_tokens": 8192}]


@pytest.mark.parametrize("declared, status, detail", [
    ("      max_input_tokens: 32768\n      max_output_tokens: 8192", "ok", "seat guarded"),
    ("      max_input_tokens: 131072", "over_limit",
     "model_info.max_input_tokens 131072 is more than seat guarded serves (max_model_len 32768)"),
    ("      max_output_tokens: 32768\n      max_tokens: 40000", "over_limit",
     "model_info.max_output_tokens 32768 is more than seat guarded serves (output cap 8192); "
     "model_info.max_tokens 40000 is more than seat guarded serves (max_model_len 32768)"),
    ("      max_input_tokens: lots", "over_limit",
     "model_info.max_input_tokens lots is more than seat guarded serves (max_model_len 32768)"),
    ("      mode: chat", "ok", "seat guarded"),
])
def test_a_routes_limits_are_held_to_what_its_seat_serves(declared, status, detail):
    finding = audit(LIMITED % declared, SERVED)[0][0]
    assert (finding["status"], finding["detail"]) == (status, detail)
    # what to write where the config is managed elsewhere
    assert finding["limits"] == {"max_input_tokens": 32768, "max_tokens": 32768, "max_output_tokens": 8192}
    assert (lc.problems_message([finding]) != "") == (status != "ok")


def test_without_a_cap_the_output_limit_is_the_context_and_without_a_context_nothing_is_held():
    uncapped = [dict(SERVED[0], max_new_tokens=None)]
    finding = audit(LIMITED % "      max_output_tokens: 32768", uncapped)[0][0]
    assert finding["status"] == "ok" and finding["limits"]["max_output_tokens"] == 32768
    unknown = [dict(SERVED[0], max_model_len=None, max_new_tokens=None)]
    finding = audit(LIMITED % "      max_input_tokens: 999999", unknown)[0][0]
    assert finding["status"] == "ok" and finding["limits"] == {}


def test_a_scoped_audit_judges_only_the_targets_on_its_hosts():
    findings = audit(external_hosts=["api.openai.com"], scope_hosts=[OLD])[0]
    assert {finding["where"] for finding in findings} == {
        "model_list[0]", "model_list[1]", "model_list[2]", "pass_through_endpoints[0]"}
    assert audit(scope_hosts=["nowhere.example"])[0] == []


def test_a_seats_limit_that_is_not_a_count_is_refused_naming_it():
    with pytest.raises(lc.RouteAuditError, match="seat guarded: max_model_len: expected a positive count of tokens"):
        audit(LIMITED % "", [dict(SERVED[0], max_model_len="32k")])


def test_the_limits_follow_the_seat_in_place_after_a_repoint_and_only_where_declared(tmp_path):
    """The seat moved from port 8040 to 8041 and its context went from 131,072 to 32,768: the
    route is repointed, then its declared limits set to what the seat serves; an undeclared
    one stays undeclared, comments and layout stay, and a second run changes nothing."""
    config = tmp_path / "config.yaml"
    before = LIMITED % "      max_input_tokens: 131072   # the old ladder's result\n      max_output_tokens: 4096"
    config.write_text(before)
    moved = [dict(SERVED[0], port=8041, previous_host="10.251.50.54", previous_port=8040)]
    result, failure = lc.check_routes(str(config), moved, yaml_nodes, repoint=True, limits=True,
                                      backup_date="20261204", backup_tag="window")
    assert failure is None, failure
    assert [(r["kind"], r["where"], r["old"], r["new"]) for r in result["rewrites"]] == [
        ("api_base", "model_list[0]", "http://10.251.50.54:8040/v1", "http://10.251.50.54:8041/v1"),
        ("model_info", "model_list[0].model_info.max_input_tokens", 131072, 32768),
        ("model_info", "model_list[0].model_info.max_output_tokens", 4096, 8192)]
    after = config.read_text()
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert changed == [sign + " " * 7 + line for sign, line in (
        ("-", "api_base: http://10.251.50.54:8040/v1"), ("+", "api_base: http://10.251.50.54:8041/v1"),
        ("-", "max_input_tokens: 131072   # the old ladder's result"),
        ("+", "max_input_tokens: 32768   # the old ladder's result"),
        ("-", "max_output_tokens: 4096"), ("+", "max_output_tokens: 8192"))]
    assert (tmp_path / "config.yaml.bak-20261204-window").read_text() == before, "the backup is the file as it was"
    assert [t["status"] for t in result["targets"]] == ["ok"] and "max_tokens" not in after
    again, failure = lc.check_routes(str(config), moved, yaml_nodes, repoint=True, limits=True,
                                     backup_date="20261204", backup_tag="window")
    assert failure is None and again["rewrites"] == [] and not again["changed"]


def test_a_limit_that_is_not_a_plain_number_is_left_to_the_operator_by_name(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(LIMITED % '      max_input_tokens: "131072"')
    with pytest.raises(lc.RouteAuditError, match=r"line 5 \(model_list\[0\]\): model_info.max_input_tokens is not a "
                                                 r"plain number to set to 32768; set it by hand"):
        lc.check_routes(str(config), SERVED, yaml_nodes, limits=True, backup_date="20261204")
    assert config.read_text() == LIMITED % '      max_input_tokens: "131072"', "nothing was written"
