"""Tab completion of %emq lines through IPython's own completer, on both backends."""

import pytest
from IPython.core.completer import provisionalcompleter

from emq_notebook import completion, jobs, magics, registry


def emq_completer(ip):
    matcher = next(m for m in ip.Completer.custom_matchers if m.matcher_identifier == "emq_notebook")
    return matcher.completer


@pytest.fixture
def complete(ip, conn):
    magics.SESSION.conn = conn
    emq_completer(ip)._cache.clear()

    def run(line: str) -> list[str]:
        return ip.complete("", line, len(line))[1]

    return run


def test_verbs_and_help_words(complete):
    assert complete("%emq ") == [*registry.VERBS, "-h", "--help"]
    assert complete("%emq dra") == ["drain"]
    assert complete("%emq re") == ["resume", "remove", "reprocess", "repeats", "reason"]
    assert complete("%emq --he") == ["--help"]


def test_the_options_of_the_verb_being_typed(complete):
    assert complete("%emq drain mail --") == ["--include-schedule", "--budget", "--yes", "--reason", "--help"]
    assert complete("%emq drain mail --budget 5 --") == ["--include-schedule", "--yes", "--reason", "--help"]
    assert complete("%emq obliterate mail --st") == ["--step"]
    assert complete("%emq jobs mail --state ") == ["pending", "active", "schedule", "dead", "all"]
    assert complete("%emq jobs mail --state d") == ["dead"]
    assert complete("%emq connect --executor f") == ["function"]


def test_queue_names_come_from_the_server(complete, conn):
    jobs.enqueue(conn, "mailers", "{}")
    jobs.enqueue(conn, "mail.eu", "{}")
    jobs.enqueue(conn, "reports", "{}")
    assert complete("%emq pause ") == ["mail.eu", "mailers", "reports"]
    assert complete("%emq pause mai") == ["mail.eu", "mailers"]
    assert complete("%emq drain --budget 5 rep") == ["reports"]


def test_queue_names_are_the_connections_known_queues_at_once(complete, conn, monkeypatch):
    jobs.enqueue(conn, "mailers", "{}")
    assert complete("%emq status ") == ["mailers"]
    jobs.enqueue(conn, "later", "{}")  # named here: known without a scan, offered at once
    scans = []
    monkeypatch.setattr(conn.directory, "_scan_once", lambda sweep: scans.append(sweep))
    assert complete("%emq status ") == ["later", "mailers"] and scans == []


def test_job_ids_for_job_verbs(complete, conn, ip):
    for i in range(3):
        jobs.enqueue(conn, "mail", "{}", id=f"j_{i}", max_attempts=1)
    got = jobs.claim(conn, "mail", 60_000)
    jobs.fail(conn, "mail", got[0], "boom")  # j_0 dead
    jobs.claim(conn, "mail", 60_000)  # j_1 active
    assert complete("%emq job mail ") == ["j_2", "j_1", "j_0"]
    assert complete("%emq reprocess mail j") == ["j_0"]
    assert complete("%emq complete mail j_") == ["j_1"]
    # pause takes no id: nothing from emq (IPython's own matchers may offer file names)
    assert emq_completer(ip).words("pause mail ") == []


def test_job_ids_are_bounded(complete, conn):
    pipe = conn.client.pipeline(transaction=False)
    for i in range(completion.MAX_IDS + 50):  # ids in the pending set are what is offered
        pipe.zadd("emq:{big}:pending", {f"j_{i:04}": 0})
    pipe.hset("emq:{big}:meta", "created", 1)
    pipe.execute()
    assert len(complete("%emq job big ")) == completion.MAX_IDS


def test_lanes_connections_and_help_topics(complete, conn, ip):
    jobs.enqueue(conn, "tenants", "{}", group="acme")
    jobs.enqueue(conn, "tenants", "{}", group="globex")
    assert complete("%emq lane tenants ") == ["acme", "globex"]
    assert "default" in complete("%emq use ")
    assert complete("%emq help obl") == ["obliterate"]


def test_a_cell_magic_line_completes_too(ip, conn):
    magics.SESSION.conn = conn
    jobs.enqueue(conn, "mailers", "{}")
    text = "%%emq\npause mailers\ndra"
    with provisionalcompleter():
        found = [c.text for c in ip.Completer.completions(text, len(text))]
    assert found == ["drain"]


def test_an_unreachable_server_completes_nothing(ip):
    import emq_notebook as emq

    magics.SESSION.conn = emq.connect("redis://127.0.0.1:1/0")
    completer = emq_completer(ip)
    completer._cache.clear()
    assert completer.words("pause ") == [] and completer.words("job mail ") == []
    ip.complete("", "%emq pause ", 11)  # no error reaches the shell
    assert ip.complete("", "%emq pa", 7)[1] == ["pause", "panel"]


def test_other_lines_are_left_to_ipython(ip):
    text, found = ip.complete("", "import o", 8)
    assert "os" in found


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_a_queue_named_like_an_option_is_neither_listed_nor_completed(ip, conn):
    from IPython.core.completer import provisionalcompleter

    from emq_notebook import frames

    jobs.enqueue(conn, "mailers", "{}")
    for name in ("-h", "--yes"):
        conn.client.hset(f"emq:{{{name}}}:meta", "created_by", "another node")
        conn.client.zadd(f"emq:{{{name}}}:pending", {"j_1": 0})
        conn.client.hset(f"emq:{{{name}}}:job:j_1", "payload", "{}")
    assert frames.queues(conn) == ["mailers"]
    magics.SESSION.conn = conn
    matcher = next(m for m in ip.Completer.custom_matchers if m.matcher_identifier == "emq_notebook")
    matcher.completer._cache.clear()
    line = "%emq pause "
    with provisionalcompleter():
        offered = [c.text for c in ip.Completer.completions(line, len(line))]
    assert offered == ["mailers"]
