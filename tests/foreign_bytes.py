"""A job row another node wrote with bytes that are not UTF-8."""

from emq_notebook import decoding

Q = "mail"
BAD = b"\xff\xfe"
# what `decoding.ERRORS` reads BAD as
BAD_TEXT = BAD.decode("utf-8", decoding.ERRORS)
PAYLOAD = b'{"to": "' + BAD + b'"}'


def row_key(job_id: str) -> str:
    return f"emq:{{{Q}}}:job:{job_id}"
