"""Parse command lines as the real ``vllm serve`` does, without serving: its own argument parser,
its own checks of the parsed arguments, and the engine configuration it builds from them (which
reads the model's config and tokenizer, and refuses what the engine would refuse at start).

Run by the real engine's own python (.build/real-vllm/venv):

    python parse_serve_args.py '[["MODEL", "--max-model-len", "2048", ...], ...]'
    python parse_serve_args.py --flags
    python parse_serve_args.py --parsers

Prints one JSON object per command line: {"ok": true} or {"ok": false, "error": "..."}; with
--flags, the JSON list of every option string the parser defines; with --parsers, the names
each parser flag takes, as the API server's own registries hold them. Several requests in one
run answer in their order (each run imports vLLM: several CPU-seconds).
"""

import contextlib
import io
import json
import sys


def serve_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def parse(argv):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args
    from vllm.entrypoints.launchers.launcher import validate_api_server_args

    parser = serve_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(["--model", argv[0]] + list(argv[1:]))
    except SystemExit:
        return {"ok": False, "error": stderr.getvalue().strip().splitlines()[-1]}
    try:
        validate_parsed_serve_args(args)
        validate_api_server_args(args)
        AsyncEngineArgs.from_cli_args(args).create_engine_config()
    except Exception as error:  # the refusal itself is what the test reads
        return {"ok": False, "error": "%s: %s" % (type(error).__name__, error)}
    return {"ok": True}


def registered_parsers():
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {field: sorted(set(manager.lazy_parsers) | set(getattr(manager, registered)))
            for field, manager, registered in (("tool_call_parser", ToolParserManager, "tool_parsers"),
                                               ("reasoning_parser", ReasoningParserManager, "reasoning_parsers"))}


def main(request):
    if request == "--flags":
        print(json.dumps(sorted({flag for action in serve_parser()._actions for flag in action.option_strings})))
        return
    if request == "--parsers":
        print(json.dumps(registered_parsers()))
        return
    for argv in json.loads(request):
        print(json.dumps(parse(argv)), flush=True)


if __name__ == "__main__":
    for each in sys.argv[1:]:
        main(each)
