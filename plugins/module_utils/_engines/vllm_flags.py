# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The flags ``vllm serve`` takes in each modelled release, and the parser names its
``--tool-call-parser`` and ``--reasoning-parser`` take, read from that release's own source by
tests/differential/vllm_cli_flags.py (which writes this file; do not edit it by hand).

``FLAGS`` and each of ``PARSERS`` hold ``(first, changes)``: the oldest release's names, then
each later release's additions and removals against the one before it. Pure data."""

from __future__ import annotations

FLAGS = (
    ('0.10.2', (
        '--additional-config',
        '--allow-credentials',
        '--allowed-headers',
        '--allowed-local-media-path',
        '--allowed-methods',
        '--allowed-origins',
        '--api-key',
        '--api-server-count',
        '--async-scheduling',
        '--block-size',
        '--calculate-kv-scales',
        '--chat-template',
        '--chat-template-content-format',
        '--code-revision',
        '--collect-detailed-traces',
        '--compilation-config',
        '--config',
        '--config-format',
        '--convert',
        '--cpu-offload-gb',
        '--cuda-graph-sizes',
        '--data-parallel-address',
        '--data-parallel-backend',
        '--data-parallel-hybrid-lb',
        '--data-parallel-rank',
        '--data-parallel-rpc-port',
        '--data-parallel-size',
        '--data-parallel-size-local',
        '--data-parallel-start-rank',
        '--decode-context-parallel-size',
        '--default-mm-loras',
        '--disable-async-output-proc',
        '--disable-cascade-attn',
        '--disable-chunked-mm-input',
        '--disable-custom-all-reduce',
        '--disable-fastapi-docs',
        '--disable-frontend-multiprocessing',
        '--disable-hybrid-kv-cache-manager',
        '--disable-log-requests',
        '--disable-log-stats',
        '--disable-mm-preprocessor-cache',
        '--disable-sliding-window',
        '--disable-uvicorn-access-log',
        '--distributed-executor-backend',
        '--download-dir',
        '--dtype',
        '--enable-auto-tool-choice',
        '--enable-chunked-prefill',
        '--enable-eplb',
        '--enable-expert-parallel',
        '--enable-force-include-usage',
        '--enable-log-outputs',
        '--enable-log-requests',
        '--enable-lora',
        '--enable-lora-bias',
        '--enable-multimodal-encoder-data-parallel',
        '--enable-prefix-caching',
        '--enable-prompt-embeds',
        '--enable-prompt-tokens-details',
        '--enable-request-id-headers',
        '--enable-server-load-tracking',
        '--enable-sleep-mode',
        '--enable-ssl-refresh',
        '--enable-tokenizer-info-endpoint',
        '--enforce-eager',
        '--eplb-config',
        '--eplb-log-balancedness',
        '--eplb-step-interval',
        '--eplb-window-size',
        '--exclude-tools-when-tool-choice-none',
        '--fully-sharded-loras',
        '--generation-config',
        '--gpu-memory-utilization',
        '--guided-decoding-backend',
        '--guided-decoding-disable-additional-properties',
        '--guided-decoding-disable-any-whitespace',
        '--guided-decoding-disable-fallback',
        '--h11-max-header-count',
        '--h11-max-incomplete-event-size',
        '--headless',
        '--hf-config-path',
        '--hf-overrides',
        '--hf-token',
        '--host',
        '--ignore-patterns',
        '--interleave-mm-strings',
        '--io-processor-plugin',
        '--kv-cache-dtype',
        '--kv-cache-memory-bytes',
        '--kv-events-config',
        '--kv-sharing-fast-prefill',
        '--kv-transfer-config',
        '--limit-mm-per-prompt',
        '--load-format',
        '--log-config-file',
        '--log-error-stack',
        '--logits-processor-pattern',
        '--logits-processors',
        '--logprobs-mode',
        '--long-prefill-token-threshold',
        '--lora-dtype',
        '--lora-extra-vocab-size',
        '--lora-modules',
        '--mamba-cache-dtype',
        '--mamba-ssm-cache-dtype',
        '--max-cpu-loras',
        '--max-log-len',
        '--max-logprobs',
        '--max-long-partial-prefills',
        '--max-lora-rank',
        '--max-loras',
        '--max-model-len',
        '--max-num-batched-tokens',
        '--max-num-partial-prefills',
        '--max-num-seqs',
        '--max-parallel-loading-workers',
        '--max-seq-len-to-capture',
        '--media-io-kwargs',
        '--middleware',
        '--mm-encoder-tp-mode',
        '--mm-processor-cache-gb',
        '--mm-processor-kwargs',
        '--model',
        '--model-impl',
        '--model-loader-extra-config',
        '--num-gpu-blocks-override',
        '--num-lookahead-slots',
        '--num-redundant-experts',
        '--otlp-traces-endpoint',
        '--override-attention-dtype',
        '--override-generation-config',
        '--override-pooler-config',
        '--pipeline-parallel-size',
        '--port',
        '--preemption-mode',
        '--prefix-caching-hash-algo',
        '--pt-load-map-location',
        '--quantization',
        '--ray-workers-use-nsight',
        '--reasoning-parser',
        '--response-role',
        '--return-tokens-as-token-ids',
        '--revision',
        '--root-path',
        '--rope-scaling',
        '--rope-theta',
        '--runner',
        '--safetensors-load-strategy',
        '--scheduler-cls',
        '--scheduler-delay-factor',
        '--scheduling-policy',
        '--seed',
        '--served-model-name',
        '--show-hidden-metrics-for-version',
        '--skip-mm-profiling',
        '--skip-tokenizer-init',
        '--speculative-config',
        '--ssl-ca-certs',
        '--ssl-cert-reqs',
        '--ssl-certfile',
        '--ssl-keyfile',
        '--swap-space',
        '--task',
        '--tensor-parallel-size',
        '--tokenizer',
        '--tokenizer-mode',
        '--tokenizer-revision',
        '--tool-call-parser',
        '--tool-parser-plugin',
        '--tool-server',
        '--trust-remote-code',
        '--uds',
        '--use-tqdm-on-load',
        '--uvicorn-log-level',
        '--worker-cls',
        '--worker-extension-cls',
        '-O',
        '-asc',
        '-dcp',
        '-dp',
        '-dpa',
        '-dpb',
        '-dpl',
        '-dpn',
        '-dpp',
        '-dpr',
        '-pp',
        '-q',
        '-tp',
    )), (
        ('0.11.2', (
            '--aggregate-engine-logging',
            '--all2all-backend',
            '--allowed-media-domains',
            '--cudagraph-capture-sizes',
            '--data-parallel-external-lb',
            '--dbo-decode-token-threshold',
            '--dbo-prefill-token-threshold',
            '--dcp-kv-cache-interleave-size',
            '--disable-nccl-for-dp-synchronization',
            '--ec-transfer-config',
            '--enable-dbo',
            '--enable-mm-embeds',
            '--expert-placement-strategy',
            '--kv-offloading-backend',
            '--kv-offloading-size',
            '--mamba-block-size',
            '--master-addr',
            '--master-port',
            '--max-cudagraph-capture-size',
            '--mm-encoder-attn-backend',
            '--mm-processor-cache-type',
            '--mm-shm-cache-max-object-size-mb',
            '--nnodes',
            '--node-rank',
            '--pooler-config',
            '--reasoning-parser-plugin',
            '--stream-interval',
            '--structured-outputs-config',
            '--tokens-only',
            '--trust-request-chat-template',
            '--video-pruning-rate',
            '-dpe',
            '-dph',
            '-n',
            '-r',
        ), (
            '--disable-async-output-proc',
            '--enable-lora-bias',
            '--guided-decoding-backend',
            '--guided-decoding-disable-additional-properties',
            '--guided-decoding-disable-any-whitespace',
            '--guided-decoding-disable-fallback',
            '--max-seq-len-to-capture',
            '--preemption-mode',
            '--rope-scaling',
            '--rope-theta',
            '--scheduler-delay-factor',
        )),
        ('0.12.0', (
            '--cp-kv-cache-interleave-size',
            '--kv-cache-metrics',
            '--kv-cache-metrics-sample',
            '--optimization-level',
            '--prefill-context-parallel-size',
            '-cc',
            '-pcp',
        ), (
            '--eplb-log-balancedness',
            '--eplb-step-interval',
            '--eplb-window-size',
            '--lora-extra-vocab-size',
            '--num-lookahead-slots',
            '--num-redundant-experts',
            '--override-pooler-config',
            '-O',
        )),
        ('0.13.0', (
            '--attention-backend',
            '--attention-config',
            '--cudagraph-metrics',
            '--enable-layerwise-nvtx-tracing',
            '--profiler-config',
            '-ac',
        ), (
            '--cuda-graph-sizes',
            '--disable-mm-preprocessor-cache',
            '--enable-multimodal-encoder-data-parallel',
            '--task',
        )),
        ('0.14.1', (
            '--allow-deprecated-quantization',
            '--default-chat-template-kwargs',
            '--enable-log-deltas',
            '--enable-logging-iteration-details',
            '--enable-mfu-metrics',
            '--enable-offline-docs',
            '--enable-return-routed-experts',
            '--enable-tower-connector-lora',
            '--ubatch-size',
            '-ep',
        ), (
        )),
        ('0.15.1', (
            '--mamba-cache-mode',
            '--mm-encoder-only',
            '--ssl-ciphers',
        ), (
        )),
        ('0.16.0', (
            '--disable-access-log-for-endpoints',
            '--enable-flashinfer-autotune',
            '--kernel-config',
            '--specialize-active-lora',
            '--weight-transfer-config',
        ), (
        )),
        ('0.17.1', (
            '--cpu-offload-params',
            '--enable-elastic-ep',
            '--fail-on-environ-validation',
            '--language-model-only',
            '--moe-backend',
            '--offload-backend',
            '--offload-group-size',
            '--offload-num-in-group',
            '--offload-params',
            '--offload-prefetch-step',
            '--performance-mode',
            '--use-gpu-for-pooling-score',
        ), (
            '--disable-log-requests',
            '--logits-processor-pattern',
        )),
        ('0.18.1', (
            '--dcp-comm-backend',
            '--distributed-timeout-seconds',
            '--enable-ep-weight-filter',
            '--gdn-prefill-backend',
            '--shutdown-timeout',
        ), (
            '--swap-space',
            '--use-gpu-for-pooling-score',
        )),
        ('0.19.1', (
            '--kv-cache-dtype-skip-layers',
            '--lora-target-modules',
            '--mm-tensor-ipc',
            '--reasoning-config',
            '--renderer-num-workers',
            '--scheduler-reserve-full-isl',
            '-sc',
        ), (
            '--disable-frontend-multiprocessing',
        )),
        ('0.20.2', (
            '--enable-flash-late-interaction',
            '--enable-mamba-cache-stochastic-rounding',
            '--grpc',
            '--ir-op-priority',
            '--mamba-backend',
            '--mamba-cache-philox-rounds',
            '--numa-bind',
            '--numa-bind-cpus',
            '--numa-bind-nodes',
        ), (
        )),
        ('0.21.0', (
            '--fingerprint-mode',
            '--fingerprint-value',
            '--mm-encoder-attn-dtype',
            '--mm-encoder-fp8-scale-path',
            '--mm-encoder-fp8-scale-save-margin',
            '--mm-encoder-fp8-scale-save-path',
            '--safetensors-prefetch-block-size',
            '--safetensors-prefetch-num-threads',
        ), (
        )),
        ('0.22.1', (
            '--cpu-distributed-timeout-seconds',
            '--data-parallel-multi-port-external-lb',
            '--data-parallel-supervisor-port',
            '--dp-supervisor-probe-failure-threshold',
            '--dp-supervisor-probe-interval-s',
            '--dp-supervisor-probe-timeout-s',
            '--enable-cumem-allocator',
            '--enable-mixed-moe-lora-format',
            '--linear-backend',
            '--quantization-config',
            '--spec-method',
            '--spec-model',
            '--spec-tokens',
            '--use-fp64-gumbel',
            '-dpm',
        ), (
        )),
        ('0.23.0', (
        ), (
        )),
        ('0.24.0', (
            '--device-ids',
            '--diffusion-config',
            '--jit-monitor-verbose',
            '--prefill-schedule-interval',
            '--watermark',
            '-dc',
        ), (
        )),
        ('0.25.1', (
            '--enable-per-request-metrics',
            '--jit-monitor-mode',
            '--mm-ipc-gpu-memory-gb',
            '--model-class-overrides',
        ), (
        )),
        ('0.26.0', (
            '--enable-bf16x3-router-gemm',
            '--enable-moe-shared-loras',
            '--max-num-scheduled-tokens',
            '--prefix-match-unit',
        ), (
        )),
        ('0.27.1', (
            '--cohere-format',
            '--cohere-is-reasoning-model',
            '--enable-fault-tolerance',
            '--fault-tolerance-config',
            '--kda-prefill-backend',
            '--mamba-ssu-algorithm',
            '--mm-hasher-algorithm',
            '--replayssm-buffer-len',
            '--use-replayssm',
            '--video-pruning-method',
        ), (
            '--max-long-partial-prefills',
            '--max-num-partial-prefills',
        )),
        ('0.28.0', (
            '--ec-manager-config',
            '--mm-device-do-normalize',
            '--mm-processor-device',
            '--return-sampling-mask',
        ), (
            '--calculate-kv-scales',
            '--override-attention-dtype',
        )),
        ('0.29.0', (
            '--dcp-q-replicate',
            '--enable-batch-sharded-sampling',
            '--enable-trace-replay',
            '--max-num-queued-reqs',
            '--max-num-queued-tokens',
            '--per-request-spec-decode-metrics',
            '--prefix-cache-retention-interval',
            '--sse-keep-alive-interval',
        ), (
        )),
        ('0.30.0', (
            '--dp-sync-interval',
            '--elastic-ep-max-dp-size',
            '--enable-mamba-fine-grained-prefix-cache',
            '--enable-nccl-comm-suspend',
            '--enable-scale-out',
            '--engram-config',
            '--kda-decode-backend',
            '--sparse-indexer-topk-backend',
            '--watermark-config',
        ), (
            '--enable-bf16x3-router-gemm',
        )),
        ('0.31.0', (
            '--anthropic-disabled-thinking-effort',
            '--aux-output-config',
            '--device-memory-utilization',
            '--enable-mamba-shared-prefix-checkpoint',
            '--log-level',
            '--logging-config',
            '--long-prefill-token-threshold-adaptive',
            '--max-lora-cls-labels',
            '--max-num-active-seqs',
            '--sleep-preserve-parameter-names',
            '--swa-bounded-replay',
            '--tool-strict-level',
            '--trust-request-mm-kwargs',
        ), (
            '--enable-mamba-fine-grained-prefix-cache',
        )),
        ('0.32.0', (
            '--custom-histogram-buckets',
            '--enable-hc-sp',
            '--enable-shm-tensor-arena',
            '--grpc-port',
            '--sleep-mode-offload-cudagraph',
        ), (
        )),
        ('0.33.0', (
            '--monokernel',
            '--reasoning-effort-map',
            '--sleep-mode-backend',
            '--watchdog-config',
        ), (
        )),
    )
)

