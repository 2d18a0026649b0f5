"""The fake model behind /v1/chat/completions: a word-level tokenizer and a deterministic
"generation" that exercises what a gate checks, shaped as vLLM 0.33 shapes it.

* Tokens are words and punctuation marks (`\\w+|[^\\w\\s]`); a chat turn adds 4, the template 3.
* The model thinks first (Qwen-style `<think>...</think>`, Gemma-style
  `<|channel>thought...<channel|>`) unless the chat template's `enable_thinking` is false
  (request `chat_template_kwargs` over `--default-chat-template-kwargs`; Gemma defaults to false).
  With `--reasoning-parser` the thinking lands in `reasoning`, else inline in `content`.
* With tools and `--enable-auto-tool-choice --tool-call-parser`, a user turn is answered with a
  call of the first tool (arguments from its schema); a tool-result turn is answered in prose,
  which without a reasoning parser leaks the template's empty thinking block (seed 002).
* A reply is FAKE_VLLM_REPLY_TOKENS long, unless the last user message contains `[runaway]`:
  then the model does not stop and only the output cap ends it, like seed 000's runaway replies.
"""

from __future__ import annotations

import json
import re
import uuid

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORDS = ("the quick seat answers from its pinned cache and every gate checks the real number "
          "not a proxy while the card keeps its spare at plateau").split()
_THOUGHT = "Let me think about this request step by step before I answer it ."


class RequestError(Exception):
    """A request vLLM rejects: its HTTP status, error type and message."""

    def __init__(self, status: int, err_type: str, message: str, param=None):
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.param = param


def count_tokens(text) -> int:
    if not isinstance(text, str):
        text = json.dumps(text) if text is not None else ""
    return len(_TOKEN.findall(text))


def message_text(message) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):   # OpenAI content parts
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def prompt_tokens(request: dict) -> int:
    messages = request["messages"]
    total = 3 + sum(4 + count_tokens(message_text(m)) for m in messages)
    if request.get("tools"):
        total += count_tokens(json.dumps(request["tools"]))
    return total


def _tool_arguments(tool: dict) -> dict:
    schema = (tool.get("function") or {}).get("parameters") or {}
    properties = schema.get("properties") or {}
    samples = {"string": "Paris", "integer": 1, "number": 1.0, "boolean": True, "array": [],
               "object": {}}
    return {name: samples.get((spec or {}).get("type"), None)
            for name, spec in properties.items() if name in (schema.get("required") or properties)}


def _spaced(index: int, word: str) -> str:
    """A token as it detokenizes: words after the first get a leading space, punctuation none."""
    return " " + word if index and (word[0].isalnum() or word[0] == "_") else word


