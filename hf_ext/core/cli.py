"""`hf-ext`: the command line, built from the method registry.

```
hf-ext list                                   # registered methods
hf-ext reproduce [METHOD ...] [--full]        # every method at quick scale by default (this is `make run`)
hf-ext train METHOD [ARGS ...]                # the method's training script (works under `accelerate launch`)
hf-ext push METHOD --repo_id ID [--from DIR] [--dry_run --out DIR] [--space_repo_id ID] [--allow_untrained]
hf-ext demo METHOD [--port N]                 # the method's Gradio Space on 127.0.0.1
hf-ext setup METHOD                           # install a method's external tools (CodeBC: solc-js via npm)
hf-ext METHOD {reproduce,train} --help        # the method's own scripts (also `hf-ext reproduce METHOD --help`)
```

Flags are spelled with underscores, as in transformers and TRL (`--repo_id`); the dashed spelling (`--repo-id`)
is accepted everywhere as an alias.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .arguments import underscore_flags
from .parallel import reproduction_thread_count, reproduction_threads
from .registry import RegistryError, get_method, list_methods


def _methods():
    import hf_ext  # noqa: F401  (registers every method)

    return list_methods()


def _extras_cell(name: str) -> str:
    from .extras import extras_status

    status = extras_status(name, "spaces")
    missing = {extra: names for extra, names in status.items() if names}
    if not status:
        return "extras: -"
    if not missing:
        return f"extras: {'+'.join(status)} installed"
    names = ", ".join(sorted({n for v in missing.values() for n in v}))
    return f"missing {names} (pip install 'hf_ext[{','.join(missing)}]')"


def cmd_list(args) -> int:
    rows = [(m.name, m.kind, m.arxiv_id or "-", _extras_cell(m.name), m.status) for m in _methods()]
    width = max(len(r[0]) for r in rows)
    for name, kind, arxiv, extras, status in rows:
        print(f"{name:<{width}}  {kind:<9}  arXiv {arxiv:<11}  {extras}  |  {status}")
    return 0


def require_method(spec, *more: str, purpose: str | None = None) -> None:
    """Stops before any work when the method's extra (and `more`, e.g. `"spaces"`) is not installed."""
    from .extras import check_extras, has_extra

    extras = [e for e in (spec.name, *more) if has_extra(e)]
    if extras:
        check_extras(spec.name, *extras, purpose=purpose)


def cmd_reproduce(args, extra: list[str]) -> int:
    reproduction_thread_count()  # a bad $HF_EXT_REPRODUCE_THREADS stops here, before any method runs
    methods = [get_method(n) for n in args.methods] if args.methods else _methods()
    failed, times = [], {}
    argv = (["--full"] if args.full else []) + list(extra)
    if args.help:
        if len(methods) != 1 or not args.methods:
            args.print_reproduce_help()
            return 0
        require_method(methods[0])
        methods[0].load("reproduce")(argv + ["--help"])  # argparse prints the method's options and exits
        return 0
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    if args.jobs > 1 and len(methods) > 1:
        from .reproduce_pool import run_pool

        failed, times = run_pool([s.name for s in methods], argv, args.jobs)
        methods = []
    for spec in methods:
        print(f"\n=== hf-ext reproduce {spec.name}{' --full' if args.full else ''} ===", flush=True)
        start = time.perf_counter()
        try:
            require_method(spec)
            with reproduction_threads():
                spec.load("reproduce")(argv)
        except ImportError as err:  # a missing extra: one line with the fix, then the other methods
            print(f"hf-ext reproduce {spec.name}: {_missing_message(spec, err)}", file=sys.stderr, flush=True)
            failed.append(spec.name)
        except Exception:  # one method failing must not hide the others' results
            traceback.print_exc()
            failed.append(spec.name)
        times[spec.name] = time.perf_counter() - start
    print("\n=== summary ===")
    for name, seconds in times.items():
        print(f"{name:<12} {'FAILED' if name in failed else 'ok':<7} {seconds:7.1f} s")
    return 1 if failed else 0


def cmd_train(args, extra: list[str]) -> int:
    from .parallel import close_process_group

    spec = get_method(args.method)
    require_method(spec)
    spec.load("train")(extra)
    close_process_group()  # under `accelerate launch`; a no-op in a single process
    return 0


def cmd_evaluate(args, extra: list[str]) -> int:
    spec = get_method(args.method)
    if spec.evaluate is None:
        raise RegistryError(f"method {spec.name!r} has no evaluate command")
    require_method(spec)
    spec.load("evaluate")(extra)
    return 0


