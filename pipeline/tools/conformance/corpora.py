"""The corpora the harness reads: where they are, what a folder holds, and their schemas, instances and
suite cases; the options of a run and the check of its selection before anything slow starts."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = "jsonschemabench-dev"
SUITE = "json-schema-test-suite"
CORPORA = (BENCH, SUITE)
# The shared corpora sit beside the project (`../shared/corpora`); EXTRACT_CORPORA points elsewhere.
DEFAULT_CORPORA_ROOT = Path(os.environ.get("EXTRACT_CORPORA")
                            or Path(__file__).resolve().parents[4] / "shared" / "corpora")
SUITE_DRAFT = "draft2020-12"
SUITE_REMOTES_BASE = "http://localhost:1234/"  # where the suite's tests expect remotes/ to be served


class ConformanceError(ValueError):
    """A corpus, subset or category that does not exist, or options that do not fit together."""


@dataclass
class Options:
    corpora_root: Path = DEFAULT_CORPORA_ROOT
    subsets: list[str] | None = None
    categories: list[str] | None = None
    limit: int | None = None
    max_tokens: int = 512
    max_model_len: int = 4096
    generate: bool = True
    generate_limit: int | None = None  # generate for the first N schemas of each subset only (id order)
    compile_timeout_s: float = 30.0
    keep: bool = False  # merge with the parts already in the output folder instead of starting afresh
    # The grammar-only bounds (schemas.bounds) on the schema sent to generation, as the pipeline applies them:
    # "auto" fits them to max_tokens, "none" generates under the schema as written. The prompt, the judge and
    # the post-check keep the schema as written either way.
    grammar_bounds: str = "auto"


@dataclass
class BenchSchema:
    subset: str
    id: str
    schema: Any

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.id}"


def corpus_dir(root: Path, name: str) -> Path:
    folder = root / name
    if not folder.is_dir():
        raise ConformanceError(f"corpus {name!r}: {folder} does not exist")
    return folder


def bench_subsets(root: Path) -> list[str]:
    return sorted(p.name for p in (corpus_dir(root, BENCH) / "schemas").iterdir() if p.is_dir())


def load_bench(root: Path, subsets: list[str] | None, limit: int | None) -> list[BenchSchema]:
    """The schemas of `subsets` (all by default), the first `limit` of each in id order."""
    known = bench_subsets(root)
    for name in subsets or []:
        if name not in known:
            raise ConformanceError(f"--subset {name!r}: not a subset of {BENCH} (one of {', '.join(known)})")
    items = []
    for subset in [s for s in known if not subsets or s in subsets]:
        files = sorted((corpus_dir(root, BENCH) / "schemas" / subset).glob("*.json"))
        for path in files[:limit] if limit is not None else files:
            items.append(BenchSchema(subset, path.stem, json.loads(path.read_text())))
    return items


def load_instances(root: Path) -> dict[str, list[dict[str, Any]]]:
    """The benchmark's own instances, `subset/id` → [{description, valid, data}]; a row without a subset
    (a user's folder of schemas) is keyed `*/id`. No instances.jsonl: none."""
    found: dict[str, list[dict[str, Any]]] = {}
    path = corpus_dir(root, BENCH) / "instances.jsonl"
    if not path.is_file():
        return found
    with open(path) as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                found[f"{row.get('subset', '*')}/{row['id']}"] = row.get("tests") or []
    return found


def suite_categories(root: Path) -> list[str]:
    return sorted(p.stem for p in (corpus_dir(root, SUITE) / "tests" / SUITE_DRAFT).glob("*.json"))


def load_suite(root: Path, categories: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """Test cases per keyword category (file name): [{description, schema, tests: [{data, valid}]}]."""
    known = suite_categories(root)
    for name in categories or []:
        if name not in known:
            raise ConformanceError(f"--category {name!r}: not a {SUITE} {SUITE_DRAFT} file")
    folder = corpus_dir(root, SUITE) / "tests" / SUITE_DRAFT
    return {c: json.loads((folder / f"{c}.json").read_text()) for c in known if not categories or c in categories}


def suite_registry(root: Path) -> Any:
    """The suite's remotes/ as a local registry at the URIs its tests use; anything else is refused."""
    import referencing
    import referencing.jsonschema

    from schemas.validation import NO_REMOTE_REGISTRY

    remotes = corpus_dir(root, SUITE) / "remotes"
    resources = []
    for path in sorted(remotes.rglob("*.json")):
        uri = SUITE_REMOTES_BASE + path.relative_to(remotes).as_posix()
        contents = json.loads(path.read_text())
        resources.append((uri, referencing.Resource.from_contents(
            contents, default_specification=referencing.jsonschema.DRAFT202012)))
    return NO_REMOTE_REGISTRY.with_resources(resources)


def corpus_kind(folder: Path) -> str:
    """What a folder holds, from its contents (never its name): the JSON-Schema-Test-Suite layout
    (`tests/<draft>/`), the benchmark layout (`schemas/<subset>/*.json`), or a plain folder of `*.json`
    schemas (one subset named after the folder), each with an optional `instances.jsonl`."""
    if (folder / "tests" / SUITE_DRAFT).is_dir():
        return SUITE
    if (folder / "schemas").is_dir() or any(folder.glob("*.json")):
        return BENCH
    raise ConformanceError(f"corpus {str(folder)!r}: no *.json schemas in it (nor schemas/<subset>/*.json, "
                           f"nor tests/{SUITE_DRAFT}/)")


def corpus_folders(names: list[str]) -> dict[str, Path]:
    """The corpora given as folders (any name, through links), by kind; a bundled name is not a folder here."""
    folders: dict[str, Path] = {}
    for name in names:
        if name == "all" or (name in CORPORA and not Path(name).is_dir()):
            continue
        folder = Path(os.path.abspath(name))  # absolute but not resolved: a link keeps its own name
        if not folder.is_dir():
            raise ConformanceError(f"corpus {name!r}: expected one of {', '.join(CORPORA)}, all, or a folder")
        kind = corpus_kind(folder)
        if kind in folders and folders[kind] != folder:
            raise ConformanceError(f"corpus {name!r}: one {kind} folder at a time ({folders[kind]} already)")
        folders[kind] = folder
    return folders


def resolve_corpora(names: list[str]) -> list[str]:
    """Corpus kinds to run, from bundled names, `all`, or folders (whose contents say which)."""
    folders = corpus_folders(names)
    found: list[str] = []
    for name in names:
        kinds = list(CORPORA) if name == "all" else [name] if name in CORPORA and not Path(name).is_dir() else []
        kinds += [k for k, f in folders.items() if f == Path(os.path.abspath(name))]
        for corpus in kinds:
            if corpus not in found:
                found.append(corpus)
    return found


def corpora_root_for(names: list[str], default: Path) -> Path:
    """The root the corpora are read from: `default`, or, when a corpus is given as a folder, a private
    root of links: `jsonschemabench-dev` → the user's folder (a plain folder of schemas becomes its one
    subset), `json-schema-test-suite` → the suite folder, and bundled corpora from `default` beside them."""
    folders = corpus_folders(names)
    if not folders:
        return default
    root = Path(tempfile.mkdtemp(prefix="conformance-corpora-"))
    atexit.register(shutil.rmtree, root, True)
    for kind in CORPORA:
        folder = folders.get(kind)
        if folder is None:
            if (default / kind).is_dir():
                (root / kind).symlink_to(default / kind)
        elif kind == BENCH and not (folder / "schemas").is_dir():
            (root / kind / "schemas").mkdir(parents=True)
            (root / kind / "schemas" / folder.name).symlink_to(folder)
            if (folder / "instances.jsonl").is_file():
                (root / kind / "instances.jsonl").symlink_to(folder / "instances.jsonl")
        else:
            (root / kind).symlink_to(folder)
    return root


def check_selection(corpora: list[str], opts: Options) -> None:
    """Fail on a missing corpus or an unknown subset or category before anything slow starts."""
    for corpus in corpora:
        corpus_dir(opts.corpora_root, corpus)
    if opts.subsets and BENCH not in corpora:
        raise ConformanceError(f"--subset applies to {BENCH}, which is not among the corpora")
    if opts.categories and SUITE not in corpora:
        raise ConformanceError(f"--category applies to {SUITE}, which is not among the corpora")
    if BENCH in corpora:
        known = bench_subsets(opts.corpora_root)
        for name in opts.subsets or []:
            if name not in known:
                raise ConformanceError(f"--subset {name!r}: not a subset of {BENCH} (one of {', '.join(known)})")
    if SUITE in corpora:
        for name in opts.categories or []:
            if name not in suite_categories(opts.corpora_root):
                raise ConformanceError(f"--category {name!r}: not a {SUITE} {SUITE_DRAFT} file")
