"""Run vLLM 0.33.0's own KV planning code, from its wheel, without torch or a GPU.

The wheel's source is read, never installed. Three kinds of code run here:

* whole vLLM modules, imported from the wheel: ``v1/kv_cache_interface.py`` (specs, page sizes),
  ``v1/core/kv_cache_planning.py`` (grouping, bytes per block, num_blocks, the admission check,
  auto-fit), ``v1/core/kv_cache_utils.py`` (the capacity line), ``v1/kv_cache_layout.py``,
  ``v1/kv_cache_spec_registry.py``, ``v1/core/kv_cache_config_builder.py``,
  ``utils/math_utils.py``;
* single functions and classes cut out of heavier vLLM files by name (``ast``) and run
  unchanged: the block-size phases of ``Platform.update_block_size_for_backend`` and
  ``_align_hybrid_block_size``, ``Attention.get_kv_cache_spec``, ``MLAAttention.get_kv_cache_spec``,
  ``MambaBase.get_kv_cache_spec``, ``customize_attention_spec``, the GDN state shape/dtype
  calculators, ``_resolve_gdn_prefill_backend``, ``get_batch_defaults`` and the max_num_seqs /
  max_num_batched_tokens defaults, ``CompilationConfig.resolve_cudagraph_mode_and_sizes`` (the
  Mamba ``max_num_seqs`` check), ``register_all_kvcache_specs``, ``format_gib``;
* stand-ins, kept to what cannot run here: a ``torch`` with dtype objects and their sizes, a
  logger, config objects holding plain values, a platform that reports the chosen GPU, and the
  attention backends' kernel block sizes (which backend vLLM picks needs a GPU to confirm).

``run_case`` takes a case (the layers a model builds, as the case generator knows them, plus
the serving options) and returns what vLLM computes: block size, bytes per block, num_blocks,
tokens, concurrency and the boot verdict with vLLM's error text.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import dataclasses
import enum
import importlib.util
import logging
import sys
import types
from pathlib import Path

from vllm_sources import SourceUnavailable, release_files

VLLM_VERSION = "0.33.0"

# Whole modules imported from the wheel, in dependency order.
WHOLE_MODULES = (
    "vllm/utils/math_utils.py",
    "vllm/v1/kv_cache_layout.py",
    "vllm/v1/kv_cache_spec_registry.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/core/kv_cache_config_builder.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/kv_cache_planning.py",
)
# Files single definitions are cut out of.
CUT_FILES = (
    "vllm/v1/attention/backend.py",
    "vllm/utils/torch_utils.py",
    "vllm/utils/mem_utils.py",
    "vllm/platforms/interface.py",
    "vllm/model_executor/layers/attention/attention.py",
    "vllm/model_executor/layers/attention/mla_attention.py",
    "vllm/model_executor/layers/mamba/abstract.py",
    "vllm/model_executor/layers/mamba/mamba_utils.py",
    "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
    "vllm/model_executor/models/qwen3_next.py",
    "vllm/distributed/utils.py",
    "vllm/v1/worker/utils.py",
    "vllm/v1/worker/gpu/attn_utils.py",
    "vllm/v1/core/single_type_kv_cache_manager.py",
    "vllm/engine/arg_utils.py",
    "vllm/config/compilation.py",
    "vllm/config/vllm.py",
    "vllm/config/model.py",
    "vllm/model_executor/models/config.py",
    "vllm/transformers_utils/config.py",
    "vllm/usage/usage_lib.py",
)

GIB = 1 << 30


def sources(cache_dir: Path) -> Path:
    """The directory holding 0.33.0's planning sources this harness reads, fetched once."""
    wanted = set(WHOLE_MODULES) | set(CUT_FILES)
    root = release_files(VLLM_VERSION, wanted, cache_dir)
    missing = sorted(name for name in wanted if not (root / name).exists())
    if missing:
        raise SourceUnavailable("vllm %s's wheel lacks %s" % (VLLM_VERSION, ", ".join(missing)))
    return root


# --- stand-ins ---------------------------------------------------------------------------


class _DType:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch.%s" % self.name


def _make_torch():
    torch = types.ModuleType("torch")
    sizes = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "uint8": 1, "int8": 1,
             "int32": 4, "int64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1}
    for name, size in sizes.items():
        setattr(torch, name, _DType(name, size))
    torch.half, torch.float, torch.long = torch.float16, torch.float32, torch.int64
    torch.dtype = _DType
    torch.Tensor = type("Tensor", (), {})
    torch.nn = types.SimpleNamespace(Module=type("Module", (), {}))
    return torch


