"""`vllm serve`: the API server process. It logs what vLLM 0.33's API server logs, forks the
engine, and serves vLLM's HTTP API (stdlib http.server, one thread per connection):

GET /health (503 until ready and once the engine is dead), /v1/models, /metrics, /version,
/ping; POST /v1/chat/completions (JSON or SSE). Like vLLM, it exits 0 a few seconds after its
engine dies (the watchdog in entrypoints/launchers/launcher.py), and on SIGTERM.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid

from . import VERSION, cli
from .chat import Generation, RequestError, prompt_tokens
from .engine import Settings, start_engine
from .gpu import Driver, NoDevice
from .knobs import KnobError, Knobs, seat_environment
from .kv import Layout, NotModelled, capability
from .logs import Logger, stderr, stdout, traceback_text
from .model import Model, ModelError

GIB = 2 ** 30
LOGO = ("\n       █     █     █▄   ▄█\n"
        " ▄▄ ▄█ █     █     █ ▀▄▀ █  version %s\n"
        "  █▄█▀ █     █     █     █  model   %s\n"
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n")
ROUTES = [("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/redoc", "GET, HEAD"),
          ("/health", "GET"), ("/ping", "GET, POST"), ("/load", "GET"), ("/version", "GET"),
          ("/metrics", "GET"), ("/v1/models", "GET"), ("/v1/chat/completions", "POST")]
CLI_FRAMES = [("entrypoints/cli/main.py", 115, "main", "args.dispatch_function(args)"),
              ("entrypoints/cli/serve.py", 155, "cmd", "uvloop.run(run_server(args))")]
ENGINE_DEAD_CLIENT = "The server had an error while processing your request."


def _json(value) -> bytes:
    """pydantic's model_dump_json: compact, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def uncaught(frames, exception_line: str) -> int:
    """What Python prints for an exception nobody catches; vLLM's CLI exits 1."""
    stderr(traceback_text([("../../bin/vllm", 10, "<module>", "sys.exit(main())")] + frames,
                          exception_line).replace(
        '"/usr/local/lib/python3.12/dist-packages/vllm/../../bin/vllm"', '"/usr/local/bin/vllm"'))
    return 1


class EngineClient:
    """The API server's view of EngineCore: boot result, requests, liveness."""

    def __init__(self, pid: int, sock: socket.socket, on_death):
        self.pid = pid
        self.sock = sock
        self.on_death = on_death
        self.boot = None
        self.booted = threading.Event()
        self.pending = {}
        self.lock = threading.Lock()
        self.next_id = 0
        self.dead = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.sock.makefile("rb"):
            message = json.loads(line)
            if "event" in message:
                self.boot = message
                self.booted.set()
                continue
            with self.lock:
                waiter = self.pending.pop(message["id"], None)
            if waiter:
                waiter["reply"] = message
                waiter["done"].set()
        status = os.waitpid(self.pid, 0)[1]
        # the output handler learns first; then the requests in flight fail
        self.on_death(os.waitstatus_to_exitcode(status))
        self.dead = True
        self.booted.set()
        with self.lock:
            waiters, self.pending = list(self.pending.values()), {}
        for waiter in waiters:
            waiter["done"].set()

    def request(self, tokens: int, long_request: bool) -> bool:
        """Run one request through the engine; False when it died on it."""
        waiter = {"done": threading.Event(), "reply": None}
        with self.lock:
            if self.dead:
                return False
            self.next_id += 1
            request_id = self.next_id
            self.pending[request_id] = waiter
            try:
                self.sock.sendall(json.dumps({"op": "request", "id": request_id, "tokens": tokens,
                                              "long": long_request}).encode() + b"\n")
            except OSError:
                self.pending.pop(request_id, None)
                return False
        waiter["done"].wait()
        return bool(waiter["reply"] and waiter["reply"].get("ok"))

    def shutdown(self) -> None:
        try:
            self.sock.sendall(b'{"op": "shutdown"}\n')
        except OSError:
            pass


