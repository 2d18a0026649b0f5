"""watch_plateau.yml where the operator watches fv-ml1 with Beszel, not DCGM exporter: the seeds'
"verify both cards' plateaus from Beszel (mu x 1.024)", scheduled. A stand-in for the Beszel hub's
API serves two days of records after a window (a Beszel hub does not run here); the playbook, on
the fv-ml1 inventory and kept off the host, must flag the card that settled short of the plan and
the one still creeping, and keep the verdict beside the report."""

from __future__ import annotations

import json
import time

from conftest import REPO_ROOT, run_ansible
from support.beszel_hub import Hub, record
from support.local_http import serving

FV_ML1 = REPO_ROOT / "inventories" / "fv-ml1" / "hosts.yml"
UUIDS = ["GPU-8b1d7a3c-0000-4000-8000-00000000000%d" % index for index in range(2)]


def test_the_scheduled_watch_reads_the_plateau_from_beszel(tmp_path):
    since = time.time() - 2 * 86400
    # GPU 0 settles 60 MiB short of full (the seeds' plateau); GPU 1 still grows 3 MiB a minute
    records = [record(since + 600 * step, [min(90000 + 100 * step, 97827), 80000 + 30 * step])
               for step in range(0, 2 * 144 + 1)]
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "report.json").write_text(json.dumps({"run_id": "r1", "check_mode": False, "hosts": {"fv-ml1": {
        "status": "applied", "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
        "plan": {"gpus": [{"index": 0, "uuid": UUIDS[0], "spare_mib": 512}, {"index": 1, "uuid": UUIDS[1]}]}}}}))
    with serving(Hub(records)) as hub:
        watch = run_ansible([
            "ansible-playbook", "-i", str(FV_ML1), "playbooks/watch_plateau.yml",
            "-e", "ansible_connection=local", "-e", "ansible_host=127.0.0.1",
            "-e", json.dumps({"watch_source": "beszel", "watch_beszel_url": hub.url, "watch_beszel_system": "fvml1hostrecord",
                              "watch_beszel_token": "pb-token-fv-ml1-0451", "watch_beszel_record_type": "10m",
                              "watch_report": str(reports / "report.json"), "watch_read_cards": False,
                              "watch_at": since + 2 * 86400})])
    said = " ".join(watch.stdout.split())
    assert watch.returncode != 0, "flagged cards fail the scheduled run"
    assert "host fv-ml1: GPU 0: 60 MiB free at the plateau, below the margin of 512 MiB; GPU 1: still creeping: " \
           "+180.0 MiB/h over the last 6h" in said, watch.stdout[-3000:]
    assert "pb-token-fv-ml1-0451" not in watch.stdout + watch.stderr, "the hub's token is never printed"
    assert hub.asked and all(auth == "Bearer pb-token-fv-ml1-0451" for auth, _query in hub.asked)
    kept = json.loads((reports / "plateau-fv-ml1.json").read_text())
    assert kept["flagged"] == [0, 1] and kept["gpus"][0]["plateau_used_mib"] == 97827
    # the first hour after the window is its boot transient, left out of the plateau
    assert kept["gpus"][0]["transient_peak_used_mib"] == 90600
    assert "(Beszel)" in (reports / "plateau-fv-ml1.svg").read_text()
