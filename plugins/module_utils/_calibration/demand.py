# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What each seat was asked for over a window, from its vLLM metrics in Prometheus: requests,
prompt and reply lengths (p50, p99, from vLLM's request-token histograms), peak requests running
and waiting, peak KV in use (usage x the KV tokens the seat ran with), preemptions, and the
replies longer than a threshold (the runaways an output cap is set against).

vLLM labels its metrics with ``model_name``, the seat's first served name, and Prometheus adds
the scrape target as ``instance``: a name served by seats on several hosts is read per target,
never summed across them. The KV tokens the seat ran with come from its
``vllm:cache_config_info`` (blocks x block size), which carries no model name, so it is read at
the seat's target. Counters are read with ``increase`` (a seat restarted in the window starts
them again from zero), gauges with a subquery at ``step``. Every figure is one instant query at
the window's end.
"""

from __future__ import annotations

import json
import time

from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.plots import chart_svg
from ansible_collections.llmfleet.seats.plugins.module_utils._calibration.prometheus import (
    PROMETHEUS_OPTIONS,
    PrometheusError,
    aligned,
    connect,
    duration_seconds,
    unix_time,
)
from ansible_collections.llmfleet.seats.plugins.module_utils._common.defaults import CONTROL_RE, DEMAND_SNAPSHOT_FORMAT

QUANTILES = (0.5, 0.99)

SEAT_DEMAND_SPEC = {
    **PROMETHEUS_OPTIONS,
    "seats": {"type": "list", "elements": "dict", "required": True},
    "window": {"type": "str", "default": "7d"},
    "step": {"type": "str", "default": "1m"},
    "at": {"type": "float"},
    "instance_host": {"type": "str"},
    "host": {"type": "str"},
    "runaway_tokens": {"type": "int", "default": 32768, "no_log": False},
}


def _seats(seats, instance_host):
    """``[(name, model_name, kv_cache_tokens, instance)]``, refusing in one line what cannot be
    asked; ``instance`` is the seat's scrape target when ``instance_host`` names its host."""
    checked = []
    for index, seat in enumerate(seats):
        name = seat.get("name") if isinstance(seat, dict) else None
        if not isinstance(name, str) or not name:
            raise PrometheusError("seats[%d].name: expected the seat's name, got %r" % (index, seat))
        served = seat.get("served_model_names") or (seat.get("launch") or {}).get("served_model_names") or [name]
        model_name = seat.get("model_name") or (served[0] if isinstance(served, list) else None)
        if not isinstance(model_name, str) or not model_name:
            raise PrometheusError("seat %s: model_name: expected the name vLLM labels its metrics with "
                                  "(its first served name), got %r" % (name, model_name))
        tokens = seat.get("kv_cache_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0):
            raise PrometheusError("seat %s: kv_cache_tokens: expected the seat's KV tokens (a plan seat's), got %r"
                                  % (name, tokens))
        port = seat.get("port")
        if instance_host is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535):
            raise PrometheusError("seat %s: port: expected the seat's TCP port (1-65535) to find its scrape target "
                                  "%s:<port>, got %r" % (name, instance_host, port))
        instance = None if instance_host is None else "%s:%d" % (instance_host, port)
        checked.append((name, model_name, tokens, instance))
    return checked


def _count(value):
    return None if value is None else int(round(value))


def _round(value, digits=1):
    return None if value is None else round(value, digits)


def _selector(labels):
    # a JSON string is a valid PromQL string literal: each value is quoted, never pasted
    return "{%s}" % ",".join("%s=%s" % (key, json.dumps(value)) for key, value in labels)


def _engine_kv_tokens(prom, instance, window, at):
    """The KV tokens the engine at ``instance`` ran with (its blocks x block size), or None."""
    tokens = set()
    for labels, _value in prom.query("last_over_time(vllm:cache_config_info%s[%s])"
                                     % (_selector([("instance", instance)]), window), at):
        try:
            tokens.add(int(labels["num_gpu_blocks"]) * int(labels["block_size"]))
        except (KeyError, TypeError, ValueError):
            continue
    # a seat restarted with another KV in the window has no one figure
    return tokens.pop() if len(tokens) == 1 else None


