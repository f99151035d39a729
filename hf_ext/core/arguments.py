"""One flag style for every hf_ext script: underscores, as in transformers and TRL (`--output_dir`).

Scripts whose arguments are a dataclass use `transformers.HfArgumentParser`, which accepts both spellings. The other
scripts build their parser with [`ArgumentParser`] (a drop-in `argparse.ArgumentParser`): each `--dashed-flag` they
declare is shown and accepted as `--dashed_flag`, and the dashed spelling stays as an alias, so older commands keep
working.
"""

from __future__ import annotations

import argparse


def underscore_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Makes every `--dashed-flag` of `parser` (and of its subparsers) answer to `--dashed_flag` too, the underscore
    spelling first (so `--help` shows it first). Returns `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                underscore_flags(sub)
            continue
        added = []
        for option in action.option_strings:
            if option.startswith("--") and "-" in option[2:]:
                alias = "--" + option[2:].replace("-", "_")
                if alias not in parser._option_string_actions:
                    parser._option_string_actions[alias] = action
                    added.append(alias)
        if added:
            action.option_strings = [*added, *[o for o in action.option_strings if o not in added]]
    return parser


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose dashed long flags also answer to (and are shown with) underscores."""

    def _underscored(self) -> None:
        underscore_flags(self)

    def parse_known_args(self, args=None, namespace=None):
        self._underscored()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._underscored()
        return super().format_help()

    def format_usage(self) -> str:
        self._underscored()
        return super().format_usage()
