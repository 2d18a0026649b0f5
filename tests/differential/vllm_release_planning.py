"""Run one vLLM release's own KV planning code, from its source, without torch or a GPU.

Every release from 0.10.2 to 0.32 keeps its planning in two files, imported whole here:
``v1/kv_cache_interface.py`` (the specs and their page sizes) and ``v1/core/kv_cache_utils.py``
(grouping, page unification, bytes per block, num_blocks, the admission check with its error
text and estimated length, the capacity line as the release logs it). 0.33 moved the planning to
``v1/core/kv_cache_planning.py``; vllm_planning.py runs it with the rest of 0.33's boot path.

Stand-ins, kept to what cannot run here: every other ``vllm`` module (and every package beside
the standard library that vLLM imports) is an empty module whose names are inert placeholders,
``torch`` has dtype objects and their sizes, the configs hold plain values (a feature the case
does not set reads as off), and the logger records what the release logs. Each attention layer's
backend is the one the release's own selection picks for it (SELECTION_MODULES), and the block
size the one its platform then settles on.

``run_case`` returns what the release computes: bytes per block, num_blocks, tokens,
concurrency and the boot verdict with the release's error text.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import logging
import re
import sys
import types
import typing
from pathlib import Path

import packaging.version
from vllm_sources import CACHE, SourceUnavailable, release_files, wheel_name

GIB = 1 << 30
# The real modules, in import order; a release may lack some (then it has no such module).
REAL_MODULES = (
    "vllm/utils/math_utils.py",
    "vllm/v1/kv_cache_layout.py",
    "vllm/v1/kv_cache_spec_registry.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/core/kv_cache_utils.py",
)
# Where each release keeps the helpers the planning imports by name.
# Since 0.2x the specs are registered with their managers at engine start-up.
REGISTRATION = "vllm/v1/core/single_type_kv_cache_manager.py"
# Since 0.26 a sliding window keeps the tokens of every batch in flight (VllmConfig properties).
VLLM_CONFIG = "vllm/config/vllm.py"
# `vllm serve`'s batch defaults per card, and the usage context they are keyed by.
ARG_UTILS, USAGE = "vllm/engine/arg_utils.py", "vllm/usage/usage_lib.py"
# (0.12 on; before, in the method that sets the V1 engine's defaults: 0.11's, 0.10's)
BATCH_SETTERS = ("_set_default_max_num_seqs_and_batched_tokens_args", "_set_default_args", "_set_default_args_v1")
# What a worker does with a pinned budget at boot.
GPU_WORKER = "vllm/v1/worker/gpu_worker.py"
# The max-length check (config/__init__.py in 0.10, config/model.py after), the RoPE patching the
# config loading runs before it, and the helper that patching imports.
MAX_LEN_CHECK = ("vllm/config/model.py", "vllm/config/__init__.py")
ROPE_PATCHING = "vllm/transformers_utils/config.py"
CONFIG_UTILS = "vllm/config/utils.py"
ROPE_FUNCTIONS = ("is_rope_parameters_nested", "iter_rope_parameters", "patch_rope_scaling_dict", "patch_rope_scaling",
                  "patch_rope_parameters_dict", "patch_legacy_rope_type", "patch_rope_parameters")
# The attention layer's own KV spec (0.14 on; before, the model runner gives every layer the
# cache's block size), which picks a sliding layer's block size, and MultipleOf, which it reads.
ATTENTION_LAYER = ("vllm/model_executor/layers/attention/attention.py", "vllm/attention/layer.py")
ATTENTION_BACKEND = "vllm/v1/attention/backend.py"
# The cache dtypes the release's CLI offers (its CacheDType and MambaDType literals).
CACHE_CONFIG = "vllm/config/cache.py"
ALLOWED_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
# A Gated DeltaNet hybrid (Qwen3-Next, Qwen3.5): the architectures the release registers, the
# model's state shapes and dtypes, the config checks that size the attention block and pad the
# Mamba page (the platform's block-size update took the alignment over in 0.20), the Mamba
# layer's spec (the model runner's in 0.10), and the CUDA graph check on Mamba blocks (0.20 on).
MODEL_REGISTRY = "vllm/model_executor/models/registry.py"
MODELS_CONFIG = "vllm/model_executor/models/config.py"
MAMBA_UTILS = "vllm/model_executor/layers/mamba/mamba_utils.py"
QWEN3_NEXT = "vllm/model_executor/models/qwen3_next.py"
MAMBA_BASE = "vllm/model_executor/layers/mamba/abstract.py"
PLATFORM = "vllm/platforms/interface.py"
TORCH_UTILS = ("vllm/utils/torch_utils.py", "vllm/utils/__init__.py")
DISTRIBUTED_UTILS = "vllm/distributed/utils.py"
COMPILATION = "vllm/config/compilation.py"
# Which attention backend a release picks: from 0.11.2 the CUDA platform's priority list and
# each backend's validate_configuration (0.10: its case-by-case choice), run from the release's
# own backend modules, imported whole; before 0.18, also the platform's config check, which forces an MLA
# backend's block size and may preselect it. Stand-ins for what the CUDA wheel and its image
# hold: every compiled extension imports (FA2, FA3, FlashMLA, ...), FlashInfer is installed; a
# backend whose module is not read here (the sparse ones) cannot be imported.
CUDA_PLATFORM = "vllm/platforms/cuda.py"
# (under vllm/attention/ before 0.14)
SELECTORS = ("vllm/v1/attention/selector.py", "vllm/attention/selector.py")
BACKEND_REGISTRIES = ("vllm/v1/attention/backends/registry.py", "vllm/attention/backends/registry.py")
SELECTION_MODULES = BACKEND_REGISTRIES + (
    "vllm/v1/attention/backend.py", "vllm/attention/backends/abstract.py", "vllm/v1/attention/backends/fa_utils.py",
    "vllm/attention/utils/fa_utils.py",
    "vllm/vllm_flash_attn/flash_attn_interface.py", "vllm/utils/flashinfer.py", "vllm/v1/attention/ops/flashmla.py", "vllm/attention/ops/flashmla.py",
    "vllm/v1/attention/backends/flash_attn.py", "vllm/v1/attention/backends/flashinfer.py",
    "vllm/v1/attention/backends/triton_attn.py", "vllm/v1/attention/backends/flex_attention.py",
    "vllm/v1/attention/backends/mla/flashattn_mla.py", "vllm/v1/attention/backends/mla/flashmla.py",
    "vllm/v1/attention/backends/mla/flashinfer_mla.py", "vllm/v1/attention/backends/mla/cutlass_mla.py",
    "vllm/v1/attention/backends/mla/triton_mla.py", "vllm/model_executor/layers/attention/mla_attention.py",
    "vllm/v1/attention/backends/mla/common.py")  # MLACommonBackend's home before 0.15
# where the wheel has FA4 (the FA version check looks for this file)
FA4_INTERFACE = "vllm/vllm_flash_attn/cute/interface.py"
# the selection ranks backends by priority (0.10 picks them case by case)
RANKED_SELECTION_FROM = (0, 11, 2)
PLATFORM_BLOCK_METHODS = ("update_block_size_for_backend", "_align_hybrid_block_size",
                          "_preferred_block_size_for_backends", "_check_aligned_block_size",
                          "_get_indexer_block_alignment")
# The Transformers each release runs with: 4 up to 0.18 (which require <5), then 5, the newest
# their requirements accept (0.19 to 0.23 take either).
TRANSFORMERS_5_FROM = (0, 19)
HELPERS = {
    "cdiv": ("vllm/utils/math_utils.py", "vllm/utils/__init__.py"),
    "round_up": ("vllm/utils/math_utils.py", "vllm/utils/__init__.py"),
    "format_gib": ("vllm/utils/mem_utils.py", "vllm/utils/__init__.py"),
}


def _wanted():
    return set(REAL_MODULES) | set(MAX_LEN_CHECK) | \
        {REGISTRATION, VLLM_CONFIG, ARG_UTILS, USAGE, GPU_WORKER, ROPE_PATCHING, CONFIG_UTILS, ATTENTION_BACKEND,
         CACHE_CONFIG} | \
        {MODEL_REGISTRY, MODELS_CONFIG, MAMBA_UTILS, QWEN3_NEXT, MAMBA_BASE, PLATFORM, DISTRIBUTED_UTILS, COMPILATION} | \
        {CUDA_PLATFORM, FA4_INTERFACE} | set(SELECTORS) | set(SELECTION_MODULES) | \
        set(ATTENTION_LAYER) | set(TORCH_UTILS) | \
        {path for paths in HELPERS.values() for path in paths}


def release_sources(version: str, cache_dir: Path = CACHE) -> Path:
    """The directory holding the files of ``version`` this harness reads, fetched once."""
    root = release_files(version, _wanted(), cache_dir)
    if not (root / "vllm/v1/core/kv_cache_utils.py").exists():
        raise SourceUnavailable("vllm %s has no vllm/v1/core/kv_cache_utils.py" % version)
    return root


# --- stand-ins ---------------------------------------------------------------------------


class _PlaceholderType(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)()


class _Placeholder(metaclass=_PlaceholderType):
    """What an unmodelled vLLM name is here: a class that can be made, called, subscripted and
    subclassed (enum members are its attributes), and is never a type a case's spec is an
    instance of."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return self

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __class_getitem__(cls, item):
        return cls


