"""The status package's pure parts: JSON round trip, password removal, page escaping, the
problems found, and the sampler's throughput."""

from __future__ import annotations

import json

from percolator.server.status.gather import (
    CoordinatorRead,
    assemble,
    public_dsn,
    server_from_member,
    workers_from_members,
)
from percolator.server.status.model import (
    ClusterStatus,
    CoordinatorStatus,
    ObserverStatus,
    Sample,
    ShardStatus,
)
from percolator.server.status.page import embed_json, render_page
from percolator.server.status.remote import status_url
from percolator.server.status.sampler import StatusSampler
from percolator.server.status.text import render_text
from percolator.server.storage.schema import SCHEMA_VERSION
from percolator.server.txn.membership import HASH_MAX, HASH_MIN, GroupMember


def _status(**kw: object) -> ClusterStatus:
    coordinator = CoordinatorRead(
        CoordinatorStatus("127.0.0.1:7470", True, latest_ts=5 << 18, latest_ts_ms=5),
        servers=[GroupMember("s", '{"sql":"127.0.0.1:5433","pid":7}', 900, 1)],
        workers=[GroupMember("w1", "h pid 1", 800, 1), GroupMember("w2", "h pid 2", 700, 2)],
    )
    shards = [ShardStatus(0, "postgresql://u@h/db", True, SCHEMA_VERSION, safe_point=9)]
    observers = [ObserverStatus("o", "t", pending=2, lag_ms=30, last_error="</script>")]
    return assemble(coordinator, shards, observers, None, source="test", **kw)  # type: ignore[arg-type]


def test_json_round_trip() -> None:
    status = _status(history=[Sample(1, 2.5, {"o": 3}, {"o": 1})])
    data = json.loads(json.dumps(status.to_json()))
    assert data["ok"] is True
    assert ClusterStatus.from_json(data) == status
    assert ClusterStatus.from_json({**data, "added_later": 1}) == status


def test_parts_assembled() -> None:
    status = _status()
    assert status.coordinator.gc_safe_point == 9
    assert status.servers[0].sql_address == "127.0.0.1:5433" and status.servers[0].pid == 7
    assert [w.slice for w in status.workers] == ["1/2", "2/2"]
    assert status.workers[0].slice_range[0] == HASH_MIN
    assert status.workers[1].slice_range[1] == HASH_MAX
    assert server_from_member(GroupMember("x", "not json", 1, 1)).host == "not json"
    assert workers_from_members([]) == []


def test_problems() -> None:
    status = _status()
    assert status.ok
    down = assemble(
        CoordinatorRead(CoordinatorStatus("c:1", False, error="refused")),
        [ShardStatus(0, "d", False, error="timeout"), ShardStatus(1, "e", True, None)],
        [ObserverStatus("o", "t")],
        None,
        source="test",
    )
    assert down.problems == [
        "coordinator c:1 does not answer: refused",
        "shard 0 (d) is unreachable: timeout",
        "shard 1 (e) has no Percolator schema",
    ]
    idle = assemble(
        CoordinatorRead(CoordinatorStatus("c:1", True)),
        [],
        [ObserverStatus("a", "t"), ObserverStatus("b", "t", paused=True)],
        None,
        source="test",
    )
    assert idle.problems == ["no observer worker is running: changes to 1 observer(s) (a) wait"]
    text = render_text(idle)
    assert text.startswith("percolator status: PROBLEMS\n  ! no observer worker")


def test_public_dsn() -> None:
    assert public_dsn("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert public_dsn("postgresql://h/db?user=u&password=pw&x=1") == (
        "postgresql://h/db?user=u&password=***&x=1"
    )
    assert public_dsn("host=h password=pw dbname=d") == "host=h password=*** dbname=d"
    assert public_dsn("host=h password='p w' dbname=d") == "host=h password=*** dbname=d"
    assert public_dsn("postgresql://u@h/db") == "postgresql://u@h/db"


def test_page_is_self_contained_and_escapes() -> None:
    page = render_page(_status().to_json())
    assert "</script>" not in embed_json({"e": "</script><!--"})
    # The observer's error is data, not markup: only the page's own two script elements close.
    assert page.count("</script>") == 2
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    assert "status.json" in page


def test_status_url() -> None:
    want = "http://h:9/status.json?history=0"
    for given in ("h:9", "http://h:9", "http://h:9/", "http://h:9/metrics", "http://h:9/status"):
        assert status_url(given) == want


async def test_sampler_throughput() -> None:
    counts = iter([100.0, 160.0])
    sampler = StatusSampler(None, None, counter=lambda: next(counts))
    first = await sampler.sample()
    assert first.timestamps_per_s is None  # nothing to compare with yet
    second = await sampler.sample()
    assert second.timestamps_per_s is not None and second.timestamps_per_s > 0
    assert second.lag_ms == {}
