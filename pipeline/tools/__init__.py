"""Tools beside the run path: `bench`, `evaluate` (the scorer), `report`, `conformance`, `retry`, `synthetic`.
They use the run path and the output package; the run path never imports them."""
