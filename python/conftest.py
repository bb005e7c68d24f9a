"""Fixtures of the Python compatibility suite.

One hearth process per test session, started from the release binary on a free loopback
port. The official firebase-admin SDK reaches it the way users reach the Firebase emulator:
through FIREBASE_DATABASE_EMULATOR_HOST, with a production-style database URL whose first host
label names the namespace. Every test gets a fresh namespace, so tests never share data.

The binary defaults to <repo>/target/release/hearth; HEARTH_BIN overrides it.
"""

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import firebase_admin
import pytest
from firebase_admin import credentials, db
from google.auth.credentials import AnonymousCredentials

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 15
# Short keep-alives let ListenerRegistration.close() return quickly: the SDK's reader thread
# only notices the closed response when the next event (or keep-alive) arrives.
SSE_KEEP_ALIVE_SECS = 1


def hearth_binary():
    path = Path(os.environ.get("HEARTH_BIN", REPO / "target" / "release" / "hearth"))
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(
            f"hearth binary not found at {path}: run `cargo build --release --bin hearth` "
            "or set HEARTH_BIN"
        )
    return path


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, log_path):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"hearth exited during startup ({process.returncode}); log:\n{log_path.read_text()}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"hearth did not listen on port {port} within {START_TIMEOUT_S} s")


class Server:
    def __init__(self, port, process, log_path):
        self.port = port
        self.process = process
        self.log_path = log_path

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def url(self, namespace, path=""):
        """A plain REST URL, for requests the SDK cannot make."""
        return f"http://{self.host}/{path.strip('/')}.json?ns={namespace}"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("hearth") / f"server-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                str(hearth_binary()),
                "serve",
                "--dev",
                "--listen",
                f"127.0.0.1:{port}",
                "--threads",
                "2",
                "--sse-keep-alive-secs",
                str(SSE_KEEP_ALIVE_SECS),
                "--data-dir",
                str(tmp_path_factory.mktemp("hearth-data")),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process, log_path)
        os.environ["FIREBASE_DATABASE_EMULATOR_HOST"] = f"127.0.0.1:{port}"
        yield Server(port, process, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class StubCredential(credentials.Base):
    """In emulator mode the SDK authenticates with the token `owner` and never asks the app
    credential for a token; this stub guarantees nothing falls back to Google's application
    default credentials."""

    def get_credential(self):
        return AnonymousCredentials()


def make_app(namespace, **options):
    return firebase_admin.initialize_app(
        StubCredential(),
        {
            "databaseURL": f"https://{namespace}.firebaseio.com",
            "projectId": "demo-hearth",
            **options,
        },
        name=f"app-{uuid.uuid4().hex}",
    )


@pytest.fixture
def namespace():
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def app(server, namespace):
    app = make_app(namespace)
    yield app
    firebase_admin.delete_app(app)


@pytest.fixture
def root(app):
    """The root reference of the test's own namespace."""
    return db.reference("/", app=app)


@pytest.fixture
def app_factory(server, namespace):
    """Makes more apps on the test's namespace, with extra options; deleted after the test."""
    apps = []

    def factory(**options):
        app = make_app(namespace, **options)
        apps.append(app)
        return app

    yield factory
    for app in apps:
        firebase_admin.delete_app(app)


def pytest_sessionfinish(session, exitstatus):
    # A run that ran no test must not look like a pass to CI (pytest's exit code 5).
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
