"""A stand-in for vLLM 0.33.0 where llmfleet.seats looks: its CLI, boot log, GPU memory, HTTP
API and failure modes. Standard library only: it runs in an image holding nothing but Debian's
python3. See ../README.md for what it models and the FAKE_VLLM_* knobs."""

VERSION = "0.33.0"
