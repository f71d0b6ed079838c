"""The mail queue the round-2 cases stage: dead letters killed with SMTP errors, one error
holding bytes that are not UTF-8."""

from emq_notebook import jobs

Q = "mailq"
K = f"emq:{{{Q}}}:"


def kill(conn, job_id: str, error: str) -> str:
    jobs.enqueue(conn, Q, f'{{"id": "{job_id}"}}', id=job_id, max_attempts=1)
    assert jobs.claim(conn, Q, 60_000).id == job_id
    jobs.fail(conn, Q, job_id, error)
    return job_id


def smtp_dead(conn, n: int = 10) -> list[str]:
    return [kill(conn, f"j_{i:02}", f"SMTP 550 mailbox {i} unavailable") for i in range(n)]


# an error another node wrote, its bytes not UTF-8 (read and shown as \xNN)

BAD = b"SMTP 550 \xff\xfe mailbox 9"


def with_a_foreign_error(conn) -> list[str]:
    """Ten SMTP dead letters, the last one's last_error written by another node as bytes
    that are not UTF-8."""
    ids = smtp_dead(conn)
    conn.client.execute_command("HSET", K + "job:" + ids[-1], "last_error", BAD)
    return ids
