"""A real Prometheus server for tests (Debian's package, installed by scripts/install-system-deps),
on a free loopback port, scraping the given targets every second into a private store.

    server = PrometheusServer(tmp_path, ["127.0.0.1:8101"])   # ready when it returns
    ...
    server.stop()
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from support.litellm import free_port, stop, wait_until
from support.need import need


class PrometheusServer:
    def __init__(self, tmp: Path, targets: list, interval: str = "1s"):
        binary = shutil.which("prometheus")
        need(binary is not None, "missing prometheus: run `sudo scripts/install-system-deps`")
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "scrape_configs": [{"job_name": "seats", "static_configs": [{"targets": targets}]}]}))
        self.url = "http://127.0.0.1:%d" % free_port()
        log = self.log = tmp / "prometheus.log"
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                [binary, "--config.file=%s" % config, "--storage.tsdb.path=%s" % (tmp / "tsdb"),
                 "--web.listen-address=%s" % self.url[len("http://"):], "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: urllib.request.urlopen(self.url + "/-/ready", timeout=2), "Prometheus", self.proc, log)
        except BaseException:
            stop(self.proc)
            raise

    def query(self, expr: str, at: float | None = None) -> list:
        params = {"query": expr} if at is None else {"query": expr, "time": "%.3f" % at}
        with urllib.request.urlopen(self.url + "/api/v1/query?" + urllib.parse.urlencode(params), timeout=10) as reply:
            document = json.load(reply)
        assert document["status"] == "success", document
        return document["data"]["result"]

    def stop(self) -> None:
        stop(self.proc)


def prometheus_quantile(q, bounds, values):
    """histogram_quantile over exact bucket counts, as Prometheus 2.42 interpolates it."""
    counts = [sum(1 for value in values if value <= bound) for bound in bounds] + [len(values)]
    rank = q * len(values)
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if index == len(bounds):
        return bounds[-1]
    start, before = (0.0, 0) if index == 0 else (bounds[index - 1], counts[index - 1])
    return start + (bounds[index] - start) * (rank - before) / (counts[index] - before)


def one_two_five(limit):
    """vLLM's 1-2-5 histogram bounds up to ``limit`` (its request-token buckets)."""
    bounds, scale = [], 1
    while scale <= limit:
        bounds += [m * scale for m in (1, 2, 5) if m * scale <= limit]
        scale *= 10
    return bounds


def side_by_side(calls):
    """Each of ``calls`` (no-argument callables) in a thread of its own, all at once, as runaway
    replies arrive together: their results, in order."""
    results = [None] * len(calls)

    def run(index, call):
        results[index] = call()
    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def counted_at(server, expr, total, timeout=60):
    """Wait until Prometheus has scraped ``expr`` (one series) at ``total``; the time of that sample,
    where a window that ends on the last request ends."""
    wait_until(lambda: [float(s["value"][1]) for s in server.query(expr)] == [float(total)],
               "Prometheus's scrape of %s = %s" % (expr, total), server.proc, server.log, timeout)
    return float(server.query("timestamp(%s)" % expr)[0]["value"][1])