def _default_artifact(spec) -> Path:
    """The artifact `hf-ext reproduce METHOD` saved (`<work dir>/<method>/artifact`). Push never trains: without a
    saved artifact it stops and names the command that makes one."""
    from .hub import artifact_parts
    from .paths import work_dir

    candidate = work_dir(spec.name, "artifact")
    if (candidate / "config.json").is_file() or artifact_parts(candidate):
        print(f"pushing {candidate} (written by `hf-ext reproduce {spec.name}` or `hf-ext train {spec.name}`)")
        return candidate
    make = f"`hf-ext reproduce {spec.name}`"
    if spec.train is not None:  # each train command's own --help names its output flag
        make += f" (or `hf-ext train {spec.name}`)"
    raise SystemExit(
        f"hf-ext push {spec.name}: no saved artifact at {candidate}, and push never trains. Make one with "
        f"{make}, then run this again, or pass --from DIR with a saved artifact folder."
    )


def cmd_push(args) -> int:
    from .cards import CardError
    from .hub import CheckpointError, PushRefusedError, check_repo_id
    from .wheel import WheelBuildError

    spec = get_method(args.method)
    require_method(spec)
    if args.dry_run and not args.out:
        raise SystemExit("hf-ext push: --dry_run needs --out DIR")
    try:
        check_repo_id(args.repo_id, "--repo_id")
        if args.space_repo_id is not None:
            check_repo_id(args.space_repo_id, "--space_repo_id")
        return _push(spec, args)
    except (PushRefusedError, CheckpointError, CardError, WheelBuildError) as err:  # bad input: one line
        raise SystemExit(f"hf-ext push {spec.name}: {err}") from None


def _push(spec, args) -> int:
    import shutil

    from .hub import build_push_folder, push_folder, push_manifest, select_push_files

    scratch = []  # temporary folders this command made; removed whatever happens (no copies left in /tmp)
    try:
        artifact = Path(args.from_dir) if args.from_dir else _default_artifact(spec)
        _, refused = select_push_files(artifact)
        if args.out:
            out = Path(args.out)
        else:
            scratch.append(Path(tempfile.mkdtemp(prefix=f"hf_ext_push_{spec.name}_")))
            out = scratch[-1] / "upload"
        wheel = args.wheel
        if wheel is None and args.space_repo_id:  # the Space installs hf_ext from the wheel it ships: build it
            from .wheel import build_space_wheel

            scratch.append(Path(tempfile.mkdtemp(prefix="hf_ext_wheel_")))
            print("building the hf_ext wheel the Space installs (pip wheel --no-deps) ...")
            wheel = build_space_wheel(scratch[-1])
        folder = build_push_folder(
            spec, artifact, out, repo_id=args.repo_id, allow_untrained=args.allow_untrained, wheel=wheel
        )
        files = push_manifest(folder, spec)
        print(f"model repo {args.repo_id} gets {len(files['model'])} files:\n  " + "\n  ".join(files["model"]))
        if args.space_repo_id or args.dry_run:
            print(
                f"Space {args.space_repo_id or '(with --space-repo-id)'} gets {len(files['space'])} files:\n  "
                + "\n  ".join(files["space"])
            )
        if refused:
            print(f"refused ({len(refused)}, not uploaded):\n  " + "\n  ".join(f"{p}: {why}" for p, why in refused))
        if args.dry_run:
            print(f"dry run: nothing uploaded (the folder is {folder})")
            return 0
        urls = push_folder(spec, folder, args.repo_id, space_repo_id=args.space_repo_id, private=args.private)
        for kind, url in urls.items():
            print(f"{kind}: {url}")
        return 0
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)


