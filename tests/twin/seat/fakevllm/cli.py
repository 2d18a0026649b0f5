"""`vllm serve` argument parsing as vLLM 0.33 does it (entrypoints/common/cli_args.py,
engine/arg_utils.py, utils/argparse_utils.py) for the flags the fake models, plus the common
flags it accepts and ignores. Anything else is an argparse error, as in vLLM:
`vllm serve: error: unrecognized arguments: ...`, exit status 2."""

from __future__ import annotations

import argparse
import json
import re
import sys

from . import VERSION

DEFAULT_PORT = 8000
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92   # config/cache.py in 0.33.0 (0.9 up to 0.10.2)

KV_CACHE_DTYPES = [  # config/cache.py CacheDType
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact",
    "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head",
    "nvfp4", "nvfp4_4over6"]
MODEL_DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
TOOL_PARSERS = [  # tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
    "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4",
    "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes", "hf",
    "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba", "k2_horizon", "kimi_k2",
    "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat",
    "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse", "muse_glimmer",
    "musespark1x", "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic",
    "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam"]
REASONING_PARSERS = [  # reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER
    "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
    "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser",
    "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2",
    "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2", "minimax_m2_append_think",
    "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x", "nemotron_v3", "olmo3",
    "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5", "step5"]

# Real vLLM 0.33 flags the fake accepts without modelling them: name -> takes a value.
ACCEPTED_FLAGS = {
    "--dtype": True, "--seed": True, "--tokenizer": True, "--revision": True,
    "--tokenizer-mode": True, "--download-dir": True, "--load-format": True,
    "--quantization": True, "--generation-config": True, "--max-logprobs": True,
    "--cpu-offload-gb": True, "--limit-mm-per-prompt": True, "--mm-processor-kwargs": True,
    "--compilation-config": True, "--speculative-config": True, "--hf-overrides": True,
    "--mamba-ssm-cache-dtype": True, "--mamba-cache-dtype": True, "--attention-backend": True,
    "--optimization-level": True, "--max-cudagraph-capture-size": True, "--chat-template": True,
    "--chat-template-content-format": True, "--response-role": True,
    "--uvicorn-log-level": True, "--tool-parser-plugin": True, "--reasoning-parser-plugin": True,
    "--data-parallel-size": True, "--pipeline-parallel-size": True, "--logits-processors": True,
    "--num-gpu-blocks-override": True, "--max-log-len": True,
    "--allowed-origins": True, "--root-path": True,
}
ACCEPTED_SWITCHES = [  # boolean flags (BooleanOptionalAction in vLLM)
    "--async-scheduling", "--disable-log-stats", "--enable-chunked-prefill",
    "--disable-hybrid-kv-cache-manager", "--enable-log-requests", "--enable-expert-parallel",
    "--disable-custom-all-reduce", "--enable-sleep-mode", "--enable-prompt-tokens-details",
    "--enable-force-include-usage", "--disable-fastapi-docs", "--enable-request-id-headers",
    "--trust-request-chat-template", "--disable-cascade-attn", "--disable-sliding-window",
    "--skip-mm-profiling", "--enable-lora",
]
SHORT_ALIASES = {"--tensor-parallel-size": "-tp", "--quantization": "-q",
                 "--data-parallel-size": "-dp", "--pipeline-parallel-size": "-pp",
                 "--enable-expert-parallel": "-ep", "--compilation-config": "-cc"}


