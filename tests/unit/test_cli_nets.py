"""The command line's two nets (issue 23 item 5): an OSError from a store that refuses or is full, escaping any
command, is one line and exit 6 naming the path; any other OSError keeps its traceback (a bug). The real stores
(a read-only and a full tmpfs) and the broken pipe run in tests/integration/test_cli_failures.py."""

from __future__ import annotations

import argparse
import errno

import pytest

from pipeline import exit_codes
from pipeline.cli.main import exit_code
from tests.conftest import own_err


def failing(error: BaseException):
    def command(args: argparse.Namespace) -> int:
        raise error
    return command


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT])
def test_a_store_that_refuses_is_exit_6_in_one_line_naming_the_path(code, tmp_path, capsys):
    import os

    target = tmp_path / "out" / "_partitions" / "all" / "manifest.json"
    assert exit_code(failing(OSError(code, os.strerror(code), str(target))), argparse.Namespace()) == 6
    err = own_err(capsys)
    assert err.count("\n") == 1 and err.startswith(f"error: {target}: {os.strerror(code)}")
    assert errno.errorcode[code] in err


def test_the_path_comes_from_the_frame_when_the_error_has_none(tmp_path, capsys):
    """pathlib's write_text raises ENOSPC without a filename: the line still names the file."""
    target = tmp_path / "manifest.json"

    def command(args: argparse.Namespace) -> int:
        def write_text(self, text):  # what Path.write_text's frame holds when the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        write_text(target, "{}")
        return 0

    assert exit_code(command, argparse.Namespace()) == exit_codes.STORAGE
    assert f"error: {target}: No space left on device (ENOSPC)" in own_err(capsys)


def test_a_refusal_wrapped_in_another_error_is_found(capsys):
    def command(args: argparse.Namespace) -> int:
        try:
            raise PermissionError(errno.EACCES, "Permission denied", "/data/out/rows/part-1.parquet")
        except OSError as exc:
            raise RuntimeError("commit failed") from exc

    assert exit_code(command, argparse.Namespace()) == exit_codes.STORAGE
    assert "error: /data/out/rows/part-1.parquet: Permission denied (EACCES)" in own_err(capsys)


@pytest.mark.parametrize("error", [OSError(errno.ECONNRESET, "Connection reset"), FileNotFoundError(2, "x"),
                                   ValueError("a bug")])
def test_any_other_error_keeps_its_traceback(error):
    with pytest.raises(type(error)):
        exit_code(failing(error), argparse.Namespace())


def test_an_engines_child_process_that_died_is_exit_3_in_one_line(capsys):
    from pipeline.tools.child import ChildDied

    died = ChildDied("the xgrammar engine's process ended before it finished (killed by a signal or out of memory?)")
    assert exit_code(failing(died), argparse.Namespace()) == exit_codes.ENGINE
    err = own_err(capsys)
    assert err.count("\n") == 1 and err.startswith("error: the xgrammar engine's process ended")


def test_every_exit_code_is_in_the_readme_and_operations_tables():
    import re

    from tests.conftest import ROOT

    codes = {value for name, value in vars(exit_codes).items() if name.isupper() and isinstance(value, int)}
    for page in ("README.md", "docs/operations.md"):
        listed = {int(n) for n in re.findall(r"^\| (\d+) \|", (ROOT / page).read_text(), re.MULTILINE)}
        assert codes <= listed, (page, sorted(codes - listed))


def test_a_line_ray_forwards_from_a_worker_meanwhile_is_not_the_commands(capsys):
    import sys

    sys.stderr.write("\x1b[36m(MapWorker(MapBatches(ExtractionActor)) pid=9946)\x1b[0m 2026-12-05T08:58Z actor.warm\n"
                     "(raylet) pid=12 [2026-12-05] something\nerror: the command's own line (pid=3)\n")
    assert own_err(capsys) == "error: the command's own line (pid=3)\n"