def load_space_app(spec):
    """Imports `spaces/<method>/app.py` by path (a Space is not a package)."""
    import importlib.util

    app_file = spec.space_dir / "app.py"
    if not app_file.is_file():
        raise FileNotFoundError(f"{spec.name}: no Space at {app_file}")
    module_spec = importlib.util.spec_from_file_location(f"hf_ext_space_{spec.name}", app_file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def cmd_demo(args) -> int:
    spec = get_method(args.method)
    require_method(spec, "spaces", purpose="its Gradio Space")
    from .demo import launch_kwargs, prepare

    demo = prepare(load_space_app(spec).build_demo())  # the Space's own queue and upload cap
    demo.launch(server_name=args.host, server_port=args.port, share=False, **launch_kwargs())
    return 0


def cmd_setup(args, extra: list[str]) -> int:
    spec = get_method(args.method)
    if "setup" not in spec.commands:
        print(f"{spec.name} needs no set-up beyond `pip install 'hf_ext[{spec.name}]'`")
        return 0
    return spec.load("setup")(extra) or 0


def cmd_method(args, extra: list[str]) -> int:
    spec = get_method(args.method_name)
    from .parallel import close_process_group

    if args.script != "setup":  # setup is what installs a method's external tools
        require_method(spec)
    # `hf-ext METHOD reproduce` is `hf-ext reproduce METHOD`: the same fixed thread count
    with reproduction_threads() if args.script == "reproduce" else contextlib.nullcontext():
        spec.load(args.script)(extra)
    close_process_group()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-ext", description="Research methods as Hugging Face-native artifacts.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the registered methods")

    # add_help=False: `hf-ext reproduce METHOD --help` reaches the method's own parser (its real options); with no
    # method or several, --help prints this parser's help.
    p = sub.add_parser(
        "reproduce",
        help="compare each method with its baseline and print the measured numbers",
        add_help=False,
    )
    p.add_argument("-h", "--help", action="store_true", help="this help; with one METHOD, that method's options")
    p.set_defaults(print_reproduce_help=p.print_help)
    p.add_argument("methods", nargs="*", help="methods to run (default: all, at quick scale)")
    p.add_argument("--full", action="store_true", help="the complete sweeps instead of the quick scale")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="methods run at once, each in its own process (same numbers; logs in <work dir>/logs; default 1)",
    )

    # add_help=False: `hf-ext train METHOD --help` reaches the method's own parser (its real options).
    p = sub.add_parser(
        "train", help="train a method (arguments after METHOD go to its training script)", add_help=False
    )
    p.add_argument("method")

    p = sub.add_parser(
        "evaluate",
        help="a trained artifact's metrics on your test split (arguments after METHOD go to its evaluate script)",
        add_help=False,
    )
    p.add_argument("method")

    p = sub.add_parser("push", help="push a trained artifact, its card and its Space to the Hub")
    p.add_argument("method")
    p.add_argument("--repo-id", required=True, help="model repo id, e.g. someone/orca-mmoe")
    p.add_argument(
        "--from",
        dest="from_dir",
        help="a saved artifact folder (default: <work dir>/<method>/artifact; the work dir is $HF_EXT_HOME or ./runs)",
    )
    p.add_argument("--dry-run", action="store_true", help="write the upload folder to --out and upload nothing")
    p.add_argument("--out", help="where to write the upload folder")
    p.add_argument("--space-repo-id", help="also push spaces/<method>/ as a Gradio Space to this repo")
    p.add_argument("--private", action="store_true")
    p.add_argument(
        "--wheel",
        help="the hf_ext wheel to ship in the Space's wheels/ (its requirements.txt installs it); default with "
        "--space-repo-id: built from the checkout hf_ext runs from",
    )
    p.add_argument(
        "--allow-untrained",
        action="store_true",
        help="publish an artifact without training_record.json, its card saying 'untrained / random init'",
    )

    p = sub.add_parser("setup", help="install a method's external tools (e.g. solc-js for CodeBC)")
    p.add_argument("method")

    p = sub.add_parser("demo", help="launch the method's Gradio Space on 127.0.0.1")
    p.add_argument("method")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None)

    for spec in _methods():
        mp = sub.add_parser(
            spec.name,
            help=f"{spec.kind}: {spec.title}",
            description=f"{spec.title} ({spec.arxiv_url or 'no arXiv id'}).\n{spec.summary}",
        )
        mp.set_defaults(method_name=spec.name)
        scripts = mp.add_subparsers(dest="script", required=True)
        scripts.add_parser(
            "reproduce", help=f"same as `hf-ext reproduce {spec.name}`; pass --help for options", add_help=False
        )
        for entry in ("train", "evaluate"):
            if getattr(spec, entry):
                scripts.add_parser(
                    entry, help=f"same as `hf-ext {entry} {spec.name}`; pass --help for options", add_help=False
                )
        for command in spec.commands:
            scripts.add_parser(command, help="pass --help for options", add_help=False)
    return underscore_flags(parser)


def _missing_message(spec, err: ImportError) -> str:
    """One line for an ImportError raised inside a method's entry point: the missing module and the pip line."""
    from .lazy import MissingExtraError

    if isinstance(err, MissingExtraError):
        return str(err)
    name = getattr(err, "name", None) or str(err)
    extra = spec.name if spec is not None else "all"
    return f"{name} is not installed ({err}); install with: pip install 'hf_ext[{extra}]'"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    try:
        return _dispatch(parser, args, extra)
    except (ValueError, TypeError) as err:  # bad input (a flag, a field, a file) names itself: one line
        if os.environ.get("HF_EXT_DEBUG"):
            raise
        print(f"hf-ext {args.command}: error: {err} (HF_EXT_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2
    except ImportError as err:  # a missing optional dependency: the fix in one line, no traceback
        method = getattr(args, "method", None) or getattr(args, "method_name", None)
        try:
            spec = get_method(method) if method else None
        except RegistryError:
            spec = None
        print(f"hf-ext: {_missing_message(spec, err)}", file=sys.stderr)
        return 2


def _dispatch(parser, args, extra) -> int:
    try:
        if args.command == "list":
            return cmd_list(args)
        if args.command == "reproduce":
            return cmd_reproduce(args, extra)
        if args.command == "train":
            return cmd_train(args, extra)
        if args.command == "evaluate":
            return cmd_evaluate(args, extra)
        if args.command == "setup":
            return cmd_setup(args, extra)
        if getattr(args, "method_name", None):
            return cmd_method(args, extra)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "push":
            return cmd_push(args)
        if args.command == "demo":
            return cmd_demo(args)
    except RegistryError as err:
        parser.error(str(err))
    return 2


if __name__ == "__main__":
    sys.exit(main())
