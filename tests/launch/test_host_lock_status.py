"""The host lock against hostile input (issue 47): its status command (`python -m
distbench.launch.hostlock`, distbench.launch.hostlock_status) and the taking of the lock
(distbench.launch.hostlock.hold, the launcher's and the health load's path), each row one input:
a bad argument, a lock path that is a directory, symlink, FIFO or device, a free lock whose file
holds a live pid's or another host's record, a lock file holding something else, a bad
DISTBENCH_HOST_LOCK_MODE.

Every row runs in a subprocess with a timeout, so a regression that blocks (a FIFO's open) fails
instead of hanging the suite; and every row checks that the files under its directory are as they
were: the status command creates and changes nothing, and a refused lock file is not written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.launch import hostlock
from distbench.launch.hostlock import LOCK_ENV, MODE_ENV, HostBusy, LockSettingError, hold
from tests.conftest import REPO

TIMEOUT_S = 30  # a row that blocks fails at this, never hangs the suite
BAD_SETTING = "it must be a plain file this user can open, or not exist yet (the first run creates it); " \
              f"set {LOCK_ENV} to another path"
# Holds the lock named by DISTBENCH_HOST_LOCK until its stdin ends: by hold() (a record naming its
# results directory), or by a bare flock that writes no record.
HOLDER = {"hold": "import sys\nfrom distbench.launch.hostlock import hold\n"
                  "with hold('comm/held', sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.read()\n",
          "bare": "import fcntl, os, sys\nfd = os.open(os.environ['DISTBENCH_HOST_LOCK'], os.O_RDWR | os.O_CREAT)\n"
                  "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n"}


def _env(lock: Path, mode: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != MODE_ENV}
    return {**env, LOCK_ENV: str(lock), **({MODE_ENV: mode} if mode is not None else {})}


def _tree(root: Path) -> dict:
    """Every path under root as lstat sees it (kind, size, mtime), symlinks not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(Path(dirpath) / name)
            out[str(Path(dirpath, name).relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _record(tmp: Path, **over) -> str:
    """A holder's record as a run writes it, of this test's own (live) process unless `over` says."""
    return json.dumps({**hostlock.HostLock("comm/old", tmp / "old-run").record(), **over})


# ---------------------------------------------------------------- setups: each makes the lock path
def missing(tmp):
    return tmp / "no-such-dir" / "host.lock"


def directory(tmp):
    (tmp / "host.lock").mkdir()
    return tmp / "host.lock"


def symlink(tmp):
    (tmp / "target").write_text("")
    (tmp / "host.lock").symlink_to(tmp / "target")
    return tmp / "host.lock"


def symlink_loop(tmp):
    (tmp / "host.lock").symlink_to("host.lock")
    return tmp / "host.lock"


def fifo(tmp):
    os.mkfifo(tmp / "host.lock")
    return tmp / "host.lock"


def device(tmp):
    return Path("/dev/null")


def under_a_file(tmp):
    (tmp / "file").write_text("x")
    return tmp / "file" / "host.lock"


def live_pid_record(tmp):  # free lock, a record of a process that is alive (this test's)
    (tmp / "host.lock").write_text(_record(tmp))
    return tmp / "host.lock"


def other_host_record(tmp):  # free lock, a record from another machine (a shared mount)
    (tmp / "host.lock").write_text(_record(tmp, host="other-host.example"))
    return tmp / "host.lock"


def dead_pid_record(tmp):  # a record of a process that has ended (killed before it could clear it)
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                             text=True, check=True).stdout)
    (tmp / "host.lock").write_text(_record(tmp, pid=pid))
    return tmp / "host.lock"


def read_only(tmp):
    (tmp / "host.lock").write_text("")
    (tmp / "host.lock").chmod(0o444)
    return tmp / "host.lock"


def unreadable(tmp):
    (tmp / "host.lock").write_text("")
    (tmp / "host.lock").chmod(0)
    return tmp / "host.lock"


def foreign_file(tmp):  # a mistyped DISTBENCH_HOST_LOCK naming some other file
    (tmp / "host.lock").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return tmp / "host.lock"


def plain(tmp):
    return tmp / "host.lock"


NOT_ROOT = pytest.mark.skipif(os.geteuid() == 0, reason="root opens a file whatever its mode")

