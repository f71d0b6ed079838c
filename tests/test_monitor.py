"""The monitor (emq_notebook/monitor.py): the collector's metrics against what the
server holds, its counters and histograms fed by the per-minute buckets, the check's
statuses, the exporter over HTTP, the shell's `emq check` and `emq exporter`, and the
hostile cases (names, a lost or stalled server, buckets another node wrote), on both
backends where a server is involved; and the shipped alert rules with a real Prometheus
scraping the exporter (`TestPrometheus`)."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from harm import bounded
from helpers import minute_now, open_conn
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import emq_notebook as emq
from emq_notebook import (
    admin,
    connector,
    frames,
    grammar,
    health,
    histogram,
    jobs,
    local_valkey,
    monitor,
    watching,
)
from emq_notebook.completion import Completer
from emq_notebook.connector import sent_once
from emq_notebook.errors import BadInput, UnknownQueue
from emq_notebook.keyspace import base, latency_index_key, latency_key, metrics_key, queue_key

EMQ = [sys.executable, "-m", "emq_notebook.cli"]


def exposition(c: monitor.Collector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(c)
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a scrape's text, as Prometheus parses it."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(c: monitor.Collector) -> dict[tuple[str, tuple], float]:
    return samples(exposition(c))


def at(got: dict, name: str, **labels: str) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def stage(conn: emq.Connection) -> None:
    """`mail`: 3 pending, 1 in flight, 1 scheduled, 2 dead (2 of 3 finished failed);
    `held`: paused, 1 pending."""
    for i in range(7):
        jobs.enqueue(conn, "mail", "{}", id=f"j_{i}", max_attempts=1)
    jobs.enqueue(conn, "mail", "{}", id="later", delay_ms=3_600_000)
    for _ in range(2):
        jobs.fail(conn, "mail", jobs.claim(conn, "mail", 60_000).id, "SMTP 550")
    jobs.complete(conn, "mail", jobs.claim(conn, "mail", 60_000).id)
    jobs.claim(conn, "mail", 60_000)
    jobs.enqueue(conn, "held", "{}")
    admin.pause(conn, "held")


def test_a_scrape_shows_each_queue_as_the_server_holds_it(conn):
    stage(conn)
    got = scrape(monitor.collector(conn))
    counts = frames.counts(conn)
    verdicts = frames.health(conn)["verdict"]
    assert set(counts.index) == {"mail", "held"}
    for q in counts.index:
        for state in ("pending", "active", "schedule", "dead"):
            assert at(got, "emq_jobs", queue=q, state=state) == counts.loc[q, state]
        assert at(got, "emq_queue_paused", queue=q) == float(counts.loc[q, "paused"])
        shown = {v for v in health.SEVERITY if at(got, "emq_queue_verdict", queue=q, verdict=v) == 1}
        assert shown == {verdicts[q]}
        assert sum(at(got, "emq_queue_verdict", queue=q, verdict=v) for v in health.SEVERITY) == 1
    assert (counts.loc["mail", ["pending", "active", "schedule", "dead"]] == [3, 1, 1, 2]).all()
    assert verdicts["mail"] == "failing" and verdicts["held"] == "paused"
    assert at(got, "emq_oldest_job_age_seconds", queue="mail", state="dead") >= 0
    assert at(got, "emq_oldest_job_age_seconds", queue="held", state="dead") == 0
    assert at(got, "emq_up") == 1 and at(got, "emq_scrape_duration_seconds") > 0


def test_a_scrape_is_the_watching_look_one_call_a_queue(conn, monkeypatch):
    """One read path (issue 43): a scrape reads the server's time, then ONE `@read_watch`
    call a queue in one pipeline, the call a dashboard refresh and health make; no other
    script and no other pipeline."""
    stage(conn)
    c = monitor.collector(conn)
    scrape(c)  # the first look finds the queues
    runs: list[str] = []
    real_run = conn.run

    def run(name, keys, args=(), **kw):
        runs.append(name)
        return real_run(name, keys, args, **kw)

    executed: list[int] = []
    real_execute = connector.Pipeline.execute

    def execute(self, *a, **kw):
        replies = real_execute(self, *a, **kw)
        executed.append(len(replies))
        return replies

    monkeypatch.setattr(conn, "run", run)
    monkeypatch.setattr(connector.Pipeline, "execute", execute)
    got = scrape(c)
    assert at(got, "emq_up") == 1
    assert runs == ["read_watch", "read_watch"] and executed == [2]


def test_a_scrape_of_a_cluster_reads_each_queue_on_its_primary(cluster):
    conn = open_conn("cluster", cluster)
    stage(conn)
    names = [f"q{i}" for i in range(12)]  # spread over the three primaries' slots
    for q in names:
        jobs.enqueue(conn, q, "{}", max_attempts=1)
    c = monitor.collector(emq.connect(cluster.url, read_only=True))
    first = scrape(c)
    counts = frames.counts(conn)
    for q in counts.index:
        for state in ("pending", "active", "schedule", "dead"):
            assert at(first, "emq_jobs", queue=q, state=state) == counts.loc[q, state]
    for q in names:
        jobs.complete(conn, q, jobs.claim(conn, q, 60_000).id)
    got = scrape(c)
    assert all(at(got, "emq_jobs_completed_total", queue=q) == 1 for q in names)
    assert all(at(got, "emq_job_run_seconds_count", queue=q) == 1 for q in names)
    assert at(got, "emq_oldest_job_age_seconds", queue="mail", state="dead") >= 0
    assert monitor.check(conn, ["mail"]).status == "CRITICAL"


def test_the_oldest_dead_age_is_read_from_the_dead_sets_lowest_score(conn):
    jobs.enqueue(conn, "mail", "{}")
    now_s = int(conn.client.time()[0])
    # another node's dead letters, died two hours and one hour ago
    conn.client.zadd(queue_key("mail", "dead"), {"old": (now_s - 7200) * 1000, "new": (now_s - 3600) * 1000})
    age = at(scrape(monitor.collector(conn)), "emq_oldest_job_age_seconds", queue="mail", state="dead")
    assert 7200 <= age < 7200 + 600


def test_the_counters_add_what_each_minute_gained_and_never_drop(conn):
    for i in range(6):
        jobs.enqueue(conn, "mail", "{}", id=f"j_{i}", max_attempts=1)
    c = monitor.collector(conn)
    first = scrape(c)
    # from 0 when the collector first sees the queue: what was counted before is not its
    assert at(first, "emq_jobs_completed_total", queue="mail") == 0
    for i in range(4):
        got = jobs.claim(conn, "mail", 60_000)
        if i < 3:
            jobs.complete(conn, "mail", got.id)
        else:
            jobs.fail(conn, "mail", got.id, "boom")
    got = scrape(c)
    assert at(got, "emq_jobs_completed_total", queue="mail") == 3
    assert at(got, "emq_jobs_failed_total", queue="mail") == 1
    # removing the jobs (the dead one, the backlog) lowers no counter (bullmq#3603)
    jobs.remove_job(conn, "mail", "j_3")
    admin.drain(conn, "mail")
    # a bucket far back, as another node's day of history, and its trim: neither counts
    minute = minute_now(conn)
    conn.client.hset(metrics_key("mail", "completed"), str(minute - 600), "1000")
    again = scrape(c)
    conn.client.hdel(metrics_key("mail", "completed"), str(minute - 600))
    trimmed = scrape(c)
    for s in (again, trimmed):
        assert at(s, "emq_jobs_completed_total", queue="mail") == 3
        assert at(s, "emq_jobs_failed_total", queue="mail") == 1
    # a node whose clock runs a minute ahead counts into the next minute: counted too
    conn.client.hincrby(metrics_key("mail", "completed"), str(minute + 1), 5)
    assert at(scrape(c), "emq_jobs_completed_total", queue="mail") == 8


def test_a_minute_written_anew_counts_whole(conn):
    jobs.enqueue(conn, "mail", "{}")
    minute = minute_now(conn)
    key = metrics_key("mail", "completed")
    conn.client.hset(key, str(minute), "10")
    c = monitor.collector(conn)
    scrape(c)
    # the hash deleted (an obliterate) and the minute counted again from 1
    conn.client.delete(key)
    conn.client.hset(key, str(minute), "2")
    assert at(scrape(c), "emq_jobs_completed_total", queue="mail") == 2


def test_the_histograms_are_cumulative_at_the_histograms_own_bucket_ends(conn):
    jobs.enqueue(conn, "mail", "{}")
    c = monitor.collector(conn)
    before = scrape(c)
    assert not any(name.startswith("emq_job_wait_seconds") for name, _ in before)
    minute = minute_now(conn)
    # each bound, and the ms past it
    waits = [0, 3, 10, 11, 97, 98, 954, 955, 956, 9412, 9413, 57565, 57566, 567_000, 567_001]
    waits += [3_467_721, 3_467_722]
    for ms in waits:
        conn.client.hincrby(latency_key("mail", "wait", minute), str(histogram.bucket(ms)), 1)
    conn.client.zadd(latency_index_key("mail"), {str(minute): minute})
    got = scrape(c)
    for le, _ in monitor.BOUNDS:
        # each bound is a bucket's last whole ms: the count at or below it is exact
        expected = sum(ms <= round(le * 1000) for ms in waits)
        assert at(got, "emq_job_wait_seconds_bucket", queue="mail", le=repr(le)) == expected, le
    assert at(got, "emq_job_wait_seconds_bucket", queue="mail", le="+Inf") == len(waits)
    assert at(got, "emq_job_wait_seconds_count", queue="mail") == len(waits)
    assert at(got, "emq_job_wait_seconds_sum", queue="mail") == pytest.approx(sum(waits) / 1000, rel=0.05)
    assert [round(le * 1000) for le, _ in monitor.BOUNDS] == [10, 97, 955, 9412, 57565, 567000, 3467721]


def test_a_claim_and_a_complete_feed_the_wait_and_run_histograms(conn):
    jobs.enqueue(conn, "mail", "{}")
    c = monitor.collector(conn)
    scrape(c)
    got = jobs.claim(conn, "mail", 60_000)
    jobs.complete(conn, "mail", got.id)
    after = scrape(c)
    assert at(after, "emq_job_wait_seconds_count", queue="mail") == 1
    assert at(after, "emq_job_run_seconds_count", queue="mail") == 1
    # read again, nothing new: nothing counted twice
    assert at(scrape(c), "emq_job_run_seconds_count", queue="mail") == 1


def test_a_queue_gone_from_the_server_leaves_the_scrape_and_the_collector(conn):
    jobs.enqueue(conn, "mail", "{}")
    jobs.enqueue(conn, "reports", "{}")
    c = monitor.collector(conn)
    scrape(c)
    admin.pause(conn, "reports")
    admin.obliterate_all(conn, "reports", force=True)
    got = scrape(c)
    assert ("emq_jobs_completed_total", (("queue", "reports"),)) not in got
    assert set(c._queues) == {"mail"}


def test_names_the_gate_refuses_are_left_out_and_label_values_escaped(conn):
    # another client's keys under names no queue may have: never a label, never a failure
    hostile = ['a"b', "x\ny", "back\\slash", "a b", "ünï"]
    for name in hostile:
        conn.client.hset(f"emq:{{{name}}}:meta", "created_at", "1")
    # and under names that are no UTF-8 at all (or hold a NUL, a line separator)
    for raw in (b"\xff\xfe", b"q\x80x", b"a\xc3", "ok\u2028x".encode(), b"\x00z"):
        conn.client.hset(b"emq:{" + raw + b"}:meta", "created_at", "1")
        conn.client.zadd(b"emq:{" + raw + b"}:pending", {b"\xff": 1})
    jobs.enqueue(conn, "ok.q@x+y-z_1", "{}")
    got = scrape(monitor.collector(conn))
    assert at(got, "emq_up") == 1
    assert {dict(labels).get("queue") for _, labels in got} - {None} == {"ok.q@x+y-z_1"}


def test_any_label_value_is_escaped_by_prometheus_client(conn):
    """Were a name the gate refuses ever a label value, the text format still holds it
    whole: prometheus_client escapes it, and Prometheus' parser reads it back."""
    hostile = ['a"b', "x\ny", "back\\slash", "a b}", "ünï"]
    frame = frames.health(conn).reindex(hostile)
    for column, value in (("pending", 1), ("active", 0), ("schedule", 0), ("dead", 0)):
        frame[column] = value
    frame["paused"], frame["oldest_pending_s"], frame["verdict"] = False, math.nan, "ok"
    look = monitor.Look(now_ms=0, health=frame, first={}, replies={})
    c = monitor.collector(conn)

    class Families:
        def describe(self):
            return []

        def collect(self):
            return c._families(look)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    got = samples(generate_latest(registry).decode())
    for name in hostile:
        assert at(got, "emq_jobs", queue=name, state="pending") == 1