class Generation:
    """One reply: pieces of raw model output, and how the parsers read them."""

    def __init__(self, request: dict, seat, max_tokens: int, reply_tokens: int):
        self.seat = seat
        messages = request["messages"]
        last = messages[-1] if messages else {}
        kwargs = dict(seat.default_chat_template_kwargs or {})
        kwargs.update(request.get("chat_template_kwargs") or {})
        thinking = kwargs.get("enable_thinking", seat.thinks_by_default)
        self.gemma = seat.model_type.startswith("gemma")
        self.after_tool = isinstance(last, dict) and last.get("role") == "tool"
        tool_choice = request.get("tool_choice", "auto" if request.get("tools") else "none")
        self.calls_tool = bool(request.get("tools")) and tool_choice != "none" \
            and not self.after_tool and seat.tool_parsing
        self.runaway = "[runaway]" in message_text(last)

        pieces = []      # (channel, text): channel is "thinking", "answer" or "tool"
        if self.after_tool and not seat.reasoning_parser:
            # the template leaves the prompt inside an open channel; without a reasoning parser it leaks
            pieces.append(("answer", "<|channel>thought\n<channel|>" if self.gemma else "<think>\n\n</think>\n\n"))
        elif thinking and not self.after_tool:
            pieces.append(("open", "<|channel>thought\n" if self.gemma else "<think>\n"))
            pieces += [("thinking", _spaced(i, word)) for i, word in enumerate(_THOUGHT.split())]
            pieces.append(("close", "<channel|>" if self.gemma else "\n</think>\n\n"))
        if self.calls_tool:
            named = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
            tool = [t for t in request["tools"] if named is None or (t.get("function") or {}).get("name") == named]
            function = (tool[0].get("function") or {}) if tool else {}
            self.tool_call = {"name": function.get("name", "tool"),
                              "arguments": json.dumps(_tool_arguments(tool[0]) if tool else {})}
            self.tool_call_id = "chatcmpl-tool-%s" % uuid.uuid4().hex
            call_text = json.dumps({"name": self.tool_call["name"],
                                    "arguments": json.loads(self.tool_call["arguments"])})
            pieces += [("tool", piece) for piece in ["<tool_call>", "\n"] + _TOKEN.findall(call_text) + ["\n", "</tool_call>"]]
        else:
            words = self._answer_words(last, reply_tokens, max_tokens)
            pieces += [("answer", _spaced(i, word)) for i, word in enumerate(words)]
        self.finish_reason = "tool_calls" if self.calls_tool else "stop"
        if len(pieces) > max_tokens:
            pieces = pieces[:max_tokens]
            self.finish_reason = "length"
            if self.calls_tool:
                self.calls_tool = False   # a cut call is no call: the parser leaves text
        self.pieces = pieces

    def _answer_words(self, last, reply_tokens, max_tokens):
        if self.after_tool:
            seen = _TOKEN.findall(message_text(last))[:12]
            return ["The", "tool", "returned", ":"] + seen + ["."]
        if self.runaway:
            return [_WORDS[i % len(_WORDS)] for i in range(max_tokens + 1)]
        asked = _TOKEN.findall(message_text(last))[:6]
        words = ["This", "is", self.seat.served_names[0], "answering", ":"] + asked
        words += [_WORDS[i % len(_WORDS)] for i in range(max(0, reply_tokens - len(words) - 1))]
        return words[:max(1, reply_tokens - 1)] + ["."]

    @property
    def completion_tokens(self) -> int:
        return len(self.pieces)

    def split(self, pieces):
        """(reasoning, content, tool text) of raw pieces, as the parsers read them."""
        reasoning, content, tool = [], [], []
        for channel, text in pieces:
            if channel == "tool" and self.calls_tool:
                tool.append(text)
            elif channel == "thinking" and self.seat.reasoning_parser:
                reasoning.append(text)
            elif channel in ("open", "close") and self.seat.reasoning_parser:
                continue
            else:
                content.append(text)
        return "".join(reasoning), "".join(content), "".join(tool)

    def message(self) -> dict:
        reasoning, content = self.split(self.pieces)[:2]
        message = {"role": "assistant", "content": content if content or not (reasoning or self.calls_tool) else None,
                   "refusal": None, "annotations": None, "audio": None, "function_call": None,
                   "reasoning": reasoning or None}
        if self.calls_tool:
            message["content"] = content.strip() or None
            message["tool_calls"] = [self.tool_call_object()]
        return message

    def tool_call_object(self) -> dict:
        return {"id": self.tool_call_id, "type": "function", "function": dict(self.tool_call)}

    def deltas(self):
        """Streamed deltas: the role first, then reasoning/content per token, the tool call whole."""
        for channel, text in self.pieces:
            reasoning, content, tool = self.split([(channel, text)])
            if tool:
                continue
            if reasoning:
                yield {"reasoning": reasoning}
            elif content:
                yield {"content": content}
        if self.calls_tool:
            call = self.tool_call_object()
            yield {"tool_calls": [{"id": call["id"], "type": "function", "index": 0,
                                   "function": call["function"]}]}