class _Logger(logging.LoggerAdapter):
    def info_once(self, *args, **kwargs):
        self.info(*args)

    def warning_once(self, *args, **kwargs):
        self.warning(*args)

    def debug_once(self, *args, **kwargs):
        self.debug(*args)


def _init_logger(name):
    return _Logger(logging.getLogger(name), {})


def _package(name):
    module = types.ModuleType(name)
    module.__path__ = []
    return module


class Harness:
    """vLLM's planning code loaded from an extracted wheel (one per process: it owns the
    ``vllm`` and ``torch`` entries of sys.modules)."""

    def __init__(self, source_root: Path):
        self.root = source_root
        self.torch = _make_torch()
        self._install_stubs()
        mem = self.cut("vllm/utils/mem_utils.py", ["format_gib"], {"GiB_bytes": GIB})
        sys.modules["vllm.utils.mem_utils"].format_gib = mem["format_gib"]
        for relative in WHOLE_MODULES:
            self._import(relative)
        self.kvi = sys.modules["vllm.v1.kv_cache_interface"]
        self.planning = sys.modules["vllm.v1.core.kv_cache_planning"]
        self.utils = sys.modules["vllm.v1.core.kv_cache_utils"]
        self._cut_definitions()

    # -- loading ---------------------------------------------------------------------------

    def _import(self, relative):
        name = relative[:-3].replace("/", ".")
        spec = importlib.util.spec_from_file_location(name, self.root / relative)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def cut(self, relative, names, namespace):
        """Exec the named top-level definitions (``Class.method`` for methods) of a wheel file
        in ``namespace``; methods land as plain functions under their own name."""
        tree = ast.parse((self.root / relative).read_text(), filename=relative)
        found = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found[node.name] = node
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef):
                            found["%s.%s" % (node.name, item.name)] = item
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = node
        body = []
        for name in names:
            node = found.get(name)
            if node is None:
                raise SourceUnavailable("%s has no definition %s" % (relative, name))
            if isinstance(node, ast.FunctionDef):
                node.decorator_list = [d for d in node.decorator_list
                                       if not (isinstance(d, ast.Name)
                                               and d.id in ("classmethod", "staticmethod", "property"))]
            body.append(node)
        module = ast.Module(body=body, type_ignores=[])
        code = compile(module, str(self.root / relative), "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)
        exec(code, namespace)  # noqa: S102 - vLLM's own source, cut out of its wheel
        return namespace

    def _install_stubs(self):
        for name in ("vllm", "vllm.v1", "vllm.v1.core", "vllm.v1.attention",
                     "vllm.v1.attention.backends", "vllm.v1.hisparse", "vllm.utils",
                     "vllm.config", "vllm.platforms", "vllm.multimodal", "vllm.v1.worker",
                     "vllm.model_executor", "vllm.model_executor.layers",
                     "vllm.model_executor.layers.mamba", "vllm.model_executor.models",
                     "vllm.config.vllm"):
            sys.modules[name] = _package(name)
        sys.modules["torch"] = self.torch
        modules = {
            "vllm.logger": {"init_logger": _init_logger},
            "vllm.envs": {},
            "vllm.utils.torch_utils": {"get_dtype_size": lambda dtype: dtype.itemsize},
            "vllm.utils.mem_utils": {},
            "vllm.utils.hashing": {"xxhash": None, "xxhash_cbor": None},
            "vllm.utils.import_utils": {"resolve_obj_by_qualname": self._resolve_qualname},
            "vllm.multimodal.utils": {"get_mm_features_in_window": None},
            "vllm.v1.request": {"Request": object},
            "vllm.v1.utils": {"tensor_data": None},
            "vllm.v1.attention.backends.registry": {
                "MambaAttentionBackendEnum": enum.Enum("MambaAttentionBackendEnum",
                                                       "MAMBA1 MAMBA2 GDN_ATTN LINEAR")},
            "vllm.v1.attention.backend": {},
            # HiSparse is off: its hooks return what they return when it is off.
            "vllm.v1.hisparse.layout": {"get_hisparse_host_pool_bytes": lambda cfg: 0,
                                        "get_hisparse_kv_cache_config": None,
                                        "get_hisparse_kv_cache_groups": lambda cfg, spec: None},
            "vllm.config.cache": {"get_kv_cache_dtype_handler": lambda name: None},
            "vllm.platforms": {"current_platform": None},
        }
        for name, attributes in modules.items():
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
        config = sys.modules["vllm.config"]
        config.VllmConfig = type("VllmConfig", (), {})
        config.SpeculativeConfig = type("SpeculativeConfig", (), {})
        sys.modules["vllm.config.vllm"].set_current_vllm_config = \
            lambda cfg: contextlib.nullcontext()

    def _resolve_qualname(self, qualname):
        module, attribute = qualname.rsplit(".", 1)
        return getattr(sys.modules[module], attribute)

    def _cut_definitions(self):
        torch = self.torch
        backend_ns = self.cut("vllm/v1/attention/backend.py",
                              ["MultipleOf", "AttentionType", "AttentionCGSupport",
                               "AttentionBackend.get_supported_kernel_block_sizes",
                               "AttentionBackend.supports_block_size",
                               "AttentionBackend.get_preferred_block_size",
                               "AttentionBackend.customize_spec"],
                              {"dataclass": dataclasses.dataclass, "Enum": enum.Enum,
                               "__name__": "vllm.v1.attention.backend"})
        self.backend_ns = backend_ns
        sys.modules["vllm.v1.attention.backend"].__dict__.update(
            MultipleOf=backend_ns["MultipleOf"], AttentionType=backend_ns["AttentionType"],
            AttentionCGSupport=backend_ns["AttentionCGSupport"])
        torch_utils = self.cut("vllm/utils/torch_utils.py",
                               ["STR_DTYPE_TO_TORCH_DTYPE", "get_kv_cache_torch_dtype",
                                "kv_cache_dtype_str_to_dtype"], {"torch": torch})
        sys.modules["vllm.utils.torch_utils"].__dict__.update(torch_utils)
        dist = self.cut("vllm/distributed/utils.py", ["ensure_divisibility", "divide"], {})
        self.mamba_ns = self.cut(
            "vllm/model_executor/layers/mamba/mamba_utils.py",
            ["MambaStateDtypeCalculator", "MambaStateShapeCalculator"],
            {"torch": torch, "divide": dist["divide"],
             "is_conv_state_dim_first": lambda: False,
             "get_kv_cache_torch_dtype": torch_utils["get_kv_cache_torch_dtype"],
             "STR_DTYPE_TO_TORCH_DTYPE": torch_utils["STR_DTYPE_TO_TORCH_DTYPE"]})
        self.qwen3_next_ns = self.cut(
            "vllm/model_executor/models/qwen3_next.py",
            ["Qwen3NextForCausalLM.get_mamba_state_dtype_from_config",
             "Qwen3NextForCausalLM.get_mamba_state_shape_from_config"], dict(self.mamba_ns))
        self.gdn_ns = self.cut(
            "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
            ["_resolve_gdn_prefill_backend"], {"logger": _init_logger("gdn")})
        self.flashinfer_gdn_alignment = 64  # gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
        self.attention_ns = self.cut(
            "vllm/model_executor/layers/attention/attention.py",
            ["_largest_kernel_block_within", "Attention.get_kv_cache_spec"],
            {"AttentionType": backend_ns["AttentionType"],
             "get_kv_quant_mode": self.kvi.get_kv_quant_mode,
             "SlidingWindowSpec": self.kvi.SlidingWindowSpec,
             "FullAttentionSpec": self.kvi.FullAttentionSpec})
        self.mla_ns = self.cut(
            "vllm/model_executor/layers/attention/mla_attention.py",
            ["MLAAttention.get_kv_cache_spec"],
            {"kv_cache_dtype_str_to_dtype": torch_utils["kv_cache_dtype_str_to_dtype"],
             "get_kv_quant_mode": self.kvi.get_kv_quant_mode,
             "MLAAttentionSpec": self.kvi.MLAAttentionSpec,
             "SlidingWindowMLASpec": self.kvi.SlidingWindowMLASpec})
        self.mamba_base_ns = self.cut(
            "vllm/model_executor/layers/mamba/abstract.py",
            ["MambaBase.get_kv_cache_spec", "get_mamba_prefill_checkpoint_grid"],
            {"MambaSpec": self.kvi.MambaSpec, "lcm": __import__("math").lcm})
        self.worker_ns = self.cut("vllm/v1/worker/utils.py", ["customize_attention_spec"],
                                  {"MultipleOf": backend_ns["MultipleOf"],
                                   "replace": dataclasses.replace})
        registry = self.kvi.KVCacheSpecRegistry
        manager_names = {}
        tree = ast.parse((self.root / "vllm/v1/core/single_type_kv_cache_manager.py")
                         .read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.endswith("Manager"):
                manager_names[node.id] = type(node.id, (), {})
        register_ns = dict(manager_names, KVCacheSpecRegistry=registry,
                           KVCacheGroupRole=self.kvi.KVCacheGroupRole,
                           **{name: getattr(self.kvi, name) for name in dir(self.kvi)
                              if name.endswith("Spec")})
        self.cut("vllm/v1/core/single_type_kv_cache_manager.py",
                 ["register_all_kvcache_specs"], register_ns)
        # CUDA registers no custom specs (Platform.register_custom_kv_cache_specs is a no-op).
        sys.modules["vllm.platforms"].current_platform = types.SimpleNamespace(
            register_custom_kv_cache_specs=lambda config: None)
        register_ns["register_all_kvcache_specs"](None)
        self.platform_ns = self.cut(
            "vllm/platforms/interface.py",
            ["Platform.update_block_size_for_backend", "Platform._align_hybrid_block_size",
             "Platform._preferred_block_size_for_backends", "Platform._check_aligned_block_size"],
            {"logger": _init_logger("platform"), "math": __import__("math"),
             "itertools": __import__("itertools")})
        usage = self.cut("vllm/usage/usage_lib.py", ["UsageContext"], {"Enum": enum.Enum})
        sys.modules["vllm.usage"] = _package("vllm.usage")
        sys.modules["vllm.usage.usage_lib"] = types.ModuleType("vllm.usage.usage_lib")
        sys.modules["vllm.usage.usage_lib"].UsageContext = usage["UsageContext"]
        self.usage_context = usage["UsageContext"]
        self.args_ns = self.cut(
            "vllm/engine/arg_utils.py",
            ["EngineArgs.get_batch_defaults",
             "EngineArgs._set_default_max_num_seqs_and_batched_tokens_args"],
            {"GiB_bytes": GIB, "logger": _init_logger("args"),
             "SchedulerConfig": types.SimpleNamespace(DEFAULT_MAX_NUM_BATCHED_TOKENS=2048,
                                                      DEFAULT_MAX_NUM_SEQS=128)})
        compile_ns = self.cut("vllm/config/compilation.py", ["CUDAGraphMode"],
                              {"enum": enum})
        self.cudagraph_mode = compile_ns["CUDAGraphMode"]
        compile_ns.update(logger=_init_logger("compilation"))
        self.cut("vllm/config/compilation.py",
                 ["CompilationConfig.resolve_cudagraph_mode_and_sizes"], compile_ns)
        self.compile_ns = compile_ns
        vllm_cfg = self.cut("vllm/config/vllm.py",
                            ["VllmConfig.max_concurrent_batches", "VllmConfig.max_in_flight_tokens"],
                            {})
        self.max_concurrent_batches = vllm_cfg["max_concurrent_batches"]
        self.max_in_flight_tokens = vllm_cfg["max_in_flight_tokens"]
        rope_ns = self.cut("vllm/transformers_utils/config.py",
                           ["is_rope_parameters_nested", "iter_rope_parameters"],
                           {"ALLOWED_LAYER_TYPES": ("full_attention", "sliding_attention",
                                                    "chunked_attention", "linear_attention")})
        self.max_len_ns = self.cut("vllm/config/model.py", ["_get_and_verify_max_len"],
                                   {"iter_rope_parameters": rope_ns["iter_rope_parameters"],
                                    "logger": _init_logger("model")})
        self.mamba_verify = self.cut(
            "vllm/model_executor/models/config.py", ["MambaModelConfig.verify_and_update_config"],
            {"logger": _init_logger("models.config")})["verify_and_update_config"]
        self.qwen35_verify = self.cut(
            "vllm/model_executor/models/config.py",
            ["Qwen3_5ForConditionalGenerationConfig.verify_and_update_config"],
            {"logger": _init_logger("models.config")})["verify_and_update_config"]


# --- one case through vLLM -------------------------------------------------------------------

# The kernel block sizes the CUDA backends declare (get_supported_kernel_block_sizes in
# v1/attention/backends/*.py); which backend vLLM picks on a GPU is inferred, not run here.
BACKEND_BLOCK_SIZES = {
    "FLASH_ATTN": ("multiple", 16), "FLASHINFER": ("fixed", (16, 32, 64)),
    "TRITON_ATTN": ("multiple", 16), "FLASH_ATTN_MLA": ("multiple", 16),
    "FLASHMLA": ("fixed", (64,)), "FLASHINFER_MLA": ("fixed", (32, 64)),
    "CUTLASS_MLA": ("fixed", (128,)), "TRITON_MLA": ("multiple", 16),
}
GPUS = {  # capability, total memory (bytes), device name
    "h100": ((9, 0), int(79.2 * GIB), "NVIDIA H100 80GB HBM3"),
    "h200": ((9, 0), int(139.8 * GIB), "NVIDIA H200"),
    "b200": ((10, 0), int(178.4 * GIB), "NVIDIA B200"),
    "rtx-pro-6000": ((12, 0), int(95.6 * GIB),
                     "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
    "a100": ((8, 0), int(79.2 * GIB), "NVIDIA A100-SXM4-80GB"),
    "l40s": ((8, 9), int(44.4 * GIB), "NVIDIA L40S"),
}


class _Platform:
    """current_platform for one GPU model (CUDA runtime 13, as vLLM 0.33's wheel)."""

    def __init__(self, gpu):
        self.capability, self.memory, self.name = GPUS[gpu]

    def get_device_total_memory(self):
        return self.memory

    def get_device_name(self):
        return self.name

    def is_device_capability(self, capability):
        if isinstance(capability, int):
            capability = divmod(capability, 10)
        return tuple(self.capability) == tuple(capability)

    def is_device_capability_family(self, family):
        return self.capability[0] == family // 10

    def get_cuda_runtime_major(self):
        return 13

    def is_cuda(self):
        return True

    def is_xpu(self):
        return False

    def is_rocm(self):
        return False

    def is_tpu(self):
        return False

    def is_cpu(self):
        return False

    def check_max_model_len(self, max_model_len):
        return max_model_len

    def get_kv_cache_config_builder_cls(self, vllm_config):
        return "vllm.v1.core.kv_cache_planning.DefaultKVCacheConfigBuilder"


def _namespace(**fields):
    return types.SimpleNamespace(**fields)


def _backend_class(harness, name):
    kind, sizes = BACKEND_BLOCK_SIZES[name]
    multiple_of = harness.backend_ns["MultipleOf"]
    declared = [multiple_of(sizes)] if kind == "multiple" else list(sizes)
    methods = {name_: classmethod(harness.backend_ns[name_])
               for name_ in ("supports_block_size", "get_preferred_block_size", "customize_spec")}
    methods.update(
        get_supported_kernel_block_sizes=staticmethod(lambda kv_cache_spec=None: list(declared)),
        get_name=staticmethod(lambda: name), is_ssm=staticmethod(lambda: False),
        is_mla=staticmethod(lambda: name.endswith("_MLA") or name == "FLASHMLA"))
    return type(name, (), methods)


def run_case(harness: Harness, truth: dict, options: dict) -> dict:
    """vLLM's numbers for one case; ``truth`` is the layer stack the generator built."""
    torch, kvi, planning = harness.torch, harness.kvi, harness.planning
    platform = _Platform(options["gpu"])
    sys.modules["vllm.platforms"].current_platform = platform
    for namespace in (harness.args_ns, harness.gdn_ns, harness.max_len_ns):
        namespace["current_platform"] = platform
    tp = options["tensor_parallel_size"]
    model_dtype = getattr(torch, truth["dtype"])
    envs = sys.modules["vllm.envs"]
    envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN = options["allow_long_max_model_len"]
    envs.VLLM_USE_V2_MODEL_RUNNER = None
    harness.max_len_ns["envs"] = envs

    # ModelConfig: the max length (config/model.py _get_and_verify_max_len).
    hf_config = _namespace(model_type=truth["model_type"],
                           rope_parameters=truth.get("rope_parameters"),
                           model_max_length=None)
    arch = _namespace(derived_max_model_len_and_key=(truth["derived_len"], truth["len_key"]))
    requested = options["max_model_len"]
    boot_errors = []
    try:
        max_model_len = harness.max_len_ns["_get_and_verify_max_len"](
            hf_config, arch, None, -1 if requested == "auto" else requested, False, None)
    except ValueError as exc:
        boot_errors.append(str(exc))
        max_model_len = requested
    auto = requested == "auto"

    attention_layers = [layer for layer in truth["layers"] if layer["kind"] != "linear"]
    reference = attention_layers[0]
    is_hybrid = any(layer["kind"] == "linear" for layer in truth["layers"])
    use_mla = reference["kind"] == "mla"
    cache_dtype = options["kv_cache_dtype"]
    model_config = _namespace(
        max_model_len=max_model_len, original_max_model_len=-1 if auto else max_model_len,
        dtype=model_dtype, use_mla=use_mla, is_hybrid=is_hybrid, architecture="Model",
        supports_kv_cache_grouping=False, is_multimodal_model=False,
        hf_text_config=_namespace(linear_key_head_dim=(truth.get("linear") or {}).get("dk"),
                                  linear_value_head_dim=(truth.get("linear") or {}).get("dv"),
                                  mamba_ssm_dtype=truth.get("ssm_dtype")),
        get_num_kv_heads=lambda parallel: 1 if use_mla else max(1, reference["kv_heads"] // tp),
        get_head_size=lambda: reference["head_size"],
        get_num_attention_heads=lambda parallel: truth["heads"] // tp)
    cache_config = _namespace(
        block_size=options["block_size"] or 16,
        user_specified_block_size=options["block_size"] is not None, cache_dtype=cache_dtype,
        enable_prefix_caching=options["enable_prefix_caching"], mamba_cache_mode="none",
        mamba_block_size=None, mamba_page_size_padded=None, kv_cache_dtype_skip_layers=None,
        mamba_cache_dtype=options["mamba_cache_dtype"],
        mamba_ssm_cache_dtype=options["mamba_ssm_cache_dtype"], use_replayssm=False,
        skip_page_size_padded=None, prefix_match_unit=None, num_gpu_blocks_override=None,
        prefix_cache_retention_interval=None,
        get_resolved_kv_cache_layout=lambda: kvi.KVCacheLayout.LBNHC)
    parallel_config = _namespace(tensor_parallel_size=tp, pipeline_parallel_size=1,
                                 decode_context_parallel_size=1, use_batched_dp_moe=False)
    num_spec = options["num_speculative_tokens"]
    speculative = _namespace(num_speculative_tokens=num_spec, method="mtp",
                             use_eagle=lambda: True, use_multi_module_mtp=lambda: False,
                             use_eagle_block_drop=lambda: False) if num_spec else None

    # EngineArgs defaults for `vllm serve` (max_num_batched_tokens, max_num_seqs).
    args = _namespace(pipeline_parallel_size=1, tensor_parallel_size=tp,
                      max_num_batched_tokens=options["max_num_batched_tokens"],
                      max_num_seqs=options["max_num_seqs"], performance_mode=None,
                      enable_chunked_prefill=True)
    args.get_batch_defaults = lambda world: harness.args_ns["get_batch_defaults"](None, world)
    harness.args_ns["_set_default_max_num_seqs_and_batched_tokens_args"](
        args, harness.usage_context.OPENAI_API_SERVER,
        _namespace(max_model_len=max_model_len if not auto else truth["derived_len"],
                   is_multimodal_model=False), parallel_config)

    scheduler_config = _namespace(max_num_batched_tokens=args.max_num_batched_tokens,
                                  max_num_seqs=args.max_num_seqs, async_scheduling=True,
                                  enable_chunked_prefill=True, max_num_encoder_input_tokens=0,
                                  disable_hybrid_kv_cache_manager=(
                                      options["disable_hybrid_kv_cache_manager"]
                                      or truth.get("chunked_local", False)))
    vllm_config = _namespace(model_config=model_config, cache_config=cache_config,
                             parallel_config=parallel_config, scheduler_config=scheduler_config,
                             speculative_config=speculative, num_speculative_tokens=num_spec,
                             attention_config=_namespace(hisparse_config=None),
                             device_config=_namespace(device_type="cuda"),
                             use_v2_model_runner=True, num_prefill_lookahead_tokens=(
                                 1 if num_spec else 0))
    vllm_config.max_concurrent_batches = harness.max_concurrent_batches(vllm_config)
    vllm_config.max_in_flight_tokens = harness.max_in_flight_tokens(vllm_config)

    if is_hybrid:  # MambaModelConfig / Qwen3_5...Config.verify_and_update_config
        harness.mamba_verify(None, vllm_config)
        if truth.get("ssm_dtype") is not None:
            harness.qwen35_verify(vllm_config)

    # Block size: Platform.update_block_size_for_backend with the inferred backend.
    backend = _backend_class(harness, options["backend"])
    linear = truth.get("linear")
    # GatedDeltaNet.__init__: FlashInfer's GDN prefill exports 64-token checkpoints in align mode.
    gdn_alignment = None
    if is_hybrid:
        gdn_backend = harness.gdn_ns["_resolve_gdn_prefill_backend"](
            _namespace(additional_config={}, model_config=model_config))[1]
        if cache_config.mamba_cache_mode == "align" and gdn_backend == "flashinfer":
            gdn_alignment = harness.flashinfer_gdn_alignment
    abstract = sys.modules.setdefault("vllm.model_executor.layers.mamba.abstract",
                                      types.ModuleType("vllm.model_executor.layers.mamba.abstract"))

    def checkpoint_alignment(config):
        """get_mamba_prefill_checkpoint_alignment over GDN layers that are all alike."""
        return gdn_alignment

    abstract.get_mamba_prefill_checkpoint_alignment = checkpoint_alignment
    harness.mamba_base_ns["get_mamba_prefill_checkpoint_alignment"] = checkpoint_alignment
    model_cls = type("Model", (), {
        "get_mamba_state_shape_from_config": classmethod(
            harness.qwen3_next_ns["get_mamba_state_shape_from_config"]),
        "get_mamba_state_dtype_from_config": classmethod(
            harness.qwen3_next_ns["get_mamba_state_dtype_from_config"])})
    hf_text = model_config.hf_text_config
    if linear:
        hf_text.linear_num_key_heads, hf_text.linear_num_value_heads = linear["nk"], linear["nv"]
        hf_text.linear_conv_kernel_dim = linear["kernel"]
    sys.modules["vllm.model_executor.models"].ModelRegistry = _namespace(
        resolve_model_cls=lambda arch, model_config=None: (model_cls, arch))
    sys.modules["vllm.config.cache"].CacheConfig = _namespace(DEFAULT_BLOCK_SIZE=16)
    platform_cls = type("Platform", (), {
        name: classmethod(harness.platform_ns[name]) for name in (
            "update_block_size_for_backend", "_align_hybrid_block_size",
            "_preferred_block_size_for_backends", "_check_aligned_block_size")})
    platform_cls._find_non_ssm_backends = classmethod(lambda cls, cfg: [backend])
    platform_cls._align_heterogeneous_kv_block_size = classmethod(lambda cls, cfg, b: None)
    platform_cls.update_block_size_for_backend(vllm_config)

    # Per-layer specs, as the model's attention layers report them (attn_utils.get_kv_cache_spec).
    specs = {}
    layers = list(truth["layers"])
    if num_spec:
        layers += [dict(reference, draft=True)] * truth["mtp_layers"]
    for index, layer in enumerate(layers):
        if layer.get("shared"):
            continue
        name = ("mtp.layers.%d" if layer.get("draft") else "model.layers.%d") % index
        if layer["kind"] == "linear":
            spec = _mamba_spec(harness, vllm_config, model_cls, gdn_alignment)
        elif layer["kind"] == "mla":
            this = _namespace(kv_cache_dtype=cache_dtype, head_size=layer["head_size"],
                              sliding_window=None, topk_buffer_width=None, indexer=None,
                              non_causal_multi_token_decode=False)
            spec = harness.mla_ns["get_kv_cache_spec"](this, vllm_config)
        else:
            this = _namespace(attn_type=harness.backend_ns["AttentionType"].DECODER,
                              kv_cache_dtype=cache_dtype, sliding_window=layer.get("window"),
                              attn_backend=backend, num_kv_heads=max(1, layer["kv_heads"] // tp),
                              head_size=layer["head_size"], head_size_v=layer["head_size"],
                              kv_cache_torch_dtype=sys.modules["vllm.utils.torch_utils"]
                              .kv_cache_dtype_str_to_dtype(cache_dtype, model_config))
            spec = harness.attention_ns["get_kv_cache_spec"](this, vllm_config)
        if isinstance(spec, kvi.AttentionSpec):
            spec = harness.worker_ns["customize_attention_spec"](backend, spec)
        if layer.get("draft"):
            spec = dataclasses.replace(spec, is_draft=True)
        specs[name] = spec

    budget = options["kv_cache_memory_bytes"]
    workers = [dict(specs) for rank in range(tp)]
    groups = planning.get_global_kv_cache_groups(vllm_config, workers)
    builder = sys.modules["vllm.v1.core.kv_cache_config_builder"] \
        .get_kv_cache_config_builder(vllm_config)
    configs = None
    if not boot_errors:
        try:
            configs = planning.get_kv_cache_configs(vllm_config, workers, [budget] * tp, groups)
        except ValueError as exc:
            boot_errors.append(str(exc))
    if configs is None:  # the numbers vLLM would have printed had the check passed
        bytes_per_block = planning._pool_bytes_per_block_from_builder(builder, vllm_config,
                                                                      groups)
        configs = [builder.get_kv_cache_config_from_groups(
            vllm_config, groups, budget // bytes_per_block)] * tp
    scheduler = harness.utils.generate_scheduler_kv_cache_config(configs)
    participating = [g.kv_cache_spec.block_size for g in scheduler.kv_cache_groups
                     if g.kv_cache_spec.prefix_cacheable]
    block_size = min(participating or [g.kv_cache_spec.block_size
                                       for g in scheduler.kv_cache_groups])
    tokens, concurrency = harness.utils.get_kv_cache_capacity(vllm_config, scheduler)
    if not boot_errors:
        error = _mamba_graph_check(harness, configs[0], args.max_num_seqs, num_spec,
                                   options["enforce_eager"])
        if error:
            boot_errors.append(error)
    return {
        "block_size": block_size,
        "bytes_per_block": planning._pool_bytes_per_block(vllm_config, groups),
        "num_blocks": configs[0].num_blocks,
        "kv_cache_tokens": tokens,
        "max_concurrency_exact": concurrency,
        "max_model_len": vllm_config.model_config.max_model_len,
        "boot_ok": not boot_errors,
        "boot_error": boot_errors[0] if boot_errors else None,
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "groups": len(groups),
    }


def _mamba_spec(harness, vllm_config, model_cls, gdn_alignment):
    """MambaBase.get_kv_cache_spec for a GDN layer, then the GDN layer's checkpoint export
    (qwen_gdn_linear_attn.py: num_prefill_checkpoint_blocks=1 on the prefix-cache grid)."""
    this = _namespace(
        get_state_shape=lambda: model_cls.get_mamba_state_shape_from_config(vllm_config),
        get_state_dtype=lambda: model_cls.get_mamba_state_dtype_from_config(vllm_config),
        mamba_type=sys.modules["vllm.v1.attention.backends.registry"]
        .MambaAttentionBackendEnum.GDN_ATTN, is_kv_cache_tp_replicated=False)
    spec = harness.mamba_base_ns["get_kv_cache_spec"](this, vllm_config)
    if gdn_alignment is not None:
        grid = harness.mamba_base_ns["get_mamba_prefill_checkpoint_grid"](vllm_config)
        spec = dataclasses.replace(spec, num_prefill_checkpoint_blocks=1,
                                   prefill_checkpoint_alignment=grid)
    return spec


def _mamba_graph_check(harness, kv_cache_config, max_num_seqs, num_spec, enforce_eager):
    """CompilationConfig.resolve_cudagraph_mode_and_sizes with the GDN builder's support
    (UNIFORM_BATCH); FULL_AND_PIECEWISE for hybrid models, NONE with --enforce-eager."""
    modes = harness.cudagraph_mode
    this = _namespace(cudagraph_mode=modes.NONE if enforce_eager else modes.FULL_AND_PIECEWISE,
                      splitting_ops_contain_attention=lambda: True, mode=None,
                      use_inductor_graph_partition=False,
                      adjust_cudagraph_sizes_for_spec_decode=lambda n: None)
    support = harness.backend_ns["AttentionCGSupport"]
    harness.compile_ns["CUDAGraphMode"] = modes
    sys.modules["vllm.v1.attention.backend"].AttentionCGSupport = support
    try:
        harness.compile_ns["resolve_cudagraph_mode_and_sizes"](
            this, support.UNIFORM_BATCH, "GDN_ATTN", uniform_decode_query_len=1 + num_spec,
            use_v2_model_runner=True, kv_cache_config=kv_cache_config,
            max_num_reqs=max_num_seqs, is_profiling=False)
    except ValueError as exc:
        return str(exc)
    return None