def test_a_lost_server_answers_up_0_and_nothing_else(private_valkey):
    conn = emq.connect(
        f"redis://127.0.0.1:{private_valkey.port}/0", socket_timeout=2, socket_connect_timeout=2
    )
    jobs.enqueue(conn, "mail", "{}")
    c = monitor.collector(conn)
    assert at(scrape(c), "emq_up") == 1
    private_valkey.stop()
    got = bounded(lambda: scrape(c), what="a scrape of a stopped server")
    assert {name for name, _ in got} == {"emq_up", "emq_scrape_duration_seconds"}
    assert at(got, "emq_up") == 0


def test_a_stalled_server_answers_up_0_in_the_socket_timeout_then_counts_on(private_valkey):
    url = f"redis://127.0.0.1:{private_valkey.port}/0"
    conn = emq.connect(url, socket_timeout=1, socket_connect_timeout=1)
    for _ in range(3):
        jobs.enqueue(conn, "mail", "{}")
    c = monitor.collector(conn)
    scrape(c)
    jobs.complete(conn, "mail", jobs.claim(conn, "mail", 60_000).id)
    pid = int(redis.Redis(port=private_valkey.port).info("server")["process_id"])
    os.kill(pid, signal.SIGSTOP)  # a paused process: it accepts, and answers nothing
    try:
        got = bounded(lambda: scrape(c), what="a scrape of a stalled server")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert at(got, "emq_up") == 0
    # back: the counters kept what they had, and count what came meanwhile
    jobs.complete(conn, "mail", jobs.claim(conn, "mail", 60_000).id)
    back = scrape(c)
    assert at(back, "emq_up") == 1
    assert at(back, "emq_jobs_completed_total", queue="mail") == 2