def human_readable_int(value: str) -> int:
    """utils/argparse_utils.py: lowercase k/m/g/t are decimal, uppercase are binary."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}[suffix]
        except ValueError:
            raise argparse.ArgumentTypeError(
                "Decimals are not allowed with binary suffixes like %s. Did you mean to use "
                "%s%s instead?" % (suffix, number, suffix.lower()))
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def _optional(convert):
    """engine/arg_utils.py optional_type(parse_type(...)): "" and "None" mean unset."""
    def parse(value):
        if value in ("", "None"):
            return None
        try:
            return convert(value)
        except (ValueError, json.JSONDecodeError) as exc:
            if isinstance(exc, argparse.ArgumentTypeError):
                raise
            raise argparse.ArgumentTypeError("Value %s cannot be converted to %s." % (value, convert))
    parse.__name__ = convert.__name__
    return parse


def _switch(parser, flag, dest=None, default=False):
    """A BooleanOptionalAction flag as vLLM registers it: --x / --no-x, and for --enable-x also
    --disable-x (argparse_utils.py EnableDisableAction)."""
    names = [flag, "--no-" + flag[2:]]
    if flag.startswith("--enable-"):
        names.append("--disable-" + flag[len("--enable-"):])
    elif flag.startswith("--disable-"):
        names.append("--enable-" + flag[len("--disable-"):])
    if flag in SHORT_ALIASES:
        names.append(SHORT_ALIASES[flag])
    negative = set(names[1:]) - {SHORT_ALIASES.get(flag)}

    class _Action(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, option_string not in negative)

    parser.add_argument(*names, dest=dest or flag[2:].replace("-", "_"), nargs=0,
                        action=_Action, default=default)


class ServeArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, "%s: error: %s\n" % (self.prog, message))


def build_parser() -> argparse.ArgumentParser:
    parser = ServeArgumentParser(prog="vllm serve", usage="vllm serve [model_tag] [options]",
                                 add_help=True)
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model", dest="model_flag")
    # frontend
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--uds", default=None)
    parser.add_argument("--api-key", nargs="+", default=None)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    _switch(parser, "--enable-auto-tool-choice")
    parser.add_argument("--tool-call-parser", default=None)
    parser.add_argument("--reasoning-parser", default="")
    parser.add_argument("--default-chat-template-kwargs", type=_optional(json.loads), default=None)
    _switch(parser, "--disable-uvicorn-access-log")
    # engine
    parser.add_argument("--max-model-len", type=_optional(human_readable_int_or_auto), default=None)
    parser.add_argument("--kv-cache-memory-bytes", type=_optional(human_readable_int), default=None)
    parser.add_argument("--gpu-memory-utilization", "--device-memory-utilization",
                        dest="gpu_memory_utilization", type=float,
                        default=DEFAULT_GPU_MEMORY_UTILIZATION)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    parser.add_argument("--max-num-seqs", type=_optional(int), default=None)
    parser.add_argument("--max-num-batched-tokens", type=_optional(human_readable_int), default=None)
    parser.add_argument("--block-size", type=_optional(int), default=None)
    _switch(parser, "--enable-prefix-caching", default=None)
    _switch(parser, "--enforce-eager")
    _switch(parser, "--trust-remote-code")
    parser.add_argument("--override-generation-config", type=_optional(json.loads), default={})
    for flag, takes_value in ACCEPTED_FLAGS.items():
        names = [flag] + ([SHORT_ALIASES[flag]] if flag in SHORT_ALIASES else [])
        parser.add_argument(*names, dest="ignored_" + flag[2:].replace("-", "_"),
                            nargs=None if takes_value else 0)
    for flag in ACCEPTED_SWITCHES:
        _switch(parser, flag, dest="ignored_" + flag[2:].replace("-", "_"))
    return parser


def _normalise(args: list) -> list:
    """FlexibleArgumentParser: underscores in option names become dashes, -O3 is
    --optimization-level 3, and `--model X` moves to the front as the positional model."""
    out = []
    for arg in args:
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            key = "--" + re.sub(r"[^.]*", lambda m: m.group(0).replace("_", "-"), key[2:], count=1)
            out.append(key + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        else:
            out.append(arg)
    return out


def parse_serve_args(argv: list) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(_normalise(argv))
    if args.model_flag is not None:
        args.model_tag = args.model_flag
    if not args.model_tag:
        args.model_tag = "Qwen/Qwen3-0.6B"   # entrypoints/cli/serve.py's documented default
    args.model = args.model_tag
    if args.reasoning_parser and args.reasoning_parser.lower() == "none":
        args.reasoning_parser = ""
    return args


def validate_serve_args(args) -> None:
    """validate_parsed_serve_args (before any logging): vLLM raises a bare TypeError."""
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")


def validate_api_server_args(args) -> None:
    """validate_api_server_args (after the logo): unknown parser names are KeyErrors."""
    if args.enable_auto_tool_choice and args.tool_call_parser not in TOOL_PARSERS:
        raise KeyError("invalid tool call parser: %s (chose from { %s })"
                       % (args.tool_call_parser, ",".join(TOOL_PARSERS)))
    if args.reasoning_parser and args.reasoning_parser not in REASONING_PARSERS:
        raise KeyError("invalid reasoning parser: %s (chose from { %s })"
                       % (args.reasoning_parser, ",".join(REASONING_PARSERS)))


def non_default_args(args) -> dict:
    """What entrypoints/common/startup.py logs as `non-default args` (parser order)."""
    defaults = vars(build_parser().parse_args([]))
    shown = {}
    for key, value in vars(args).items():
        if key == "model_flag" or key.startswith("ignored_") and value is None:
            continue
        if key == "model" or key not in defaults or defaults[key] != value:
            shown[key.replace("ignored_", "")] = value
    return shown


def top_level(argv: list):
    """`vllm --version`, `vllm serve ...`; anything else is argparse's invalid choice."""
    if argv[:1] in (["-v"], ["--version"]):
        print(VERSION)
        sys.exit(0)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: vllm [-h] [-v] {chat,complete,serve,...} ...")
        sys.exit(0)
    if argv[0] != "serve":
        sys.stderr.write("usage: vllm [-h] [-v] {chat,complete,serve,...} ...\n"
                         "vllm: error: argument subparser: invalid choice: %r\n" % argv[0])
        sys.exit(2)
    return argv[1:]