class ApiServer:
    def __init__(self, args, knobs: Knobs):
        self.args = args
        self.knobs = knobs
        self.log = Logger("APIServer")
        self.state = "booting"
        self.stop = threading.Event()
        self.exit_code = 0
        self.engine = None
        self.metrics_lock = threading.Lock()
        self.running = {}
        self.counters = {"prompt": 0, "generation": 0, "success": {}}
        # each finished request's prompt and reply tokens, for vLLM's request-token histograms
        self.observed = {"prompt": [], "generation": []}

    # -- boot --------------------------------------------------------------------------------
    def boot(self) -> int:
        args = self.args
        if os.environ.get("VLLM_DISABLE_LOG_LOGO") in ("1", "true", "True"):
            self.log.info("logo", "vLLM server version %s, serving model %s" % (VERSION, args.model))
        else:
            self.log.info("logo", LOGO % (VERSION, args.model))
        self.log.info("non_default_args", "non-default args: %r" % cli.non_default_args(args))
        try:
            cli.validate_api_server_args(args)
        except KeyError as exc:
            return uncaught(CLI_FRAMES, "KeyError: %r" % exc.args[0])
        self.httpd = http.server.ThreadingHTTPServer((args.host or "", args.port), Handler,
                                                     bind_and_activate=False)
        self.httpd.daemon_threads = True
        self.httpd.api = self
        try:
            self.httpd.server_bind()
            self.httpd.server_activate()
        except OSError as exc:
            return uncaught(CLI_FRAMES, "OSError: [Errno %d] %s" % (exc.errno, exc.strerror))
        try:
            settings = self.resolve()
        except ModelError as exc:
            return uncaught(CLI_FRAMES, "%s: %s" % (exc.exc_type, exc))
        except NotModelled as exc:
            stderr("fake vLLM: %s is not modelled (tests/twin/seat/README.md)" % exc)
            return 1
        pid, sock = start_engine(settings)
        self.settings = settings
        self.engine = EngineClient(pid, sock, self.engine_died)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        while not self.engine.booted.wait(0.1):
            if self.stop.is_set():   # SIGTERM while booting interrupts the engine's init
                os.kill(pid, signal.SIGTERM)
                while not self.engine.dead:
                    time.sleep(0.02)
                self.httpd.shutdown()
                return 0
        boot = self.engine.boot
        if not boot or boot["event"] != "ready":
            self.httpd.shutdown()
            return uncaught(CLI_FRAMES + [("v1/engine/utils.py", 1473, "wait_for_engine_startup",
                                           "raise RuntimeError(")],
                            "RuntimeError: Engine core initialization failed. See root cause above. "
                            "Failed core proc(s): {}")
        self.ready(boot)
        self.stop.wait()
        self.shut_down()
        return self.exit_code

    def resolve(self) -> Settings:
        """create_engine_config: model, context, devices, scheduler defaults, KV layout."""
        args = self.args
        model = Model.load(args.model)
        self.log.info("architecture", "Resolved architecture: %s" % model.architecture)
        key, derived = model.derived_max_model_len()
        max_model_len = args.max_model_len
        auto_fit = max_model_len == -1
        if max_model_len is None or auto_fit:
            max_model_len = derived
        elif max_model_len > derived:
            message = ("User-specified max_model_len (%d) is greater than the derived max_model_len "
                       "(%s=%d or model_max_length=None in model's config.json)." % (max_model_len, key, derived))
            warning = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model "
                       "uses relative position encoding (RoPE), positions exceeding derived_max_model_len "
                       "lead to nan. If the model uses absolute position encoding, positions exceeding "
                       "derived_max_model_len will cause a CUDA array out-of-bounds error.")
            if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") not in ("1", "true", "True"):
                raise ModelError("pydantic_core._pydantic_core.ValidationError",
                                 "1 validation error for ModelConfig\n  Value error, %s To allow "
                                 "overriding this maximum, set the env var "
                                 "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. %s [type=value_error, "
                                 "input_value=ArgsKwargs((), {'model': %r}), input_type=ArgsKwargs]"
                                 % (message, warning, args.model))
            self.log.warning("long_max_model_len", "%s %s" % (message, warning))
        self.log.info("max_model_len", "Using max model len %d" % max_model_len)
        try:
            driver = Driver()
            devices = driver.devices()
            driver.close()
        except NoDevice:
            devices = []
        if not devices:
            raise ModelError("RuntimeError", "Failed to infer device type, please set the environment "
                             "variable `VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help "
                             "debug the issue.")
        if len(devices) < args.tensor_parallel_size:
            raise ModelError("ValueError", (
                "World size (%d) is larger than the number of available GPUs (%d) in this node. If "
                "this is intentional and you are using:\n- ray, set '--distributed-executor-backend "
                "ray'.\n- multiprocessing, set '--nnodes' appropriately."
                % (args.tensor_parallel_size, len(devices))))
        memory_gib = devices[0]["total_mib"] / 1024
        large = memory_gib >= 70 and "A100" not in devices[0]["name"]
        batched = args.max_num_batched_tokens or (16384 if memory_gib >= 160 else 8192 if large else 2048)
        max_num_seqs = args.max_num_seqs or (1024 if large else 256)
        self.log.info("chunked_prefill", "Chunked prefill is enabled with max_num_batched_tokens=%d."
                      % batched)
        prefix_caching = True if args.enable_prefix_caching is None else args.enable_prefix_caching
        layout = Layout(model, args.kv_cache_dtype, args.tensor_parallel_size, args.block_size,
                        prefix_caching, batched, capability(devices[0]["name"]))
        knobs = self.knobs
        weights = knobs.weights_bytes if knobs.weights_bytes is not None else model.weights_bytes()
        activation = knobs.activation_mib if knobs.activation_mib is not None else max(
            256, math.ceil(batched * model.hidden_size * 18 / 2 ** 20))
        self.model = model
        return Settings(
            model=model, layout=layout, knobs=knobs, tp=args.tensor_parallel_size,
            devices=[d["uuid"] for d in devices[:args.tensor_parallel_size]],
            max_model_len=max_model_len, auto_fit=auto_fit,
            kv_cache_memory_bytes=args.kv_cache_memory_bytes,
            gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager,
            max_num_seqs=max_num_seqs, weights_bytes=weights, activation_mib=activation,
            cuda_graph_mib=knobs.cuda_graph_mib, config_text=self.config_text(max_model_len))

    def config_text(self, max_model_len: int) -> str:
        args = self.args
        served = args.served_model_name[0] if args.served_model_name else args.model
        return ("model=%r, speculative_config=None, tokenizer=%r, skip_tokenizer_init=False, "
                "tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=%s, "
                "dtype=torch.bfloat16, max_seq_len=%d, download_dir=None, load_format=auto, "
                "tensor_parallel_size=%d, pipeline_parallel_size=1, data_parallel_size=1, "
                "decode_context_parallel_size=1, dcp_comm_backend=ag_rs, disable_custom_all_reduce=False, "
                "quantization=None, quantization_config=None, enforce_eager=%s, kv_cache_dtype=%s, "
                "device_config=cuda, seed=0, served_model_name=%s, enable_prefix_caching=%s, "
                "enable_chunked_prefill=True"
                % (args.model, args.model, args.trust_remote_code, max_model_len,
                   args.tensor_parallel_size, args.enforce_eager, args.kv_cache_dtype, served,
                   args.enable_prefix_caching is not False))

    def ready(self, boot: dict) -> None:
        args = self.args
        self.boot_info = boot
        self.max_model_len = boot["max_model_len"]
        self.served_names = args.served_model_name or [args.model]
        self.long_request_tokens = self.knobs.long_request_tokens or max(1, self.max_model_len // 2)
        override = args.override_generation_config or {}
        self.override_max_tokens = override.get("max_new_tokens")   # "max_tokens" is ignored
        self.log.info("supported_tasks", "Supported tasks: ['generate']")
        host = args.host or "0.0.0.0"
        self.log.info("starting", "Starting vLLM server on http://%s:%d" % (host, args.port))
        self.log.info("routes", "Available routes are:")
        for path, methods in ROUTES:
            self.log.info("route", "Route: %s, Methods: %s" % (path, methods))
        stdout("INFO:     Started server process [%d]" % os.getpid())
        stdout("INFO:     Waiting for application startup.")
        stdout("INFO:     Application startup complete.")
        self.state = "ready"

    # -- the seat as the chat layer sees it --------------------------------------------------
    @property
    def seat(self):
        args = self.args
        return _SeatView(
            served_names=self.served_names, model_type=self.model.model_type,
            thinks_by_default=self.model.thinks_by_default,
            reasoning_parser=args.reasoning_parser or None,
            tool_parsing=bool(args.enable_auto_tool_choice and args.tool_call_parser),
            default_chat_template_kwargs=args.default_chat_template_kwargs)

    # -- lifetime ----------------------------------------------------------------------------
    def engine_died(self, exit_code: int) -> None:
        if self.stop.is_set() or self.state != "ready":   # a shutdown, or a failed boot
            return
        self.state = "dead"
        if exit_code < 0:   # killed by a signal: the client's liveness monitor notices
            self.log.warning("client_engine_dead", "[shutdown] MPClient: engine core exited "
                                                   "unexpectedly; starting cleanup")
        else:
            self.log.exception("output_handler", "AsyncLLM output_handler failed.", traceback_text(
                [("v1/engine/async_llm.py", 901, "output_handler",
                  "outputs = await engine_core.get_output_async()")],
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
                "stack trace (above) for the root cause."))
        # watchdog_loop: every 5 s the server checks for a dead engine and exits cleanly
        threading.Timer(self.knobs.watchdog_s, self.stop.set).start()

    def request_stop(self, *_signal) -> None:
        self.log.info("shutdown_triggered", "[shutdown] API server: shutdown triggered")
        self.stop.set()

    def shut_down(self) -> None:
        stdout("INFO:     Shutting down")
        self.httpd.shutdown()
        stdout("INFO:     Waiting for application shutdown.")
        stdout("INFO:     Application shutdown complete.")
        if self.engine and not self.engine.dead:
            self.engine.shutdown()
            deadline = time.monotonic() + 10
            while not self.engine.dead and time.monotonic() < deadline:
                time.sleep(0.02)
        stdout("INFO:     Finished server process [%d]" % os.getpid())


class _SeatView:
    def __init__(self, **values):
        self.__dict__.update(values)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    @property
    def api(self) -> ApiServer:
        return self.server.api

    def log_message(self, *_args):   # uvicorn's access log instead, after each response
        pass

    def _access(self, status: int) -> None:
        if not self.api.args.disable_uvicorn_access_log:
            stdout('INFO:     %s:%d - "%s %s HTTP/1.1" %d %s' % (
                self.client_address[0], self.client_address[1], self.command, self.path, status,
                http.server.BaseHTTPRequestHandler.responses.get(status, ("",))[0]))

    def _send(self, status: int, body=None, content_type="application/json") -> None:
        data = b"" if body is None else (body if isinstance(body, bytes) else _json(body))
        self.send_response_only(status)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-length", str(len(data)))
        if body is not None:
            self.send_header("content-type", content_type)
        self.end_headers()
        self.wfile.write(data)
        self._access(status)

    def _error(self, status: int, err_type: str, message: str, param=None) -> None:
        self._send(status, {"error": {"message": message, "type": err_type, "param": param, "code": status}})

    def _authorised(self) -> bool:
        keys = self.api.args.api_key or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else [])
        if not keys or not self.path.startswith(("/v1", "/v2", "/inference", "/cohere")):
            return True
        scheme, token = ((self.headers.get("Authorization") or "").split(" ", 1) + [""])[:2]
        if scheme.lower() == "bearer" and token in keys:
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    def do_GET(self) -> None:
        api = self.api
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ping"):
            healthy = api.state == "ready" and api.knobs.fault != "health_stuck"
            self._send(200 if healthy else 503)
        elif api.state == "booting":
            self._send(503)
        elif not self._authorised():
            return
        elif path == "/v1/models":
            self._send(200, self.models())
        elif path == "/version":
            self._send(200, {"version": VERSION})
        elif path == "/load":
            with api.metrics_lock:
                self._send(200, {"server_load": len(api.running)})
        elif path == "/metrics":
            self._send(200, self.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        api = self.api
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path == "/ping":
            self._send(200 if api.state == "ready" else 503)
        elif api.state == "booting":
            self._send(503)
        elif not self._authorised():
            return
        elif path == "/v1/chat/completions":
            self.chat(raw)
        else:
            self._send(404, {"detail": "Not Found"})

    def models(self) -> dict:
        api = self.api
        created = int(time.time())
        return {"object": "list", "data": [{
            "id": name, "object": "model", "created": created, "owned_by": "vllm",
            "root": api.args.model, "parent": None, "max_model_len": api.max_model_len,
            "permission": [{"id": "modelperm-%s" % uuid.uuid4().hex, "object": "model_permission",
                            "created": created, "allow_create_engine": False, "allow_sampling": True,
                            "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                            "allow_fine_tuning": False, "organization": "*", "group": None,
                            "is_blocking": False}]} for name in api.served_names]}

    # -- chat --------------------------------------------------------------------------------
    def chat(self, raw: bytes) -> None:
        api = self.api
        try:
            request = json.loads(raw or b"null")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise RequestError(400, "BadRequestError", "messages: Field required")
            generation, prompt = self.plan(request)
        except ValueError:
            self._error(400, "BadRequestError", "Expecting value: the request body is not JSON")
            return
        except RequestError as err:
            self._error(err.status, err.err_type, str(err), err.param)
            return
        request_id = uuid.uuid4().hex
        long_request = prompt + generation.completion_tokens >= api.long_request_tokens
        with api.metrics_lock:
            api.running[request_id] = prompt

        def finished() -> None:
            # the engine counts a request out when it has made its last token, before the reply's
            # last bytes leave: a client that has read the whole reply never sees it running
            with api.metrics_lock:
                if api.running.pop(request_id, None) is None:
                    return
                api.counters["prompt"] += prompt
                api.counters["generation"] += generation.completion_tokens
                api.observed["prompt"].append(prompt)
                api.observed["generation"].append(generation.completion_tokens)
                reasons = api.counters["success"]
                reasons[generation.finish_reason] = reasons.get(generation.finish_reason, 0) + 1

        try:
            if api.state != "ready" or not api.engine.request(prompt, long_request):
                self._error(500, "InternalServerError", ENGINE_DEAD_CLIENT)
                api.stop.set()    # terminate_if_errored: the server exits once the reply is out
                return
            if request.get("stream"):
                self.stream(request, generation, prompt, finished)
            else:
                self.complete(request, generation, prompt, finished)
        finally:
            finished()

    def plan(self, request: dict):
        """Validation and max_tokens as vLLM 0.33 does them (renderers/online_renderer.py,
        renderers/params.py, entrypoints/serve/utils/api_utils.py get_max_tokens)."""
        api, seat = self.api, self.api.seat
        model = request.get("model") or api.served_names[0]
        if model not in api.served_names:
            raise RequestError(404, "NotFoundError", "The model `%s` does not exist. Valid aliases: %s."
                               % (model, ", ".join(api.served_names)), "model")
        tools = request.get("tools")
        # Tools without a tool_choice mean "auto" (chat_completion/protocol.py, check_tool_usage).
        tool_choice = request.get("tool_choice", "auto" if tools else "none")
        if tools and tool_choice not in (None, "none") and not seat.tool_parsing:
            if tool_choice == "auto":
                raise RequestError(400, "BadRequestError", '"auto" tool choice requires '
                                   "--enable-auto-tool-choice and --tool-call-parser to be set")
            described = ('function "%s"' % tool_choice["function"]["name"]
                         if isinstance(tool_choice, dict) else '"%s"' % tool_choice)
            raise RequestError(400, "BadRequestError", "tool_choice=%s requires --tool-call-parser "
                               "to be set" % described)
        field = "max_completion_tokens" if request.get("max_completion_tokens") is not None else "max_tokens"
        asked = request.get(field)
        limit = api.max_model_len
        if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool) or asked < 1):
            raise RequestError(400, "BadRequestError", "%s: Input should be a valid integer "
                               "greater than or equal to 1" % field, field)
        if asked is not None and asked > limit:
            # VLLMValidationError's text ends with its parameter and value
            raise RequestError(400, "BadRequestError", "%s=%d cannot be greater than max_model_len=%d. "
                               "Please request fewer output tokens. (parameter=%s, value=%d)"
                               % (field, asked, limit, field, asked), field)
        prompt = prompt_tokens(request)
        if prompt > limit:
            # the tokenizer stops at one token past the limit (renderers/params.py get_encode_kwargs)
            raise RequestError(400, "BadRequestError", (
                "This model's maximum context length is %d tokens. However, your prompt contains "
                "at least %d input tokens, which exceeds this limit even without any output tokens. "
                "Please reduce the length of the input prompt. (parameter=input_tokens, value=%d)"
                % (limit, limit + 1, limit + 1)), "input_tokens")
        max_tokens = min(v for v in (limit - prompt, asked, api.override_max_tokens) if v is not None)
        return Generation(request, seat, max_tokens, api.knobs.reply_tokens), prompt

    def _usage(self, prompt: int, generation: Generation) -> dict:
        return {"prompt_tokens": prompt, "total_tokens": prompt + generation.completion_tokens,
                "completion_tokens": generation.completion_tokens, "prompt_tokens_details": None}

    def complete(self, request: dict, generation: Generation, prompt: int, finished) -> None:
        time.sleep(self.api.knobs.token_delay_s * generation.completion_tokens)
        finished()
        self._send(200, {
            "id": "chatcmpl-%s" % uuid.uuid4().hex, "object": "chat.completion",
            "created": int(time.time()), "model": request.get("model") or self.api.served_names[0],
            "choices": [{"index": 0, "message": generation.message(), "logprobs": None,
                         "finish_reason": generation.finish_reason, "stop_reason": None,
                         "token_ids": None, "routed_experts": None}],
            "service_tier": None, "system_fingerprint": None, "usage": self._usage(prompt, generation),
            "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None,
            "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None})

    def stream(self, request: dict, generation: Generation, prompt: int, finished) -> None:
        self.send_response_only(200)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        head = {"id": "chatcmpl-%s" % uuid.uuid4().hex, "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.get("model") or self.api.served_names[0]}

        def event(payload) -> None:
            data = b"data: %s\n\n" % (payload.encode() if isinstance(payload, str) else _json(payload))
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            event(dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                       "logprobs": None, "finish_reason": None}]))
            for delta in generation.deltas():
                time.sleep(self.api.knobs.token_delay_s)
                event(dict(head, choices=[{"index": 0, "delta": delta}]))
            finished()
            event(dict(head, choices=[{"index": 0, "delta": {"content": ""},
                                       "finish_reason": generation.finish_reason, "stop_reason": None}]))
            if (request.get("stream_options") or {}).get("include_usage"):
                event(dict(head, choices=[], usage=self._usage(prompt, generation)))
            event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        self._access(200)

    # -- metrics -----------------------------------------------------------------------------
    def metrics(self) -> str:
        api = self.api
        labels = 'model_name="%s",engine="0"' % api.served_names[0]
        boot = api.boot_info
        with api.metrics_lock:
            running = len(api.running)
            in_flight = sum(api.running.values())
            counters = {"prompt": api.counters["prompt"], "generation": api.counters["generation"],
                        "success": dict(api.counters["success"])}
            observed = {kind: list(values) for kind, values in api.observed.items()}
        usage = min(1.0, in_flight / boot["kv_cache_size_tokens"]) if boot["kv_cache_size_tokens"] else 0.0
        out = []

        def metric(name, kind, doc, value, extra=""):
            out.append("# HELP %s %s\n# TYPE %s %s" % (name, doc, name, kind))
            out.append("%s{%s%s} %s" % (name, labels, extra, float(value)))

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", running)
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0)
        metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", usage)
        metric("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", 0)
        metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", counters["prompt"])
        metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
               counters["generation"])
        out.append("# HELP vllm:request_success_total Count of successfully processed requests.\n"
                   "# TYPE vllm:request_success_total counter")
        for reason in ("stop", "length", "abort", "error", "repetition", "tool_calls"):
            if reason in ("stop", "length", "abort", "error", "repetition") or counters["success"].get(reason):
                out.append('vllm:request_success_total{%s,finished_reason="%s"} %s'
                           % (labels, reason, float(counters["success"].get(reason, 0))))
        # vLLM's request-token histograms: 1-2-5 buckets up to max_model_len (v1/metrics/buckets.py)
        bounds = one_two_five(api.settings.max_model_len)
        for kind, doc in (("prompt", "Number of prefill tokens processed."),
                          ("generation", "Number of generation tokens processed.")):
            name = "vllm:request_%s_tokens" % kind
            out.append("# HELP %s %s\n# TYPE %s histogram" % (name, doc, name))
            values = observed[kind]
            for bound in bounds + [float("inf")]:
                out.append('%s_bucket{%s,le="%s"} %s' % (name, labels, "+Inf" if bound == float("inf") else float(bound),
                                                         float(sum(1 for value in values if value <= bound))))
            out.append("%s_count{%s} %s" % (name, labels, float(len(values))))
            out.append("%s_sum{%s} %s" % (name, labels, float(sum(values))))
        settings, args = api.settings, api.args
        info = {
            "block_size": boot["block_size"], "user_specified_block_size": args.block_size is not None,
            "kv_cache_layout": "LBNHC", "gpu_memory_utilization": args.gpu_memory_utilization,
            "cache_dtype": args.kv_cache_dtype, "is_attention_free": False,
            "num_gpu_blocks_override": None, "sliding_window": None,
            "enable_prefix_caching": args.enable_prefix_caching is not False,
            "prefix_caching_hash_algo": "sha256", "num_gpu_blocks": boot["num_gpu_blocks"],
            "num_cpu_blocks": None, "kv_cache_size_tokens": boot["kv_cache_size_tokens"],
            "kv_cache_max_concurrency": boot["kv_cache_max_concurrency"],
            "kv_cache_memory_bytes": settings.kv_cache_memory_bytes, "kv_offloading_size": None,
            "engine": "0"}
        out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                   "# TYPE vllm:cache_config_info gauge")
        out.append("vllm:cache_config_info{%s} 1.0" % ",".join('%s="%s"' % (k, v) for k, v in info.items()))
        return "\n".join(out) + "\n"


def one_two_five(max_value: int) -> list:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's build_1_2_5_buckets)."""
    bounds, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_value:
                return bounds
            bounds.append(mantissa * scale)
        scale *= 10


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = cli.parse_serve_args(cli.top_level(argv))
    try:
        cli.validate_serve_args(args)
    except TypeError as exc:
        return uncaught([("entrypoints/cli/main.py", 112, "main", "cmd.validate(args)"),
                         ("entrypoints/common/cli_args.py", 554, "validate_parsed_serve_args",
                          'raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")')],
                        "TypeError: %s" % exc)
    try:
        knobs = Knobs(seat_environment((args.served_model_name or [args.model])[0]))
    except KnobError as exc:
        stderr("fake vLLM: %s" % exc)
        return 2
    server = ApiServer(args, knobs)
    signal.signal(signal.SIGTERM, server.request_stop)
    signal.signal(signal.SIGINT, server.request_stop)
    return server.boot()