def seat_figures(prom, name, model_name, kv_cache_tokens, window, step, at, runaway_tokens, instance=None):
    """One seat's demand over ``window`` ending at ``at``; ``instance`` (its scrape target) tells
    it from seats on other hosts serving the same name."""
    asked = [("model_name", model_name)] + ([("instance", instance)] if instance else [])
    result = {"seat": name, "model_name": model_name, "instance": instance, "metrics": False, "requests": None,
              "prompt_tokens": None, "generation_tokens": None, "peak_running": None, "peak_waiting": None,
              "peak_kv_usage": None, "kv_cache_tokens": kv_cache_tokens, "kv_cache_tokens_from": None,
              "peak_kv_tokens": None, "preemptions": None, "runaways": None, "detail": ""}
    targets = sorted(labels.get("instance", "") for labels, _value in prom.query(
        "count by (instance) (count_over_time(vllm:num_requests_running%s[%s]))" % (_selector(asked), window), at))
    if not targets:
        result["detail"] = "no vLLM metrics with model_name %s%s in the %s before the window's end" % (
            model_name, " at %s" % instance if instance else "", window)
        return result
    result["metrics"] = True
    if len(targets) > 1:
        result["detail"] = ("%d scrape targets serve model_name %s (%s): set instance_host to read this host's "
                            "seat alone" % (len(targets), model_name, ", ".join(targets)))
        return result
    result["instance"] = targets[0]
    sel = _selector([("model_name", model_name), ("instance", targets[0])])
    ran_with = _engine_kv_tokens(prom, targets[0], window, at)
    if ran_with is not None:
        result["kv_cache_tokens"] = ran_with
    if result["kv_cache_tokens"] is not None:
        result["kv_cache_tokens_from"] = "engine" if ran_with is not None else "plan"
    result["peak_running"] = _count(prom.value("max_over_time(sum(vllm:num_requests_running%s)[%s:%s])"
                                               % (sel, window, step), at))
    result["peak_waiting"] = _count(prom.value("max_over_time(sum(vllm:num_requests_waiting%s)[%s:%s])"
                                               % (sel, window, step), at))
    usage = prom.value("max_over_time(max(vllm:kv_cache_usage_perc%s)[%s:%s])" % (sel, window, step), at)
    result["peak_kv_usage"] = _round(usage, 4)
    if usage is not None and result["kv_cache_tokens"]:
        result["peak_kv_tokens"] = int(round(usage * result["kv_cache_tokens"]))
    result["preemptions"] = _count(prom.value("sum(increase(vllm:num_preemptions_total%s[%s]))" % (sel, window), at))
    requests = _count(prom.value("sum(increase(vllm:request_prompt_tokens_count%s[%s]))" % (sel, window), at))
    result["requests"] = requests
    if not requests:
        result["detail"] = "no traffic in the %s before the window's end" % window
        return result
    for kind in ("prompt", "generation"):
        result["%s_tokens" % kind] = {"p%g" % (q * 100): _round(prom.value(
            "histogram_quantile(%s, sum by (le) (increase(vllm:request_%s_tokens_bucket%s[%s])))"
            % (q, kind, sel, window), at)) for q in QUANTILES}
    result["runaways"] = _runaways(prom, sel, window, at, runaway_tokens)
    return result


def _runaways(prom, sel, window, at, runaway_tokens):
    """The replies longer than the largest histogram bound at or below ``runaway_tokens``."""
    bounds = []
    series = prom.query("count by (le) (last_over_time(vllm:request_generation_tokens_bucket%s[%s]))" % (sel, window), at)
    for labels, _value in series:
        try:
            bound = float(labels.get("le"))
        except (TypeError, ValueError):
            continue
        if bound <= runaway_tokens:
            bounds.append((bound, labels["le"]))
    if not bounds:
        return None
    bound, label = max(bounds)
    total = prom.value("sum(increase(vllm:request_generation_tokens_count%s[%s]))" % (sel, window), at) or 0.0
    within = prom.value("sum(increase(vllm:request_generation_tokens_bucket{%s,le=%s}[%s]))"
                        % (sel[1:-1], json.dumps(label), window), at) or 0.0
    return {"longer_than": int(bound), "replies": int(round(total - within))}