def test_a_server_that_stalls_mid_scrape_answers_up_0_in_the_socket_timeout(monkeypatch):
    """`DEBUG SLEEP` sent by another client after the scrape read the server's time and
    before its one read of the queues: the scrape answers emq_up 0 within the socket
    timeout, not after the server wakes."""
    srv = local_valkey.start(save="", appendonly="no", config={"enable-debug-command": "yes"})
    try:
        url = f"redis://127.0.0.1:{srv.port}/0"
        conn = emq.connect(url, socket_timeout=1, socket_connect_timeout=1)
        jobs.enqueue(conn, "mail", "{}")
        c = monitor.collector(conn)
        assert at(scrape(c), "emq_up") == 1
        real = watching.read
        # sent once: a server stopped under it is never sent it again (another took its port)
        sleeper = redis.Redis(port=srv.port, socket_timeout=30, retry=sent_once())
        prober = redis.Redis(port=srv.port, socket_timeout=0.2, retry=sent_once())
        asleep = threading.Thread(
            target=with_suppressed, args=(sleeper.execute_command, "DEBUG", "SLEEP", "20")
        )

        def stalled(*args, **kw):
            asleep.start()
            for _ in range(100):  # until the server no longer answers a PING
                try:
                    prober.ping()
                except redis.TimeoutError:
                    break
            return real(*args, **kw)

        monkeypatch.setattr(watching, "read", stalled)
        got = bounded(lambda: scrape(c), seconds=15, what="a scrape of a server asleep for 20 s")
        assert at(got, "emq_up") == 0
    finally:
        srv.terminate()
    asleep.join(30)
    assert not asleep.is_alive()


