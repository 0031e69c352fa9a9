"""The house's logging now lives in `workers.logs` (the actors configure it too, and `workers/` imports nothing
from `pipeline/`). This name stays for the driver's modules and the tests: it is that very module."""

import sys

from workers import logs as _logs

sys.modules[__name__] = _logs