def _cell(value):
    return "-" if value is None else str(value)


def demand_table(figures):
    """One line per seat for the operator's log: what it was asked for, beside its KV."""
    rows = [("seat", "requests", "prompt p50/p99", "reply p50/p99", "peak running", "peak KV tokens", "runaways",
             "note")]
    for seat in figures:
        prompt, reply = seat["prompt_tokens"] or {}, seat["generation_tokens"] or {}
        kv = _cell(seat["peak_kv_tokens"])
        if seat["peak_kv_tokens"] is not None:
            kv = "%s of %s (%.0f%%)" % (kv, seat["kv_cache_tokens"], 100.0 * seat["peak_kv_usage"])
        elif seat["peak_kv_usage"] is not None:
            kv = "%.0f%% of its KV" % (100.0 * seat["peak_kv_usage"])
        runaways = seat["runaways"]
        rows.append((seat["seat"], _cell(seat["requests"]),
                     "%s/%s" % (_cell(prompt.get("p50")), _cell(prompt.get("p99"))) if prompt else "-",
                     "%s/%s" % (_cell(reply.get("p50")), _cell(reply.get("p99"))) if reply else "-",
                     _cell(seat["peak_running"]), kv,
                     "%d over %d tokens" % (runaways["replies"], runaways["longer_than"]) if runaways else "-",
                     seat["detail"]))
    return aligned(rows)


def demand_svg(prom, figures, start, end, host=None):
    """Each seat's KV in use over the window (each step's most, in tokens where its KV tokens are
    known, else as a share) against its KV budget."""
    panels = []
    for figure in figures:
        usage, tokens = [], figure["kv_cache_tokens"]
        # a name served at several targets has no one series (its instance is left unset)
        if figure["metrics"] and figure["instance"]:
            sel = _selector([("model_name", figure["model_name"]), ("instance", figure["instance"])])
            found = prom.query_range("max_over_time(max(vllm:kv_cache_usage_perc%s)[{step}s:])" % sel, start, end)
            usage = found[0][1] if found else []
        scale, unit = (tokens, "tokens") if tokens else (100.0, "%")
        panels.append({
            "title": "%s (%s)" % (figure["seat"], figure["model_name"]), "start": start, "end": end,
            "series": [("KV in use (each step's most)", [(when, value * scale) for when, value in usage])],
            "lines": [("KV budget", tokens)] if tokens else [("all of its KV", 100.0)], "shade": None, "unit": unit})
    return chart_svg("%sKV cache in use per seat" % ("%s: " % host if host else ""), panels)


def seat_demand(params, clock=time.time):
    """The seat_demand module's result for its validated ``params``."""
    instance_host = params.get("instance_host")
    if instance_host is not None and (not instance_host or CONTROL_RE.search(instance_host)
                                      or any(char.isspace() for char in instance_host)):
        raise PrometheusError("instance_host: expected the host part of the seats' scrape targets (a name or an "
                              "address, as in fv-ml1:8001), got %r" % (instance_host,))
    seats = _seats(params["seats"], instance_host)
    window_s = duration_seconds(params["window"], "window")
    duration_seconds(params["step"], "step")
    if params["runaway_tokens"] < 1:
        raise PrometheusError("runaway_tokens: expected an integer >= 1, got %r" % params["runaway_tokens"])
    at = unix_time(params["at"] if params["at"] is not None else clock(), "at")
    prom = connect(params)
    figures = [seat_figures(prom, name, model_name, tokens, params["window"], params["step"], at,
                            params["runaway_tokens"], instance) for name, model_name, tokens, instance in seats]
    result = {"changed": False, "seats": figures, "window": {"seconds": window_s, "end": at},
              "table": demand_table(figures), "svg": demand_svg(prom, figures, at - window_s, at, params.get("host"))}
    if params.get("host"):
        # what the plan reads back (llmfleet_demand_snapshot); never the server's address or token
        result["snapshot"] = {"format": DEMAND_SNAPSHOT_FORMAT, "host": params["host"], "window": result["window"],
                              "seats": figures}
    return result