def test_a_server_asleep_mid_read_costs_a_scrape_the_timeout_and_the_exporter_serves_on(monkeypatch):
    """`DEBUG SLEEP` sent by another client while the server answers the scrape's one
    pipeline (1,000 calls: the server serves other clients between them): the HTTP
    scrape answers `emq_up 0` within about the socket timeout, so does one while the
    server sleeps, and the first after it wakes reads every queue again."""
    srv = local_valkey.start(save="", appendonly="no", config={"enable-debug-command": "yes"})
    try:
        url = f"redis://127.0.0.1:{srv.port}/0"
        names = [f"q{i:04d}" for i in range(1000)]
        writer = emq.connect(url)
        pipe = writer.pipeline()
        for q in names:
            jobs.enqueue(writer, q, "{}", pipeline=pipe)
        pipe.execute()
        conn = emq.connect(url, read_only=True, socket_timeout=1, socket_connect_timeout=1)
        sleeper = redis.Redis(port=srv.port, socket_timeout=30, retry=sent_once())
        asleep = threading.Thread(
            target=with_suppressed, args=(sleeper.execute_command, "DEBUG", "SLEEP", "5")
        )
        real = connector.Pipeline.execute

        def stalled(self, *args, **kw):
            threading.Timer(0.02, asleep.start).start()  # once the pipeline is on its way
            return real(self, *args, **kw)

        with monitor.serve(conn, "127.0.0.1", 0) as exporter:

            def get() -> tuple[float, dict]:
                t = time.perf_counter()
                text = urllib.request.urlopen(exporter.url, timeout=60).read().decode()
                return time.perf_counter() - t, samples(text)

            assert at(get()[1], "emq_up") == 1  # the first finds the queues
            monkeypatch.setattr(connector.Pipeline, "execute", stalled)
            took, got = get()
            assert at(got, "emq_up") == 0 and took < 4, took
            monkeypatch.setattr(connector.Pipeline, "execute", real)
            took, got = get()  # the server still asleep
            assert at(got, "emq_up") == 0 and took < 4, took
            asleep.join(30)
            took, got = get()
            assert at(got, "emq_up") == 1
            assert sum(name == "emq_jobs" and ("state", "pending") in labels for name, labels in got) == 1000
    finally:
        srv.terminate()
    asleep.join(30)
    assert not asleep.is_alive()


# what a scrape of 10,000 queues may take on a busy shared machine, and the exporter's
# resident memory then (the package and its imports are most of it)
TEN_THOUSAND_S = 120
TEN_THOUSAND_RSS = 400e6


