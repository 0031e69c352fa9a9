"""The exit codes of `extract`, one place for all of them (the README lists them too).

A scheduler or `ray job submit` reads these: anything but 0 is a failure, and the number says which."""

from __future__ import annotations

OK = 0
FAILED = 1  # the run ended, and some partition failed (see the run manifest and the summary)
USAGE = 2  # bad config, bad arguments, bad input found before Ray started
ENGINE = 3  # an engine could not start (memory, model, engine arguments), or kept dying past workers.max_restarts,
# or the child process of a bench arm or a conformance backend died (pipeline.tools.child.ChildDied);
# also Ray itself: its local cluster could not start, or the cluster at RAY_ADDRESS could not be reached
QUALITY_ALERT = 4  # the run committed, but missed the output's quality bar (dead-letter/truncated rate, min rows)
OUTPUT_LEASED = 5  # another writer holds the output's lease, or its lease record cannot be read (a time to live that is
# not finite or under a second included), or EXTRACT_LEASE_TTL_S is not a number of seconds from 1 to 604800
STORAGE = 6  # the input or output store refused or failed (a botocore endpoint or credentials error included), or a
# write would follow a symbolic link under the output
ACCOUNTING = 7  # outcomes did not add up to the input (a lost or duplicated document): nothing was committed
OUTPUT_CORRUPT = 8  # the committed output is corrupt or tampered: a manifest that does not parse, a named file
# missing, outside the output, or not of the size (or, with --verify, the hash) its manifest records; --verify on a
# manifest that records no sizes and hashes; metadata (a manifest, a run record, _job.json) over its size, depth or
# type bounds; a read that would follow a symbolic link under the output (a write through one is STORAGE, 6)
INTERRUPTED = 130
BROKEN_PIPE = 141  # stdout's reader went away (`| head`): nothing more printed, as a tool killed by SIGPIPE
