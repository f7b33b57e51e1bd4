"""Signed provider records (``dsh_workflow._store.signing``): only this user's signature, for
this run and this exact record, verifies; the key is made owner-only, atomically, once."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow._store.signing import SIGNATURE, key_path, signed, verified

RECORD: dict[str, Any] = {"kind": "command", "command": ["agent", "--json"],
                          "identity": 'command [["agent", "--json"], null]',
                          "model_aliases": {"sonnet": "m"}}


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


def test_the_key_lives_owner_only_in_the_users_configuration_folder(config_home: Path) -> None:
    assert key_path() == config_home / "dsh-workflow" / "record-key"
    assert not key_path().exists()
    record = signed("run-1", RECORD)
    assert record[SIGNATURE].startswith("hmac-sha256:")
    assert (key_path().parent.stat().st_mode & 0o777, key_path().stat().st_mode & 0o777) == (
        0o700, 0o600)


def test_without_xdg_the_folder_is_under_home(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert key_path() == tmp_path / "home" / ".config" / "dsh-workflow" / "record-key"


def test_a_signed_record_verifies_for_its_run_only() -> None:
    record = signed("run-1", RECORD)
    assert verified("run-1", record) == (RECORD, True)
    assert verified("run-2", record) == (RECORD, False)


@given(key=st.sampled_from(sorted(RECORD)), value=st.text() | st.integers() | st.none())
def test_any_edit_breaks_the_signature(key: str, value: Any) -> None:
    record = signed("run-1", RECORD)
    edited = {**record, key: value}
    if edited == record:
        return
    assert verified("run-1", edited)[1] is False


def test_no_signature_or_no_key_never_verifies(config_home: Path) -> None:
    assert verified("run-1", RECORD) == (RECORD, False)
    assert not key_path().exists()  # verifying never makes a key
    record = signed("run-1", RECORD)
    key_path().unlink()
    assert verified("run-1", record)[1] is False
    assert verified("run-1", {**record, SIGNATURE: 42})[1] is False


def test_another_users_key_does_not_verify(config_home: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    record = signed("run-1", RECORD)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home.parent / "elsewhere"))
    signed("run-0", RECORD)  # the other user's own key
    assert verified("run-1", record)[1] is False


def test_a_key_that_cannot_be_made_leaves_the_record_unsigned(config_home: Path) -> None:
    config_home.mkdir()
    (config_home / "dsh-workflow").write_text("a file where the folder goes")
    assert SIGNATURE not in signed("run-1", RECORD)


def test_processes_racing_to_make_the_key_end_with_one(config_home: Path) -> None:
    signatures: list[str] = []

    def sign() -> None:
        signatures.append(signed("run-1", RECORD)[SIGNATURE])

    threads = [threading.Thread(target=sign) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(signatures)) == 1
    assert os.listdir(key_path().parent) == ["record-key"]  # no file left aside


def test_a_key_that_cannot_be_made_leaves_the_record_unsigned_and_says_so(
        config_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    config_home.parent.mkdir(parents=True, exist_ok=True)
    config_home.write_text("a file where the folder should be")
    with caplog.at_level("WARNING", logger="dsh_workflow.store"):
        record = signed("run-1", RECORD)
    assert SIGNATURE not in record and record == RECORD
    assert verified("run-1", record) == (RECORD, False)
    assert any(str(key_path()) in message and "run-1" in message and "unsigned" in message
               for message in caplog.messages)