def test_ten_thousand_queues_the_exporter_answers_bounded_in_time_and_memory(private_valkey):
    """`emq exporter` of a server holding 10,000 queues: each scrape answers every queue
    within a bound, and the exporter's resident memory stays under one (the families of
    a scrape are its largest part). A real server only: the fake runs the scripts many
    times slower, and a scrape of it would be the test's whole budget."""
    url = f"redis://127.0.0.1:{private_valkey.port}/0"
    writer = emq.connect(url)
    names = [f"q{i:05d}" for i in range(10_000)]
    for start in range(0, len(names), 500):
        pipe = writer.pipeline()
        for q in names[start : start + 500]:
            jobs.enqueue(writer, q, "{}", pipeline=pipe)
        pipe.execute()
    p = subprocess.Popen(
        [*EMQ, "--url", url, "exporter", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        where = p.stderr.readline().split("serving ", 1)[1].split(" ", 1)[0]
        for _ in range(2):  # the first finds the queues, the second reads them as every later one
            got = bounded(
                lambda: samples(urllib.request.urlopen(where, timeout=TEN_THOUSAND_S).read().decode()),
                seconds=TEN_THOUSAND_S,
                what="a scrape of 10,000 queues",
            )
            assert at(got, "emq_up") == 1
            assert sum(name == "emq_queue_paused" for name, _ in got) == 10_000
            assert at(got, "process_resident_memory_bytes") < TEN_THOUSAND_RSS
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0


def with_suppressed(call, *args):
    """`call(*args)`; the error of a server stopped under it swallowed."""
    try:
        call(*args)
    except redis.ConnectionError:
        pass


def test_read_monitor_measures_what_another_node_wrote_before_it_reads_it(harm):
    conn, srv = harm
    jobs.enqueue(conn, "mail", "{}")
    minute = minute_now(conn)
    r = conn.client
    # a metrics field of a MB, a latency hash of 2,000 fields, a dead head of 4 MB
    r.hset(metrics_key("mail", "failed"), str(minute), "9" * 1_000_000)
    r.hset(latency_key("mail", "run", minute), mapping={str(b): "1" for b in range(2000)})
    r.zadd(latency_index_key("mail"), {str(minute): minute})
    r.zadd(queue_key("mail", "dead"), {"x" * 4_000_000: 1_000_000, "j_ok": 2_000_000})
    asked = [minute - 1, minute + 1, "" if srv is None else "1", monitor.HASH_FIELDS, monitor.HASH_BYTES]
    oldest, completed, failed, waits, runs = bounded(
        lambda: conn.run("read_monitor", [base("mail")], asked), srv, what="read_monitor"
    )
    assert oldest == 1_000_000
    assert completed == [0, 0, 0] and failed == [0, -1, 0]
    assert runs == [minute, -1] and waits == [minute, []]
    # and a scrape beside them answers, its counters untouched by what it did not read
    got = bounded(lambda: scrape(monitor.collector(conn)), srv, what="a scrape")
    assert at(got, "emq_up") == 1 and at(got, "emq_jobs_failed_total", queue="mail") == 0


def test_read_monitor_refuses_a_span_of_minutes_past_its_bound(conn):
    with pytest.raises(emq.EMQError, match="read_monitor: minutes"):
        conn.run("read_monitor", [base("mail")], [0, 65, "", 512, 65536])


# -- the exporter -------------------------------------------------------------------------


def test_serve_answers_metrics_over_http_and_stops(conn):
    jobs.enqueue(conn, "mail", "{}")
    with monitor.serve(conn, "127.0.0.1", 0) as exporter:
        assert exporter.port > 0 and exporter.url.endswith("/metrics")
        text = urllib.request.urlopen(exporter.url, timeout=30).read().decode()
        got = samples(text)
        assert at(got, "emq_jobs", queue="mail", state="pending") == 1
        # the exporter process's own, beside the queues'
        assert "process_resident_memory_bytes" in text
        with pytest.raises(BadInput, match="cannot listen"):
            monitor.serve(conn, "127.0.0.1", exporter.port)


@pytest.mark.parametrize(
    "text, expected",
    [("127.0.0.1:9808", ("127.0.0.1", 9808)), ("[::1]:0", ("::1", 0)), ("localhost:1", ("localhost", 1))],
)
def test_a_listen_address_is_host_and_port(text, expected):
    assert monitor.listen_address(text) == expected


@pytest.mark.parametrize("text", ["9808", ":9808", "host:", "host:99999", "host:x"])
def test_a_listen_address_that_is_not_one_is_refused(text):
    with pytest.raises(BadInput, match="not HOST:PORT"):
        monitor.listen_address(text)


# -- the check ----------------------------------------------------------------------------


def fail_all(conn, q: str, n: int = 2) -> None:
    for _ in range(n):
        jobs.enqueue(conn, q, "{}", max_attempts=1)
        jobs.fail(conn, q, jobs.claim(conn, q, 60_000).id, "boom")


def test_check_is_ok_when_nothing_is_wrong(conn):
    assert monitor.check(conn).lines() == [f"EMQ OK - no queue on {conn.label}"]
    jobs.enqueue(conn, "mail", "{}", delay_ms=3_600_000)
    result = monitor.check(conn)
    assert (result.status, result.code, result.problems) == ("OK", 0, ())
    assert result.lines() == ["EMQ OK - 1 queue, no problem: 1 idle"]


def test_check_a_failing_queue_is_critical_and_dead_letters_warn(conn):
    fail_all(conn, "mail")
    # reports: one failure in three (33%: not failing), its dead job left
    fail_all(conn, "reports", 1)
    for _ in range(2):
        jobs.enqueue(conn, "reports", "{}")
        jobs.complete(conn, "reports", jobs.claim(conn, "reports", 60_000).id)
    result = monitor.check(conn, dead_above=0)
    assert result.status == "CRITICAL" and result.code == 2
    assert (
        result.lines()[0]
        == "EMQ CRITICAL - 3 problems in 2 of 2 queues (1 critical, 2 warning): mail, reports"
    )
    assert result.lines()[1].startswith(
        "CRITICAL mail: failing — 2 of 2 jobs finished in the last 5 min failed"
    )
    assert "WARNING mail: 2 dead, more than 0" in result.lines()
    assert "WARNING reports: 1 dead, more than 0" in result.lines()
    # the same problems, said as the monitor asked
    assert monitor.check(conn, ["reports"], dead_above=0).lines() == [
        "EMQ WARNING - 1 problem in 1 of 1 queue (1 warning): reports",
        "WARNING reports: 1 dead, more than 0",
    ]
    assert monitor.check(conn, ["reports"], critical_dead_above=0).status == "CRITICAL"
    quiet = monitor.check(conn, verdicts=(), critical_verdicts=())
    assert quiet.status == "OK"
    assert json.loads(result.json())["problems"][0] == {
        "queue": "mail",
        "status": "CRITICAL",
        "check": "verdict",
        "why": result.problems[0].why,
    }


def test_check_an_old_backlog_by_its_oldest_wait(conn):
    jobs.enqueue(conn, "mail", "{}", id="j_1")
    now_ms = conn.server_ms()
    conn.client.hset(queue_key("mail", "job:j_1"), "created_at", str(now_ms - 2 * 3_600_000))
    result = monitor.check(conn, age_above_s=3600, verdicts=(), critical_verdicts=())
    assert result.lines() == [
        "EMQ WARNING - 1 problem in 1 of 1 queue (1 warning): mail",
        "WARNING mail: the oldest pending job has waited 2 h, more than 1 h",
    ]
    assert monitor.check(conn, critical_age_above_s=60, verdicts=()).status == "CRITICAL"
    # by default a backlog nobody claims for 5 minutes is stuck: WARNING
    stuck = monitor.check(conn)
    assert stuck.status == "WARNING" and stuck.problems[0].check == "verdict"
    assert stuck.problems[0].why.startswith("stuck — ")


def test_check_refuses_what_it_cannot_check(conn):
    jobs.enqueue(conn, "mail", "{}")
    with pytest.raises(BadInput, match="verdict 'fine'"):
        monitor.check(conn, verdicts=("fine",))
    with pytest.raises(BadInput, match="dead_above"):
        monitor.check(conn, dead_above=-1)
    with pytest.raises(UnknownQueue):
        monitor.check(conn, ["mial"])
    assert monitor.unknown("WireError: lost\nthe server").lines() == [
        "EMQ UNKNOWN - WireError: lost the server"
    ]


def test_check_names_at_most_a_few_queues_in_its_summary(conn):
    for i in range(7):
        fail_all(conn, f"q{i}", 1)
    first = monitor.check(conn).lines()[0]
    assert first.endswith(": q0, q1, q2, q3, q4 and 2 more")


# -- the grammar, the notebook, the shell -------------------------------------------------


def test_check_takes_queues_and_help_as_any_verb_does():
    ns = grammar.parse(["check", "mail", "reports", "--dead-above", "10", "--verdicts", "failing,stuck"])
    assert ns.queue == ["mail", "reports"] and ns.dead_above == 10 and ns.verdicts == ("failing", "stuck")
    assert grammar.parse(["check"]).queue == []
    assert grammar.parse(["check", "-h"]).show_help
    assert grammar.parse(["check", "--verdicts", "none"]).verdicts == ()
    assert "check [QUEUE ...] [--dead-above N]" in grammar.grammar()
    with pytest.raises(emq.EMQError, match="name verdicts from"):
        grammar.parse(["check", "--verdicts", "fine"])
    assert grammar.parse(["exporter", "--listen", "0.0.0.0:9000"]).listen == ("0.0.0.0", 9000)


def test_completion_offers_queues_for_each_queue_of_a_check(conn):
    jobs.enqueue(conn, "mail", "{}")
    session = emq.verbs.Session(say=lambda _l: None)
    session.conn = conn
    completer = Completer(session)
    assert completer.words("check ") == ["mail"]
    assert completer.words("check mail ") == ["mail"]


def test_the_magic_checks_and_serves_from_the_notebook(emq_line, conn, capsys):
    fail_all(conn, "mail")
    result = emq_line("check --critical-verdicts none")
    assert isinstance(result, monitor.Check) and result.status == "WARNING"
    assert "EMQ WARNING - 1 problem in 1 of 1 queue (1 warning): mail" in capsys.readouterr().out
    exporter = emq_line("exporter --listen 127.0.0.1:0")
    try:
        text = urllib.request.urlopen(exporter.url, timeout=30).read().decode()
        assert at(samples(text), "emq_jobs", queue="mail", state="dead") == 2
    finally:
        exporter.stop()


def run_emq(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*EMQ, *args], capture_output=True, text=True, timeout=120, env=env)


def test_emq_check_exits_with_the_nagios_codes(valkey):
    url = f"redis://127.0.0.1:{valkey.port}/0"
    conn = emq.connect(url)
    conn.client.flushall()
    fail_all(conn, "mail")
    jobs.enqueue(conn, "fine", "{}", delay_ms=3_600_000)
    no_server = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    commands = [
        [*EMQ, "--url", url, "check", "fine"],
        [*EMQ, "--url", url, "check", "mail", "--critical-verdicts", "none"],
        [*EMQ, "--url", url, "check"],
        [*EMQ, "--url", url, "check", "--json"],
        [*EMQ, "--url", "redis://:pw-secret@127.0.0.1:1/0", "check"],
        [*EMQ, "--url", url, "check", "--verdicts", "fine"],
        [*EMQ, "--url", url, "check", "mial"],
        [*EMQ, "check"],
        [*EMQ, "--url", url, "check", "--dead-above", "x", "--json"],
    ]
    started = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_server)
        for c in commands
    ]
    done = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in started]
    for p in started:
        p.stdout.close()
        p.stderr.close()
    ok, warning, critical, as_json, unreachable, bad, typo, nowhere, bad_json = done
    assert ok[0] == 0 and ok[1] == "EMQ OK - 1 queue, no problem: 1 idle\n"
    assert warning[0] == 1 and warning[1].startswith("EMQ WARNING - ")
    assert critical[0] == 2 and critical[1].splitlines()[1].startswith("CRITICAL mail: failing — ")
    assert as_json[0] == 2 and json.loads(as_json[1])["status"] == "CRITICAL" and as_json[1].count("\n") == 1
    for code, out, err in (unreachable, bad, typo, nowhere):
        assert code == 3 and out.count("\n") == 1 and out.startswith("EMQ UNKNOWN - ") and err == ""
    assert "WireError" in unreachable[1] and "pw-secret" not in unreachable[1]
    assert "name verdicts from" in bad[1] and "UnknownQueue" in typo[1] and "needs a server" in nowhere[1]
    assert bad_json[0] == 3 and json.loads(bad_json[1])["status"] == "UNKNOWN"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_emq_exporter_serves_until_sigterm_or_sigint(valkey, stop):
    url = f"redis://127.0.0.1:{valkey.port}/0"
    conn = emq.connect(url)
    conn.client.flushall()
    jobs.enqueue(conn, "mail", "{}")
    p = subprocess.Popen(
        [*EMQ, "--url", url, "exporter", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = p.stderr.readline()
        assert first.startswith("emq exporter: serving http://127.0.0.1:") and "read-only" in first
        where = first.split("serving ", 1)[1].split(" ", 1)[0]
        got = samples(urllib.request.urlopen(where, timeout=30).read().decode())
        assert at(got, "emq_jobs", queue="mail", state="pending") == 1 and at(got, "emq_up") == 1
        p.send_signal(stop)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0 and out == "" and err == "emq exporter: stopped\n"


def test_emq_exporter_that_cannot_listen_exits_2_with_one_line(valkey):
    url = f"redis://127.0.0.1:{valkey.port}/0"
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
        out = run_emq("--url", url, "exporter", "--listen", f"127.0.0.1:{port}")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("emq: BadInput: cannot listen on 127.0.0.1:") and out.stderr.count("\n") == 1


# -- against a real Prometheus: the shipped alert rules pass `promtool check rules` and
# `promtool test rules`, and a Prometheus server (Debian's `prometheus` package) scraping
# the exporter every second finds the queues' counts and raises the alert of a failing
# queue. The Prometheus started here listens on 127.0.0.1 (a free port), keeps its data
# in the test's temporary directory, runs under `timeout` (it stops by itself) and is
# stopped by its pid.

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
RULES = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
# the longest a Prometheus started here lives (seconds): it stops by itself after it
LIFETIME_S = 300
# the longest a test waits for Prometheus to start, scrape or evaluate (seconds)
WAIT_S = 90.0


def promtool(*args: str) -> subprocess.CompletedProcess:
    """`promtool ARGS` in deploy/prometheus, its output as text."""
    return subprocess.run([str(PROMTOOL), *args], cwd=RULES, capture_output=True, text=True, timeout=60)


class Prometheus:
    """A Prometheus server of this test: `query(expr)` asks its HTTP API."""

    def __init__(self, port: int, process: subprocess.Popen, log: Path):
        self.url = f"http://127.0.0.1:{port}"
        self.process, self.log = process, log

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.loads(reply.read())

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def until(self, expr: str, holds: Any, what: str) -> list[dict]:
        """The result of `expr` once `holds(result)`; fails after `WAIT_S`."""
        deadline = time.monotonic() + WAIT_S
        result: list[dict] = []
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"Prometheus exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            result = self.query(expr)
            if holds(result):
                return result
            time.sleep(0.5)
        pytest.fail(f"{what}: {expr} answered {result} after {WAIT_S:g} s")


class TestPrometheus:
    """Needs /usr/bin/prometheus and /usr/bin/promtool (`apt-get install -y prometheus`;
    .ci/run installs it). Outside CI a machine without them skips these tests with that
    line; in CI they fail."""

    @pytest.fixture(autouse=True)
    def _needs_prometheus(self):
        if not (PROMETHEUS.exists() and PROMTOOL.exists()):
            if os.environ.get("CI"):
                pytest.fail(
                    "CI needs /usr/bin/prometheus and promtool for the monitor test (.ci/run installs it)"
                )
            pytest.skip("no /usr/bin/prometheus: apt-get install -y prometheus")

    def test_the_shipped_rules_pass_promtool_check_and_test(self):
        checked = promtool("check", "rules", "emq-alerts.yml")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "SUCCESS: 7 rules found" in checked.stdout
        tested = promtool("test", "rules", "emq-alerts.test.yml")
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert "SUCCESS" in tested.stdout

    @pytest.fixture
    def prometheus(self, tmp_path) -> Iterator[Any]:
        """`start(target)`: a Prometheus scraping `target` (host:port) every second in a job
        named `emq`, evaluating the shipped rules every second."""
        started: list[Prometheus] = []

        def start(target: str) -> Prometheus:
            port = local_valkey.free_port()
            config = tmp_path / "prometheus.yml"
            config.write_text(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {RULES / 'emq-alerts.yml'}\n"
                f"scrape_configs:\n  - job_name: emq\n    static_configs:\n      - targets: ['{target}']\n"
            )
            log = tmp_path / "prometheus.log"
            process = subprocess.Popen(
                [
                    "timeout",
                    str(LIFETIME_S),
                    str(PROMETHEUS),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.console.templates=/dev/null",
                    "--web.console.libraries=/dev/null",
                ],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
            )
            server = Prometheus(port, process, log)
            started.append(server)
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    pytest.fail(f"Prometheus exited {process.returncode}: {log.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as reply:
                        if reply.status == 200:
                            return server
                except OSError:
                    pass
                time.sleep(0.3)
            pytest.fail(f"Prometheus not ready after {WAIT_S:g} s: {log.read_text()[-2000:]}")

        yield start
        for server in started:
            server.process.terminate()  # `timeout` hands the signal on to Prometheus
            try:
                server.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait(timeout=30)

    def test_prometheus_scrapes_the_counts_and_raises_a_failing_queues_alert(self, conn, prometheus):
        # mail: three failed, none completed (failing), 3 dead; fine: one job due in an hour
        for _ in range(3):
            jobs.enqueue(conn, "mail", "{}", max_attempts=1)
            jobs.fail(conn, "mail", jobs.claim(conn, "mail", 60_000).id, "SMTP 550")
        jobs.enqueue(conn, "fine", "{}", delay_ms=3_600_000)
        dead = int(frames.counts(conn).loc["mail", "dead"])
        assert dead == 3
        with monitor.serve(conn, "127.0.0.1", 0) as exporter:
            server = prometheus(f"127.0.0.1:{exporter.port}")
            found = server.until(
                'emq_jobs{queue="mail",state="dead"}', lambda r: len(r) == 1, "the dead count of mail"
            )
            assert float(found[0]["value"][1]) == dead
            assert found[0]["metric"]["job"] == "emq"
            assert float(server.query('emq_jobs{queue="fine",state="schedule"}')[0]["value"][1]) == 1
            assert float(server.query("emq_up")[0]["value"][1]) == 1
            alert = server.until(
                'ALERTS{alertname="EmqQueueFailing",queue="mail"}',
                lambda r: len(r) == 1 and r[0]["metric"]["alertstate"] in ("pending", "firing"),
                "the failing alert of mail",
            )
            assert alert[0]["metric"]["severity"] == "critical"
            # and no alert for the queue that is fine
            assert server.query('ALERTS{queue="fine",alertname=~"EmqQueue.*"}') == []
