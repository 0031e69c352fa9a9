"""No symbolic link is followed under an output (issue 55): an output folder is a share other people and tools can
write to, and a link planted in it (`_staging` to another folder, `_lease.json` to a file elsewhere) would make a
run delete or overwrite what it points at.

`refuse_links(root, uri, write)` checks every component of `uri` below `root` with `lstat`; `refuse_links_in(root,
write)` checks the output's own metadata (staging, lease, manifests, run records). A link found is one line:
`LinkedWriteError` (a `StorageError`: exit 6) where a write would follow it, `LinkedReadError` (exit 8, as an
`OutputCorruptError`) where a read would. S3 has no links: nothing to check there."""

from __future__ import annotations

import os
import stat

from pipeline.storage import StorageError, is_s3

# The output's own metadata, checked before a run writes and before a reader reads (glob-free: a few lstat calls).
_METADATA = ("_staging", "_partitions", "_runs", "_lease.json", "_eval")


class LinkedWriteError(StorageError):
    """A write under the output would follow a symbolic link."""


class LinkedReadError(RuntimeError):
    """A read under the output would follow a symbolic link (exit 8, as a corrupt output: `pipeline.cli.main`)."""


def _message(link: str, root: str, write: bool) -> str:
    what = "writes" if write else "reads"
    return (f"{link} is a symbolic link inside the output {root}: refused (extract never {what} through a link "
            "under an output); remove the link, or move the output to a folder of its own")


def _is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def refuse_links(root: str, uri: str, write: bool) -> None:
    """Raise if any component of `uri` below `root` (the output's folder) is a symbolic link."""
    if is_s3(root) or is_s3(uri):
        return
    base = os.path.abspath(root).rstrip("/")
    target = os.path.abspath(uri)
    if target != base and not target.startswith(base + "/"):
        return
    path = base
    for part in target[len(base):].strip("/").split("/"):
        if not part:
            continue
        path = f"{path}/{part}"
        if _is_link(path):
            raise (LinkedWriteError if write else LinkedReadError)(_message(path, root, write))


def refuse_links_in(root: str, write: bool) -> None:
    """Raise if the output's metadata (its staging, lease, manifests, run records, evaluations, and the folders
    one level below each) holds a symbolic link."""
    if is_s3(root):
        return
    base = os.path.abspath(root)
    for name in _METADATA:
        top = os.path.join(base, name)
        refuse_links(base, top, write)
        if not os.path.isdir(top):
            continue
        for entry in os.scandir(top):
            refuse_links(base, entry.path, write)
            if entry.is_dir(follow_symlinks=False):
                for inner in os.scandir(entry.path):
                    refuse_links(base, inner.path, write)