def _placeholder(name):
    return type(name, (_Placeholder,), {})


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Real modules from the release's source; every other ``vllm`` module a stub."""

    def __init__(self, root, real):
        self.root, self.real = root, set(real)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "vllm" and not fullname.startswith("vllm."):
            # what vLLM imports beside the standard library (torch's submodules, FlashInfer, tqdm,
            # requests) is a stub, as the rest of vLLM is; what this harness imported stays real
            parent = sys.modules.get(fullname.rpartition(".")[0])
            if isinstance(parent, _StubModule) or ("." not in fullname and fullname not in sys.stdlib_module_names):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None
        source = self.root / (fullname.replace(".", "/") + ".py")
        if source.as_posix()[len(self.root.as_posix()) + 1:] in self.real and source.exists():
            return importlib.util.spec_from_file_location(fullname, source)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        pass


class _DType:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch.%s" % self.name


def _make_torch():
    torch = _StubModule("torch")
    sizes = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "uint8": 1, "int8": 1,
             "int32": 4, "int64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1}
    for name, size in sizes.items():
        setattr(torch, name, _DType(name, size))
    torch.half, torch.float, torch.long = torch.float16, torch.float32, torch.int64
    torch.dtype = _DType
    return torch


class _Envs(types.ModuleType):
    """vllm.envs: every switch the planning reads is off."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class _Logger(logging.LoggerAdapter):
    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args)

    def debug_once(self, msg, *args, **kwargs):
        self.debug(msg, *args)

    def process(self, msg, kwargs):
        kwargs.pop("scope", None)
        return msg, kwargs


class _Config(types.SimpleNamespace):
    """A config object: what a case sets, and None (off) for anything else."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _drop_annotations(node):
    """Function annotations name types that are not here (and are evaluated at definition)."""
    for function in ast.walk(node):
        if isinstance(function, ast.FunctionDef):
            function.returns = None
            for argument in ast.walk(function.args):
                if isinstance(argument, ast.arg):
                    argument.annotation = None


def _cut(path, name, namespace=None):
    """One top-level function (or assignment) of a source file, executed on its own in
    ``namespace`` (where the definitions cut before it are), its annotations dropped."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        assigned = isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets)
        if (isinstance(node, ast.FunctionDef) and node.name == name) or assigned:
            _drop_annotations(node)
            namespace = {} if namespace is None else namespace
            namespace.setdefault("GiB_bytes", GIB)
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
            return namespace[name]
    return None


def _cut_method(path, class_name, name, namespace=None):
    """A method of a class in a source file (or, without ``name``, the class), as a plain
    function executed in ``namespace``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            found = [node] if name is None else [item for item in node.body
                                                 if isinstance(item, ast.FunctionDef) and item.name == name]
            if found:
                if name is not None:
                    found[0].decorator_list = []
                _drop_annotations(found[0])
                namespace = {} if namespace is None else namespace
                exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
                return namespace[name or class_name]
    return None


class _Platform:
    """current_platform for one card: CUDA, its memory, name and compute capability."""

    def __init__(self, memory, name, capability=(9, 0)):
        self.memory, self.name, self.capability = memory, name, tuple(capability)

    def get_device_capability(self, *args):
        interface = sys.modules.get("vllm.platforms.interface")
        capability = getattr(interface, "DeviceCapability", None)
        if isinstance(capability, type) and hasattr(capability, "_fields"):
            return capability(*self.capability)
        return _Config(major=self.capability[0], minor=self.capability[1])

    def has_device_capability(self, capability):
        if isinstance(capability, int):
            capability = divmod(capability, 10)
        return self.capability >= tuple(capability)

    def is_device_capability(self, capability):
        if isinstance(capability, int):
            capability = divmod(capability, 10)
        return self.capability == tuple(capability)

    def is_device_capability_family(self, family):
        return self.capability[0] == family // 10

    def get_device_total_memory(self, *args):
        return self.memory

    def get_device_name(self, *args):
        return self.name

    def check_max_model_len(self, max_model_len):  # Platform's, which CUDA keeps
        return max_model_len

    def register_custom_kv_cache_specs(self, vllm_config):  # CUDA registers none
        return None

    def fp8_dtype(self):
        return sys.modules["torch"].float8_e4m3fn

    device_type = "cuda"

    def __getattr__(self, name):
        if name.startswith("is_"):
            return lambda *args: name == "is_cuda"
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)()  # what else a module asks the platform at import (dispatch keys, ...)


