"""`extract bench --simulate`'s pure parts (pipeline.tools.simbench): the grid, the corpus, the report."""

from __future__ import annotations

import pyarrow.parquet as pq

from pipeline.config import load_config
from pipeline.tools.simbench import grid_cells, make_corpus, render_markdown, write_config


def test_grid_cells_product_skips_partitions_of_under_ten_documents_and_takes_explicit_cells():
    cells = grid_cells({"docs": [20, 1000], "actors": [1, 4], "partitions": [1, 10]})
    assert (20, 1, 10) not in cells and (1000, 4, 10) in cells and len(cells) == 6
    assert grid_cells({"docs": [], "actors": [], "partitions": [], "cells": [[5, 1, 1]]}) == [(5, 1, 1)]


def test_corpus_per_day_and_a_config_that_loads(tmp_path):
    info = make_corpus(tmp_path / "c", 25, 3)
    days = sorted(p.name for p in (tmp_path / "c").glob("dt=*"))
    assert days == ["dt=2020-01-01", "dt=2020-01-02", "dt=2020-01-03"] and info["end"] == "2020-01-03"
    assert sum(pq.read_metadata(p / "docs.parquet").num_rows for p in (tmp_path / "c").glob("dt=*")) == 25
    assert make_corpus(tmp_path / "c", 25, 3) == info  # kept
    config = write_config(tmp_path / "extract.yaml", tmp_path / "c", info, tmp_path / "out", 2, 10, 10,
                          {"tokens_per_s": 5})
    loaded = load_config(config)
    assert loaded.model_path == "simulated" and loaded.config.workers.actors == 2
    assert loaded.config.model.engine_kwargs["simulated"]["tokens_per_s"] == 5


def test_markdown_has_a_row_per_cell_and_the_ceilings():
    report = {"cores": 2, "nodes": 1, "batch_size": 500, "checkpoint_rows": 500, "simulated": {},
              "cells": [{"docs": 10, "actors": 1, "partitions": 1, "exit": 0, "outcomes_per_s": 5.0}],
              "commit_ceiling": {"outcomes_per_s": 100.0, "docs": 10}, "ray_ceiling": {"rows_per_s": 50.0, "rows": 10},
              "memory": {}}
    text = render_markdown(report)
    assert "| 10 | 1 | 1 | 0 | 5.0 |" in text and "| 100.0 |" in text and "| 50.0 |" in text


def test_per_node_sums_each_nodes_actors_and_documents_over_the_generating_time():
    from pipeline.tools.simbench import _per_node_lines, per_node

    actors = [{"actor": "a", "node": "aaaaaaaa11", "documents": 300}, {"actor": "b", "node": "aaaaaaaa22",
                                                                      "documents": 100},
              {"actor": "c", "node": "bbbbbbbb33", "documents": 600}, {"actor": "d", "node": None}]
    nodes = per_node(actors, 10.0)
    assert nodes == {"aaaaaaaa": {"actors": 2, "documents": 400, "docs_per_s": 40.0},
                     "bbbbbbbb": {"actors": 1, "documents": 600, "docs_per_s": 60.0},
                     "None": {"actors": 1, "documents": 0, "docs_per_s": 0.0}}
    assert per_node(actors, None)["aaaaaaaa"]["docs_per_s"] is None
    lines = _per_node_lines([{"docs": 1000, "actors": 4, "partitions": 1, "per_node": nodes},
                             {"docs": 10, "actors": 1, "partitions": 1, "per_node": {"x": nodes["bbbbbbbb"]}}])
    assert "| 1000 | 4 | 1 | aaaaaaaa | 2 | 400 | 40.0 |" in lines
    assert not any(line.startswith("| 10 |") for line in lines)  # one node: nothing to compare