PARSERS = {
    'tool_call_parser': (
        ('0.10.2', (
            'deepseek_v3',
            'deepseek_v31',
            'glm45',
            'granite',
            'granite-20b-fc',
            'hermes',
            'hunyuan_a13b',
            'internlm',
            'jamba',
            'kimi_k2',
            'llama3_json',
            'llama4_json',
            'llama4_pythonic',
            'minimax',
            'mistral',
            'openai',
            'phi4_mini_json',
            'pythonic',
            'qwen3_coder',
            'seed_oss',
            'step3',
            'xlam',
        )), (
            ('0.11.2', (
                'ernie45',
                'longcat',
                'minimax_m2',
                'olmo3',
                'qwen3_xml',
            ), (
            )),
            ('0.12.0', (
            ), (
            )),
            ('0.13.0', (
                'deepseek_v32',
                'gigachat3',
            ), (
            )),
            ('0.14.1', (
                'functiongemma',
                'glm47',
            ), (
            )),
            ('0.15.1', (
                'step3p5',
            ), (
            )),
            ('0.16.0', (
            ), (
            )),
            ('0.17.1', (
            ), (
            )),
            ('0.18.1', (
                'granite4',
            ), (
            )),
            ('0.19.1', (
                'gemma4',
            ), (
            )),
            ('0.20.2', (
                'deepseek_v4',
                'hy_v3',
                'mimo',
            ), (
            )),
            ('0.21.0', (
                'cohere_command3',
                'cohere_command4',
                'lfm2',
                'poolside_v1',
            ), (
            )),
            ('0.22.1', (
                'apertus',
            ), (
            )),
            ('0.23.0', (
                'minicpm5',
            ), (
            )),
            ('0.24.0', (
                'minimax_m3',
            ), (
                'minimax',
            )),
            ('0.25.1', (
            ), (
            )),
            ('0.26.0', (
                'inkling',
            ), (
            )),
            ('0.27.1', (
                'kimi_k3',
            ), (
            )),
            ('0.28.0', (
                'dots',
                'ling3',
                'muse_glimmer',
            ), (
            )),
            ('0.29.0', (
                'hy_v4',
            ), (
            )),
            ('0.30.0', (
                'deepseek_v41',
                'k2_horizon',
            ), (
            )),
            ('0.31.0', (
            ), (
            )),
            ('0.32.0', (
                'hf',
                'plamo3',
                'qwen3_json',
            ), (
            )),
            ('0.33.0', (
                'beam',
                'muse',
                'musespark1x',
                'step5',
            ), (
            )),
        )
    ),
    'reasoning_parser': (
        ('0.10.2', (
            'deepseek_r1',
            'glm45',
            'granite',
            'hunyuan_a13b',
            'mistral',
            'openai_gptoss',
            'qwen3',
            'step3',
        )), (
            ('0.11.2', (
                'deepseek_v3',
                'ernie45',
                'kimi_k2',
                'minimax_m2',
                'minimax_m2_append_think',
                'olmo3',
                'seed_oss',
            ), (
            )),
            ('0.12.0', (
            ), (
            )),
            ('0.13.0', (
                'holo2',
            ), (
            )),
            ('0.14.1', (
            ), (
            )),
            ('0.15.1', (
                'step3p5',
            ), (
            )),
            ('0.16.0', (
            ), (
            )),
            ('0.17.1', (
                'nemotron_v3',
            ), (
            )),
            ('0.18.1', (
            ), (
            )),
            ('0.19.1', (
                'gemma4',
            ), (
            )),
            ('0.20.2', (
                'deepseek_v4',
                'hy_v3',
                'mimo',
            ), (
            )),
            ('0.21.0', (
                'cohere_command3',
                'cohere_command4',
                'poolside_v1',
            ), (
            )),
            ('0.22.1', (
            ), (
            )),
            ('0.23.0', (
            ), (
            )),
            ('0.24.0', (
                'glm47',
                'minimax_m3',
            ), (
            )),
            ('0.25.1', (
            ), (
            )),
            ('0.26.0', (
                'inkling',
            ), (
            )),
            ('0.27.1', (
                'kimi_k3',
            ), (
            )),
            ('0.28.0', (
                'ling3',
                'muse_glimmer',
            ), (
            )),
            ('0.29.0', (
                'hy_v4',
            ), (
            )),
            ('0.30.0', (
                'deepseek_v41',
                'k2_horizon',
            ), (
            )),
            ('0.31.0', (
                'granite_thinking_parser',
            ), (
            )),
            ('0.32.0', (
                'hf',
                'minicpmv',
                'plamo3',
            ), (
            )),
            ('0.33.0', (
                'beam',
                'muse',
                'musespark1x',
                'step5',
            ), (
            )),
        )
    ),
}