class Harness:
    """One release's planning code (one per process: it owns ``vllm`` and ``torch``)."""

    def __init__(self, source_root: Path, version: str):
        self.root, self.version = source_root, version
        self.recorder = Recorder()
        logger = logging.getLogger("vllm-release-%s" % version)
        logger.handlers[:] = [self.recorder]
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        sys.modules["torch"] = self.torch = _make_torch()
        sys.meta_path.insert(0, _Finder(source_root, REAL_MODULES + SELECTION_MODULES))
        # the card the backends ask about, one object they all import (set per case)
        self.platform = _Platform(0, "cuda")
        importlib.import_module("vllm.platforms").current_platform = self.platform
        importlib.import_module("vllm.utils.import_utils").resolve_obj_by_qualname = _resolve_qualname
        # the config the backends read while one is being picked (set per case)
        self.current_config = None
        config_module = importlib.import_module("vllm.config")
        config_module.get_current_vllm_config = config_module.get_current_vllm_config_or_none = \
            lambda: self.current_config
        sys.modules["vllm.envs"] = _Envs("vllm.envs")
        logger_module = _StubModule("vllm.logger")
        logger_module.init_logger = lambda name: _Logger(logger, {})
        sys.modules["vllm.logger"] = logger_module
        # HiSparse is off: its hooks return what they return when it is off.
        importlib.import_module("vllm.v1.hisparse.layout").__dict__.update(
            get_hisparse_host_pool_bytes=lambda *args: 0, get_hisparse_kv_cache_config=lambda *args: None,
            get_hisparse_kv_cache_groups=lambda *args: None)
        helpers = {}
        for name, paths in HELPERS.items():
            for relative in paths:
                if (source_root / relative).exists():
                    found = _cut(source_root / relative, name)
                    if found:
                        helpers[name] = found
                        break
        helpers["get_dtype_size"] = lambda dtype: dtype.itemsize
        helpers["GiB_bytes"] = GIB
        for module in ("vllm.utils", "vllm.utils.math_utils", "vllm.utils.mem_utils", "vllm.utils.torch_utils"):
            importlib.import_module(module).__dict__.update(helpers)
        # what the backends' KV dtype checks ask (a KV dtype that is quantized; no custom handlers)
        torch_utils = source_root / TORCH_UTILS[0]
        if torch_utils.exists() and "def is_quantized_kv_cache" in torch_utils.read_text():
            importlib.import_module("vllm.utils.torch_utils").is_quantized_kv_cache = _cut(
                torch_utils, "is_quantized_kv_cache")
        importlib.import_module("vllm.config.cache").get_kv_cache_dtype_handler = lambda name: None
        self.modules = {}
        for relative in REAL_MODULES:
            if (source_root / relative).exists():
                name = relative[:-3].replace("/", ".")
                self.modules[name] = importlib.import_module(name)
        self.kvi = self.modules["vllm.v1.kv_cache_interface"]
        self.utils = self.modules["vllm.v1.core.kv_cache_utils"]
        self.utils.__dict__.update({k: v for k, v in helpers.items() if k in self.utils.__dict__})
        self._register_specs()
        self._load_batch_defaults()
        self._load_max_len_check()
        self._load_attention_spec()
        self._load_hybrid()
        self._load_selection()
        self.config_properties = {}
        if (source_root / VLLM_CONFIG).exists():
            for name in ("max_concurrent_batches", "max_in_flight_tokens"):
                found = _cut_method(source_root / VLLM_CONFIG, "VllmConfig", name)
                if found:
                    self.config_properties[name] = found

    def _register_specs(self):
        """register_all_kvcache_specs, run with placeholder managers (planning reads only
        which spec classes are registered and their uniform base types)."""
        registry = self.modules.get("vllm.v1.kv_cache_spec_registry")
        if registry is None or not (self.root / REGISTRATION).exists():
            return
        text = (self.root / REGISTRATION).read_text()
        namespace = {name: _placeholder(name) for name in set(re.findall(r"\b(\w+Manager)\b", text))}
        namespace.update({name: getattr(self.kvi, name) for name in dir(self.kvi) if name.endswith("Spec")})
        namespace["KVCacheSpecRegistry"] = registry.KVCacheSpecRegistry
        namespace.update({name: getattr(self.kvi, name) for name in dir(self.kvi) if name.startswith("KVCache")})
        register = _cut(self.root / REGISTRATION, "register_all_kvcache_specs", namespace)
        if register is not None:
            register(None)

    def _load_batch_defaults(self):
        self.batch_setter = None
        if not (self.root / ARG_UTILS).exists() or not (self.root / USAGE).exists():
            return
        import enum
        usage = _cut_method(self.root / USAGE, "UsageContext", None, {"Enum": enum.Enum})
        importlib.import_module("vllm.usage.usage_lib").UsageContext = self.usage_context = usage
        self.args_ns = {"GiB_bytes": GIB, "logger": _Logger(logging.getLogger("vllm-args"), {}), "sys": sys,
                        "UsageContext": usage, "envs": sys.modules["vllm.envs"],
                        "SchedulerConfig": _Config(DEFAULT_MAX_NUM_BATCHED_TOKENS=2048, DEFAULT_MAX_NUM_SEQS=128)}
        self.batch_defaults_fn = _cut_method(self.root / ARG_UTILS, "EngineArgs", "get_batch_defaults", self.args_ns)
        self.args_ns["EngineArgs"] = _Config()
        setters = (_cut_method(self.root / ARG_UTILS, "EngineArgs", name, self.args_ns) for name in BATCH_SETTERS)
        self.batch_setter = next(found for found in setters if found)

    def _load_max_len_check(self):
        """_get_and_verify_max_len and the RoPE patching before it, cut into one namespace; the
        patching asks for the Transformers version, which TRANSFORMERS_5_FROM stands in for."""
        self.transformers_5 = packaging.version.Version(self.version).release[:2] >= TRANSFORMERS_5_FROM
        quiet = logging.getLogger("vllm-release-config")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        self.rope_ns = {"logger": _Logger(quiet, {}), "ALLOWED_LAYER_TYPES": ALLOWED_LAYER_TYPES,
                        "ALLOWED_ATTENTION_LAYER_TYPES": ALLOWED_LAYER_TYPES, "Version": packaging.version.Version,
                        "version": lambda package: "5.8.0" if self.transformers_5 else "4.57.6"}
        if (self.root / CONFIG_UTILS).exists():
            importlib.import_module("vllm.config.utils").getattr_iter = _cut(self.root / CONFIG_UTILS, "getattr_iter",
                                                                             dict(self.rope_ns))
        for name in ROPE_FUNCTIONS:
            _cut(self.root / ROPE_PATCHING, name, self.rope_ns)
        self.patch_rope = self.rope_ns.get("patch_rope_parameters") or self.rope_ns["patch_rope_scaling"]
        self.max_len_ns = dict(self.rope_ns, envs=sys.modules["vllm.envs"], current_platform=_Platform(0, "none"))
        checks = (_cut(self.root / path, "_get_and_verify_max_len", self.max_len_ns)
                  for path in MAX_LEN_CHECK if (self.root / path).exists())
        self.max_len_check = next(found for found in checks if found)

    def _load_attention_spec(self):
        self.attention_spec = None
        path = next((self.root / path for path in ATTENTION_LAYER if (self.root / path).exists()), None)
        if path is None:
            return
        if (self.root / ATTENTION_BACKEND).exists():
            importlib.import_module("vllm.v1.attention.backend").MultipleOf = _cut_method(
                self.root / ATTENTION_BACKEND, "MultipleOf", None, {"dataclass": dataclasses.dataclass})
        namespace = {name: getattr(self.kvi, name) for name in dir(self.kvi) if name.endswith("Spec")}
        namespace.update(AttentionType=_Config(DECODER="decoder", ENCODER="encoder", ENCODER_ONLY="encoder_only"),
                         get_kv_quant_mode=getattr(self.kvi, "get_kv_quant_mode", None))
        _cut(path, "_largest_kernel_block_within", namespace)
        self.attention_spec = _cut_method(path, "Attention", "get_kv_cache_spec", namespace)

    def sliding_block_size(self, backend_name, layer, block_size, tp, kv_dtype, cache_dtype):
        """The block size the release's Attention.get_kv_cache_spec gives a sliding layer
        served by ``backend_name`` (its declared kernel block sizes, as the 0.33 harness's)."""
        if self.attention_spec is None:
            return block_size
        backend = self._backend_class(backend_name)
        attention = _Config(attn_type="decoder", sliding_window=layer["window"], attn_backend=backend,
                            num_kv_heads=max(1, layer["kv_heads"] // tp), head_size=layer["head_size"],
                            head_size_v=layer["head_size"], kv_cache_torch_dtype=kv_dtype, kv_cache_dtype=cache_dtype)
        spec = self.attention_spec(attention, _Config(cache_config=_Config(block_size=block_size),
                                                      model_config=_Config(use_mla=False)))
        return spec.block_size

    def _load_hybrid(self):
        """The GDN hybrid's code (see MODEL_REGISTRY), cut into one namespace."""
        import math
        quiet = logging.getLogger("vllm-release-hybrid")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        ns = self.hybrid_ns = {
            "torch": self.torch, "logger": _Logger(quiet, {}), "lcm": math.lcm, "envs": sys.modules["vllm.envs"],
            "cdiv": importlib.import_module("vllm.utils").__dict__.get("cdiv"), "VerifyAndUpdateConfig": object,
            "is_conv_state_dim_first": lambda: False, "CUDAGraphMode": _placeholder("CUDAGraphMode"),
            "AttentionBackendEnum": _Config(CUTLASS_MLA="CUTLASS_MLA", FLASHINFER="FLASHINFER")}
        ns.update({name: getattr(self.kvi, name) for name in dir(self.kvi) if name.endswith("Spec")})
        for name in ("STR_DTYPE_TO_TORCH_DTYPE", "get_kv_cache_torch_dtype"):
            next(_cut(self.root / path, name, ns) for path in TORCH_UTILS
                 if (self.root / path).exists() and name in (self.root / path).read_text())
        importlib.import_module("vllm.utils.torch_utils").STR_DTYPE_TO_TORCH_DTYPE = ns["STR_DTYPE_TO_TORCH_DTYPE"]
        for name in ("ensure_divisibility", "divide"):
            _cut(self.root / DISTRIBUTED_UTILS, name, ns)
        for name in ("MambaStateDtypeCalculator", "MambaStateShapeCalculator"):
            _cut_method(self.root / MAMBA_UTILS, name, None, ns)
        self.model_cls = type("Model", (), {name: classmethod(_cut_method(self.root / QWEN3_NEXT, "Qwen3NextForCausalLM",
                                                                          name, ns))
                                            for name in ("get_mamba_state_shape_from_config",
                                                         "get_mamba_state_dtype_from_config")})
        importlib.import_module("vllm.model_executor.models").ModelRegistry = ns["ModelRegistry"] = _Config(
            resolve_model_cls=lambda *args, **kwargs: (self.model_cls, "Model"))
        registry = (self.root / MODEL_REGISTRY).read_text()
        self.architectures = set(re.findall(r'"(\w+)":\s*\(', registry))
        self.cli_dtypes = {node.targets[0].id: [element.value for element in node.value.slice.elts]
                           for node in ast.parse((self.root / CACHE_CONFIG).read_text()).body
                           if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in
                           ("CacheDType", "MambaDType")}
        tree = ast.parse((self.root / MODELS_CONFIG).read_text())
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        self.models_config_map = {}
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = {getattr(target, "id", "") for target in targets}
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and "MODELS_CONFIG_MAP" in names:
                self.models_config_map = {key.value: value.id for key, value in zip(node.value.keys, node.value.values)
                                          if isinstance(value, ast.Name)}
        for name in ("MambaModelConfig", "HybridAttentionMambaModelConfig", "Qwen3_5ForConditionalGenerationConfig",
                     "Qwen3_5ForCausalLMConfig"):
            if name in classes:
                _cut_method(self.root / MODELS_CONFIG, name, None, ns)
        self.mamba_spec = _cut_method(self.root / MAMBA_BASE, "MambaBase", "get_kv_cache_spec", ns)
        self.platform_cls = None
        if (self.root / PLATFORM).exists():
            methods = {name: classmethod(found) for name in PLATFORM_BLOCK_METHODS
                       for found in [_cut_method(self.root / PLATFORM, "Platform", name, {"logger": ns["logger"]})]
                       if found}
            if methods:
                self.platform_cls = type("Platform", (), methods)
        config_module = importlib.import_module("vllm.config.vllm")
        config_module.set_current_vllm_config = lambda *args, **kwargs: contextlib.nullcontext()
        importlib.import_module("vllm.config.cache").CacheConfig = _Config(DEFAULT_BLOCK_SIZE=16)
        self.graph_check = None
        if (self.root / COMPILATION).exists() and "requires one Mamba cache block" in (self.root / COMPILATION).read_text():
            compile_ns = {"logger": ns["logger"], "enum": __import__("enum")}
            self.cudagraph_mode = _cut_method(self.root / COMPILATION, "CUDAGraphMode", None, compile_ns)
            self.graph_check = _cut_method(self.root / COMPILATION, "CompilationConfig",
                                           "resolve_cudagraph_mode_and_sizes", compile_ns)
            compile_ns["CUDAGraphMode"] = self.cudagraph_mode
            self.cg_support = _cut_method(self.root / ATTENTION_BACKEND, "AttentionCGSupport", None,
                                          {"Enum": __import__("enum").Enum})
            importlib.import_module("vllm.v1.attention.backend").AttentionCGSupport = self.cg_support

    def _load_selection(self):
        """The CUDA platform's backend selection and the backends it ranks (SELECTION_MODULES)."""
        self.select = self.check_and_update = None
        # what the backends ask torch.cuda before 0.18: the card (FlashAttention's version check),
        # its SM count (CUTLASS MLA's workspace, made at import)
        self.torch.cuda.get_device_capability = lambda *args: self.platform.capability
        self.torch.cuda.get_device_properties = lambda *args: _Config(multi_processor_count=148)
        interface = importlib.import_module("vllm.platforms.interface")
        interface.DeviceCapability = self.device_capability = _cut_method(
            self.root / PLATFORM, "DeviceCapability", None, {"NamedTuple": typing.NamedTuple, "Any": object})
        quiet = logging.getLogger("vllm-release-selection")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        if packaging.version.Version(self.version).release < RANKED_SELECTION_FROM:
            self._load_selection_0_10(_Logger(quiet, {}))
            return
        # the selector's config (0.13 on; before, its fields are the arguments)
        self.selector_config = _cut_method(_first(self.root, SELECTORS), "AttentionSelectorConfig", None,
                                           {"NamedTuple": typing.NamedTuple, "AttentionType": _Config(
                                               DECODER="decoder")})
        registry = self._registry()
        if (self.root / "vllm/attention/backends/abstract.py").exists():  # vllm.attention's, before 0.14
            importlib.import_module("vllm.attention").AttentionType = importlib.import_module(
                "vllm.attention.backends.abstract").AttentionType
        ns = {"AttentionBackendEnum": registry.AttentionBackendEnum, "logger": _Logger(quiet, {}), "cache": functools.cache,
              "DeviceCapability": self.device_capability}
        ns["NamedTuple"] = typing.NamedTuple
        # no backend nor FlashAttention version asked for (the variables, before 0.13)
        ns["envs"] = sys.modules["vllm"].envs = sys.modules["vllm.envs"]  # `from vllm import envs` too
        ns["envs"].VLLM_ATTENTION_BACKEND = ns["envs"].VLLM_FLASH_ATTN_VERSION = None
        for node in ast.parse((self.root / CUDA_PLATFORM).read_text()).body:  # what cuda.py imports by name
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm."):
                module = importlib.import_module(node.module)
                ns.update({alias.asname or alias.name: getattr(module, alias.name) for alias in node.names
                           if (alias.asname or alias.name) not in ns})
        for name in ("_get_backend_priorities", "_get_attn_backend_class", "_backend_cls_path"):
            _cut(self.root / CUDA_PLATFORM, name, ns)
        _cut_method(self.root / CUDA_PLATFORM, "_BackendCandidate", None, ns)
        methods = {name: classmethod(_cut_method(self.root / CUDA_PLATFORM, "CudaPlatformBase", name, ns))
                   for name in ("get_valid_backends", "get_attn_backend_cls")}
        methods.update(device_name="cuda", get_device_capability=classmethod(
            lambda cls, *args: self.platform.get_device_capability()),
            is_device_capability_family=classmethod(lambda cls, family: self.platform.is_device_capability_family(family)),
            is_device_capability=classmethod(lambda cls, capability: self.platform.is_device_capability(capability)))
        if packaging.version.Version(self.version).release[:2] < (0, 18):
            # before 0.18 the platform's config check picks an MLA model's block size and may
            # preselect its backend, which the selection then must find valid
            methods["check_and_update_config"] = classmethod(
                _cut_method(self.root / CUDA_PLATFORM, "CudaPlatformBase", "check_and_update_config", ns))
        platform = type("CudaPlatform", (), methods)
        self.select = platform.get_attn_backend_cls
        self.check_and_update = getattr(platform, "check_and_update_config", None)

    def _load_selection_0_10(self, logger):
        """0.10's selection, written out case by case in the CUDA platform (FlashInfer first on
        Blackwell, then FlashAttention for the heads and dtypes it lists, FlexAttention else; an MLA
        backend by the block size the config check forced), and that config check."""
        envs = sys.modules["vllm"].envs = sys.modules["vllm.envs"]
        envs.VLLM_ATTENTION_BACKEND = envs.VLLM_FLASH_ATTN_VERSION = None
        envs.VLLM_USE_V1 = True
        selector = importlib.import_module("vllm.attention.selector")
        selector_ns = {"resolve_obj_by_qualname": _resolve_qualname, "dataclass": dataclasses.dataclass,
                       "Union": typing.Union, "AttentionBackend": object, "torch": self.torch}
        _cut_method(_first(self.root, SELECTORS), "_IsSupported", None, selector_ns)
        selector.is_attn_backend_supported = _cut(_first(self.root, SELECTORS), "is_attn_backend_supported",
                                                  selector_ns)
        ns = {"_Backend": _cut_method(self.root / PLATFORM, "_Backend", None, {"enum": __import__("enum")}),
              "envs": envs, "logger": logger, "torch": self.torch}
        methods = {name: classmethod(_cut_method(self.root / CUDA_PLATFORM, "CudaPlatformBase", name, ns))
                   for name in ("get_attn_backend_cls", "check_and_update_config")}
        methods.update(device_name="cuda", has_device_capability=classmethod(
            lambda cls, capability: self.platform.has_device_capability(capability)),
            is_device_capability=classmethod(lambda cls, capability: self.platform.is_device_capability(capability)))
        platform = type("CudaPlatform", (), methods)
        self.select, self.check_and_update = platform.get_attn_backend_cls, platform.check_and_update_config
        self.selector_config = None

    def _registry(self):
        return importlib.import_module(_first(self.root, BACKEND_REGISTRIES).relative_to(self.root).as_posix()[:-3]
                                       .replace("/", "."))

    def attention_backend(self, truth, options, capability, layer):
        """The backend the release picks for an attention ``layer`` on a card of ``capability``:
        its name, or "ValueError: ..." where none is valid."""
        self.platform.capability = tuple(capability)
        _clear_caches()  # FA versions and the like are cached per process, and the card changes
        tp = options["tensor_parallel_size"]
        # the model's head size (its config's head_dim: the first attention layer's), whichever layer asks
        model_head_size = next(layer for layer in truth["layers"] if layer["kind"] != "linear")["head_size"]
        self.current_config = _Config(
            model_config=_Config(hf_text_config=_Config(qk_nope_head_dim=(truth.get("mla") or {}).get("nope")),
                                 get_num_attention_heads=lambda parallel: truth["heads"] // tp,
                                 get_head_size=lambda: model_head_size, dtype=getattr(self.torch, truth["dtype"]),
                                 get_num_kv_heads=lambda parallel: 1 if layer["kind"] == "mla"
                                 else max(1, layer["kv_heads"] // tp)),
            parallel_config=_Config(tensor_parallel_size=tp, decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                    pipeline_parallel_size=1), attention_config=_Config(),
            cache_config=_Config(cache_dtype=options["kv_dtype_setting"]))
        fields = {"head_size": layer["head_size"], "dtype": getattr(self.torch, truth["dtype"]),
                  "kv_cache_dtype": options["kv_dtype_setting"], "block_size": options["user_block_size"],
                  "use_mla": layer["kind"] == "mla", "has_sink": bool(truth.get("sinks")), "use_sparse": False,
                  "use_mm_prefix": False, "attn_type": "decoder", "has_sliding_window": bool(layer.get("window"))}
        config = self.selector_config and self.selector_config(**{
            name: value for name, value in fields.items() if name in self.selector_config._fields})
        selected = None
        if self.check_and_update:  # before 0.18
            checked = self.platform_config(truth, options, layer)
            selected, fields["block_size"] = self.preselected(checked), checked.cache_config.block_size
        try:
            path = _call(self.select, selected_backend=selected, attn_selector_config=config,
                         num_heads=truth["heads"] // options["tensor_parallel_size"], use_v1=True, **fields)
        except ValueError as exc:
            return "ValueError: %s" % exc
        return _resolve_qualname(path).get_name().removesuffix("_VLLM_V1")  # 0.10's V1 names

    def platform_config(self, truth, options, layer):
        """What the CUDA platform's config check (before 0.18) leaves of a config: the block size
        (an MLA backend's, forced) and the backend it preselected (``attention_config.backend``)."""
        nope = (truth.get("mla") or {}).get("nope")
        vllm_config = _Config(
            parallel_config=_Config(worker_cls="auto"), attention_config=_Config(backend=None),
            cache_config=_Config(block_size=options["user_block_size"], cache_dtype=options["kv_dtype_setting"]),
            # a plain namespace: the check asks hasattr(hf_config, "index_topk") for the sparse MLA
            model_config=_Config(use_mla=layer["kind"] == "mla", hf_config=types.SimpleNamespace(),
                                 hf_text_config=types.SimpleNamespace(qk_nope_head_dim=nope), is_mm_prefix_lm=False),
            scheduler_config=_Config())
        sys.modules["vllm.envs"].VLLM_ATTENTION_BACKEND = None
        self.check_and_update(vllm_config)
        return vllm_config

    def preselected(self, vllm_config):
        """The backend the config check preselected: in the attention config (0.13 on), or
        before in VLLM_ATTENTION_BACKEND, which it sets for the selector to read (0.11 on; 0.10's
        selector never sees it, as its own TODO says)."""
        if not any((self.root / path).exists() for path in BACKEND_REGISTRIES):  # 0.10
            return None
        named = sys.modules["vllm.envs"].VLLM_ATTENTION_BACKEND
        return vllm_config.attention_config.backend or (self._registry().AttentionBackendEnum[named] if named else None)

    def block_size(self, truth, options, backend_names):
        """The block size the release's platform settles on for a model without Mamba layers once
        its selection picked ``backend_names`` (the distinct ones of its attention layers, in layer
        order): from 0.18 the backends' preference unless --block-size; before, what the
        platform's config check leaves (16, or an MLA backend's)."""
        if self.check_and_update:
            layer = next(layer for layer in truth["layers"] if not layer.get("shared"))
            return self.platform_config(truth, options, layer).cache_config.block_size
        backends = [self._backend_class(name) for name in backend_names]
        user = options["user_block_size"]
        cache_config = _Config(block_size=user or 16, user_specified_block_size=user is not None,
                               cache_dtype=options["kv_dtype_setting"])
        reference = next(layer for layer in truth["layers"] if not layer.get("shared"))
        vllm_config = _Config(model_config=_Config(is_hybrid=False, use_mla=reference["kind"] == "mla"),
                              cache_config=cache_config, parallel_config=_Config(
                                  tensor_parallel_size=options["tensor_parallel_size"]))
        importlib.import_module("vllm.config.vllm").get_layers_from_vllm_config = lambda *args: {
            "model.layers.%d" % index: _Config(get_attn_backend=lambda backend=backend: backend)
            for index, backend in enumerate(backends)}
        self._platform_class(backends).update_block_size_for_backend(vllm_config)
        return cache_config.block_size

    def _platform_class(self, backends):
        """The platform, its layers served by ``backends``: the first non-SSM layer's (to 0.30), or
        the distinct ones in layer order (0.31 on)."""
        return type("CudaPlatform", (self.platform_cls,), {
            "_find_non_ssm_backend": classmethod(lambda cls, config: backends[0]),
            "_find_non_ssm_backends": classmethod(lambda cls, config: list(backends))})

    def _backend_class(self, backend_name):
        """The release's own backend class (0.14 on, where the attention layer and the platform ask
        it for block sizes; it reads the config its selection left)."""
        return self._registry().AttentionBackendEnum[backend_name].get_class()

    def hybrid(self, truth, options, capability):
        """What the release's config checks make of a GDN hybrid: ``{"error"}`` where it does
        not register the architecture, else the attention block size, the prefix caching left
        on, and the Mamba layers' spec."""
        if options["architecture"] not in self.architectures:
            return {"error": "%s is not supported by vLLM %s" % (options["architecture"], self.version)}
        linear, tp = truth["linear"], options["tensor_parallel_size"]
        reference = next(layer for layer in truth["layers"] if layer["kind"] != "linear")
        text = _Config(linear_num_key_heads=linear["nk"], linear_num_value_heads=linear["nv"],
                       linear_key_head_dim=linear["dk"], linear_value_head_dim=linear["dv"],
                       linear_conv_kernel_dim=linear["kernel"], mamba_ssm_dtype=truth.get("ssm_dtype"),
                       model_type=truth["model_type"])
        model_config = _Config(
            dtype=getattr(self.torch, truth["dtype"]), use_mla=False, is_hybrid=True, architecture=options["architecture"],
            max_model_len=options["max_model_len"], supports_mamba_prefix_caching=False, hf_config=text,
            hf_text_config=text, get_num_kv_heads=lambda parallel: max(1, reference["kv_heads"] // tp),
            get_head_size=lambda: reference["head_size"], get_num_attention_heads=lambda parallel: truth["heads"] // tp)
        user_block = options["block_size"]
        cache_config = _Config(
            block_size=user_block or (16 if self.platform_cls else None), user_specified_block_size=user_block is not None,
            cache_dtype=options["kv_dtype"], enable_prefix_caching=options["enable_prefix_caching"],
            mamba_cache_mode="none", mamba_cache_dtype=options["mamba_cache_dtype"],
            mamba_ssm_cache_dtype=options["mamba_ssm_cache_dtype"])
        num_spec = options["num_speculative_tokens"]
        vllm_config = _Config(
            model_config=model_config, cache_config=cache_config, attention_config=_Config(),
            parallel_config=_Config(tensor_parallel_size=tp), scheduler_config=_Config(enable_chunked_prefill=True),
            speculative_config=_speculative_config(num_spec), num_speculative_tokens=num_spec,
            compilation_config=_Config())
        sys.modules["vllm.envs"].VLLM_USE_V1 = True
        self.platform.capability = tuple(capability)
        self.hybrid_ns["current_platform"] = self.platform
        # VllmConfig.try_verify_and_update_config: the architecture's own checks, then the hybrid's
        own = self.models_config_map.get(options["architecture"])
        try:
            if own in self.hybrid_ns:
                self.hybrid_ns[own].verify_and_update_config(vllm_config)
            self.hybrid_ns["HybridAttentionMambaModelConfig"].verify_and_update_config(vllm_config)
        except AssertionError as exc:  # the engine's config refuses the combination
            return {"error": "AssertionError: %s" % exc}
        if cache_config.block_size is None:  # CudaPlatform.check_and_update_config before 0.18
            cache_config.block_size = 16
        if self.platform_cls is not None:  # the worker, once the model is loaded (0.18 on)
            self._platform_class([self._backend_class(options["backend"])]).update_block_size_for_backend(vllm_config)
        layer = _Config(get_state_shape=lambda: self.model_cls.get_mamba_state_shape_from_config(vllm_config),
                        get_state_dtype=lambda: self.model_cls.get_mamba_state_dtype_from_config(vllm_config),
                        mamba_type="gdn_attn", is_kv_cache_tp_replicated=False)
        if self.mamba_spec is not None:
            spec = self.mamba_spec(layer, vllm_config)
        else:  # 0.10: GPUModelRunner.get_kv_cache_spec, one block of max_model_len per request
            spec = self.spec("MambaSpec", shapes=layer.get_state_shape(), dtypes=layer.get_state_dtype(),
                             block_size=model_config.max_model_len, page_size_padded=cache_config.mamba_page_size_padded,
                             mamba_type="gdn_attn", num_speculative_blocks=num_spec)
        return {"block_size": cache_config.block_size, "mamba_spec": spec,
                "enable_prefix_caching": cache_config.enable_prefix_caching,
                "mamba_cache_mode": cache_config.mamba_cache_mode or "none"}

    def mamba_graph_error(self, kv_cache_config, max_num_seqs, num_spec, enforce_eager):
        """The release's CUDA graph check on Mamba blocks (0.20 on), FULL_AND_PIECEWISE for a
        hybrid, NONE with --enforce-eager; None where it passes or the release has none."""
        if self.graph_check is None:
            return None
        modes = self.cudagraph_mode
        this = _Config(cudagraph_mode=modes.NONE if enforce_eager else modes.FULL_AND_PIECEWISE,
                       splitting_ops_contain_attention=lambda: True, use_inductor_graph_partition=False,
                       adjust_cudagraph_sizes_for_spec_decode=lambda *args: None, cudagraph_capture_sizes=[],
                       max_cudagraph_capture_size=0)
        try:
            _call(self.graph_check, self=this, min_cg_support=self.cg_support.UNIFORM_BATCH, min_cg_attn_backend="GDN_ATTN",
                  uniform_decode_query_len=1 + num_spec, use_v2_model_runner=False, kv_cache_config=kv_cache_config,
                  max_num_reqs=max_num_seqs, is_profiling=False, tensor_parallel_size=1)
        except ValueError as exc:
            return str(exc)
        return None

    def max_len(self, config, truth, max_model_len, allow_long):
        """The release's max model length for ``config`` (its config.json; the check reads the
        text config) at a requested length (-1: auto-fit, from 0.14), as its config loading and
        _get_and_verify_max_len give it. Raises ValueError with the release's text when the
        length is refused, and what the release raises (KeyError, TypeError) where it cannot
        boot the config at all."""
        hf_config = _hf_config(config.get("text_config", config), truth["rope_parameters"] is not None,
                               self.transformers_5)
        hf_config.__dict__.setdefault(truth["len_key"], truth["derived_len"])  # the class default
        self.patch_rope(hf_config)
        sys.modules["vllm.envs"].VLLM_ALLOW_LONG_MAX_MODEL_LEN = allow_long
        return _call(self.max_len_check, hf_config=hf_config,
                     model_arch_config=_Config(derived_max_model_len_and_key=(truth["derived_len"], truth["len_key"])),
                     tokenizer_config=None, max_model_len=max_model_len, disable_sliding_window=False,
                     sliding_window=None)

    def batch_limits(self, gpu, tp, max_model_len, max_num_batched_tokens, max_num_seqs):
        """``(max_num_batched_tokens, max_num_seqs)`` as the release's EngineArgs resolves them
        for ``vllm serve`` on ``gpu`` (``(memory bytes, name)``)."""
        if self.batch_setter is None:
            return None
        self.args_ns["current_platform"] = _Platform(*gpu)
        args = _Config(pipeline_parallel_size=1, tensor_parallel_size=tp, max_num_batched_tokens=max_num_batched_tokens,
                       max_num_seqs=max_num_seqs, performance_mode=None, enable_chunked_prefill=True,
                       enable_prefix_caching=True)
        args.get_chunked_prefill_prefix_caching_defaults = lambda model_config: (True, True)  # 0.11: a decoder's
        if self.batch_defaults_fn:
            args.get_batch_defaults = lambda world_size: self.batch_defaults_fn(None, world_size)
        _call(self.batch_setter, self=args, usage_context=self.usage_context.OPENAI_API_SERVER,
              model_config=_Config(max_model_len=max_model_len, is_multimodal_model=False, runner_type="generate"),
              parallel_config=_Config(use_batched_dp_moe=False))
        return args.max_num_batched_tokens, args.max_num_seqs

    def layout(self):
        """The default LBNHC layout, where the release has layouts."""
        module = self.modules.get("vllm.v1.kv_cache_layout")
        return module.KVCacheLayout.LBNHC if module is not None and hasattr(module, "KVCacheLayout") else None

    # -- specs --------------------------------------------------------------------------------

    def spec(self, cls_name, **fields):
        """A spec of the release's class, with the fields this release's class has."""
        cls = getattr(self.kvi, cls_name)
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in fields.items() if key in names})

    def layer_spec(self, layer, block_size, tp, kv_dtype):
        heads = 1 if layer["kind"] == "mla" else max(1, layer["kv_heads"] // tp)
        common = {"block_size": block_size, "num_kv_heads": heads, "head_size": layer["head_size"],
                  "dtype": kv_dtype, "use_mla": layer["kind"] == "mla"}
        if layer["kind"] == "mla":  # 0.10 marks MLA on a full-attention spec
            return self.spec("MLAAttentionSpec" if hasattr(self.kvi, "MLAAttentionSpec") else "FullAttentionSpec",
                             **common)
        if layer.get("window"):
            return self.spec("SlidingWindowSpec", sliding_window=layer["window"], **common)
        return self.spec("FullAttentionSpec", head_size_v=layer["head_size"], **common)


def _hf_config(config, has_rope, transformers_5):
    """What Transformers makes of config.json before vLLM patches the RoPE parameters: its
    fields as attributes, and a RoPE family's class defaults. Transformers 4 keeps rope_scaling
    as written and defaults rope_theta; 5 standardises rope_parameters (standardize_rope_params:
    rope_type and rope_theta set; for llama3, yarn and longrope the original length taken from
    the top level, else kept, else max_position_embeddings)."""
    config = copy.deepcopy(config)
    hf_config = types.SimpleNamespace(**config, standardize_rope_params=lambda: None, validate_rope=lambda: None)
    if not has_rope:
        return hf_config
    if not transformers_5:
        hf_config.__dict__.setdefault("rope_theta", 10000.0)
        hf_config.__dict__.setdefault("rope_scaling", None)
        return hf_config
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    rope.setdefault("rope_type", rope.get("type", "default"))
    rope.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    if rope["rope_type"] in ("llama3", "yarn", "longrope"):
        if "original_max_position_embeddings" in config:
            rope["original_max_position_embeddings"] = config["original_max_position_embeddings"]
        rope.setdefault("original_max_position_embeddings", config.get("max_position_embeddings"))
    hf_config.rope_parameters = rope
    return hf_config


def _vllm_config(harness, options, max_model_len):
    config = _Config(
        model_config=_Config(max_model_len=max_model_len,
                             original_max_model_len=options.get("original_max_model_len", max_model_len)),
        cache_config=_Config(block_size=options["block_size"], enable_prefix_caching=options["enable_prefix_caching"],
                             num_gpu_blocks_override=None, kv_cache_memory_bytes=options["kv_cache_memory_bytes"],
                             mamba_cache_mode=options.get("mamba_cache_mode", "none"),
                             get_resolved_kv_cache_layout=harness.layout),
        scheduler_config=_Config(max_num_batched_tokens=options["max_num_batched_tokens"],
                                 max_num_seqs=options["max_num_seqs"], async_scheduling=options["async_scheduling"],
                                 disable_hybrid_kv_cache_manager=options["disable_hybrid_kv_cache_manager"],
                                 max_model_len=max_model_len),
        parallel_config=_Config(tensor_parallel_size=options["tensor_parallel_size"], pipeline_parallel_size=1,
                                decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                world_size=options["tensor_parallel_size"]),
        attention_config=_Config(), device_config=_Config(device_type="cuda"), compilation_config=_Config(),
        speculative_config=_speculative_config(options.get("num_speculative_tokens", 0)),
        kv_transfer_config=None, kv_events_config=None, num_speculative_tokens=options.get("num_speculative_tokens", 0),
        num_prefill_lookahead_tokens=0, use_v2_model_runner=options.get("use_v2_model_runner", False))
    for name in ("max_concurrent_batches", "max_in_flight_tokens"):  # in order: one reads the other
        if name in harness.config_properties:
            setattr(config, name, harness.config_properties[name](config))
    return config


def _clear_caches():
    """Empty the functools caches of the release's modules and their classes (found again only
    when a module has been imported since: a case clears them a few times, and the harness
    never removes one)."""
    if _CACHES.get("imported") != len(sys.modules):
        modules = [module for module in list(sys.modules.values())
                   if not isinstance(module, _StubModule) and getattr(module, "__name__", "").startswith("vllm.")]
        _CACHES.update(imported=len(sys.modules), found=_lru_caches(modules))
    for cache in _CACHES["found"]:
        cache.cache_clear()


_CACHES = {}


def _lru_caches(modules):
    """The functools caches defined in ``modules`` and on their classes."""
    found = []
    for module in modules:
        for value in list(vars(module).values()):
            for candidate in [value] + (list(vars(value).values()) if isinstance(value, type) else []):
                candidate = getattr(candidate, "__func__", candidate)
                if isinstance(candidate, functools._lru_cache_wrapper):
                    found.append(candidate)
    return found


def _resolve_qualname(qualname):
    """vLLM's resolve_obj_by_qualname; a backend whose module is not read here is one the image
    cannot import, which the selection skips."""
    module, name = qualname.rsplit(".", 1)
    found = importlib.import_module(module)
    if isinstance(found, _StubModule):
        raise ImportError("%s is not read by this harness" % module)
    return getattr(found, name)


def _speculative_config(num_spec):
    """MTP with ``num_spec`` draft tokens (an EAGLE-style drafter with its own layers), or None."""
    if not num_spec:
        return None
    return _Config(num_speculative_tokens=num_spec, method="mtp", use_eagle=lambda: True,
                   use_multi_module_mtp=lambda: False, use_eagle_block_drop=lambda: False)


def _first(root, paths):
    """The first of ``paths`` the release has, under its source ``root``."""
    return next(root / path for path in paths if (root / path).exists())


def _call(function, **available):
    """``function`` with the arguments its signature in this release names."""
    parameters = inspect.signature(function).parameters
    return function(**{name: available[name] for name in parameters if name in available})


_CAPACITY = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def run_case(harness: Harness, truth: dict, options: dict) -> dict:
    """The release's numbers for one case; ``options`` carry the attention backend (the first
    layer's, and each layer's by name), the block size and the batch limits."""
    kvi, utils = harness.kvi, harness.utils
    tp = options["tensor_parallel_size"]
    kv_dtype = getattr(harness.torch, {"fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
                                       "bfloat16": "bfloat16", "float16": "float16"}.get(options["kv_dtype"], "bfloat16"))
    max_model_len = options["max_model_len"]
    hybrid = None
    if truth.get("linear"):
        hybrid = harness.hybrid(truth, dict(options, block_size=options["user_block_size"]), options["capability"])
        if "error" in hybrid:
            return {"boot_ok": False, "boot_error": hybrid["error"]}
        options = dict(options, block_size=hybrid["block_size"], enable_prefix_caching=hybrid["enable_prefix_caching"],
                       mamba_cache_mode=hybrid["mamba_cache_mode"])
    specs = {}
    layers = [("model.layers.%d" % index, layer) for index, layer in enumerate(truth["layers"])]
    if hybrid and options["num_speculative_tokens"]:  # the MTP drafter's attention layers
        reference = next(layer for layer in truth["layers"] if layer["kind"] != "linear")
        layers += [("mtp.layers.%d" % index, reference) for index in range(truth["mtp_layers"])]
    for name, layer in layers:
        if layer.get("shared"):
            continue
        if layer["kind"] == "linear":
            specs[name] = hybrid["mamba_spec"]
            continue
        block_size = options["block_size"]
        if layer.get("window"):
            block_size = harness.sliding_block_size(options["layer_backends"][name], layer, block_size, tp, kv_dtype,
                                                    options["kv_dtype"])
        specs[name] = harness.layer_spec(layer, block_size, tp, kv_dtype)
    budget = options["kv_cache_memory_bytes"]
    config = _vllm_config(harness, options, max_model_len)
    harness.recorder.lines.clear()
    boot_error = None
    configs = None
    try:
        if hasattr(utils, "get_kv_cache_configs"):
            configs = _call(utils.get_kv_cache_configs, vllm_config=config, kv_cache_specs=[dict(specs)] * tp,
                            available_memory=[budget] * tp)
        else:
            configs = [utils.get_kv_cache_config(config, dict(specs), budget)]
    except ValueError as exc:
        boot_error = str(exc)
    except NotImplementedError as exc:  # a layout the release cannot group: the boot fails
        boot_error = ("NotImplementedError: %s" % exc).rstrip(": ")
    result = {"boot_ok": boot_error is None, "boot_error": boot_error}
    if configs is not None:
        # what the engine core does next: the scheduler's view, then the capacity line
        scheduler = utils.generate_scheduler_kv_cache_config(configs) \
            if hasattr(utils, "generate_scheduler_kv_cache_config") else configs[0]
        if not any(_CAPACITY.search(line) for line in harness.recorder.lines):
            for reporter in ("update_kv_cache_capacity", "_report_kv_cache_config"):
                if hasattr(utils, reporter):
                    getattr(utils, reporter)(config, scheduler)
                    break
        result["max_concurrency_exact"] = utils.get_max_concurrency_for_kv_cache_config(config, scheduler)
        result["max_model_len"] = config.model_config.max_model_len  # auto-fit may have cut it
        if hybrid and boot_error is None:
            result["boot_error"] = harness.mamba_graph_error(configs[0], options["max_num_seqs"],
                                                             options["num_speculative_tokens"], options["enforce_eager"])
            result["boot_ok"] = result["boot_error"] is None
    lines = list(harness.recorder.lines)
    result["log"] = lines
    if configs is not None:
        first = configs[0]
        result["num_blocks"] = first.num_blocks
        if hasattr(utils, "_pool_bytes_per_block"):  # 0.29: one tensor per layer, the pool's divisor named
            groups = _call(utils.get_kv_cache_groups, vllm_config=config, kv_cache_spec=dict(specs),
                           kv_cache_specs=dict(specs))
            result["bytes_per_block"] = _call(utils._pool_bytes_per_block, vllm_config=config, kv_cache_groups=groups)
        elif first.num_blocks:  # before, one tensor per slot of a group, shared by the groups
            result["bytes_per_block"] = sum(tensor.size for tensor in first.kv_cache_tensors) // first.num_blocks
        for line in lines:
            found = _CAPACITY.search(line)
            if found:
                result["kv_cache_tokens"] = int(found.group(1).replace(",", ""))
            found = _CONCURRENCY.search(line)
            if found:
                result["max_concurrency"] = float(found.group(2))
    return result


def pinned_budget_branch(root: Path) -> str:
    """The source of ``Worker.determine_available_memory``'s branch for a pinned
    ``kv_cache_memory_bytes``: what the worker does with it before the KV cache is allocated."""
    tree = ast.parse((root / GPU_WORKER).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "determine_available_memory":
            for branch in ast.walk(node):
                if isinstance(branch, ast.If) and "kv_cache_memory_bytes" in ast.unparse(branch.test):
                    return ast.unparse(ast.Module(body=branch.body, type_ignores=[]))
    raise SourceUnavailable("%s has no pinned-budget branch in determine_available_memory" % GPU_WORKER)


def load(version, cache_dir=CACHE):
    """A Harness over ``version``'s source, fetched once into ``cache_dir``."""
    root = release_sources(version, cache_dir)
    harness = Harness(root, version)
    harness.source = wheel_name(root)
    return harness
