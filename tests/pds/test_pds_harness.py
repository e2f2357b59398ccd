"""The real PDS the test command installs and starts (SPEC PLAT-5): what its admin API
does to records and accounts, as the PDS kind (PLAT-1/2) will rely on.

No console code runs here: these tests pin down the platform's own behaviour over its
XRPC API, so a PDS upgrade that changes it fails here first.
"""

from __future__ import annotations

import secrets

import pytest

from .harness import Pds, XrpcError, account_subject, install, record_subject


def _ref() -> str:
    return f"op-{secrets.token_hex(8)}"


def test_record_takedown_hides_the_post_and_reversal_serves_it_again(pds):
    """PLAT-5: a post taken down through the admin API is no longer served by getRecord;
    getSubjectStatus shows the takedown with our reference; the reversal serves it again."""
    author = pds.create_account()
    post = pds.create_post(author, "a post to take down")
    subject = record_subject(post.uri, post.cid)
    assert pds.get_record(post.uri)["cid"] == post.cid
    ref = _ref()

    answer = pds.update_subject_status(subject, ref, applied=True)

    assert answer["takedown"] == {"applied": True, "ref": ref}
    with pytest.raises(XrpcError) as refused:
        pds.get_record(post.uri)
    assert (refused.value.status, refused.value.error) == (400, "RecordNotFound")
    status = pds.get_subject_status(subject)
    assert status["subject"]["uri"] == post.uri
    assert status["takedown"] == {"applied": True, "ref": ref}

    pds.update_subject_status(subject, ref, applied=False)

    served = pds.get_record(post.uri)
    assert (served["cid"], served["value"]["text"]) == (post.cid, "a post to take down")
    assert pds.get_subject_status(subject)["takedown"]["applied"] is False


def test_account_takedown_blocks_the_session_and_reversal_restores_it(pds):
    """PLAT-5: an account takedown refuses the account's session (getSession and
    createSession), getSubjectStatus shows it with our reference; its reversal restores
    both."""
    account = pds.create_account()
    subject = account_subject(account.did)
    assert pds.get_session(account)["did"] == account.did
    ref = _ref()

    pds.update_subject_status(subject, ref, applied=True)

    with pytest.raises(XrpcError) as session_refused:
        pds.get_session(account)
    assert 400 <= session_refused.value.status < 500
    with pytest.raises(XrpcError) as sign_in_refused:
        pds.create_session(account)
    assert (sign_in_refused.value.status, sign_in_refused.value.error) == (401, "AccountTakedown")
    status = pds.get_subject_status(subject)
    assert status["subject"] == {"$type": "com.atproto.admin.defs#repoRef", "did": account.did}
    assert status["takedown"] == {"applied": True, "ref": ref}

    pds.update_subject_status(subject, ref, applied=False)

    assert pds.get_session(account)["did"] == account.did
    assert pds.create_session(account)["did"] == account.did
    assert pds.get_subject_status(subject)["takedown"]["applied"] is False


def test_admin_api_refuses_a_wrong_password_and_knows_no_unknown_subject(pds):
    """PLAT-5: the answers the PDS kind maps to terminal errors: a wrong admin password
    is 401 (and changes nothing), an unknown record is 400 NotFound."""
    author = pds.create_account()
    post = pds.create_post(author)
    subject = record_subject(post.uri, post.cid)

    with pytest.raises(XrpcError) as wrong_password:
        pds.update_subject_status(subject, _ref(), password="not-the-password")
    assert wrong_password.value.status == 401
    assert pds.get_record(post.uri)["cid"] == post.cid

    unknown = record_subject(f"{post.uri}x", post.cid)
    with pytest.raises(XrpcError) as not_found:
        pds.get_subject_status(unknown)
    assert (not_found.value.status, not_found.value.error) == (400, "NotFound")


def test_launcher_stops_and_removes_its_data_when_its_parent_lets_go(tmp_path):
    """PLAT-5: the launcher never outlives the test session: when its standard input
    closes (the parent died) it stops cleanly and removes its data folder."""
    server = Pds.start(install(), tmp_path / "pds.log")
    assert server.data_dir.is_dir()

    server.process.stdin.close()

    assert server.process.wait(30) == 0, (tmp_path / "pds.log").read_text()
    assert not server.data_dir.exists()
    server.stop()
