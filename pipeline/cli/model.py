"""`extract model prepare`: convert the bundled GGUF model once and print its folder."""

from __future__ import annotations

import argparse


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from workers.bundled_model import prepare

    print(prepare())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    model = sub.add_parser("model", help="model utilities")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="prepare")
    model_sub.add_parser("prepare", help="convert the bundled GGUF model once and print its folder").set_defaults(
        func=cmd_model_prepare
    )
