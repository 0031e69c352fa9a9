"""Issue 55: no secret is printed or written. Secrets are planted in a job (its storage endpoint's URL, its prompt's
`Authorization` header and AWS secret, a failed run's input URL, a config error's value, a retry's `--set`); after
a run, a failed run, a config error, a retry and a report, the whole output folder, the report's folder, stdout and
stderr are searched for each: zero hits. The simulated engine (workers/simulated.py): the subject is every exit of
the pipeline around the engine."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli, write_config, write_docs

SECRETS = {"url": "urlPass4242x", "basic": "dXNlcjpiasic4242", "aws": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
           "input": "inputPass4242y", "api": "apiKey4242zzz", "retry": "retryPass4242w"}


def hits(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


def files_with_secrets(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            names = hits(path.read_bytes().decode("utf-8", "replace"))
            if names:
                found[str(path.relative_to(folder))] = names
    return found


def test_no_planted_secret_reaches_the_output_the_report_or_the_terminal(tmp_path, cli_env):
    docs = write_docs(tmp_path / "docs.parquet", [f"d{i}" for i in range(6)],
                      [f"Invoice A-{i} from Acme, total {i}.50 USD, issued 2026-01-0{i + 1}." for i in range(6)])
    prompt = (f"Authorization: Basic {SECRETS['basic']}\naws_secret_access_key={SECRETS['aws']}\n"
              "Extract the invoice.\n{document}")
    cfg = write_config(tmp_path, simulated=True, **{
        "input.uri": str(docs), "model.max_tokens": 40, "prompt": prompt,
        "storage.endpoint_url": f"https://admin:{SECRETS['url']}@minio.local:9000",
        "output.max_dead_letter_rate": 1.0})
    runs = [
        run_cli(["run", str(cfg)], cli_env),
        run_cli(["run", str(cfg), "--set", f"input.uri=https://bob:{SECRETS['input']}@127.0.0.1:9/in.parquet",
                 "--output", str(tmp_path / "out")], cli_env),
        run_cli(["validate", str(cfg), "--set", f'model.max_tokens={{"api_key": "{SECRETS["api"]}"}}'], cli_env),
        run_cli(["retry", str(cfg), "--reason", "truncated", "--max-tokens", "512", "--set",
                 f"storage.endpoint_url=https://admin:{SECRETS['retry']}@minio.local:9000"], cli_env),
        run_cli(["report", str(tmp_path / "out"), "--out", str(tmp_path / "report")], cli_env),
    ]
    codes = [r.returncode for r in runs]
    assert codes[0] in (0, 4) and codes[1] == 6 and codes[2] == 2 and codes[4] == 0, \
        (codes, [r.stderr[-1500:] for r in runs])
    assert (tmp_path / "out" / "_runs").is_dir() and (tmp_path / "report" / "index.html").is_file()
    printed = {i: hits(r.stdout + r.stderr) for i, r in enumerate(runs)}
    assert printed == {i: [] for i in range(len(runs))}
    assert files_with_secrets(tmp_path / "out") == {}
    assert files_with_secrets(tmp_path / "report") == {}