# (setup, argv ({tmp}: the row's directory), env mode, holder, exit code, words said, words never said)
STATUS = [
    pytest.param(plain, ["--help"], None, None, 0,
                 ["usage: python -m distbench.launch.hostlock", "RESULTS_DIR", LOCK_ENV, "Exit status"],
                 ["no overlapping benchmark measurements"], id="help"),
    pytest.param(plain, ["--bogus"], None, None, 2, ["unrecognized arguments: --bogus"], [], id="unknown-option"),
    pytest.param(plain, ["{tmp}/nowhere"], None, None, 2,
                 ["RESULTS_DIR '{tmp}/nowhere': no such file or directory; give results directories"],
                 ["no overlapping"], id="missing-results-dir"),
    pytest.param(foreign_file, ["{tmp}/host.lock"], None, None, 2,
                 ["RESULTS_DIR '{tmp}/host.lock': not a directory: it is a plain file"], ["no overlapping"],
                 id="file-as-results-dir"),
    pytest.param(plain, ["{tmp}"], None, None, 0, ["{tmp}: no benchmark measurements in it"], [],
                 id="empty-results-dir"),
    pytest.param(missing, [], None, None, 0, ["{lock}: free (no lock file yet"], ["held"], id="missing-lock"),
    pytest.param(directory, [], None, None, 2, ["the host lock file {lock} is a directory: " + BAD_SETTING],
                 ["held"], id="directory"),
    pytest.param(symlink, [], None, None, 2, ["{lock} is a symlink (to {tmp}/target): " + BAD_SETTING],
                 ["held", "free"], id="symlink"),
    pytest.param(symlink_loop, [], None, None, 2, ["{lock} is a symlink (to host.lock)"], ["held"],
                 id="symlink-loop"),
    pytest.param(fifo, [], None, None, 2, ["{lock} is a FIFO (named pipe): " + BAD_SETTING], ["held"], id="fifo"),
    pytest.param(device, [], None, None, 2, ["/dev/null is a character device"], ["free"], id="device"),
    pytest.param(under_a_file, [], None, None, 2, ["{lock} cannot be examined (Not a directory)"], ["held"],
                 id="parent-is-a-file"),
    pytest.param(live_pid_record, [], None, None, 0, ["{lock}: free (the record left in it is stale: ",
                                                      "old-run (pid {pid}"], ["held"], id="free-with-live-pid-record"),
    pytest.param(other_host_record, [], None, None, 0, ["{lock}: free (the record left in it is stale",
                                                        "on other-host.example"], ["held"],
                 id="free-with-other-host-record"),
    pytest.param(plain, [], None, "hold", 0, ["{lock}: held by {tmp}/holder (pid {holder}, since ", "comm/held"],
                 ["free"], id="held-with-record"),
    pytest.param(dead_pid_record, [], None, "bare", 0, ["{lock}: held by another process (it left no record"],
                 ["free", "old-run"], id="held-without-record-over-a-stale-one"),
    pytest.param(read_only, [], None, None, 0, ["{lock}: free"], ["held"], id="read-only-lock"),
    pytest.param(unreadable, [], None, None, 2, ["{lock} cannot be opened for reading (Permission denied)"],
                 ["held"], id="unreadable-lock", marks=NOT_ROOT),
    pytest.param(plain, [], "bogus", None, 2, [f"{MODE_ENV}='bogus': allowed wait, fail (wait is the default)"],
                 ["Traceback"], id="bad-mode"),
]


