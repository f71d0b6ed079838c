"""A queue staged for the triage verbs through %emq: dead letters killed with their errors."""

from dead_letters import dead_letter

Q = "mailq"


def kill(conn, job_id: str, error: str) -> str:
    return dead_letter(conn, Q, job_id, error, payload=f'{{"id": "{job_id}"}}')


def stage(conn) -> None:
    for i in range(5):
        kill(conn, f"j_smtp{i}", f"SMTP 550 mailbox {i} unavailable")
    kill(conn, "j_tls", "TLS handshake failed after 30s")
    kill(conn, "j_to", "timeout after 1200ms")
