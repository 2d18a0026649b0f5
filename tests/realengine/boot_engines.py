"""Boot the real vLLM's engine once per case in one process, as ``vllm serve`` boots it: the same
engine arguments and usage context, the same KV planning and the same log lines, without the API server and its
two child processes (each would import vLLM again: half a minute a boot on two cores).

Run by the real engine's own python (.build/real-vllm/venv) with VLLM_ENABLE_V1_MULTIPROCESSING=0:

    python boot_engines.py '[{"id": "gqa", "model": DIR, "max_model_len": 2048,
                              "kv_cache_memory_bytes": 67108864, "block_size": 64}, ...]'

Prints ``==== boot ID`` before each case's log; a refusal prints its traceback there, as the
server's log would.
"""

import gc
import json
import sys
import traceback

from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
from vllm.v1.engine.llm_engine import LLMEngine


def main(cases):
    for case in cases:
        engine_args = {key: value for key, value in case.items() if key != "id"}
        print("==== boot %s" % case["id"], flush=True)
        engine = None
        try:
            # the server's usage context: its batch defaults size a sliding window's pages
            engine = LLMEngine.from_engine_args(
                EngineArgs(enforce_eager=True, distributed_executor_backend="uni", **engine_args),
                usage_context=UsageContext.OPENAI_API_SERVER)
        except Exception:  # pylint: disable=broad-except  # vLLM's refusal is what the case reads
            traceback.print_exc(file=sys.stdout)
        finally:
            del engine  # the next case's engine starts from nothing held
            destroy_model_parallel()
            destroy_distributed_environment()
            gc.collect()
        sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