@pytest.mark.parametrize("setup, argv, mode, holder, code, said, unsaid", STATUS)
def test_the_status_command_on_hostile_input(tmp_path, setup, argv, mode, holder, code, said, unsaid):
    lock = setup(tmp_path)
    held = None
    if holder:
        held = subprocess.Popen([sys.executable, "-c", HOLDER[holder], str(tmp_path / "holder")], cwd=REPO,
                                env=_env(lock), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if held:
            assert held.stdout.readline().strip() == "held"
        before = _tree(tmp_path)
        p = subprocess.run([sys.executable, "-m", "distbench.launch.hostlock", *(a.format(tmp=tmp_path) for a in argv)],
                           cwd=REPO, env=_env(lock, mode), capture_output=True, text=True, timeout=TIMEOUT_S)
        assert _tree(tmp_path) == before  # nothing created, nothing changed
    finally:
        if held:
            held.kill()
            held.wait()
    out = p.stdout + p.stderr
    assert p.returncode == code, out
    fill = {"tmp": tmp_path, "lock": lock, "pid": os.getpid(), "holder": held.pid if held else None}
    for words in said:
        assert words.format(**fill) in out
    for words in unsaid:
        assert words.format(**fill) not in out


# Takes the lock as a benchmark job does (mode wait: a lock path read as held would wait forever).
TAKE = ("import sys\nfrom distbench.launch.hostlock import hold, HostBusy\ntry:\n"
        "    with hold('comm/job', sys.argv[1], mode='wait'):\n        print('held', flush=True)\n"
        "except HostBusy as e:\n    print(type(e).__name__, e.why)\n    sys.exit(3)\n")
REFUSED = ", or not exist yet (the first run creates it); set DISTBENCH_HOST_LOCK to another path"


@pytest.mark.parametrize("setup, said", [
    pytest.param(directory, ["LockSettingError the host lock file {lock} is a directory: it must be a plain file"],
                 id="directory"),
    pytest.param(symlink, ["{lock} is a symlink (to {tmp}/target)"], id="symlink"),
    pytest.param(symlink_loop, ["{lock} is a symlink (to host.lock)"], id="symlink-loop"),
    pytest.param(fifo, ["{lock} is a FIFO (named pipe)"], id="fifo"),
    pytest.param(device, ["/dev/null is a character device"], id="device"),
    pytest.param(under_a_file, ["{lock} cannot be examined (Not a directory)"], id="parent-is-a-file"),
    pytest.param(foreign_file, ["{lock} holds 32 bytes that are no holder's record (starting "
                                "'root:x:0:0:root:/root:/b'); it was not overwritten: it must be a lock file a run made"],
                 id="foreign-file"),
])
def test_taking_the_lock_refuses_what_is_not_a_lock_file(tmp_path, setup, said):
    lock = setup(tmp_path)
    before = _tree(tmp_path)
    p = subprocess.run([sys.executable, "-c", TAKE, str(tmp_path / "run")], cwd=REPO, env=_env(lock),
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    assert p.returncode == 3, p.stdout + p.stderr
    for words in said + [REFUSED]:
        assert words.format(tmp=tmp_path, lock=lock) in p.stdout
    assert "held by" not in p.stdout
    assert _tree(tmp_path) == before  # refused: the file is not written, nothing is made beside it


@pytest.mark.parametrize("setup", [missing, read_only, live_pid_record, dead_pid_record], ids=lambda f: f.__name__)
def test_taking_the_lock_takes_a_plain_or_missing_lock_file(tmp_path, setup, monkeypatch):
    lock = setup(tmp_path)
    monkeypatch.setenv(LOCK_ENV, str(lock))
    with hold("comm/job", tmp_path / "run", mode="fail"):
        assert hostlock.read_holder(lock)["job"] == "comm/job"
    assert lock.read_text() == ""  # released: its record cleared


def test_a_bad_mode_names_the_variable_for_each_caller(tmp_path, monkeypatch):
    """A bad DISTBENCH_HOST_LOCK_MODE or mode argument: a LockSettingError, which the rule scripts and
    the health load catch as HostBusy (ending with the reason) and a caller passing it as ValueError."""
    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "host.lock"))
    monkeypatch.setenv(MODE_ENV, "bogus")
    for caught in (ValueError, HostBusy, LockSettingError):
        with pytest.raises(caught, match=rf"^{MODE_ENV}='bogus': allowed wait, fail \(wait is the default\)$"), \
                hold("comm/job"):
            pass
    with pytest.raises(ValueError, match=r"^host lock mode 'never' \(config host_lock\): allowed wait, fail"):
        hostlock.HostLock("comm/job", mode="never")
    from distbench.health import load as health_load

    with pytest.raises(SystemExit, match=rf"^distbench error: health load: {MODE_ENV}='bogus': allowed wait, fail"):
        health_load.sample(None, {}, 1.0)
    assert not (tmp_path / "host.lock").exists()  # refused before the lock file was touched
